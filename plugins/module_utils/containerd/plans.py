"""containerd config.toml editing, part 3 of 4: the layout of new items and the plans (in place, drop-in).

CONTROLLER only: config.py (the entry point) imports the parts.
"""

from __future__ import annotations

import copy
import fnmatch
import posixpath
import re
from collections import Counter
from collections.abc import Mapping

from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import changes as _changes
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import parse as _parse
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd.parse import tomlkit
from ansible_collections.gpunode.provisioning.plugins.module_utils.files import merge as config_merge

try:
    from tomlkit.items import AoT, Comment, Table, Whitespace
except ImportError:  # no tomlkit (parse.py says so where TOML is edited): nothing is an instance of these
    AoT = Comment = Table = Whitespace = _parse.NoTomlkitType

DROPIN_HEADER = _parse.DROPIN_HEADER
ContainerdConfigError = _parse.ContainerdConfigError
Outcome = _parse.Outcome
Request = _parse.Request
_is_empty = _parse._is_empty
config_version = _parse.config_version
parse_document = _parse.parse_document
table_paths = _parse.table_paths
_default_runtime_plan = _changes._default_runtime_plan
_drop_stale_spellings = _changes._drop_stale_spellings
_plain = _changes._plain
_unset_default = _changes._unset_default
build_changes = _changes.build_changes
check_effective = _changes.check_effective
keep_nvidia_default = _changes.keep_nvidia_default
nvidia_summary = _changes.nvidia_summary


# --------------------------------------------------------------------------- layout of new items


def _renders_header(table: Table) -> bool:
    if not table.is_super_table():
        return True
    return any(not isinstance(item, (Table, AoT, Whitespace, Comment)) for _key, item in table.value.body)


def _spaces(indent: str) -> str:
    """The indentation part of a trivia indent (what follows its last newline)."""
    return indent.rsplit("\n", 1)[-1]


def _snapshot(doc) -> tuple[list, dict, set]:
    """Items of ``doc`` before a merge: (references that keep them alive, {id: table indent or None}, ids of
    tables that print a header)."""
    keep, old, rendered = [], {}, set()

    def walk(container):
        for _key, item in container.body:
            keep.append(item)
            old[id(item)] = item.trivia.indent if isinstance(item, Table) else None
            if isinstance(item, Table):
                if _renders_header(item):
                    rendered.add(id(item))
                walk(item.value)

    walk(doc)
    return keep, old, rendered


def _style(doc, text: str) -> tuple[str, bool]:
    """(indent step, blank line before table headers) as the file does it; ('', True) for an empty file."""
    steps: Counter = Counter()

    def walk(container):
        for _key, item in container.body:
            if isinstance(item, Table):
                header = _spaces(item.trivia.indent)
                if _renders_header(item):
                    for key, child in item.value.body:
                        if key is not None and not isinstance(child, (Table, AoT)):
                            kv = _spaces(child.trivia.indent)
                            if kv.startswith(header):
                                steps[kv[len(header) :]] += 1
                            break
                walk(item.value)

    walk(doc)
    step = steps.most_common(1)[0][0] if steps else ""
    blank = len(re.findall(r"\n[ \t]*\n[ \t]*\[", text))
    tight = len(re.findall(r"[^\n]\n[ \t]*\[", text))
    return step, blank >= tight


