#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The GPU settings a node declares (role gpu_settings), read back from the driver, applied now and at every boot."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_settings
short_description: Keep GPU settings (persistence, power, clocks, compute mode, ECC, CC/PPCIe, NVreg_*) as declared
description:
  - Reads every GPU's current values with C(nvidia-smi --query-gpu) (power limit and its range, application clocks and
    their maximum, compute mode, ECC current and pending, persistence mode), compares them with O(settings), refuses a
    value a GPU does not support (naming the GPU, the value and its range) before anything changes, and applies what
    differs with nvidia-smi (C(-pl), C(-lgc), C(-lmc), C(-ac), C(-c), C(-e)), NVIDIA's gpu-admin-tools (CC and PPCIe
    modes) and C(nvidia-persistenced) (persistence).
  - Writes a oneshot systemd unit that applies the settings a GPU loses at a reset or a driver reload (power limit,
    clocks, compute mode) at every boot, after nvidia-persistenced, the fabric manager and the MIG manager and before
    the kubelet; a modprobe.d file with the nvidia module's C(NVreg_*) parameters (the initramfs is rebuilt, in effect
    after a reboot); and a record of the declared values (JSON) that the doctor (gpu_validate, row C(GPU settings))
    compares with the driver.
  - ECC, CC and PPCIe modes and module parameters take effect only after a GPU reset or a reboot (RV(pending)). Such a
    change is refused while processes hold GPUs (GPU pods) unless O(drained) says the rollout drained the node.
  - With nothing declared, the module only removes the files an earlier declaration left and asks nothing of the GPUs.
version_added: "0.4.0"
author:
  - gpu-node-provisioning contributors (!UNKNOWN)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
options:
  settings:
    description:
      - "The declared settings: C(persistence) (bool or null), C(power_limit) (watts, or a share of the default as
        C(80%)), C(gpu_clocks) and C(memory_clocks) (C(min,max) MHz, locked), C(application_clocks) (C(memory,graphics)
        MHz), C(compute_mode) (C(DEFAULT), C(EXCLUSIVE_PROCESS), C(PROHIBITED)), C(ecc) (bool or null), C(cc_mode)
        (C(on), C(off), C(devtools)), C(ppcie_mode) (C(on), C(off)), C(per_gpu) (a GPU's index, PCI bus id or UUID to
        values of its own) and C(module_params) (C(NVreg_*) name to value). Empty values are not declared."
    type: dict
    required: true
  has_gpu:
    description: Whether the node has an NVIDIA GPU (the gpu_node facts); without one the GPU settings are left alone.
    type: bool
    required: true
  driver_loaded:
    description:
      - Whether the NVIDIA driver is loaded (the gpu_node facts). Where it is not (installed, waiting for the reboot),
        the GPU settings are not read or applied and RV(pending) says to run the role again after the reboot.
    type: bool
    default: true
  drained:
    description:
      - Set by the rollout mechanism that drained the node; a reset-bound change then goes ahead while processes hold
        GPUs.
    type: bool
    default: false
  nvidia_smi:
    description: nvidia-smi.
    type: path
    default: /usr/bin/nvidia-smi
  gpu_tools:
    description: NVIDIA's gpu-admin-tools C(nvidia_gpu_tools.py), used only for a declared CC or PPCIe mode.
    type: path
    default: /usr/local/bin/nvidia_gpu_tools.py
  unit_path:
    description: The boot unit the module writes.
    type: path
    required: true
  unit_before:
    description: The units the boot unit runs before (the kubelet's, an installer agent's).
    type: list
    elements: str
    default: [kubelet.service]
  record_path:
    description: The record of the declared values (JSON) the doctor reads.
    type: path
    required: true
  modprobe_path:
    description: The modprobe.d file of the C(NVreg_*) parameters.
    type: path
    required: true
  proc_params:
    description: The driver's parameters in effect (C(/proc/driver/nvidia/params)).
    type: path
    default: /proc/driver/nvidia/params
  initramfs_argv:
    description: The command that rebuilds the initramfs after the modprobe.d file changed; empty for none.
    type: list
    elements: str
    default: []
  systemctl:
    description: systemctl (tests give a stand-in).
    type: str
    default: systemctl
  persistenced_unit:
    description: NVIDIA's persistence daemon unit.
    type: str
    default: nvidia-persistenced.service
  proc_root:
    description: The root whose /proc is searched for processes that hold GPUs (tests point it elsewhere).
    type: path
    default: /
  header:
    description: The comment line that starts every file the module writes.
    type: str
    default: "# Managed by gpu-node-provisioning (roles/gpu_settings): edits are overwritten"
