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

import tomlkit

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - Ansible is always there when the role runs

    class AnsibleFilterError(Exception):
        pass


# the fields of CRI-O's own default runtime when its config names none (CRI-O 1.31+: crun, before: runc)
FALLBACK_DEFAULTS = ("crun", "runc")


def crio_runtime_entry(config_text: str, name: str, binary: str) -> dict:
    """The table for runtime ``name``: the default runtime's effective entry with runtime_path = ``binary``.

    ``config_text`` is the output of ``crio config`` (empty: CRI-O gave nothing, only the binary is written).
    """
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


def crio_dropin(config_text: str, name: str, binary: str, set_as_default: bool = False) -> str:
    """TOML text of the drop-in: [crio.runtime] (default_runtime only when asked) and the runtime's table."""
    doc = tomlkit.document()
    crio = tomlkit.table(is_super_table=True)
    runtime = tomlkit.table()
    if set_as_default:
        runtime["default_runtime"] = name
    runtimes = tomlkit.table(is_super_table=True)
    table = tomlkit.table()
    for key, value in crio_runtime_entry(config_text, name, binary).items():
        table[key] = value
    runtimes[name] = table
    runtime["runtimes"] = runtimes
    crio["runtime"] = runtime
    doc["crio"] = crio
    return tomlkit.dumps(doc)


class FilterModule:
    def filters(self):
        return {
            "runtime_config_crio_runtime_entry": crio_runtime_entry,
            "runtime_config_crio_dropin": crio_dropin,
        }
