# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Filters of the nvidia_driver role: which kernel module flavour (open or proprietary) the node's GPUs need.

Pure functions of the gpu_node facts (PCI device IDs from sysfs, gathered by plugins/modules/gpu_node_facts.py), so
the unit tests call them without Ansible.

What NVIDIA documents, checked for this table:
- NVIDIA Driver Installation Guide, "Kernel Modules" (docs.nvidia.com/datacenter/tesla/driver-installation-guide/
  kernel-modules.html, 580 and 610 editions): the proprietary flavour "is required for older GPUs from the
  Maxwell, Pascal, or Volta architectures. The open-source GPU kernel modules are not compatible with these
  platforms"; the open modules "are only for Turing and newer architectures"; "Starting in the 560 driver release
  series, the open kernel module flavor is the default and suggested installation."
- NVIDIA technical blog "NVIDIA Transitions Fully Towards Open-Source GPU Kernel Modules" (July 2024, R560): Grace
  Hopper and Blackwell "must use the open-source GPU kernel modules. The proprietary drivers are unsupported on
  these platforms"; Turing, Ampere, Ada Lovelace and Hopper: open recommended; Maxwell, Pascal, Volta: open not
  compatible; "For mixed deployments with older and newer GPUs in the same system, continue to use the
  proprietary driver."
- Release notes of NVIDIA/open-gpu-kernel-modules: from 515 the open modules are production quality for data
  center GPUs (Turing and newer); GeForce and workstation GPUs were alpha quality (515-535, they need
  NVreg_OpenRmEnableUnsupportedGpus=1) and beta quality from 545, fully supported from 560. So before branch 560
  open is recommended only for data center GPUs, which present themselves as 3D controllers (PCI class 0x0302);
  display-class (0x0300) GPUs stay on the proprietary modules there.

