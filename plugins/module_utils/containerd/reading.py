"""containerd config.toml editing, part 4 of 4: the daemon's reading (config dump) checked against the plan.

CONTROLLER only: config.py (the entry point) imports the parts.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import replace

from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import changes as _changes
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import parse as _parse
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import versions as containerd_versions
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd.parse import tomlkit
from ansible_collections.gpunode.provisioning.plugins.module_utils.files import merge as config_merge
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia import runtime as nvidia_runtime

CRI_TABLES = containerd_versions.CRI_TABLES
DEFAULT_RUNTIME_TYPE = _parse.DEFAULT_RUNTIME_TYPE
SERVICE_PLUGINS = _parse.SERVICE_PLUGINS
ContainerdConfigError = _parse.ContainerdConfigError
Request = _parse.Request
dotted_key = _parse.dotted_key
parse_document = _parse.parse_document
table_paths = _parse.table_paths
_cri_runtimes = _changes._cri_runtimes
_plain = _changes._plain
nvidia_default = _changes.nvidia_default
option_value = _changes.option_value


# --------------------------------------------------------------------------- the daemon's reading


def _leaves(value, path=()):
    """(key path, value) of every leaf of a parsed config; a list is a leaf."""
    if isinstance(value, Mapping):
        if not value:
            yield path, {}
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    else:
        yield path, value


def _differences(before: Mapping, after: Mapping) -> list:
    """Key paths whose value differs between two parsed configs (added, removed or changed leaves)."""
    left, right = dict(_leaves(before)), dict(_leaves(after))
    return sorted(p for p in set(left) | set(right) if not config_merge.values_equal(left.get(p), right.get(p)))


def _settings_tails(settings: Mapping | None) -> list:
    """The key paths of ``settings`` below their plugin table (``plugins.<id>.a.b`` -> ``(a, b)``), and whole
    paths of top-level settings: containerd 2.x moves a version 2 file's CRI settings to other plugin ids
    (``io.containerd.grpc.v1.cri`` -> ``io.containerd.cri.v1.runtime`` / ``.images``) when it reads it, and
    containerd 2.3 a file's top-level ``grpc``/``ttrpc``/``debug``/``metrics`` to its server plugins
    (SERVICE_PLUGINS)."""
    tails = []
    for path, _value in _leaves(dict(settings or {})):
        if len(path) >= 3 and path[0] == "plugins":
            tails.append(("plugins", None, *path[2:]))
        elif path:
            tails.append(tuple(path))
            tails.extend(("plugins", plugin) for plugin in SERVICE_PLUGINS.get(path[0], ()))
    return tails


def _covered(path: tuple, allowed: list) -> bool:
    """Whether ``path`` lies in (or above) one of the ``allowed`` paths; None in an allowed path matches any key."""
    for prefix in allowed:
        size = min(len(prefix), len(path))
        if all(want is None or want == got for want, got in zip(prefix[:size], path[:size])):
            return True
    return False


def _file_runtime_tables(doc: Mapping | None) -> list:
    """Dotted names of the tables in a config file that hold a ``runtimes`` table (under any plugin id)."""
    found = []
    for plugin, table in ((doc or {}).get("plugins") or {}).items():
        runtimes = config_merge.get_path(table, ["containerd", "runtimes"]) if isinstance(table, Mapping) else None
        if isinstance(runtimes, Mapping):
            found.append(f"{dotted_key(('plugins', plugin, 'containerd', 'runtimes'))} ({', '.join(runtimes)})")
    return found


def reading_as(reading: Mapping, staged: str, path: str) -> dict:
    """containerd's reading of a staged copy as if it were ``path``: `config dump` lists the file it was given
    (the staged copy's own name) in the top-level ``imports`` (containerd 1.6/1.7; seen with 1.6.20), so two
    readings of two staged copies would differ there although the files are read alike. Pure."""
    result = dict(reading)
    imports = result.get("imports")
    if isinstance(imports, list):
        result["imports"] = [path if item == staged else item for item in imports]
    return result


def stage_imports(root_text: str, root_path: str, dropin_path: str, stage_dir: str) -> str:
    """The root config, to be read from anywhere with a staged drop-in directory: every ``imports`` entry made
    absolute (relative entries are relative to the root file's directory, as containerd reads them), and the
    entries in the drop-in's directory moved to ``stage_dir``, which holds a copy of that directory with the
    candidate drop-in in it. Pure."""
    doc = parse_document(root_text if root_text.strip() else "", root_path)
    imports = _plain(config_merge.get_path(doc, ["imports"], []))
    if not isinstance(imports, list) or not imports:
        return root_text
    root_dir = posixpath.dirname(root_path)
    dropin_dir = posixpath.dirname(posixpath.normpath(dropin_path))
    staged = []
    for entry in imports:
        if isinstance(entry, str):
            full = posixpath.normpath(entry if posixpath.isabs(entry) else posixpath.join(root_dir, entry))
            directory, name = posixpath.split(full)
            entry = posixpath.join(stage_dir, name) if directory == dropin_dir else full
        staged.append(entry)
    doc["imports"] = staged
    return tomlkit.dumps(doc)


def unstage_reading(reading: Mapping, staged_root: str, root_path: str, stage_dir: str, dropin_path: str) -> dict:
    """containerd's reading of a staged root config (stage_imports) as if it were read in place: the files its
    dump lists in ``imports`` get their own paths back. Pure."""
    result = dict(reading)
    imports = result.get("imports")
    if isinstance(imports, list):
        dropin_dir = posixpath.dirname(posixpath.normpath(dropin_path))
        result["imports"] = [
            root_path
            if item == staged_root
            else posixpath.join(dropin_dir, item[len(stage_dir) + 1 :])
            if isinstance(item, str) and item.startswith(stage_dir + "/")
            else item
            for item in imports
        ]
    return result


def verify_reading(
    path: str,
    before: Mapping | None,
    after: Mapping,
    request: Request,
    written: Mapping | None = None,
    written_table: str | None = None,
    expected: tuple = (),
) -> None:
    """Refuse a candidate file that containerd reads otherwise than this request meant.

    ``before`` and ``after`` are containerd's own reading (`containerd --config <file> config dump`, parsed) of
    the current file and of the candidate (None for ``before`` when there was no file: then only the runtime
    and the default are compared). Meant: the runtime of ``request`` in the CRI plugin's runtimes with its
    binary (options.BinaryName) and runtime_type; the default runtime as asked (the request's, else not the
    runtime unless it already was and stays so); nothing else changed in the reading but the runtime's entry,
    the default, CDI, what ``request.settings`` names and the key paths in ``expected`` (method=dropin: the root
    file's ``imports``). ``written`` is the candidate file (parsed), whose runtimes tables the message names;
    ``written_table`` the table the plan wrote the runtime to.
    Pure: no I/O. Raises ContainerdConfigError naming the tables and the fix; the file is then left as it was.
    """
    problems = []
    read_version = after.get("version", 1) if isinstance(after, Mapping) else 1
    if read_version not in CRI_TABLES:
        raise ContainerdConfigError(
            f"containerd reads the new {path} as config version {read_version!r}, whose tables this action does not "
            f"know: nothing was changed. Edit {path} by hand."
        )
    paths = table_paths(read_version)
    runtimes, default = _cri_runtimes(after)
    read_runtimes = dotted_key(paths.runtimes)
    if request.runtime is not None:
        name, binary = request.runtime["name"], request.runtime["path"]
        runtime_type = request.runtime.get("runtime_type") or DEFAULT_RUNTIME_TYPE
        entry = runtimes.get(name)
        if not isinstance(entry, Mapping):
            problems.append(
                f"containerd's reading has no {read_runtimes}.{name} (runtimes it reads: "
                f"{', '.join(runtimes) or 'none'})"
            )
        else:
            got_binary = option_value(entry.get("options"), "BinaryName")
            if got_binary != binary:
                problems.append(f"{read_runtimes}.{name}.options.BinaryName is {got_binary!r}, not {binary!r}")
            if entry.get("runtime_type") != runtime_type:
                problems.append(
                    f"{read_runtimes}.{name}.runtime_type is {entry.get('runtime_type')!r}, not {runtime_type!r}"
                )
    _before_runtimes, before_default = _cri_runtimes(before) if before is not None else ({}, None)
    name = (request.runtime or {}).get("name")
    default_key = f"{dotted_key(paths.containerd)}.default_runtime_name"
    kept, _binary = nvidia_default(before_default, [_before_runtimes], name)
    if request.default_runtime is not None and request.default_runtime == name and kept not in (None, name):
        # asked to be the default where NVIDIA's runtime already is under another name: that one stays (issue 37)
        request = replace(request, default_runtime=None, unset_default=False)
        if default != kept:
            problems.append(f"{default_key} is {default!r}, not NVIDIA's runtime {kept!r} as it was")
    if request.default_runtime is not None:
        if default != request.default_runtime:
            problems.append(f"{default_key} is {default!r}, not {request.default_runtime!r} as asked")
    elif name is not None and default == name and (request.unset_default or before_default != name):
        problems.append(f"{default_key} is {name!r}: every pod without a RuntimeClass would run through it")
    elif request.unset_default and nvidia_default(default, [runtimes], name)[0] not in (None, name):
        binary = nvidia_runtime.entry_binary("containerd", runtimes.get(default))
        problems.append(
            f"{default_key} is NVIDIA's runtime {nvidia_runtime.describe(default, binary)}: every pod without a"
            " RuntimeClass would run through it"
        )
    if before is not None:
        allowed = [
            (*paths.runtimes, name) if name else None,
            # a default that moves brings its own table: the runc table written from the old default's (issue 25)
            (*paths.runtimes, default) if default and default != before_default else None,
            (*paths.containerd, "default_runtime_name"),
            (*paths.cri, "enable_cdi"),
            (*paths.cri, "cdi_spec_dirs"),
            *_settings_tails(request.settings),
            *expected,
        ]
        allowed = [a for a in allowed if a]
        changed = [p for p in _differences(before, after) if not _covered(p, allowed)]
        if changed:
            shown = ", ".join(dotted_key(p) for p in changed[:5]) + (" ..." if len(changed) > 5 else "")
            problems.append(f"it also changes what was not asked for: {shown}")
    if not problems:
        return
    tables = _file_runtime_tables(written)
    said = f"; the runtimes tables of the new file: {'; '.join(tables)}" if tables else ""
    wrote = f"The plan wrote {written_table}" if written_table else "The plan wrote the runtime"
    raise ContainerdConfigError(
        f"containerd reads the new {path} otherwise than meant (`containerd --config <candidate> config dump`): "
        + "; ".join(problems)
        + f". {wrote}, but containerd reads its runtimes from {read_runtimes}{said}. A file whose 'version' does not"
        " match its table names (e.g. version = 2 with io.containerd.cri.v1.runtime tables, as some cloud images"
        " ship for containerd 2.x) is read otherwise than it looks: make 'version' match the table names (3, or 4"
        f" on containerd 2.3, for io.containerd.cri.v1.* tables), then run again. {path} was left as it was."
    )
