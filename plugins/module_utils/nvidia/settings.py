# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The GPU settings a node declares (role gpu_settings, issue 49), against what the driver reports: one plan.

Pure functions, shared by the node-side module gpu_settings (read, plan, apply) and the doctor's "GPU settings" row
(gpu_validate_health: the role's record against the driver now). Stdlib only, Python 3.8+.

What each setting is in NVIDIA's nvidia-smi(1) (driver 550.90.12's man page, as Ubuntu ships it:
https://manpages.ubuntu.com/manpages/plucky/man1/nvidia-smi.1.html; the NVML calls behind them in the NVML API
reference, "Device Commands", https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceCommands.html):

Each setting, how it is set, how it is read back (``--query-gpu`` fields) and how long it lasts:

- persistence: the ``nvidia-persistenced`` daemon (NVIDIA: the daemon, not ``-pm``, is the way on Linux);
  ``persistence_mode``; while the daemon runs.
- power limit: ``-i <GPU> -pl <watts>`` (nvmlDeviceSetPowerManagementLimit); ``power.limit``, its range
  ``power.min_limit``..``power.max_limit``, a share of ``power.default_limit``; until the driver unloads (at boot).
- locked GPU clocks: ``-lgc <min,max>`` (nvmlDeviceSetGpuLockedClocks); no field reports a locked range, so the role's
  record says what was applied; until a reset (at boot).
- locked memory clocks: ``-lmc <min,max>`` (nvmlDeviceSetMemoryLockedClocks); the record; until a reset (at boot).
- application clocks: ``-ac <memory,graphics>`` (nvmlDeviceSetApplicationsClocks); ``clocks.applications.memory`` and
  ``.graphics``, at most ``clocks.max.memory`` and ``.graphics``; until a reset (at boot).
- compute mode: ``-c DEFAULT|EXCLUSIVE_PROCESS|PROHIBITED`` (nvmlDeviceSetComputeMode); ``compute_mode``; until a
  reset (at boot).
- ECC: ``-e 0|1`` (nvmlDeviceSetEccMode); ``ecc.mode.current``, ``ecc.mode.pending``; stored on the GPU, in effect
  after a reset or a reboot.
- CC mode: NVIDIA's gpu-admin-tools ``nvidia_gpu_tools.py --gpu-bdf=<bdf> --set-cc-mode=on|off|devtools``;
  ``--query-cc-mode`` ("... CC mode is on"); stored, in effect after a GPU reset.
- PPCIe mode: the same tool, ``--set-ppcie-mode=on|off``; ``--query-ppcie-mode``; after a GPU reset.
- NVreg_*: ``options nvidia NVreg_X=Y`` in modprobe.d, the initramfs rebuilt; /proc/driver/nvidia/params; after a
  reboot.

