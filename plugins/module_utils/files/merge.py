"""The merge engine shared by every config-file adapter of this project.

Pure functions, standard library only and no Ansible imports, so the same file
runs inside modules on the node (``from ansible_collections.gpunode.provisioning.plugins.module_utils.files.merge
import ...``) and inside controller-side plugins (by the same package path).

Semantics
---------
``merge_into(target, changes)`` deep-merges the mapping ``changes`` into
``target`` in place:

* keys of ``target`` that ``changes`` does not name are left alone, existing
  keys keep their position, new keys are appended;
* a mapping merged onto a mapping recurses; any other combination (mapping
  onto scalar, scalar onto mapping, ...) replaces the old value;
* lists follow ``list_strategy``: ``replace`` (the new list wins),
  ``append_unique`` (old items kept in order, missing new items appended) or
  ``prepend_unique`` (missing new items put in front, in their order);
* a key is only assigned when its value really changes, comparing unwrapped
  values strictly (``1``, ``1.0`` and ``True`` are different values). Targets
  may therefore be tomlkit documents or tables: untouched items keep their
  comments and layout, and tables are never rebuilt;
* applying the same change twice equals applying it once.

``remove_paths`` deletes keys by path; ``get_path`` reads one.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, MutableMapping, MutableSequence

LIST_STRATEGIES = ("replace", "append_unique", "prepend_unique")

__all__ = [
    "LIST_STRATEGIES",
    "get_path",
    "merge",
    "merge_into",
    "normalize_path",
    "remove_paths",
    "values_equal",
]


def _unwrap(value):
    """Return the plain Python value of a tomlkit item (anything with ``unwrap()``)."""
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if callable(unwrap) else value


def _is_list(value) -> bool:
    return isinstance(value, (list, tuple))


def _kind(value):
    # bool is a subclass of int and 1 == 1.0 in Python, but they are different
    # values in JSON and TOML: compare scalars by kind and value.
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind
    return type(value)


def values_equal(left, right) -> bool:
    """Deep, type-strict equality of two (possibly tomlkit-wrapped) values.

    Mapping key order is ignored; list order is not.
    """
    left, right = _unwrap(left), _unwrap(right)
    if isinstance(left, Mapping) or isinstance(right, Mapping):
        if not (isinstance(left, Mapping) and isinstance(right, Mapping)) or len(left) != len(right):
            return False
        return all(key in right and values_equal(left[key], right[key]) for key in left)
    if _is_list(left) or _is_list(right):
        if not (_is_list(left) and _is_list(right)) or len(left) != len(right):
            return False
        return all(values_equal(a, b) for a, b in zip(left, right))
    return _kind(left) is _kind(right) and left == right


def _contains(items, value) -> bool:
    return any(values_equal(item, value) for item in items)


def _check_strategy(list_strategy: str) -> None:
    if list_strategy not in LIST_STRATEGIES:
        raise ValueError(f"unknown list strategy {list_strategy!r}: use one of {', '.join(LIST_STRATEGIES)}")


def _merge_list(target: MutableMapping, key, current, new: list, list_strategy: str) -> bool:
    if list_strategy == "replace" or not _is_list(current):
        if values_equal(current, new):
            return False
        target[key] = copy.deepcopy(new)
        return True
    missing: list = []
    for item in new:
        if not _contains(current, item) and not _contains(missing, item):
            missing.append(copy.deepcopy(item))
    if not missing:
        return False
    if isinstance(current, MutableSequence):
        # In place, so a tomlkit array keeps its comments and layout.
        if list_strategy == "append_unique":
            current.extend(missing)
        else:
            for index, item in enumerate(missing):
                current.insert(index, item)
    else:
        old = list(current)
        target[key] = old + missing if list_strategy == "append_unique" else missing + old
    return True


def merge_into(target: MutableMapping, changes: Mapping, list_strategy: str = "replace") -> bool:
    """Deep-merge ``changes`` into ``target`` in place; return True when anything changed.

    ``target`` is any mutable mapping (dict, tomlkit document or table).
    Raises ValueError for an unknown ``list_strategy`` or a ``changes`` that is
    not a mapping, TypeError when ``target`` is not a mutable mapping.
    """
    _check_strategy(list_strategy)
    if not isinstance(changes, Mapping):
        raise ValueError(f"changes must be a mapping, got {type(changes).__name__}")
    if not isinstance(target, MutableMapping):
        raise TypeError(f"target must be a mutable mapping, got {type(target).__name__}")
    return _merge_into(target, changes, list_strategy)


def _merge_into(target: MutableMapping, changes: Mapping, list_strategy: str) -> bool:
    changed = False
    for key, new in changes.items():
        new = _unwrap(new)
        if key not in target:
            target[key] = copy.deepcopy(new)
            changed = True
            continue
        current = target[key]
        if isinstance(new, Mapping) and isinstance(current, MutableMapping):
            changed |= _merge_into(current, new, list_strategy)
        elif _is_list(new):
            changed |= _merge_list(target, key, current, new, list_strategy)
        elif not values_equal(current, new):
            target[key] = copy.deepcopy(new)
            changed = True
    return changed


def merge(base: Mapping, changes: Mapping, list_strategy: str = "replace"):
    """Return a deep copy of ``base`` with ``changes`` merged in; ``base`` is not modified."""
    result = copy.deepcopy(base)
    merge_into(result, changes, list_strategy)
    return result


def normalize_path(path) -> list:
    """Return ``path`` as a list of keys; a plain string is one top-level key.

    Raises ValueError for an empty path or one that is neither a string nor a list/tuple.
    """
    if isinstance(path, str):
        return [path]
    if not _is_list(path):
        raise ValueError(f"a key path must be a string or a list of keys, got {type(path).__name__}: {path!r}")
    if not path:
        raise ValueError("a key path must name at least one key, got an empty list")
    return list(path)


def get_path(mapping: Mapping, path, default=None):
    """Return the value at ``path`` (list of keys, or one top-level key), or ``default``."""
    node = mapping
    for key in normalize_path(path):
        if not isinstance(node, Mapping) or key not in node:
            return default
        node = node[key]
    return node


def remove_paths(target: MutableMapping, paths) -> bool:
    """Delete every key path in ``paths`` from ``target``; return True when something was removed.

    Missing paths are no-ops; parents left empty stay in place.
    """
    if isinstance(paths, str) or not _is_list(paths):
        raise ValueError(f"paths must be a list of key paths, got {type(paths).__name__}: {paths!r}")
    removed = False
    for path in paths:
        keys = normalize_path(path)
        parent = get_path(target, keys[:-1]) if len(keys) > 1 else target
        if isinstance(parent, MutableMapping) and keys[-1] in parent:
            del parent[keys[-1]]
            removed = True
    return removed
