# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""gpu_node facts of the NVLink fabric (issue 39): whether the node is an NVLink5 (NVL5+) system whose NVSwitches
are managed through InfiniBand, so that the fabric manager needs NVIDIA's NVLink Subnet Manager (nvlsm) and the
kernel modules ib_umad and mlx5_ib beside it.

How NVIDIA tells: the fabric manager's own start script decides it, not a list of GPU IDs. nvidia-fabricmanager-580
580.178.04 (Ubuntu noble-updates, multiverse), /usr/bin/nvidia-fabricmanager-start.sh: fm_environment_precheck()
looks at every Mellanox PCI function (`lspci -D | grep Mellanox`, PCI vendor 0x15b3) whose Vital Product Data
carries "SW_MNG" (`lspci -vvv`), and detect_nvl5_system() then takes an InfiniBand device whose
/sys/class/infiniband/<dev>/device/vpd carries "SW_MNG" as the sign of an "NVL5+ system", for which it launches
/opt/nvidia/nvlsm/sbin/nvlsm; check_required_module() refuses to start without ib_umad. The same test is made
here on sysfs' PCI functions (/sys/bus/pci/devices/<address>/vpd, which the PCI core exposes without mlx5_ib loaded,
so a node is recognised before the modules are there).

The node-side module gpu_node_facts imports this file as module_utils.node_facts.fabric.
Stdlib only, Python 3.8+ (the node's python3).
"""

from __future__ import annotations

import os

from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.gpu import read_pci_functions
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.host import rooted

MELLANOX_VENDOR_ID = "0x15b3"
# The VPD keyword NVIDIA's fabric manager start script looks for (see above).
SWITCH_MANAGEMENT_VPD = b"SW_MNG"


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def switch_management_functions(root: str = "/") -> list:
    """PCI addresses of the Mellanox functions whose VPD names them NVSwitch management ports (SW_MNG)."""
    return [
        function["pci_address"]
        for function in read_pci_functions(root, MELLANOX_VENDOR_ID)
        if SWITCH_MANAGEMENT_VPD
        in (_read(os.path.join(rooted(root, "/sys/bus/pci/devices"), function["pci_address"], "vpd")) or b"")
    ]


def nvlink_fabric_facts(root: str = "/") -> dict:
    """The fact nvlink_fabric: {nvl5: bool, switch_management_functions: [PCI address, ...]}."""
    functions = switch_management_functions(root)
    return {"nvl5": bool(functions), "switch_management_functions": functions}
