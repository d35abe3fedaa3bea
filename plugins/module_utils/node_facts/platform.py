# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Platform facts: whether the node is a container or a virtual machine (and which kind), and Secure Boot's
state (which decides whether the driver's kernel modules must be signed).

Part of gpu_node_facts (plugins/modules/gpu_node_facts.py). Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.host import (
    command_output,
    first_line,
    read_bytes,
    read_text,
    rooted,
)

if TYPE_CHECKING:  # annotations only
    from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.host import RunCommand, Which

EFI_GLOBAL_VARIABLE_GUID = "8be4df61-93ca-11d2-aa0d-00e098032b8c"


SECURE_BOOT_EFIVARFS = f"/sys/firmware/efi/efivars/SecureBoot-{EFI_GLOBAL_VARIABLE_GUID}"


SECURE_BOOT_SYSFS = f"/sys/firmware/efi/vars/SecureBoot-{EFI_GLOBAL_VARIABLE_GUID}/data"


def parse_secure_boot_efivar(data: bytes | None) -> bool | None:
    """efivarfs SecureBoot variable: 4 bytes of attributes, then one byte, 1 when Secure Boot is enabled."""
    if data is None or len(data) < 5:
        return None
    return data[4] == 1


def parse_mokutil_sb_state(text: str | None) -> bool | None:
    """`mokutil --sb-state`: "SecureBoot enabled" / "SecureBoot disabled"; anything else is unknown."""
    text = (text or "").lower()
    if "secureboot enabled" in text:
        return True
    if "secureboot disabled" in text or "doesn't support secure boot" in text:
        return False
    return None


def secure_boot_from_files(root: str) -> bool | None:
    if not os.path.isdir(rooted(root, "/sys/firmware/efi")):
        return None
    state = parse_secure_boot_efivar(read_bytes(rooted(root, SECURE_BOOT_EFIVARFS)))
    if state is None:
        # Kernels before efivarfs: the data file holds only the value byte.
        data = read_bytes(rooted(root, SECURE_BOOT_SYSFS))
        state = data[0] == 1 if data else None
    return state


# /proc/1/cgroup path fragments and the container kind they show (cgroup v1 and hybrid hierarchies).
CGROUP_CONTAINER_HINTS = (
    ("/docker/", "docker"),
    ("/docker-", "docker"),
    ("libpod", "podman"),
    ("/lxc/", "lxc"),
    ("/lxc.payload", "lxc"),
    ("/kubepods", "container-other"),
)


def container_type_from_files(root: str) -> str | None:
    for path in ("/run/systemd/container", "/run/host/container-manager"):
        value = first_line(rooted(root, path))
        if value:
            return value
    environ = read_bytes(rooted(root, "/proc/1/environ")) or b""
    for item in environ.split(b"\0"):
        if item.startswith(b"container=") and item[len(b"container=") :]:
            return item[len(b"container=") :].decode("utf-8", "replace")
    if os.path.exists(rooted(root, "/run/.containerenv")):
        return "podman"
    if os.path.exists(rooted(root, "/.dockerenv")):
        return "docker"
    for line in (read_text(rooted(root, "/proc/1/cgroup")) or "").splitlines():
        cgroup_path = line.split(":", 2)[-1]
        for hint, kind in CGROUP_CONTAINER_HINTS:
            if hint in cgroup_path:
                return kind
    return None


# DMI value prefixes that name a hypervisor, with systemd-detect-virt's name for it.
DMI_VM_VENDORS = (
    ("KVM", "kvm"),
    ("OpenStack", "kvm"),
    ("KubeVirt", "kvm"),
    ("QEMU", "qemu"),
    ("VMware", "vmware"),
    ("VMW", "vmware"),
    ("innotek GmbH", "oracle"),
    ("VirtualBox", "oracle"),
    ("Xen", "xen"),
    ("Bochs", "bochs"),
    ("Parallels", "parallels"),
    ("BHYVE", "bhyve"),
    ("Hyper-V", "microsoft"),
    ("Google Compute Engine", "google"),
    ("Amazon EC2", "amazon"),
)


DMI_FIELDS = ("product_name", "sys_vendor", "board_vendor", "bios_vendor")


def vm_type_from_files(root: str) -> str | None:
    dmi = {field: first_line(rooted(root, f"/sys/class/dmi/id/{field}")) for field in DMI_FIELDS}
    if dmi["sys_vendor"].startswith("Microsoft") and dmi["product_name"].startswith("Virtual Machine"):
        return "microsoft"
    for field in DMI_FIELDS:
        for prefix, kind in DMI_VM_VENDORS:
            if dmi[field].startswith(prefix):
                # EC2 bare-metal instances carry Amazon's DMI too; their instance type ends in .metal.
                if kind == "amazon" and dmi["product_name"].endswith(".metal"):
                    return None
                return kind
    for line in (read_text(rooted(root, "/proc/cpuinfo")) or "").splitlines():
        if line.startswith("flags") and "hypervisor" in line.split(":", 1)[-1].split():
            return "vm-other"
    return None


def _detect_virt(run_command: RunCommand | None, which: Which, flag: str) -> str | None:
    """What `systemd-detect-virt <flag>` prints ("none" when it finds nothing), null when it did not run."""
    binary = which("systemd-detect-virt") if run_command else None
    if not binary:
        return None
    result = run_command([binary, flag])
    if result is None:
        return None
    value = result[1].strip()
    return value.splitlines()[0] if value else None


def platform_facts(root: str, run_command: RunCommand | None, which: Which) -> dict:
    """The facts container, container_type, vm, vm_type and secure_boot."""
    # systemd-detect-virt knows more kinds than the files show; "none" from --vm is trusted (EC2 .metal hosts
    # carry a hypervisor's DMI), "none" from --container is not (it misses some container managers).
    container_virt = _detect_virt(run_command, which, "--container")
    container_type = container_virt if container_virt not in (None, "none") else container_type_from_files(root)
    vm_virt = _detect_virt(run_command, which, "--vm")
    vm_type = vm_type_from_files(root) if vm_virt is None else (None if vm_virt == "none" else vm_virt)

    secure_boot = secure_boot_from_files(root)
    if secure_boot is None and run_command and os.path.isdir(rooted(root, "/sys/firmware/efi")):
        mokutil = which("mokutil")
        if mokutil:
            secure_boot = parse_mokutil_sb_state(command_output(run_command, [mokutil, "--sb-state"]))
    return {
        "container": container_type is not None,
        "container_type": container_type,
        "vm": vm_type is not None,
        "vm_type": vm_type,
        "secure_boot": secure_boot,
    }