def _tidy(doc, old: dict, old_rendered: set, step: str, blank: bool) -> None:
    """Give the items the merge added the file's indentation and blank-line style.

    ``old`` and ``old_rendered`` come from _snapshot() taken before the merge. Old tables get back the
    indentation they had (tomlkit adds a newline to the table after an inserted key). The document is
    walked in rendering order, tracking whether the text so far ends with an empty line: a new table header
    gets the indentation of its old sibling tables (else its parent's plus ``step``) and, in a file that
    separates tables by empty lines, one empty line before it; so does an old header that follows new keys.
    """
    state = {"blank": True, "after_new": False}

    def walk(container, owner_indent):
        kv = next(
            (
                _spaces(item.trivia.indent)
                for key, item in container.body
                if key is not None and not isinstance(item, (Table, AoT)) and id(item) in old
            ),
            "" if owner_indent is None else owner_indent + step,
        )
        sibling = next((item for _k, item in container.body if id(item) in old_rendered), None)
        for key, item in container.body:
            if isinstance(item, Whitespace):
                state["blank"] = state["blank"] or "\n" in item.s
                continue
            if isinstance(item, Table):
                renders = _renders_header(item)
                if id(item) in old_rendered:
                    header = _spaces(old[id(item)])
                    item.trivia.indent = old[id(item)]
                    if blank and state["after_new"] and not state["blank"] and "\n" not in item.trivia.indent:
                        item.trivia.indent = "\n" + item.trivia.indent
                else:
                    header = (
                        _spaces(sibling.trivia.indent)
                        if sibling is not None
                        else ("" if owner_indent is None else owner_indent + step)
                    )
                    if renders:  # new, or an old implicit table that now holds keys
                        item.trivia.indent = ("\n" if blank and not state["blank"] else "") + header
                    elif id(item) in old:
                        item.trivia.indent = old[id(item)]
                    else:
                        item.trivia.indent = ""  # tomlkit prints a header-less table's indent when it is "\n"
                if renders:
                    state.update(blank=False, after_new=id(item) not in old_rendered)
                elif item.trivia.indent == "\n":
                    state["blank"] = True
                walk(item.value, header)
                continue
            state["blank"] = False
            state["after_new"] = False
            if key is not None and not isinstance(item, AoT) and id(item) not in old:
                item.trivia.indent = kv
                state["after_new"] = True

    walk(doc, None)


def _merge_document(doc, text: str, changes: Mapping, list_strategy: str) -> bool:
    """config_merge.merge_into, then lay out what it added like the rest of the file."""
    keep, old, rendered = _snapshot(doc)  # keep: old items stay alive, so their ids stay unique
    step, blank = _style(doc, text)
    changed = config_merge.merge_into(doc, changes, list_strategy)
    if changed:
        _tidy(doc, old, rendered, step, blank)
    del keep
    return changed


# --------------------------------------------------------------------------- plans


def _finish(path: str, text: str, original, doc, changed: bool, existed: bool) -> tuple[str, bool]:
    """Return (after text, changed). Unchanged when the parsed value is the same, whatever the text;
    a file that does not exist yet is always written."""
    if changed and not config_merge.values_equal(original, doc.unwrap()):
        after = tomlkit.dumps(doc)
        # Our own output must read back as what we meant; anything else is a bug and is never written.
        if not config_merge.values_equal(tomlkit.parse(after).unwrap(), doc.unwrap()):  # pragma: no cover
            raise ContainerdConfigError(f"{path}: internal error, the rendered TOML does not parse back")
        return after, True
    return text, not existed


def plan_inplace(
    text: str,
    path: str,
    request: Request,
    empty_version: int = 2,
    existed: bool = True,
    source_label: str | None = None,
) -> Outcome:
    """Merge ``request`` into the config ``text`` of ``path`` (method=inplace); nothing is written here.

    ``empty_version`` is the version an empty file is written as (empty_version_for: the node's containerd's);
    its ``version`` key is written too, because containerd reads a file without one as version 1.
    ``source_label`` names the text in error messages when it is not the file itself (e.g. the output of
    ``containerd config default``). ``existed=False`` marks a file that is created (always changed).
    """
    label = source_label or path
    doc = parse_document(text if text.strip() else "", label)  # whitespace only: start from a clean document
    version = config_version(doc, label, empty_version)
    original = doc.unwrap()
    asked, request = request, keep_nvidia_default(doc, version, request)
    nvidia = nvidia_summary(doc, version, asked, request)
    check_effective(path, _default_runtime_plan(doc, table_paths(version), request), request)
    default_written = _default_written(doc, version, request)
    changes, runtime_table, copied_from = build_changes(doc, version, request, keep_read_alike=True)
    if _is_empty(doc) and changes and version >= 2:
        changes = {"version": version, **changes}
    changed = _drop_stale_spellings(doc, version, request, changes)
    changed |= _merge_document(doc, text, changes, request.list_strategy)
    changed |= _unset_default(doc, version, request)
    after, changed = _finish(path, text, original, doc, changed, existed)
    return Outcome(path, text, after, changed, version, runtime_table, copied_from, existed, default_written, nvidia)


def _default_written(doc, version: int, request: Request) -> str | None:
    if request.runtime is None:
        return None
    plan = _default_runtime_plan(doc, table_paths(version), request)
    return plan["write_default"][0] if plan["write_default"] else None


