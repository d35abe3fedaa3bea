"""containerd config.toml editing, part 2 of 4: the changes a request makes (runtime table, NVIDIA's default).

CONTROLLER only: config.py (the entry point) imports the parts.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace

from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import parse as _parse
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import tables as containerd_tables
from ansible_collections.gpunode.provisioning.plugins.module_utils.files import merge as config_merge
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia import runtime as nvidia_runtime

DEFAULT_RUNTIME_TYPE = _parse.DEFAULT_RUNTIME_TYPE
ContainerdConfigError = _parse.ContainerdConfigError
Request = _parse.Request
TablePaths = _parse.TablePaths
dotted_key = _parse.dotted_key
table_paths = _parse.table_paths


# --------------------------------------------------------------------------- changes


def _plain(value):
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if callable(unwrap) else copy.deepcopy(value)


def _cri_runtimes(config: Mapping | None) -> tuple[dict, str | None]:
    """(runtimes, default_runtime_name) of a parsed containerd config of any supported version, or ({}, None): as
    the node reads it (containerd/tables.py cri_runtimes), plain values."""
    runtimes, default = containerd_tables.cri_runtimes(config)
    return {name: _plain(entry) for name, entry in runtimes.items()}, _plain(default)


def _runtime_entry(name: str, sources) -> tuple[dict | None, str | None]:
    """The whole table of runtime ``name`` from the first source (label, runtimes) that has it."""
    for label, runtimes in sources:
        entry = runtimes.get(name)
        if isinstance(entry, Mapping):
            return copy.deepcopy(dict(entry)), label
    return None, None


def nvidia_default(name, runtimes_sources, project_name: str | None) -> tuple[str | None, str | None]:
    """(name, binary) of ``name`` when that runtime is NVIDIA's runtime (plugins/module_utils/nvidia/runtime.py: its
    BinaryName, in the first of ``runtimes_sources`` that has its table; an entry named like the project's runtime
    without a BinaryName counts), else (None, None)."""
    if not isinstance(name, str) or not name:
        return None, None
    entry = next((runtimes[name] for runtimes in runtimes_sources if isinstance(runtimes.get(name), Mapping)), None)
    binary = nvidia_runtime.entry_binary("containerd", entry)
    if nvidia_runtime.is_nvidia_entry(name, binary, project_name or "nvidia"):
        return name, binary
    return None, None


def _file_nvidia_default(doc, paths: TablePaths, request: Request) -> tuple[str | None, str | None]:
    """The default_runtime_name of ``doc`` when it names NVIDIA's runtime, under any name, and its binary."""
    name = request.runtime["name"] if request.runtime else None
    file_default = _plain(config_merge.get_path(doc, [*paths.containerd, "default_runtime_name"]))
    file_runtimes = _plain(config_merge.get_path(doc, list(paths.runtimes), {}))
    file_runtimes = file_runtimes if isinstance(file_runtimes, Mapping) else {}
    effective_runtimes, _default = _cri_runtimes(request.effective)
    return nvidia_default(file_default, [file_runtimes, effective_runtimes], name)


def keep_nvidia_default(doc, version: int, request: Request) -> Request:
    """``request`` as it applies to ``doc``: asked to make the runtime the default where NVIDIA's runtime is the
    default already under another name (nvidia-container-runtime, nvidia-cdi ...), the default stays that entry
    (nvidia_container_toolkit_keep_gpu_pod_access; no second, unused NVIDIA default)."""
    name = request.runtime["name"] if request.runtime else None
    if request.default_runtime is None or request.default_runtime != name:
        return request
    current, _binary = _file_nvidia_default(doc, table_paths(version), request)
    if current is None:
        effective_runtimes, effective_default = _cri_runtimes(request.effective)
        current, _binary = nvidia_default(effective_default, [effective_runtimes], name)
    if current is None or current == name:
        return request
    return replace(request, default_runtime=None, unset_default=False)