Architectures come from the PCI device ID. NVIDIA allocates device IDs in blocks per GPU family (the
open-gpu-kernel-modules README's list of compatible GPUs starts at 0x1E02, TU102; every ID below 0x1E00 is
Volta, Pascal, Maxwell or older). Blackwell starts at 0x2900 (GB100/GB102: B200 0x2901, GB200 0x2941; GB20x:
0x2Bxx-0x2Fxx, e.g. RTX 5090 0x2B85, GB10 0x2E06) and anything newer than the table is taken to need the open
modules too (every GPU after Blackwell does).
"""

from __future__ import annotations

PRE_TURING = "pre-Turing (Maxwell, Pascal, Volta or older)"
# (first device ID, last device ID, architecture, what the open modules are for it)
ARCHITECTURES = (
    (0x0000, 0x1DFF, PRE_TURING, "incompatible"),
    (0x1E00, 0x1FFF, "Turing", "recommended"),  # TU102, TU104, TU106, TU117 (T4: 0x1EB8)
    (0x2000, 0x217F, "Ampere", "recommended"),  # GA100 (A100: 0x20B0-0x20FD)
    (0x2180, 0x21FF, "Turing", "recommended"),  # TU116
    (0x2200, 0x22FF, "Ampere", "recommended"),  # GA102 (A10: 0x2236, A40: 0x2235)
    (0x2300, 0x23FF, "Hopper", "recommended"),  # GH100 (H100 SXM5: 0x2330, H100 PCIe: 0x2331, H200: 0x2335)
    (0x2400, 0x25FF, "Ampere", "recommended"),  # GA103, GA104, GA106, GA107 (A16/A2: 0x25B6)
    (0x2600, 0x28FF, "Ada Lovelace", "recommended"),  # AD10x (L40: 0x26B5, L40S: 0x26B9, L4: 0x27B8)
    (0x2900, 0xFFFF, "Blackwell or newer", "required"),
)
# Hopper GPUs of Grace Hopper superchips: open modules required (pci.ids: 0x2342 GH200 480GB,
# 0x2348 GH200 144G HBM3e). Any Hopper on a 64-bit Arm node is a Grace Hopper too.
GRACE_HOPPER_DEVICE_IDS = frozenset((0x2342, 0x2348))
OPEN_DEFAULT_BRANCH = 560
DATACENTER_CLASS_PREFIX = "0x0302"


def gpu_architecture(device_id: str | None, architecture: str = "x86_64") -> tuple[str, str]:
    """PCI device ID ("0x2330") -> (architecture name, "required" | "recommended" | "incompatible" | "unknown")."""
    try:
        number = int(str(device_id), 16)
    except (TypeError, ValueError):
        return "unknown", "unknown"
    for first, last, name, support in ARCHITECTURES:
        if first <= number <= last:
            if name == "Hopper" and (number in GRACE_HOPPER_DEVICE_IDS or architecture == "aarch64"):
                return "Grace Hopper", "required"
            return name, support
    return "unknown", "unknown"  # pragma: no cover - the table covers 0x0000-0xFFFF


def _branch_number(branch) -> int | None:
    text = str(branch or "").strip()
    return int(text) if text.isdigit() else None


def nvidia_kernel_module(
    gpus: list | None,
    requested: str = "auto",
    branch: str | int | None = "",
    loaded: str | None = None,
    architecture: str = "x86_64",
) -> dict:
    """Resolve nvidia_driver_flavour for a node.

    gpus: gpu_node.gpus (pci_address, device_id, class). requested: auto, open or proprietary (explicit choices
    are kept). branch: the driver branch ("" = unknown, taken as 560 or later). loaded: gpu_node.driver's
    kernel_module_type of the driver that runs now (auto keeps it when the GPUs can use it, so a rerun never
    swaps the modules under running pods). Returns {flavour, reason, error, gpus}; error is '' or the message
    the role fails with.
    """
    described = []
    for gpu in gpus or []:
        name, support = gpu_architecture(gpu.get("device_id"), architecture)
        described.append(
            {
                "pci_address": gpu.get("pci_address"),
                "device_id": gpu.get("device_id"),
                "class": gpu.get("class"),
                "architecture": name,
                "open": support,
            }
        )
    result = {"flavour": requested, "reason": "", "error": "", "gpus": described}

    def names(entries):
        return ", ".join(f"{gpu['pci_address']} ({gpu['device_id']}, {gpu['architecture']})" for gpu in entries)

    required = [gpu for gpu in described if gpu["open"] == "required"]
    incompatible = [gpu for gpu in described if gpu["open"] in ("incompatible", "unknown")]
    if requested != "auto":
        result["reason"] = f"nvidia_driver_flavour is {requested}"
        if requested == "proprietary" and required:
            result["error"] = (
                f"nvidia_driver_flavour is proprietary, but {names(required)} need the open GPU kernel modules "
                "(NVIDIA supports no proprietary module on Blackwell and Grace Hopper): set nvidia_driver_flavour "
                "to open or auto."
            )
        elif requested == "open" and incompatible:
            result["error"] = (
                f"nvidia_driver_flavour is open, but the open GPU kernel modules cannot drive {names(incompatible)} "
                "(they support Turing and newer only): set nvidia_driver_flavour to proprietary or auto."
            )
        return result
    if not described:
        result.update(flavour="proprietary", reason="no NVIDIA GPU found on PCI, so the proprietary default is kept")
        return result
    if required and incompatible:
        result.update(
            flavour="",
            error=(
                f"No NVIDIA kernel module drives all the GPUs of this node: {names(required)} need the open GPU "
                f"kernel modules, and {names(incompatible)} work only with the proprietary ones. Move the older "
                "GPUs to another node; nvidia_driver_flavour cannot fix this."
            ),
        )
        return result
    if required:
        result.update(flavour="open", reason=f"open required by {names(required)}")
        return result
    if incompatible:
        result.update(flavour="proprietary", reason=f"proprietary: the open modules cannot drive {names(incompatible)}")
        return result
    if loaded in ("open", "proprietary"):
        result.update(flavour=loaded, reason=f"the loaded {loaded} driver is kept (all GPUs can use it)")
        return result
    number = _branch_number(branch)
    if number is not None and number < OPEN_DEFAULT_BRANCH:
        display = [gpu for gpu in described if not str(gpu["class"] or "").startswith(DATACENTER_CLASS_PREFIX)]
        if display:
            result.update(
                flavour="proprietary",
                reason=(
                    f"proprietary: branch {number} supports the open modules only on data center GPUs, "
                    f"not on {names(display)}"
                ),
            )
            return result
    result.update(flavour="open", reason=f"open recommended for {names(described)}")
    return result


def key_value_config(text: str, settings: dict) -> str:
    """NVIDIA IMEX's config.cfg (KEY=VALUE lines, "#" comments) with `settings` set, everything else kept.

    Each key's first uncommented line is rewritten in place (the file nvidia-imex-580 580.178.04 ships names each
    key once, commented help above it, which stays); a key the file lacks is appended. The values are written as
    given (str()); a bool is 1 or 0, as the file spells them.
    """
    lines = (text or "").splitlines()
    done = set()
    for number, line in enumerate(lines):
        key, sep, _value = line.partition("=")
        key = key.strip()
        if sep and not key.startswith("#") and key in settings and key not in done:
            lines[number] = f"{key}={_cfg_value(settings[key])}"
            done.add(key)
    lines += [f"{key}={_cfg_value(value)}" for key, value in settings.items() if key not in done]
    return "\n".join(lines) + "\n"


def _cfg_value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


class FilterModule:
    def filters(self):
        # nvidia_kernel_module: called by the role's plan (plugins/filter/nvidia_driver_plan.py)
        return {"key_value_config": key_value_config}