(gpu-admin-tools: github.com/NVIDIA/gpu-admin-tools, its nvidia_gpu_tools.py options --query-cc-mode,
--query-ppcie-mode, --set-cc-mode {off,on,devtools}, --set-ppcie-mode, --reset-after-cc-mode-switch.)
"""

from __future__ import annotations

import re

from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.smi import available, bus_id, number

READ_FIELDS = (
    "index",
    "pci.bus_id",
    "uuid",
    "name",
    "persistence_mode",
    "power.limit",
    "power.default_limit",
    "power.min_limit",
    "power.max_limit",
    "clocks.applications.graphics",
    "clocks.applications.memory",
    "clocks.max.graphics",
    "clocks.max.memory",
    "compute_mode",
    "ecc.mode.current",
    "ecc.mode.pending",
)
COMPUTE_MODES = {"DEFAULT": "Default", "EXCLUSIVE_PROCESS": "Exclusive_Process", "PROHIBITED": "Prohibited"}
CC_MODES = ("on", "off", "devtools")
PPCIE_MODES = ("on", "off")
GPU_KEYS = (
    "power_limit",
    "gpu_clocks",
    "memory_clocks",
    "application_clocks",
    "compute_mode",
    "ecc",
    "cc_mode",
    "ppcie_mode",
)
# Settings a GPU keeps only until its next reset or a driver reload: the boot unit applies them again.
BOOT_KEYS = ("power_limit", "gpu_clocks", "memory_clocks", "application_clocks", "compute_mode")
# Settings that take effect only after a GPU reset or a reboot.
RESET_KEYS = ("ecc", "cc_mode", "ppcie_mode")
_NVREG = re.compile(r"^NVreg_[A-Za-z0-9_]+$")


class SettingsError(Exception):
    """A declared value the node cannot take: the message names the GPU, the value and its range."""


def declared(settings: dict) -> bool:
    """Whether any GPU setting or module parameter is declared."""
    if settings.get("persistence") is not None or settings.get("module_params"):
        return True
    if any(_set(settings.get(key)) for key in GPU_KEYS):
        return True
    return any(_set(value) for entry in (settings.get("per_gpu") or {}).values() for value in (entry or {}).values())


def gpu_declared(settings: dict) -> bool:
    return (
        settings.get("persistence") is not None
        or any(_set(settings.get(k)) for k in GPU_KEYS)
        or bool(settings.get("per_gpu"))
    )


def _set(value) -> bool:
    return value is not None and value != ""


def _pair(value, what: str, ordered: bool = True) -> list:
    """'1200,1800' (or a list) as two ints; ``ordered``: a range, the lower first (not application clocks)."""
    parts = value if isinstance(value, (list, tuple)) else str(value).split(",")
    try:
        numbers = [int(str(part).strip()) for part in parts]
    except ValueError:
        raise SettingsError(f"{what} {value!r} is not two numbers in MHz, such as 1200,1800") from None
    if len(numbers) == 1:
        numbers = numbers * 2
    if len(numbers) != 2 or (ordered and numbers[0] > numbers[1]) or min(numbers) <= 0:
        raise SettingsError(f"{what} {value!r} is not two numbers in MHz, the lower first, such as 1200,1800")
    return numbers


def static_problems(settings: dict) -> list:
    """What is wrong with the declared values before any GPU is asked (shape, choices, names)."""
    problems = []
    entries = [("", settings)] + [
        (f" for GPU {key}", entry or {}) for key, entry in (settings.get("per_gpu") or {}).items()
    ]
    for where, entry in entries:
        limit = entry.get("power_limit")
        if _set(limit) and not re.fullmatch(r"\d+(\.\d+)?%?", str(limit).strip()):
            problems.append(f"power_limit{where} {limit!r} is neither watts (300) nor a share of the default (80%)")
        for key in ("gpu_clocks", "memory_clocks", "application_clocks"):
            if _set(entry.get(key)):
                try:
                    _pair(entry[key], key + where, ordered=key != "application_clocks")
                except SettingsError as exc:
                    problems.append(str(exc))
        mode = entry.get("compute_mode")
        if _set(mode) and str(mode).upper() not in COMPUTE_MODES:
            problems.append(f"compute_mode{where} {mode!r} is not one of {', '.join(COMPUTE_MODES)}")
        for key, choices in (("cc_mode", CC_MODES), ("ppcie_mode", PPCIE_MODES)):
            if _set(entry.get(key)) and str(entry[key]).lower() not in choices:
                problems.append(f"{key}{where} {entry[key]!r} is not one of {', '.join(choices)}")
    for name in settings.get("module_params") or {}:
        if not _NVREG.match(str(name)):
            problems.append(f"module parameter {name!r} is not an NVreg_* parameter of the nvidia module")
    return problems


def _entry_for(settings: dict, gpu: dict) -> dict:
    """The declared values of one GPU: the node's, over them a per_gpu entry naming its index, bus id or UUID."""
    entry = {key: settings.get(key) for key in GPU_KEYS}
    names = {str(gpu.get("index")), bus_id(gpu.get("pci.bus_id")), str(gpu.get("uuid") or "").lower()}
    for key, override in (settings.get("per_gpu") or {}).items():
        if str(key).lower() in names or bus_id(str(key)) in names:
            entry.update({k: v for k, v in (override or {}).items() if _set(v)})
    return entry


def _label(gpu: dict) -> str:
    return f"GPU {gpu.get('index')} ({bus_id(gpu.get('pci.bus_id'))}, {gpu.get('name')})"