def nvidia_summary(doc, version: int, request: Request, plan_request: Request) -> dict:
    """What the user is told about NVIDIA's runtime in this file: its entries under other names (kept: RuntimeClasses
    name them), the default that moved away from one (and whose settings runc got), the default that was kept."""
    paths = table_paths(version)
    name = request.runtime["name"] if request.runtime else None
    file_runtimes = _plain(config_merge.get_path(doc, list(paths.runtimes), {}))
    file_runtimes = file_runtimes if isinstance(file_runtimes, Mapping) else {}
    effective_runtimes, _default = _cri_runtimes(request.effective)
    entries = {}
    for runtimes in (effective_runtimes, file_runtimes):
        for entry_name, binary in nvidia_runtime.nvidia_entries("containerd", runtimes, name or "nvidia").items():
            if entry_name != name:
                entries[entry_name] = binary
    current, binary = _file_nvidia_default(doc, paths, request)
    moved = (
        current if current is not None and plan_request.unset_default and plan_request.default_runtime is None else None
    )
    kept = None
    if plan_request.default_runtime is None and request.default_runtime == name and name is not None:
        kept = current or _cri_runtimes(request.effective)[1]
    notes = []
    if entries:
        notes.append(
            "NVIDIA's runtime is also registered as "
            + ", ".join(nvidia_runtime.describe(n, b) for n, b in sorted(entries.items()))
            + ": kept (RuntimeClasses name it)"
        )
    if moved:
        notes.append(
            f"the default runtime was NVIDIA's runtime {nvidia_runtime.describe(current, binary)}: it is no longer the"
            " default, and runc's table keeps its settings (all but BinaryName)"
        )
    if kept:
        notes.append(f"NVIDIA's runtime {kept} stays the default (no second default named {name} is made)")
    return {"entries": entries, "moved_from": moved, "kept": kept, "note": "; ".join(notes)}


def _default_runtime_plan(doc, paths: TablePaths, request: Request) -> dict:
    """Work out, from the file, containerd's effective config and its defaults, which runtime is the default
    once this request is applied, whose table the new runtime copies, and whether the default runtime's own
    table must be written into the file (it is not there, so a runtimes table without it would drop it)."""
    name = request.runtime["name"] if request.runtime else None
    runtime_type = (request.runtime or {}).get("runtime_type") or DEFAULT_RUNTIME_TYPE
    file_runtimes = _plain(config_merge.get_path(doc, list(paths.runtimes), {}))
    file_runtimes = file_runtimes if isinstance(file_runtimes, Mapping) else {}
    file_default = _plain(config_merge.get_path(doc, [*paths.containerd, "default_runtime_name"]))
    effective_runtimes, effective_default = _cri_runtimes(request.effective)
    default_runtimes, builtin_default = _cri_runtimes(request.defaults)
    # the default is NVIDIA's runtime under whatever name (issue 37): nvidia, nvidia-container-runtime, nvidia-cdi ...
    nvidia_file_default, _binary = nvidia_default(file_default, [file_runtimes, effective_runtimes], name)
    if request.default_runtime is not None:
        target = request.default_runtime
    elif request.unset_default and nvidia_file_default is not None:
        target = builtin_default or "runc"
    else:
        target = effective_default or (file_default if isinstance(file_default, str) else None)
        target = target or builtin_default or "runc"
    sources = [
        ("the effective config", effective_runtimes),
        ("the file", file_runtimes),
        ("containerd config default", default_runtimes),
    ]
    source_name = source = None
    # The default moves away from the runtime (it was the default, it is no longer asked to be): the new default's
    # table and the runtime's own keep every key of the old default's effective table (SystemdCgroup above all, or
    # every pod gets another cgroup driver than the kubelet's); only the binary differs (issue 25).
    old_default = None
    if (
        name is not None
        and request.default_runtime is None
        and request.unset_default
        and nvidia_file_default is not None
        and target not in file_runtimes
    ):
        old_default, _label = _runtime_entry(nvidia_file_default, sources[:2])
    if old_default is not None:
        # containerd 2.x lays the file's runc table over its built-in one: copy what runc will be once written
        builtin_runc = default_runtimes.get("runc")
        if isinstance(builtin_runc, Mapping):
            source = config_merge.merge(copy.deepcopy(dict(builtin_runc)), old_default, "replace")
        else:
            source = old_default
        source_name = nvidia_file_default
        entry = copy.deepcopy(old_default)
        options = entry.get("options") if isinstance(entry.get("options"), Mapping) else {}
        entry["options"] = {key: value for key, value in options.items() if key.lower() != "binaryname"}
        entry["runtime_type"] = DEFAULT_RUNTIME_TYPE
        return {
            "target": target,
            "source_name": source_name,
            "source": source,
            "write_default": (target, entry),
            "file_default": file_default,
            "effective_default": effective_default,
            "effective_runtimes": effective_runtimes,
            "file_runtimes": file_runtimes,
        }
    for candidate in (target, "runc") if source is None else ():
        if candidate == name:
            continue
        if candidate == "runc" and target == name and "runc" not in file_runtimes:
            # the runtime stays the default and the file has no runc: its own table is what pods run with today
            own, _label = _runtime_entry(name, sources[:2])
            if own is not None:
                source_name, source = name, own
                break
        entry, _label = _runtime_entry(candidate, sources)
        if entry is None:
            continue
        if entry.get("runtime_type") not in (None, "", runtime_type):
            continue  # a kata runtime's table means nothing to runc
        source_name, source = candidate, entry
        break
    write_default = None
    if name is not None and target != name and target not in file_runtimes:
        entry, _label = _runtime_entry(target, [sources[0], sources[2]])
        if entry is not None:
            write_default = (target, entry)
    return {
        "target": target,
        "source_name": source_name,
        "source": source,
        "write_default": write_default,
        "file_default": file_default,
        "effective_default": effective_default,
        "effective_runtimes": effective_runtimes,
        "file_runtimes": file_runtimes,
    }


