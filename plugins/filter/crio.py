# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Filters of runtime_config for CRI-O: the drop-in's runtime table, copied from the default runtime.

CRI-O's effective configuration (``crio config`` or ``crio status config``, crio.conf with every file of
crio.conf.d) is parsed here, on the controller, with tomlkit. The new runtime's table is a copy of the
default runtime's whole entry (monitor_path: packaged CRI-O keeps conmon in /usr/libexec/crio, not on PATH,
and without it CRI-O's config validation fails; runtime_root; allowed_annotations; monitor_cgroup;
monitor_env ...) with only runtime_path replaced, as NVIDIA's own tooling does.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import reading as _reading
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd.parse import require_tomlkit, tomlkit
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia import runtime as _nvidia

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - Ansible is always there when the role runs

    class AnsibleFilterError(Exception):
        pass


# the fields of CRI-O's own default runtime when its config names none (CRI-O 1.31+: crun, before: runc)
FALLBACK_DEFAULTS = ("crun", "runc")


# What NVIDIA's runtime is, whatever the entry's name (issue 37)
# The leaves of a parsed config, as containerd's reading check walks them (one walk for both runtimes)
_leaves = _reading._leaves


def _effective(config_text: str) -> tuple:
    """(runtimes, default_runtime as set or None) of CRI-O's effective config text."""
    if not config_text or not config_text.strip():
        return {}, None
    runtime = _parse(config_text, "CRI-O's effective config (`crio config`)").get("crio", {}).get("runtime", {})
    runtimes = runtime.get("runtimes", {}) if isinstance(runtime.get("runtimes"), Mapping) else {}
    return runtimes, runtime.get("default_runtime") or None


def nvidia_default(runtimes: Mapping, default, name: str) -> bool:
    """Whether CRI-O's default runtime is NVIDIA's runtime, under ``name`` or any other (its runtime_path)."""
    entry = runtimes.get(default) if default else None
    return bool(default) and _nvidia.is_nvidia_entry(default, _nvidia.entry_binary("crio", entry), name)


def crio_runtime_entry(config_text: str, name: str, binary: str) -> dict:
    """The table for runtime ``name``: the default runtime's effective entry with runtime_path = ``binary``.

    ``config_text`` is the output of ``crio config`` (empty: CRI-O gave nothing, only the binary is written).
    """
    require_tomlkit()
    if not config_text or not config_text.strip():
        return {"runtime_path": binary, "runtime_type": "oci"}
    try:
        config = tomlkit.parse(config_text).unwrap()
    except Exception as exc:  # tomlkit raises several error types
        raise AnsibleFilterError(f"CRI-O's effective config (`crio config`) is not valid TOML: {exc}") from exc
    runtime = config.get("crio", {}).get("runtime", {})
    runtimes = runtime.get("runtimes", {}) if isinstance(runtime.get("runtimes"), Mapping) else {}
    default = runtime.get("default_runtime") or next((n for n in FALLBACK_DEFAULTS if n in runtimes), None)
    source = runtimes.get(default) if default != name else None
    if not isinstance(source, Mapping):
        source = next(
            (runtimes[n] for n in FALLBACK_DEFAULTS if n != name and isinstance(runtimes.get(n), Mapping)), {}
        )
    entry = copy.deepcopy(dict(source))
    entry["runtime_path"] = binary
    if not entry.get("runtime_type"):
        entry["runtime_type"] = "oci"
    # a VM runtime's own config file means nothing to an OCI runtime wrapper
    entry.pop("runtime_config_path", None)
    return entry


def _merge(target, changes: Mapping) -> None:
    """Merge ``changes`` (nested dicts) into the tomlkit table ``target``: tables recursively, values replaced."""
    for key, value in changes.items():
        if isinstance(value, Mapping):
            if key not in target or not isinstance(target[key], Mapping):
                target[key] = tomlkit.table()
            _merge(target[key], value)
        else:
            target[key] = value