def resolve(settings: dict, gpus: list) -> list:
    """Each GPU's wanted values, checked against what the GPU supports; raises SettingsError naming GPU, value, range.

    Returns [{bus_id, index, uuid, name, power_limit, gpu_clocks, memory_clocks, application_clocks, compute_mode, ecc,
    cc_mode, ppcie_mode}] with None for what is not declared (power_limit in watts, clocks as [low, high] MHz)."""
    wanted = []
    problems = []
    for gpu in gpus:
        entry = _entry_for(settings, gpu)
        label = _label(gpu)
        item = {
            "bus_id": bus_id(gpu.get("pci.bus_id")),
            "index": gpu.get("index"),
            "uuid": gpu.get("uuid"),
            "name": gpu.get("name"),
        }
        item.update({key: None for key in GPU_KEYS})
        limit = entry.get("power_limit")
        if _set(limit):
            low, high, default = (
                number(gpu.get(f)) for f in ("power.min_limit", "power.max_limit", "power.default_limit")
            )
            text = str(limit).strip()
            if low is None or high is None or not available(gpu.get("power.limit")):
                problems.append(f"{label} does not support a power limit (power.limit is {gpu.get('power.limit')})")
            else:
                watts = round(default * float(text[:-1]) / 100, 2) if text.endswith("%") and default else float(text)
                if watts < low or watts > high:
                    share = f" ({text} of the default {default:g} W)" if text.endswith("%") else ""
                    problems.append(f"{label}: power limit {watts:g} W{share} is outside its range {low:g}-{high:g} W")
                else:
                    item["power_limit"] = watts
        for key, field, what in (
            ("gpu_clocks", "clocks.max.graphics", "locked GPU clocks"),
            ("memory_clocks", "clocks.max.memory", "locked memory clocks"),
        ):
            if _set(entry.get(key)):
                pair = _pair(entry[key], key)
                top = number(gpu.get(field))
                if top is None:
                    problems.append(f"{label} does not report {field}: it cannot take {what}")
                elif pair[1] > top:
                    problems.append(f"{label}: {what} {pair[0]},{pair[1]} MHz exceed its range 0-{top:g} MHz ({field})")
                else:
                    item[key] = pair
        if _set(entry.get("application_clocks")):
            memory, graphics = _pair(entry["application_clocks"], "application_clocks", ordered=False)
            top_memory, top_graphics = number(gpu.get("clocks.max.memory")), number(gpu.get("clocks.max.graphics"))
            if not available(gpu.get("clocks.applications.graphics")) or top_memory is None or top_graphics is None:
                problems.append(f"{label} does not support application clocks")
            elif memory > top_memory or graphics > top_graphics:
                problems.append(
                    f"{label}: application clocks {memory},{graphics} MHz (memory,graphics) exceed its range "
                    f"{top_memory:g},{top_graphics:g} MHz (clocks.max.memory, clocks.max.graphics)"
                )
            else:
                item["application_clocks"] = [memory, graphics]
        if _set(entry.get("compute_mode")):
            if not available(gpu.get("compute_mode")):
                problems.append(f"{label} does not support compute modes (compute_mode is {gpu.get('compute_mode')})")
            else:
                item["compute_mode"] = str(entry["compute_mode"]).upper()
        if entry.get("ecc") is not None:
            if not available(gpu.get("ecc.mode.current")):
                problems.append(
                    f"{label} has no ECC to turn {'on' if entry['ecc'] else 'off'} "
                    f"(ecc.mode.current is {gpu.get('ecc.mode.current')})"
                )
            else:
                item["ecc"] = bool(entry["ecc"])
        for key in ("cc_mode", "ppcie_mode"):
            if _set(entry.get(key)):
                item[key] = str(entry[key]).lower()
        wanted.append(item)
    if problems:
        raise SettingsError("; ".join(problems))
    return wanted


def _enabled(value) -> bool:
    return str(value or "").strip().lower() == "enabled"


def current_text(gpu: dict, key: str, record_item: dict | None = None, modes: dict | None = None) -> str:
    """What the driver (or, where it reports nothing, the role's record) says of one setting, as the diff shows it."""
    if key == "power_limit":
        value = number(gpu.get("power.limit"))
        return f"{value:g} W" if value is not None else str(gpu.get("power.limit"))
    if key == "application_clocks":
        return f"{gpu.get('clocks.applications.memory')},{gpu.get('clocks.applications.graphics')} MHz"
    if key == "compute_mode":
        return str(gpu.get("compute_mode"))
    if key == "ecc":
        current, pending = gpu.get("ecc.mode.current"), gpu.get("ecc.mode.pending")
        return f"{current}" + (f" (pending {pending})" if pending and pending != current else "")
    if key in ("cc_mode", "ppcie_mode"):
        return str((modes or {}).get(key) or "unknown")
    pair = (record_item or {}).get(key)
    return f"{pair[0]},{pair[1]} MHz (as last applied)" if pair else "not locked by the role"


def wanted_text(item: dict, key: str) -> str:
    value = item[key]
    if key == "power_limit":
        return f"{value:g} W"
    if key in ("gpu_clocks", "memory_clocks", "application_clocks"):
        return f"{value[0]},{value[1]} MHz"
    if key == "ecc":
        return "Enabled" if value else "Disabled"
    if key == "compute_mode":
        return COMPUTE_MODES[value]
    return str(value)


def in_effect(gpu: dict, item: dict, key: str, record_item: dict | None = None, modes: dict | None = None) -> str:
    """'yes', 'pending' (set, waiting for a reset) or 'no' for one declared setting of one GPU."""
    value = item[key]
    if key == "power_limit":
        current = number(gpu.get("power.limit"))
        return "yes" if current is not None and abs(current - value) < 0.5 else "no"
    if key == "application_clocks":
        now = [number(gpu.get("clocks.applications.memory")), number(gpu.get("clocks.applications.graphics"))]
        return "yes" if now == [float(v) for v in value] else "no"
    if key == "compute_mode":
        return "yes" if str(gpu.get("compute_mode") or "").lower() == COMPUTE_MODES[value].lower() else "no"
    if key == "ecc":
        if _enabled(gpu.get("ecc.mode.current")) == value:
            return "yes"
        return (
            "pending"
            if available(gpu.get("ecc.mode.pending")) and _enabled(gpu.get("ecc.mode.pending")) == value
            else "no"
        )
    if key in ("cc_mode", "ppcie_mode"):
        now = (modes or {}).get(key)
        return "yes" if now == value else "pending" if (modes or {}).get(key + "_pending") == value else "no"
    # locked clocks: the driver reports no locked range; in effect when the last applied value is this one
    return "yes" if (record_item or {}).get(key) == value else "no"