# containerd decodes a runtime's ``options`` into the shim's options struct case-insensitively (containerd 1.7:
# pkg/cri/sbserver/helpers.go generateRuntimeOptions, toml.Marshal + toml.Unmarshal with pelletier/go-toml,
# whose Unmarshal falls back to a case-insensitive key match; 2.x: go-toml v2, "case-insensitive" field
# matching, see its README). kubespray's template renders the spellings of its inventory (docs/containerd.md:
# ``binaryName``, ``systemdCgroup``), so ``binaryName`` and ``BinaryName`` in one table are the same field and
# which one containerd takes is undefined: option keys are compared, copied and replaced case-insensitively.


def option_keys(options: Mapping | None, key: str) -> list:
    """The keys of ``options`` that containerd reads as option ``key`` (case-insensitive), in file order."""
    if not isinstance(options, Mapping):
        return []
    return [name for name in options if isinstance(name, str) and name.lower() == key.lower()]


def option_value(options: Mapping | None, key: str):
    """The value containerd would give option ``key``: None when absent; a set of the values when the table
    spells it more than once with different values (containerd's pick is undefined then)."""
    values = [options[name] for name in option_keys(options, key)]
    if not values:
        return None
    distinct = []
    for value in values:
        if value not in distinct:
            distinct.append(value)
    return distinct[0] if len(distinct) == 1 else frozenset(map(str, distinct))


def fold_options(*layers: Mapping) -> dict:
    """Merge option tables, later layers winning, keys compared case-insensitively: a key of a later layer
    replaces every spelling of it in the earlier ones, so the result spells each option once (the later
    layer's spelling)."""
    result: dict = {}
    for layer in layers:
        for key, value in (layer or {}).items():
            for other in option_keys(result, key):
                if other != key:
                    del result[other]
            if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
                result[key] = config_merge.merge(result[key], dict(value), "replace")
            else:
                result[key] = copy.deepcopy(value)
    return result


