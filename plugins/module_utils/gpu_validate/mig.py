# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's mig family (issue 38): the row "MIG", the MIG layout the node's MIG manager is asked for against what
nvidia-smi reports.

What is asked for: NVIDIA's MIG manager (mig-parted v0.15.0, deployments/systemd: nvidia-mig-manager.service runs
/etc/nvidia-mig-manager/service.sh) applies the layout named by MIG_PARTED_SELECTED_CONFIG from the config file
MIG_PARTED_CONFIG_FILE (default /etc/nvidia-mig-manager/config.yaml), both in the unit's environment, so the row reads
`systemctl show --property=Environment` of the unit and then that file. The format (mig-parted api/spec/v1/spec.go):
`version: v1`, `mig-configs: {name: [entry, ...]}`, an entry with `device-filter` (a PCI device ID like 0x233010DE or
a list of them; none: every GPU), `devices` (`all` or a list of GPU indexes), `mig-enabled` and `mig-devices`
(profile -> count). Every entry is applied in order to each GPU it matches (cmd/nvidia-mig-parted/assert/assert.go,
WalkSelectedMigConfigForEachGPU), so the last entry that matches a GPU is the one it ends with.

What is there: `nvidia-smi --query-gpu=index,pci.device_id,mig.mode.current --format=csv,noheader` (one line per GPU:
"0, 0x233010DE, Enabled") and `nvidia-smi -L` (a GPU line "GPU 0: ..." followed by its MIG devices, "  MIG 1g.10gb
Device 0: (UUID: MIG-...)").

The node-side module gpu_validate_checks imports this file as module_utils.gpu_validate.mig.
Stdlib only, Python 3.8+ (the node's python3).
"""

from __future__ import annotations

import json
import re
import shlex

from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.cdi import YamlError, read_yaml
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import Node, table_row

NAME = "MIG"
UNIT = "nvidia-mig-manager.service"
DEFAULT_CONFIG = "/etc/nvidia-mig-manager/config.yaml"
SMI_QUERY = ["--query-gpu=index,pci.device_id,mig.mode.current", "--format=csv,noheader"]
_GPU_LINE = re.compile(r"^GPU (\d+):")
_MIG_LINE = re.compile(r"^\s+MIG (\S+)\s+Device\s+\d+:")
FIX = "Run site.yml --tags mig (roles/nvidia_mig applies the layout with nvidia-mig-parted)"


def unit_environment(text: str) -> dict:
    """The variables of `systemctl show --property=Environment --value` (systemd quotes values with spaces)."""
    found = {}
    try:
        words = shlex.split(text or "")
    except ValueError:
        words = (text or "").split()
    for word in words:
        key, sep, value = word.partition("=")
        if sep:
            found[key] = value
    return found


def smi_gpus(query: str, listing: str) -> list:
    """The GPUs nvidia-smi reports: {index, device_id, mig_enabled, profiles: {profile: count}}."""
    gpus = {}
    for line in (query or "").splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) < 3 or not fields[0].isdigit():
            continue
        gpus[int(fields[0])] = {
            "index": int(fields[0]),
            "device_id": fields[1].upper(),
            "mig_enabled": fields[2].lower() == "enabled",
            "profiles": {},
        }
    current = None
    for line in (listing or "").splitlines():
        gpu = _GPU_LINE.match(line)
        if gpu:
            current = gpus.get(int(gpu.group(1)))
            continue
        mig = _MIG_LINE.match(line)
        if mig and current is not None:
            current["profiles"][mig.group(1)] = current["profiles"].get(mig.group(1), 0) + 1
    return [gpus[index] for index in sorted(gpus)]


def _filters(value) -> list:
    if value in (None, ""):
        return []
    return [str(item).upper() for item in (value if isinstance(value, list) else [value])]


def _matches(entry: dict, gpu: dict) -> bool:
    filters = _filters(entry.get("device-filter"))
    if filters and gpu["device_id"] not in filters:
        return False
    devices = entry.get("devices")
    if devices == "all":
        return True
    return isinstance(devices, list) and gpu["index"] in [int(device) for device in devices]


def wanted(entries: list, gpu: dict) -> dict | None:
    """The entry a GPU ends with (the last one that matches it), or None when the layout leaves it alone."""
    found = None
    for entry in entries or []:
        if isinstance(entry, dict) and _matches(entry, gpu):
            found = entry
    return found


def gpu_problem(entry: dict, gpu: dict) -> str:
    """What differs between an entry and a GPU, "" when nothing does."""
    enabled = bool(entry.get("mig-enabled"))
    if enabled != gpu["mig_enabled"]:
        have, want = ("disabled", "enabled") if enabled else ("enabled", "disabled")
        return f"GPU {gpu['index']}: MIG mode {have}, wanted {want}"
    if not enabled:
        return ""
    want = {str(name): int(count) for name, count in (entry.get("mig-devices") or {}).items() if int(count) > 0}
    if want != gpu["profiles"]:
        have = ", ".join(f"{count}x {name}" for name, count in sorted(gpu["profiles"].items())) or "none"
        asked = ", ".join(f"{count}x {name}" for name, count in sorted(want.items())) or "none"
        return f"GPU {gpu['index']}: MIG devices {have}, wanted {asked}"
    return ""


def mig_row(selected: str, config_path: str, spec, gpus: list) -> dict:
    """The row from the selected layout's name, the parsed config file (None: unreadable) and nvidia-smi's GPUs."""
    if not isinstance(spec, dict) or spec.get("version") != "v1" or not isinstance(spec.get("mig-configs"), dict):
        return table_row(NAME, "fail", f"{config_path} is no mig-parted v1 config (version: v1, mig-configs)", FIX)
    entries = spec["mig-configs"].get(selected)
    if not isinstance(entries, list):
        return table_row(NAME, "fail", f"layout {selected} is not in {config_path}", FIX)
    if not gpus:
        return table_row(NAME, "fail", f"layout {selected}: nvidia-smi reports no GPU", FIX)
    problems, covered = [], 0
    for gpu in gpus:
        entry = wanted(entries, gpu)
        if entry is None:
            continue
        covered += 1
        problem = gpu_problem(entry, gpu)
        if problem:
            problems.append(problem)
    if problems:
        return table_row(NAME, "fail", f"layout {selected}: " + "; ".join(problems), FIX)
    if not covered:
        # mig-parted applies nothing then: a layout written for other GPUs (a device-filter for A100s on H100s)
        ids = ", ".join(sorted({str(gpu.get("device_id")) for gpu in gpus}))
        return table_row(
            NAME,
            "fail",
            f"layout {selected} applies to none of the {len(gpus)} GPU(s) (device IDs {ids}): its devices and "
            "device-filter entries match no GPU of this node",
            FIX,
        )
    return table_row(NAME, "ok", f"layout {selected} on {covered} of {len(gpus)} GPU(s)")


def check_mig(params: dict, node: dict, host: Node) -> list:
    """The MIG row: skipped without a GPU or without a layout asked for."""
    if not node.get("has_gpu") or not node.get("nvidia_smi"):
        return [table_row(NAME, "skipped", "no GPU")]
    if params.get("mig_selected"):
        environment = {
            "MIG_PARTED_SELECTED_CONFIG": params["mig_selected"],
            "MIG_PARTED_CONFIG_FILE": params.get("mig_config"),
        }
    else:
        rc, out, _err = host.run(["systemctl", "show", "--property=Environment", "--value", UNIT])
        environment = unit_environment(out) if rc == 0 else {}
    selected = environment.get("MIG_PARTED_SELECTED_CONFIG", "")
    if not selected:
        return [table_row(NAME, "skipped", f"no MIG layout asked for ({UNIT} sets no MIG_PARTED_SELECTED_CONFIG)")]
    config_path = environment.get("MIG_PARTED_CONFIG_FILE") or DEFAULT_CONFIG
    text = host.read(config_path)
    spec = None
    if text is not None:
        try:
            spec = json.loads(text) if config_path.endswith(".json") else read_yaml(text)
        except (ValueError, YamlError):
            spec = None
    smi = node["nvidia_smi"]
    rc_query, query, err_query = host.run([smi, *SMI_QUERY])
    rc_list, listing, err_list = host.run([smi, "-L"])
    if rc_query != 0 or rc_list != 0:
        return [table_row(NAME, "fail", f"nvidia-smi failed: {(err_query or err_list).strip()}", FIX)]
    return [mig_row(selected, config_path, spec, smi_gpus(query, listing))]