"""

EXAMPLES = r"""
- name: Cap every GPU at 80 % of its default power, in EXCLUSIVE_PROCESS mode, with persistence
  gpu_settings:
    settings: {persistence: true, power_limit: "80%", compute_mode: EXCLUSIVE_PROCESS}
    has_gpu: "{{ ansible_facts.gpu_node.has_gpu }}"
    unit_path: /etc/systemd/system/gpu-node-provisioning-gpu-settings.service
    record_path: /etc/gpu-node-provisioning/gpu-settings.json
    modprobe_path: /etc/modprobe.d/gpu-node-provisioning-nvidia.conf
"""

RETURN = r"""
changes:
  description: Each setting changed (or, in check mode, to change) - C({gpu, setting, current, wanted, when}), C(when)
    V(now) or V(after reset or reboot).
  returned: always
  type: list
  elements: dict
  sample:
    - {gpu: "GPU 0 (0000:17:00.0, NVIDIA H100 80GB HBM3)", setting: power limit, current: 700 W, wanted: 560 W,
       when: now}
pending:
  description: Declared settings set but waiting for a GPU reset or a reboot.
  returned: always
  type: list
  elements: str
  sample: ["GPU 0 (0000:17:00.0, NVIDIA H100 80GB HBM3): ECC Enabled after reset or reboot"]