def drop_option_variants(doc, options_path, options: Mapping) -> bool:
    """Remove from the options table at ``options_path`` of ``doc`` every key that spells one of ``options``'
    keys differently (``binaryName`` next to our ``BinaryName``); return True when one was removed."""
    table = config_merge.get_path(doc, list(options_path))
    if not isinstance(table, Mapping):
        return False
    stale = [[*options_path, name] for key in options for name in option_keys(table, key) if name != key]
    return config_merge.remove_paths(doc, stale) if stale else False


# containerd's reading of one CRI runtime entry (issue 36): the CRI plugin decodes runtimes.<name> into its Runtime
# struct, so a key left out and a key at its Go zero value ('', 0, false, [], {}) read the same (containerd v2.3.4
# internal/cri/config/config.go, type Runtime; v1.7.34 pkg/cri/config/config.go); ValidateRuntimeConfig gives an empty
# `sandboxer` (1.7: `sandbox_mode`) "podsandbox", and an empty `io_type` means named pipes, "fifo" (same files; v2.3.4
# internal/cri/server/container_create.go switches on IOType with fifo as the default). `config dump` prints the
# built-in runc entry filled in (sandboxer 'podsandbox', runc's options at their zero values) and any other entry
# with what its file says, so the same runtime reads differently in the dump by name alone. The options of an
# io.containerd.runc.v2 entry are decoded into runc's Options message (GenerateRuntimeOptions, getRuntimeOptionsType):
# zero and absent read the same there too, keys case-insensitively (see option_keys). Any other runtime type gets its
# options table passed on as written (runtimeoptions ConfigBody): compared as it is.
_RUNTIME_DEFAULTS = {"sandboxer": "podsandbox", "sandbox_mode": "podsandbox", "io_type": "fifo"}