def record_item_for(record: dict | None, bus: str) -> dict | None:
    return next((g for g in (record or {}).get("gpus") or [] if g.get("bus_id") == bus), None)


def compare_record(record: dict, gpus_now: list) -> tuple:
    """(differences, pending) between the role's record (declared, resolved per GPU) and the driver's values now.
    Locked clocks and CC/PPCIe modes are not read here (the query fields have none): the role's run checks them."""
    differences, pending = [], []
    now = {bus_id(gpu.get("pci.bus_id")): gpu for gpu in gpus_now}
    if record.get("persistence") is not None:
        off = [bus for bus, gpu in now.items() if _enabled(gpu.get("persistence_mode")) != record["persistence"]]
        if off:
            differences.append(
                f"persistence mode {'on' if record['persistence'] else 'off'} declared, not so on {', '.join(off)}"
            )
    for item in record.get("gpus") or []:
        gpu = now.get(item.get("bus_id"))
        if gpu is None:
            differences.append(f"GPU {item.get('bus_id')} is declared but not seen by the driver")
            continue
        for key in ("power_limit", "application_clocks", "compute_mode", "ecc"):
            if item.get(key) is None:
                continue
            state = in_effect(gpu, item, key)
            said = f"{_label(gpu)} {key.replace('_', ' ')} {wanted_text(item, key)} (now {current_text(gpu, key)})"
            if state == "pending":
                pending.append(said)
            elif state == "no":
                differences.append(said)
    return differences, pending


def smi_argv(smi: str, item: dict, key: str) -> list:
    """nvidia-smi's command that sets one setting of one GPU (the GPU named by its PCI bus id)."""
    value = item[key]
    target = [smi, "-i", item["bus_id"]]
    if key == "power_limit":
        return [*target, "-pl", f"{value:g}"]
    if key == "gpu_clocks":
        return [*target, "-lgc", f"{value[0]},{value[1]}"]
    if key == "memory_clocks":
        return [*target, "-lmc", f"{value[0]},{value[1]}"]
    if key == "application_clocks":
        return [*target, "-ac", f"{value[0]},{value[1]}"]
    if key == "compute_mode":
        return [*target, "-c", value]
    if key == "ecc":
        return [*target, "-e", "1" if value else "0"]
    raise KeyError(key)


def tools_argv(tools: str, item: dict, key: str) -> list:
    """gpu-admin-tools' command that stages a CC or PPCIe mode (in effect after the GPU's next reset)."""
    option = "--set-cc-mode" if key == "cc_mode" else "--set-ppcie-mode"
    return ["python3", tools, f"--gpu-bdf={item['bus_id']}", f"{option}={item[key]}"]


def unit_text(smi: str, wanted: list, persistence, before: list, header: str) -> str:
    """The boot unit: a oneshot that applies the settings a GPU loses at reset, before the kubelet starts."""
    lines = [
        header,
        "[Unit]",
        "Description=GPU settings declared by gpu-node-provisioning (roles/gpu_settings)",
        "After=nvidia-persistenced.service nvidia-fabricmanager.service nvidia-mig-manager.service",
    ]
    if persistence:
        lines.append("Wants=nvidia-persistenced.service")
    lines += [f"Before={' '.join(before)}", "", "[Service]", "Type=oneshot", "RemainAfterExit=yes"]
    for item in wanted:
        for key in BOOT_KEYS:
            if item.get(key) is not None:
                lines.append("ExecStart=" + " ".join(smi_argv(smi, item, key)))
    lines += ["", "[Install]", "WantedBy=multi-user.target", ""]
    return "\n".join(lines)


def modprobe_text(params: dict, header: str) -> str:
    """modprobe.d's line for the nvidia module's NVreg_* parameters, sorted by name."""
    if not params:
        return ""
    options = " ".join(f"{name}={_param_value(value)}" for name, value in sorted(params.items()))
    return f"{header}\noptions nvidia {options}\n"


def _param_value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def proc_params(text: str | None) -> dict:
    """/proc/driver/nvidia/params ("Name: value" lines) as {NVreg_Name: value}."""
    found = {}
    for line in (text or "").splitlines():
        name, sep, value = line.partition(":")
        if sep:
            found[f"NVreg_{name.strip()}"] = value.strip().strip('"')
    return found