reboot_required:
  description: Whether a declared setting waits for a GPU reset or a reboot (the rollout reboots the drained node then).
  returned: always
  type: bool
  sample: false
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpunode.provisioning.plugins.module_utils.files.edit import (
    FileEditError,
    make_backup,
    write_file,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import Node
from ansible_collections.gpunode.provisioning.plugins.module_utils.kubernetes.gpu_pods import gpu_processes
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.settings import (
    BOOT_KEYS,
    GPU_KEYS,
    READ_FIELDS,
    RESET_KEYS,
    SettingsError,
    current_text,
    declared,
    gpu_declared,
    in_effect,
    modprobe_text,
    proc_params,
    record_item_for,
    resolve,
    smi_argv,
    static_problems,
    tools_argv,
    unit_text,
    wanted_text,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.smi import parse_query, query_argv

WHEN_RESET = "after reset or reboot"


class Refusal(Exception):
    """The module stops before any change: the message says why and what to do."""


def _modes(host, tools: str, bus: str) -> dict:
    """The CC and PPCIe modes of a GPU as gpu-admin-tools reports them ("... CC mode is on")."""
    import re

    found = {}
    for key, option in (("cc_mode", "--query-cc-mode"), ("ppcie_mode", "--query-ppcie-mode")):
        rc, out, err = host.run(["python3", tools, f"--gpu-bdf={bus}", option])
        match = re.search(r"(?:CC|PPCIe) mode is (\w+)", f"{out}\n{err}", re.IGNORECASE)
        if rc != 0 or not match:
            raise Refusal(f"{tools} {option} for {bus} answered no mode (exit code {rc}): {(err or out).strip()[:200]}")
        found[key] = match.group(1).lower()
    return found


def plan(params: dict, host, record: dict | None) -> dict:
    """What to change: {gpus, wanted, changes, persistence_change, modes}; raises Refusal/SettingsError."""
    settings = params["settings"]
    smi = params["nvidia_smi"]
    rc, out, err = host.run(query_argv(smi, READ_FIELDS))
    if rc != 0:
        raise Refusal(
            f"nvidia-smi does not answer (exit code {rc}: {(err or out).strip()[:200]}): "
            "the GPU settings cannot be read. "
            "Load the driver (reboot after its installation), then run the role again"
        )
    gpus = parse_query(out, READ_FIELDS)
    if not gpus:
        raise Refusal("nvidia-smi lists no GPU: the GPU settings cannot be applied; see the doctor's GPU health rows")
    wanted = resolve(settings, gpus)
    by_bus = {item["bus_id"]: gpu for item, gpu in zip(wanted, gpus)}
    changes, modes = [], {}
    for item in wanted:
        gpu = by_bus[item["bus_id"]]
        label = f"GPU {item['index']} ({item['bus_id']}, {item['name']})"
        previous = record_item_for(record, item["bus_id"])
        if item.get("cc_mode") or item.get("ppcie_mode"):
            if not os.path.exists(params["gpu_tools"]):
                raise Refusal(
                    f"{label}: a CC or PPCIe mode is declared, but NVIDIA's gpu-admin-tools are not at "
                    f"{params['gpu_tools']} (github.com/NVIDIA/gpu-admin-tools, nvidia_gpu_tools.py): install them "
                    "there or set gpu_settings_gpu_tools"
                )
            modes = _modes(host, params["gpu_tools"], item["bus_id"])
            for key in ("cc_mode", "ppcie_mode"):
                if previous and previous.get(key) == item.get(key) and modes.get(key) != item.get(key):
                    modes[key + "_pending"] = item.get(key)  # staged by an earlier run, waiting for the reset
        for key in GPU_KEYS:
            if item.get(key) is None:
                continue
            state = in_effect(gpu, item, key, previous, modes)
            if state == "yes" or (state == "pending" and key in RESET_KEYS):
                continue
            changes.append(
                {
                    "gpu": label,
                    "bus_id": item["bus_id"],
                    "key": key,
                    "setting": key.replace("_", " "),
                    "current": current_text(gpu, key, previous, modes),
                    "wanted": wanted_text(item, key),
                    "when": WHEN_RESET if key in RESET_KEYS else "now",
                    "argv": tools_argv(params["gpu_tools"], item, key)
                    if key in ("cc_mode", "ppcie_mode")
                    else smi_argv(smi, item, key),
                }
            )
    persistence = settings.get("persistence")
    persistence_change = None
    if persistence is not None:
        off = [g for g in gpus if (str(g.get("persistence_mode")).lower() == "enabled") != persistence]
        if off:
            persistence_change = {
                "gpu": ", ".join(f"GPU {g['index']}" for g in off),
                "key": "persistence",
                "setting": "persistence mode",
                "current": ", ".join(str(g.get("persistence_mode")) for g in off),
                "wanted": "Enabled" if persistence else "Disabled",
                "when": "now",
            }
    return {"gpus": gpus, "wanted": wanted, "changes": changes, "persistence_change": persistence_change}


def pending_list(wanted: list, gpus: list, modes_by_bus: dict, module_params_pending: list) -> list:
    pending = list(module_params_pending)
    for item, gpu in zip(wanted, gpus):
        for key in RESET_KEYS:
            if item.get(key) is not None and in_effect(gpu, item, key, None, modes_by_bus.get(item["bus_id"])) != "yes":
                pending.append(
                    f"GPU {item['index']} ({item['bus_id']}, {item['name']}): "
                    f"{key.replace('_', ' ')} {wanted_text(item, key)} {WHEN_RESET}"
                )
    return pending


def refusal_of_reset(params: dict, changes: list) -> str:
    """Why a reset-bound change stops here ('' when it may go ahead)."""
    bound = [c for c in changes if c["when"] == WHEN_RESET]
    if not bound or params["drained"]:
        return ""
    holders = gpu_processes(params["proc_root"])
    if not holders:
        return ""
    said = ", ".join(f"{p['comm']} (pid {p['pid']})" for p in holders[:5]) + (" ..." if len(holders) > 5 else "")
    what = "; ".join(f"{c['gpu']} {c['setting']} {c['current']} -> {c['wanted']}" for c in bound)
    return (
        f"Refusing GPU settings that need a GPU reset or a reboot while processes hold GPUs ({said}): {what}. "
        "Nothing was changed. Run the change through the rollout, which drains the node first and sets "
        "gpu_settings_drained: true (roles/gpu_settings/README.md, 'Rollouts'), or drain the node yourself and run "
        "with -e gpu_settings_drained=true"
    )


def _text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None


def _diff(path: str, before: str | None, after: str | None) -> dict:
    return {"before": before or "", "after": after or "", "before_header": path, "after_header": path}


def run(module, host) -> dict:
    params = module.params
    settings = params["settings"] or {}
    problems = static_problems(settings)
    if problems:
        raise SettingsError("; ".join(problems))
    record_before = _text(params["record_path"])
    try:
        record = json.loads(record_before) if record_before else None
    except ValueError:
        record = None
    files = {}  # path -> wanted text (None: absent)
    result = {"changed": False, "changes": [], "pending": [], "reboot_required": False, "diff": []}
    header = params["header"]
    module_params = dict(settings.get("module_params") or {})
    files[params["modprobe_path"]] = modprobe_text(module_params, header) or None
    applies = declared(settings) and params["has_gpu"] and gpu_declared(settings)
    gpu_plan = None
    waiting = applies and not params["driver_loaded"]
    if waiting:
        # the driver is installed but not loaded yet: leave the GPU settings' files as they are, apply after the reboot
        for path in (params["unit_path"], params["record_path"]):
            files[path] = _text(path)
        module.warn("The NVIDIA driver is not loaded: the GPU settings are applied when the role runs after the reboot")
    elif applies:
        gpu_plan = plan(params, host, record)
        wanted = gpu_plan["wanted"]
        persistence = settings.get("persistence")
        needs_unit = any(item.get(key) is not None for item in wanted for key in BOOT_KEYS) or bool(persistence)
        files[params["unit_path"]] = (
            unit_text(params["nvidia_smi"], wanted, persistence, params["unit_before"], header) if needs_unit else None
        )
        new_record = {"persistence": persistence, "module_params": module_params, "gpus": wanted}
        files[params["record_path"]] = json.dumps(new_record, indent=2, sort_keys=True) + "\n"
    else:
        files[params["unit_path"]] = None
        files[params["record_path"]] = (
            None
            if not module_params
            else json.dumps({"persistence": None, "module_params": module_params, "gpus": []}, indent=2, sort_keys=True)
            + "\n"
        )
    changes = list(gpu_plan["changes"]) if gpu_plan else []
    if gpu_plan and gpu_plan["persistence_change"]:
        changes.insert(0, gpu_plan["persistence_change"])
    # module parameters: the file, and whether the loaded driver already runs with them
    modprobe_before = _text(params["modprobe_path"])
    loaded = proc_params(_text(params["proc_params"]))
    params_pending = []
    if files[params["modprobe_path"]] != modprobe_before:
        changes.append(
            {
                "gpu": "nvidia module",
                "key": "module_params",
                "setting": "module parameters",
                "current": " ".join(f"{k}={v}" for k, v in sorted(loaded.items()) if k in module_params)
                or "(none set)",
                "wanted": " ".join(f"{k}={v}" for k, v in sorted(module_params.items())) or "(none)",
                "when": WHEN_RESET,
            }
        )
    for name, value in sorted(module_params.items()):
        if loaded and loaded.get(name) not in (
            None,
            str(value),
            "1" if value is True else "0" if value is False else str(value),
        ):
            params_pending.append(f"nvidia module: {name}={value} after reboot (loaded: {loaded.get(name)})")
    if files[params["modprobe_path"]] != modprobe_before and not loaded:
        params_pending.append(f"nvidia module: {', '.join(sorted(module_params)) or 'parameters removed'} after reboot")
    refusal = refusal_of_reset(params, changes)
    if refusal:
        raise Refusal(refusal)
    befores = {path: _text(path) for path in files}
    changed_files = [path for path, text in files.items() if text != befores[path]]
    if module._diff:
        result["diff"] = [_diff(path, befores[path], files[path]) for path in changed_files]
        if changes:
            result["diff"].insert(
                0,
                {
                    "before": "".join(f"{c['gpu']}: {c['setting']} {c['current']}\n" for c in changes),
                    "after": "".join(f"{c['gpu']}: {c['setting']} {c['wanted']} ({c['when']})\n" for c in changes),
                    "before_header": "GPU settings (read from the driver)",
                    "after_header": "GPU settings (declared)",
                },
            )
    result["changes"] = [{k: c[k] for k in ("gpu", "setting", "current", "wanted", "when")} for c in changes]
    result["changed"] = bool(changes or changed_files)
    if not module.check_mode:
        apply(module, host, files, befores, changed_files, changes, params)
    modes_by_bus = {}
    if (
        gpu_plan
        and not module.check_mode
        and any(item.get("cc_mode") or item.get("ppcie_mode") for item in gpu_plan["wanted"])
    ):
        for item in gpu_plan["wanted"]:
            modes = _modes(host, params["gpu_tools"], item["bus_id"])
            modes.update({f"{k}_pending": item.get(k) for k in ("cc_mode", "ppcie_mode")})  # just staged
            modes_by_bus[item["bus_id"]] = modes
    if gpu_plan:
        gpus_after = gpu_plan["gpus"]
        if not module.check_mode and any(c["key"] == "ecc" for c in changes):
            rc, out, _err = host.run(query_argv(params["nvidia_smi"], READ_FIELDS))
            gpus_after = parse_query(out, READ_FIELDS) if rc == 0 else gpus_after
        result["pending"] = pending_list(gpu_plan["wanted"], gpus_after, modes_by_bus, params_pending)
        if module.check_mode:
            result["pending"] += [
                f"{c['gpu']}: {c['setting']} {c['wanted']} {WHEN_RESET}"
                for c in changes
                if c["when"] == WHEN_RESET and c["key"] != "module_params"
            ]
    else:
        result["pending"] = params_pending + (
            ["GPU settings: run the role again after the reboot that loads the driver"] if waiting else []
        )
    result["reboot_required"] = bool(result["pending"])
    if not module._diff:
        result.pop("diff")
    return result


def apply(module, host, files: dict, befores: dict, changed_files: list, changes: list, params: dict) -> None:
    """Write the files that differ, then apply each change; a failed command fails the module naming it."""
    systemctl = params["systemctl"]
    unit_path = params["unit_path"]
    unit = os.path.basename(unit_path)
    if unit_path in changed_files and files[unit_path] is None:
        _must(host, [systemctl, "disable", unit])  # before its file goes
    for path in changed_files:
        text = files[path]
        if text is None:
            make_backup(path)
            os.remove(path)
        else:
            write_file(module, path, text, backup=befores[path] is not None, create_dirs=True)
            os.chmod(path, 0o644)
    if unit_path in changed_files:
        _must(host, [systemctl, "daemon-reload"])
        if files[unit_path] is not None:
            _must(host, [systemctl, "enable", unit])
    if params["modprobe_path"] in changed_files and params["initramfs_argv"]:
        _must(host, params["initramfs_argv"])
    for change in changes:
        if change["key"] == "persistence":
            verb = "enable" if change["wanted"] == "Enabled" else "disable"
            _must(host, [systemctl, verb, "--now", params["persistenced_unit"]])
        elif change.get("argv"):
            _must(host, change["argv"])


def _must(host, argv: list) -> None:
    rc, out, err = host.run(argv)
    if rc != 0:
        raise Refusal(f"{' '.join(argv)} failed (exit code {rc}): {(err or out).strip()[:300]}")


ARGUMENT_SPEC = dict(
    settings=dict(type="dict", required=True),
    has_gpu=dict(type="bool", required=True),
    driver_loaded=dict(type="bool", default=True),
    drained=dict(type="bool", default=False),
    nvidia_smi=dict(type="path", default="/usr/bin/nvidia-smi"),
    gpu_tools=dict(type="path", default="/usr/local/bin/nvidia_gpu_tools.py"),
    unit_path=dict(type="path", required=True),
    unit_before=dict(type="list", elements="str", default=["kubelet.service"]),
    record_path=dict(type="path", required=True),
    modprobe_path=dict(type="path", required=True),
    proc_params=dict(type="path", default="/proc/driver/nvidia/params"),
    initramfs_argv=dict(type="list", elements="str", default=[]),
    systemctl=dict(type="str", default="systemctl"),
    persistenced_unit=dict(type="str", default="nvidia-persistenced.service"),
    proc_root=dict(type="path", default="/"),
    header=dict(type="str", default="# Managed by gpu-node-provisioning (roles/gpu_settings): edits are overwritten"),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        result = run(module, Node(timeout=120))
    except (SettingsError, Refusal, FileEditError) as exc:
        module.fail_json(msg=str(exc), changed=False)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
