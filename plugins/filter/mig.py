# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Filters of the nvidia_mig role: is a set of MIG layouts in mig-parted's format? What does the node have of the
MIG manager package?

`nvidia_mig_bad_entries(configs, entry_keys)`
    The problems of ``configs`` (nvidia_mig_configs: layout name -> list of entries), one string each, in the order
    of the layouts and their entries ("<layout> entry <n>: ..." with n counted from 1); an empty list when every
    entry is well formed. An entry has ``devices`` (``all`` or GPU indexes), ``mig-enabled`` (true or false),
    ``mig-devices`` (MIG profile such as 1g.10gb, 1g.10gb+me or 1c.3g.40gb -> count) where MIG is on, and optionally
    ``device-filter`` (PCI device IDs like 0x233010DE, one or a list); no other key (``entry_keys``: mig-parted's
    keys, api/spec/v1/spec.go). One problem is named per entry, the first found in that order; unknown keys in the
    entry's order (the Jinja program this replaced took a set difference, whose order varied from run to run).

`nvidia_mig_package_read(lines)`
    {installed, offered} from the lines of the package read (roles/nvidia_mig/tasks/install.yml): ``installed`` is
    {version, selection} of the line "installed <version> <selection>" ({} when there is none), ``offered`` the
    versions of the lines "offered <version>", in their order (the package manager's: newest first). Lines of other
    forms are not read.

Callers: roles/nvidia_mig/vars/main.yml (the `entries` rule of __nvidia_mig_variable_checks; __nvidia_mig_installed
and __nvidia_mig_offered).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

PROFILE = re.compile(r"[0-9]+c?\.?[0-9]*g\.[0-9]+gb(\+[a-z]+)*$")
COUNT = re.compile(r"[0-9]+$")
PCI_DEVICE_ID = re.compile(r"0x[0-9A-Fa-f]{8}$")


def _string(value) -> str:
    """A value as Jinja's `string` filter writes it (booleans as True/False)."""
    return str(value)


def _listlike(value) -> bool:
    """Jinja's `sequence` test without strings: has a length and items (a list, or a mapping: its keys)."""
    return not isinstance(value, str) and hasattr(value, "__len__") and hasattr(value, "__getitem__")


def _devices_ok(devices) -> bool:
    if devices == "all":
        return True
    return _listlike(devices) and all(COUNT.match(_string(index)) for index in devices)


def _mig_devices_ok(mig_devices) -> bool:
    if not isinstance(mig_devices, Mapping):
        return False
    return all(PROFILE.match(str(name)) for name in mig_devices) and all(
        COUNT.match(_string(count)) for count in mig_devices.values()
    )


def _device_filter_ok(device_filter) -> bool:
    ids = device_filter if _listlike(device_filter) else [device_filter]
    return all(PCI_DEVICE_ID.match(_string(device_id)) for device_id in ids)


def _entry_problem(entry, entry_keys) -> str | None:
    if not isinstance(entry, Mapping):
        return "not a mapping"
    unknown = [key for key in entry if key not in entry_keys]
    if unknown:
        return "unknown keys " + ", ".join(str(key) for key in dict.fromkeys(unknown))
    if "devices" not in entry or not _devices_ok(entry["devices"]):
        return "devices must be all or a list of GPU indexes"
    if not isinstance(entry.get("mig-enabled"), bool):
        return "mig-enabled must be true or false"
    if entry["mig-enabled"] and not _mig_devices_ok(entry.get("mig-devices", {})):
        return "mig-devices must map MIG profiles (like 1g.10gb) to counts"
    if "device-filter" in entry and not _device_filter_ok(entry["device-filter"]):
        return "device-filter must be PCI device IDs like 0x233010DE"
    return None


def nvidia_mig_bad_entries(configs, entry_keys) -> list:
    """The problems of the MIG layouts ``configs`` (see the module's docstring); [] when there are none."""
    bad = []
    for name, entries in (configs or {}).items():
        if not _listlike(entries) or len(entries) == 0:
            bad.append(f"{name}: not a list of entries")
            continue
        for index, entry in enumerate(entries, start=1):
            problem = _entry_problem(entry, entry_keys)
            if problem:
                bad.append(f"{name} entry {index}: {problem}")
    return bad


def nvidia_mig_package_read(lines) -> dict:
    """{installed: {version, selection} or {}, offered: [versions]} of the package read's lines."""
    rows = [line.split() for line in lines]
    installed = [row for row in rows if len(row) == 3 and row[0] == "installed"]
    return {
        "installed": {"version": installed[0][1], "selection": installed[0][2]} if installed else {},
        "offered": [row[1] for row in rows if len(row) == 2 and row[0] == "offered"],
    }


class FilterModule:
    """Filters of the nvidia_mig role."""

    def filters(self):
        return {"nvidia_mig_bad_entries": nvidia_mig_bad_entries, "nvidia_mig_package_read": nvidia_mig_package_read}