def crio_dropin(
    config_text: str, name: str, binary: str, set_as_default: bool = False, settings: Mapping | None = None
) -> str:
    """TOML text of the drop-in: [crio.runtime] (default_runtime only when asked) and the runtime's table, with
    ``settings`` (runtime_config_crio_settings: tables and keys of crio.conf) merged over them."""
    if settings is not None and not isinstance(settings, Mapping):
        raise AnsibleFilterError(f"runtime_config_crio_settings must be a dict of crio.conf tables, got {settings!r}")
    doc = tomlkit.document()
    crio = tomlkit.table(is_super_table=True)
    runtime = tomlkit.table()
    runtimes_now, default_now = _effective(config_text)
    if set_as_default and not (default_now != name and nvidia_default(runtimes_now, default_now, name)):
        runtime["default_runtime"] = name
    elif not set_as_default and default_now != name and nvidia_default(runtimes_now, default_now, name):
        # NVIDIA's runtime under another name is the default (an earlier file of crio.conf.d): the drop-in, read
        # later, makes CRI-O's own default the default again; that entry stays (RuntimeClasses name it)
        runtime["default_runtime"] = next((n for n in FALLBACK_DEFAULTS if n in runtimes_now), FALLBACK_DEFAULTS[-1])
    runtimes = tomlkit.table(is_super_table=True)
    table = tomlkit.table()
    for key, value in crio_runtime_entry(config_text, name, binary).items():
        table[key] = value
    runtimes[name] = table
    runtime["runtimes"] = runtimes
    crio["runtime"] = runtime
    doc["crio"] = crio
    _merge(doc, dict(settings or {}))
    return tomlkit.dumps(doc)


def _parse(text: str, what: str) -> dict:
    require_tomlkit()
    try:
        return tomlkit.parse(text or "").unwrap()
    except Exception as exc:  # tomlkit raises several error types
        raise AnsibleFilterError(f"{what} is not valid TOML: {exc}") from exc


def _covered(path: tuple, allowed: list) -> bool:
    return any(path[: len(prefix)] == prefix or prefix[: len(path)] == path for prefix in allowed)


def crio_reading_problems(
    before_text: str,
    after_text: str,
    name: str,
    binary: str,
    set_as_default: bool = False,
    settings: Mapping | None = None,
) -> list:
    """What CRI-O's reading of the candidate drop-in says otherwise than meant; [] when it reads what was meant.

    ``before_text`` / ``after_text``: `crio config` with the drop-in as it is, and with the candidate in its
    place (crio.conf and every other file of crio.conf.d as they are). Meant: crio.runtime.runtimes.<name> with
    runtime_path = ``binary``; crio.runtime.default_runtime = <name> when ``set_as_default``, else not <name>;
    nothing else in the reading changed but that table, default_runtime and the keys ``settings`` names.
    """
    before = _parse(before_text, "`crio config` with the current drop-in")
    after = _parse(after_text, "`crio config` with the new drop-in")
    runtime = (after.get("crio") or {}).get("runtime") or {}
    runtimes = runtime.get("runtimes") if isinstance(runtime.get("runtimes"), Mapping) else {}
    problems = []
    entry = runtimes.get(name)
    table = f"crio.runtime.runtimes.{name}"
    if not isinstance(entry, Mapping):
        problems.append(f"CRI-O's reading has no [{table}] (runtimes: {', '.join(runtimes) or 'none'})")
    elif entry.get("runtime_path") != binary:
        problems.append(f"{table}.runtime_path is {entry.get('runtime_path')!r}, not {binary!r}")
    default = runtime.get("default_runtime")
    # the runtime's own entry is meant to be NVIDIA's (its binary is checked above); others count by their binary
    nvidia = default == name or nvidia_default(runtimes, default, name)
    if set_as_default and not nvidia:
        problems.append(f"crio.runtime.default_runtime is {default!r}, not {name!r} as asked")
    elif not set_as_default and default == name:
        problems.append(
            f"crio.runtime.default_runtime is {name!r}: every pod without a RuntimeClass would run through it"
        )
    elif not set_as_default and nvidia:
        binary = _nvidia.entry_binary("crio", runtimes.get(default))
        problems.append(
            f"crio.runtime.default_runtime is NVIDIA's runtime {_nvidia.describe(default, binary)}: every pod without"
            " a RuntimeClass would run through it"
        )
    allowed = [("crio", "runtime", "runtimes", name), ("crio", "runtime", "default_runtime")]
    allowed += [path for path, _value in _leaves(dict(settings or {})) if path]
    left, right = dict(_leaves(before)), dict(_leaves(after))
    changed = sorted(p for p in set(left) | set(right) if left.get(p) != right.get(p) and not _covered(p, allowed))
    if changed:
        shown = ", ".join(".".join(p) for p in changed[:5]) + (" ..." if len(changed) > 5 else "")
        problems.append(f"it also changes what was not asked for: {shown}")
    return problems


class FilterModule:
    def filters(self):
        return {
            "runtime_config_crio_dropin": crio_dropin,
            "runtime_config_crio_reading_problems": crio_reading_problems,
        }