def _zero(value) -> bool:
    """Go's zero value of the field a TOML value decodes into: false, 0, '', an empty list or table (or nothing)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value == 0
    return value is None or (isinstance(value, (str, list, tuple, Mapping)) and len(value) == 0)


def runtime_reading(entry: Mapping | None) -> dict | None:
    """The runtime entry as containerd's CRI plugin reads it: keys at their zero or default value dropped, a runc
    entry's options folded to lower case without their zero values. Two entries that read the same run pods the same.
    """
    if not isinstance(entry, Mapping):
        return None
    runc = entry.get("runtime_type") == DEFAULT_RUNTIME_TYPE
    reading = {}
    for key, value in _plain(entry).items():
        if key == "options" and isinstance(value, Mapping) and runc:
            options = {str(name).lower(): item for name, item in value.items() if not _zero(item)}
            if options:
                reading[key] = options
        elif not _zero(value) and _RUNTIME_DEFAULTS.get(key) != value:
            reading[key] = value
    return reading


def check_effective(path: str, plan: dict, request: Request) -> None:
    """Refuse when containerd's effective config (imports included) overrides what this request writes to
    ``path``: an imported file that makes the runtime the default, or gives it another binary."""
    if request.effective is None or request.runtime is None:
        return
    name, binary = request.runtime["name"], request.runtime["path"]
    imports = (request.effective or {}).get("imports") or []
    where = f"a file it imports ({', '.join(map(str, imports))})" if imports else "an imported file"
    if plan["effective_default"] == name and plan["file_default"] != name and request.default_runtime != name:
        raise ContainerdConfigError(
            f"containerd's effective config (`containerd --config {path} config dump`, imports included) makes "
            f"{name!r} the default runtime, but {path} does not: {where} sets default_runtime_name = {name!r}. "
            f"Every pod without a RuntimeClass would run through {name}. Remove default_runtime_name from that "
            f"file (or set runtime_config_set_as_default: true if you really want it), then run again. "
            f"Nothing was changed."
        )
    other, other_binary = nvidia_default(plan["effective_default"], [plan["effective_runtimes"]], name)
    if (
        request.unset_default
        and request.default_runtime is None
        and other not in (None, name)
        and plan["file_default"] != other
    ):
        raise ContainerdConfigError(
            f"containerd's effective config (`containerd --config {path} config dump`, imports included) makes "
            f"NVIDIA's runtime {nvidia_runtime.describe(other, other_binary)} the default runtime, but {path} does "
            f"not: {where} sets default_runtime_name = {other!r}. Every pod without a RuntimeClass would run through "
            f"it. Remove default_runtime_name from that file (keep its runtimes.{other} table: RuntimeClasses name "
            f"it), or set runtime_config_set_as_default: true to keep it the default, then run again. Nothing was "
            f"changed."
        )
    effective_entry = plan["effective_runtimes"].get(name)
    file_entry = plan["file_runtimes"].get(name)
    effective_binary = option_value((effective_entry or {}).get("options"), "BinaryName") if effective_entry else None
    file_binary = (
        option_value((file_entry or {}).get("options"), "BinaryName") if isinstance(file_entry, Mapping) else None
    )
    if effective_entry is not None and effective_binary != file_binary:
        others = imported_nvidia_entries(plan, exclude=name)
        also = (
            f" {where} also registers NVIDIA's runtime as {others}: every such entry is NVIDIA's runtime, and the"
            " one this project does not rebind keeps reading its own toolkit config (the GPU Operator's wrappers"
            " read /usr/local/nvidia/toolkit/.config/nvidia-container-runtime/config.toml, which accepts"
            " NVIDIA_VISIBLE_DEVICES from unprivileged containers). Remove them all from that file (with the"
            " RuntimeClasses that name them; on a GPU Operator node disable its toolkit first, ClusterPolicy"
            " spec.toolkit.enabled: false, or it writes them back), or keep them and give their config"
            " accept-nvidia-visible-devices-envvar-when-unprivileged = false (ClusterPolicy spec.toolkit.env"
            " ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED=false)."
            if others
            else ""
        )
        raise ContainerdConfigError(
            f"containerd's effective config (`containerd --config {path} config dump`, imports included) runs the "
            f"{name!r} runtime as BinaryName = {effective_binary!r}, but {path} says {file_binary!r}: {where} "
            f"defines runtimes.{name} and wins over {path}. Remove runtimes.{name} from that file (or make it "
            f"BinaryName = {binary!r}), then run again.{also} Nothing was changed."
        )


def imported_nvidia_entries(plan: Mapping, exclude: str | None = None) -> str:
    """The entries of containerd's effective config that are NVIDIA's runtime (nvidia_runtime.py) and that the root
    file does not define as they run, as a message names them: what an imported file (the toolkit's 99-nvidia.toml
    drop-in) registers; "" when none (issue 46: the drop-in refusal names every one)."""
    effective = plan.get("effective_runtimes") or {}
    file_runtimes = plan.get("file_runtimes") or {}
    named = []
    for entry_name, binary in sorted(nvidia_runtime.nvidia_entries("containerd", effective).items()):
        file_entry = file_runtimes.get(entry_name)
        file_binary = nvidia_runtime.entry_binary("containerd", file_entry) if isinstance(file_entry, Mapping) else None
        if entry_name != exclude and file_binary != binary:
            named.append(nvidia_runtime.describe(entry_name, binary))
    return ", ".join(named)


def _check_request(request: Request) -> None:
    runtime = request.runtime
    if runtime is not None:
        for key in ("name", "path"):
            if not isinstance(runtime.get(key), str) or not runtime.get(key):
                raise ContainerdConfigError(f"runtime.{key} must be a non-empty string, got {runtime.get(key)!r}")
        if runtime.get("options") is not None and not isinstance(runtime.get("options"), Mapping):
            raise ContainerdConfigError("runtime.options must be a dict of runtime options (e.g. SystemdCgroup: true)")
    if request.settings is not None and not isinstance(request.settings, Mapping):
        raise ContainerdConfigError("settings must be a dict of TOML tables and keys to merge at the top level")
    if request.list_strategy not in config_merge.LIST_STRATEGIES:
        raise ContainerdConfigError(
            f"list_strategy {request.list_strategy!r} is unknown: use one of {', '.join(config_merge.LIST_STRATEGIES)}"
        )


def build_changes(
    source_doc, version: int, request: Request, keep_read_alike: bool = False
) -> tuple[dict, str | None, str | None]:
    """Return (changes, runtime_table, options_copied_from) for ``request`` against ``source_doc``.

    ``changes`` is a plain nested dict for config_merge.merge_into: ``settings`` first, then the typed
    options on top (they win where both name the same key). The runtime's ``options`` are copied from the
    default/runc runtime of ``source_doc``, then ``runtime.options`` is merged over them and ``BinaryName``
    set to ``runtime.path``, option keys compared case-insensitively (fold_options). Where there is nothing
    to copy, only the given options are written: pass ``SystemdCgroup: true`` in ``runtime.options`` then.

    ``keep_read_alike`` (method=inplace): where ``source_doc`` has the runtime's table already and containerd's
    effective config reads it as the entry this would write (runtime_reading), the table is left as it is. Another
    tool may write the entry without the values `config dump` fills in (kubespray's render of the printed
    containerd_additional_runtimes entry): rewriting it would change the file at each run of either, for nothing.
    """
    _check_request(request)
    paths = table_paths(version)
    typed: dict = {}
    runtime_table = None
    copied_from = None

    def put(path, value):
        node = typed
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value

    plan = _default_runtime_plan(source_doc, paths, request)
    if request.runtime is not None:
        runtime = request.runtime
        runtime_type = runtime.get("runtime_type") or DEFAULT_RUNTIME_TYPE
        copied_from, table = plan["source_name"], plan["source"] or {}
        options = table.get("options") if isinstance(table.get("options"), Mapping) else {}
        # one spelling per option (see fold_options): ours win, kubespray's binaryName does not survive
        options = fold_options(options, dict(runtime.get("options") or {}), {"BinaryName": runtime["path"]})
        entry = {**table, "runtime_type": runtime_type, "options": options}
        if plan["write_default"] is not None:
            put(paths.runtime(plan["write_default"][0]), plan["write_default"][1])
        read_alike = (
            keep_read_alike
            and isinstance(plan["file_runtimes"].get(runtime["name"]), Mapping)
            and runtime_reading(plan["effective_runtimes"].get(runtime["name"])) == runtime_reading(entry)
        )
        if not read_alike:
            put(paths.runtime(runtime["name"]), entry)
        runtime_table = dotted_key(paths.runtime(runtime["name"]))
    if request.default_runtime is not None:
        put((*paths.containerd, "default_runtime_name"), request.default_runtime)
    if request.enable_cdi is not None:
        put((*paths.cri, "enable_cdi"), bool(request.enable_cdi))
    if request.cdi_spec_dirs is not None:
        put((*paths.cri, "cdi_spec_dirs"), list(request.cdi_spec_dirs))
    changes = config_merge.merge(dict(request.settings or {}), typed, "replace")
    return changes, runtime_table, copied_from


def _drop_stale_spellings(doc, version: int, request: Request, changes: Mapping) -> bool:
    """Remove the other spellings of the runtime's options from its table in ``doc`` (a file written by
    kubespray, or by an older run, may hold ``binaryName`` where we now write ``BinaryName``)."""
    if request.runtime is None:
        return False
    options_path = (*table_paths(version).runtime(request.runtime["name"]), "options")
    options = config_merge.get_path(changes, list(options_path))
    return drop_option_variants(doc, options_path, options) if isinstance(options, Mapping) else False


def _unset_default(doc, version: int, request: Request) -> bool:
    """Remove default_runtime_name from ``doc`` when it names NVIDIA's runtime (under any name: the runtime's own, or
    another entry whose binary is NVIDIA's) and the runtime is not asked to be the default. That entry stays."""
    if not request.unset_default or request.runtime is None or request.default_runtime is not None:
        return False
    key = [*table_paths(version).containerd, "default_runtime_name"]
    if _file_nvidia_default(doc, table_paths(version), request)[0] is None:
        return False
    return config_merge.remove_paths(doc, [key])