def ensure_import(doc, root_path: str, dropin_path: str) -> bool:
    """Make the top-level ``imports`` of ``doc`` cover ``dropin_path``; return True when it changed.

    An entry covers the drop-in when it names it, or is a glob in the same directory whose pattern matches
    its file name (relative entries are relative to the root config's directory, as containerd reads them).
    Otherwise ``<drop-in dir>/*.toml`` is appended (the drop-in path itself when it does not end in .toml);
    the entries already there are kept.
    """
    current = config_merge.get_path(doc, ["imports"], [])
    current = _plain(current)
    if not isinstance(current, list):
        raise ContainerdConfigError(
            f"{root_path}: the top-level 'imports' must be a list of paths, found {current!r}; fix it by hand."
        )
    root_dir = posixpath.dirname(root_path)
    target_dir, target_name = posixpath.split(posixpath.normpath(dropin_path))
    for entry in current:
        if not isinstance(entry, str):
            continue
        full = entry if posixpath.isabs(entry) else posixpath.join(root_dir, entry)
        entry_dir, entry_name = posixpath.split(posixpath.normpath(full))
        if entry_dir == target_dir and fnmatch.fnmatchcase(target_name, entry_name):
            return False
    wanted = posixpath.join(target_dir, "*.toml") if target_name.endswith(".toml") else dropin_path
    return _merge_document(doc, "", {"imports": [wanted]}, "append_unique")


def render_dropin(root_path: str, version: int, changes: Mapping, list_strategy: str = "replace") -> str:
    """The drop-in's text: a header comment, ``version`` (none for version 1) and ``changes``, nothing else."""
    doc = tomlkit.parse(DROPIN_HEADER.format(root=root_path))
    if version >= 2:
        doc["version"] = version
    config_merge.merge_into(doc, changes, list_strategy)
    return tomlkit.dumps(doc)


def plan_dropin(
    root_text: str,
    root_path: str,
    dropin_text: str | None,
    dropin_path: str,
    request: Request,
    empty_version: int = 3,
    root_existed: bool = True,
    root_label: str | None = None,
) -> tuple[Outcome, Outcome]:
    """Plan method=dropin: returns (root outcome, drop-in outcome); nothing is written here.

    The root file only gets its top-level ``imports`` extended to cover the drop-in (and ``version`` when
    it was empty). The drop-in is ours: it is rendered from scratch with the root file's version and only
    our tables, and rewritten only when its parsed value differs (``dropin_text`` None: it does not exist).
    The runtime's options are copied from the root file's default/runc runtime.
    Call check_dropin_allowed() first: on containerd 1.x a drop-in wipes the root file's plugin tables.
    """
    label = root_label or root_path
    root_doc = parse_document(root_text if root_text.strip() else "", label)
    version = config_version(root_doc, label, empty_version)
    root_original = root_doc.unwrap()
    asked, request = request, keep_nvidia_default(root_doc, version, request)
    nvidia = nvidia_summary(root_doc, version, asked, request)
    # The drop-in is ours: what it says is what this module wrote, not an import that overrides the root file.
    owned = copy.deepcopy(root_original)
    if dropin_text is not None and dropin_text.strip():
        config_merge.merge_into(owned, parse_document(dropin_text, dropin_path).unwrap())
    check_effective(root_path, _default_runtime_plan(owned, table_paths(version), request), request)
    changes, runtime_table, copied_from = build_changes(root_doc, version, request)

    root_changed = _unset_default(root_doc, version, request)
    root_changed |= _drop_stale_spellings(root_doc, version, request, changes)  # 2.x deep-merges both spellings
    if _is_empty(root_doc) and version >= 2:
        root_changed |= config_merge.merge_into(root_doc, {"version": version})
    root_changed |= ensure_import(root_doc, root_path, dropin_path)
    root_after, root_changed = _finish(root_path, root_text, root_original, root_doc, root_changed, root_existed)
    root = Outcome(root_path, root_text, root_after, root_changed, version, None, None, root_existed)

    rendered = render_dropin(root_path, version, changes, request.list_strategy)
    default_written = _default_written(root_doc, version, request)
    if dropin_text is None:
        dropin = Outcome(
            dropin_path, "", rendered, True, version, runtime_table, copied_from, False, default_written, nvidia
        )
    else:
        same = config_merge.values_equal(
            parse_document(dropin_text, dropin_path).unwrap(), tomlkit.parse(rendered).unwrap()
        )
        after = dropin_text if same else rendered
        dropin = Outcome(
            dropin_path,
            dropin_text,
            after,
            not same,
            version,
            runtime_table,
            copied_from,
            True,
            default_written,
            nvidia,
        )
    return root, dropin
