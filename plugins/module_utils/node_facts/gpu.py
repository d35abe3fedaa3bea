# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""GPU facts: NVIDIA's PCI functions (GPUs, NVSwitches, SR-IOV virtual functions) from sysfs, with or without a
driver, and the loaded driver (version, open or proprietary kernel modules).

Part of gpu_node_facts (plugins/modules/gpu_node_facts.py). Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.host import read_text, rooted

if TYPE_CHECKING:  # annotations only
    from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.host import Which

NVIDIA_VENDOR_ID = "0x10de"


# PCI base class 03 (display controller): subclass 00 is VGA compatible (workstation and consumer cards),
# 02 is 3D controller (datacenter GPUs: A100, H100, ...). Keyed by the first 6 characters of sysfs `class`.
GPU_CLASS_NAMES = {"0x0300": "VGA compatible controller", "0x0302": "3D controller"}


# Base class 06 subclass 80 (bridge, other): what an NVSwitch reports; its driver is nvidia-nvswitch.
NVSWITCH_CLASS_PREFIX = "0x0680"


NVIDIA_KERNEL_MODULES = ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem")


# The GPUs of Grace superchips, by PCI device ID (pci.ids: 0x2342 GH200 480GB, 0x2348 GH200 144G HBM3e, 0x2941
# GB200), attached to their Grace CPU by NVLink-C2C: a node with one is an aarch64 Grace node (GH200: Grace Hopper;
# GB200 NVL72/NVL4 trays: Grace Blackwell). plugins/filter/nvidia_driver.py reads the Grace Hopper IDs for the
# kernel module flavour (a controller plugin cannot import this node-side file).
GRACE_SUPERCHIP_GPUS = {"0x2342": "GH200", "0x2348": "GH200", "0x2941": "GB200"}


def parse_nvidia_driver_version(text: str | None) -> tuple[str | None, str | None]:
    """First line of /proc/driver/nvidia/version -> (version, "open" | "proprietary").

    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024"
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build  (dvs-builder@...)  ..."
    """
    for line in (text or "").splitlines():
        match = re.search(r"NVRM version:.*?Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)", line)
        if match:
            return match.group(1), "open" if "Open Kernel Module" in line else "proprietary"
    return None, None


def parse_numa_node(text: str | None) -> int | None:
    """sysfs numa_node: -1 (no NUMA information) and anything unreadable are null."""
    try:
        node = int((text or "").strip())
    except ValueError:
        return None
    return node if node >= 0 else None


def _hex_id(text: str | None) -> str | None:
    value = (text or "").strip().lower()
    return value if re.fullmatch(r"0x[0-9a-f]+", value) else None


def _link_name(path: str) -> str | None:
    """Basename of what a sysfs link (driver, iommu_group) points at; null when there is no link."""
    try:
        target = os.readlink(path)
    except OSError:
        return None
    return os.path.basename(target.rstrip("/")) or None


def read_pci_functions(root: str, vendor_id: str = NVIDIA_VENDOR_ID) -> list[dict]:
    """The PCI functions of one vendor, from /sys/bus/pci/devices, in PCI address order."""
    base = rooted(root, "/sys/bus/pci/devices")
    try:
        addresses = sorted(os.listdir(base))
    except OSError:
        return []
    functions = []
    for address in addresses:
        path = os.path.join(base, address)
        if _hex_id(read_text(os.path.join(path, "vendor"))) != vendor_id:
            continue
        iommu_group = _link_name(os.path.join(path, "iommu_group"))
        functions.append(
            {
                "pci_address": address,
                "vendor_id": vendor_id,
                "device_id": _hex_id(read_text(os.path.join(path, "device"))),
                "class": _hex_id(read_text(os.path.join(path, "class"))),
                "numa_node": parse_numa_node(read_text(os.path.join(path, "numa_node"))),
                "iommu_group": int(iommu_group) if iommu_group and iommu_group.isdigit() else None,
                "driver": _link_name(os.path.join(path, "driver")),
                "virtual_function": os.path.lexists(os.path.join(path, "physfn")),
            }
        )
    return functions


def classify_nvidia_functions(functions: list[dict]) -> tuple[list[dict], list[dict], int]:
    """NVIDIA PCI functions -> (GPUs, NVSwitches, number of GPU virtual functions)."""
    gpus, nvswitches, virtual_functions = [], [], 0
    for function in functions:
        if function["vendor_id"] != NVIDIA_VENDOR_ID or not function["class"]:
            continue
        class_prefix = function["class"][:6]
        if class_prefix in GPU_CLASS_NAMES:
            if function["virtual_function"]:
                virtual_functions += 1
                continue
            gpus.append(
                {
                    "pci_address": function["pci_address"],
                    "vendor_id": function["vendor_id"],
                    "device_id": function["device_id"],
                    "class": function["class"],
                    "class_name": GPU_CLASS_NAMES[class_prefix],
                    "numa_node": function["numa_node"],
                    "iommu_group": function["iommu_group"],
                    "driver": function["driver"],
                }
            )
        elif class_prefix == NVSWITCH_CLASS_PREFIX:
            nvswitches.append(
                {
                    "pci_address": function["pci_address"],
                    "device_id": function["device_id"],
                    "class": function["class"],
                    "numa_node": function["numa_node"],
                    "driver": function["driver"],
                }
            )
    return gpus, nvswitches, virtual_functions


def driver_facts(root: str) -> dict:
    proc_text = read_text(rooted(root, "/proc/driver/nvidia/version"))
    version, module_type = parse_nvidia_driver_version(proc_text)
    source = "proc" if version else None
    if version is None:
        sysfs_version = (read_text(rooted(root, "/sys/module/nvidia/version")) or "").strip()
        if re.fullmatch(r"\d+(?:\.\d+)+", sysfs_version):
            version, source = sysfs_version, "sysfs"
    modules = [name for name in NVIDIA_KERNEL_MODULES if os.path.isdir(rooted(root, f"/sys/module/{name}"))]
    return {
        "loaded": proc_text is not None or "nvidia" in modules,
        "version": version,
        "source": source,
        "kernel_module_type": module_type,
        "modules": modules,
    }


def grace_facts(gpus: list[dict]) -> dict:
    """Whether the GPUs are those of Grace superchips: {superchip: "GH200" | "GB200" | null, gpus: [pci addresses]}."""
    found = [gpu for gpu in gpus if gpu.get("device_id") in GRACE_SUPERCHIP_GPUS]
    kinds = sorted({GRACE_SUPERCHIP_GPUS[gpu["device_id"]] for gpu in found})
    return {"superchip": "/".join(kinds) or None, "gpus": [gpu["pci_address"] for gpu in found]}


def gpu_facts(root: str, which: Which) -> dict:
    """The facts has_gpu to nvidia_smi: GPUs and NVSwitches on PCI, the driver, nouveau, nvidia-smi, Grace."""
    gpus, nvswitches, gpu_vf_count = classify_nvidia_functions(read_pci_functions(root))
    return {
        "has_gpu": bool(gpus),
        "gpu_count": len(gpus),
        "gpu_vf_count": gpu_vf_count,
        "gpus": gpus,
        "nvswitch_count": len(nvswitches),
        "nvswitches": nvswitches,
        "driver": driver_facts(root),
        "nouveau_loaded": os.path.isdir(rooted(root, "/sys/module/nouveau")),
        "nvidia_smi": which("nvidia-smi"),
        "grace": grace_facts(gpus),
    }
