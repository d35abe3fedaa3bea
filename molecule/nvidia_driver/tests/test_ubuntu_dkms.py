"""Verify the nvidia_driver role on Ubuntu 26.04 with DKMS: a real build of the open kernel
modules (nvidia-dkms-580-server-open) against Ubuntu's generic kernel headers (7.0)."""

from __future__ import annotations

import re

from conftest import KERNEL_META

testinfra_hosts = ["ansible://drv-ubuntu2604"]

HELD = ("nvidia-headless-580-server-open", "nvidia-utils-580-server")


def _generic_kernel(host) -> str:
    return host.check_output("ls /usr/src | sed -n 's/^linux-headers-\\(.*-generic\\)$/\\1/p' | sort -V | tail -1")


def test_dkms_built_the_open_module_for_the_generic_kernel(host):
    kernel = _generic_kernel(host)
    assert kernel, host.check_output("ls /usr/src")
    status = host.check_output("dkms status")
    lines = [line for line in status.splitlines() if line.startswith("nvidia")]
    assert lines, status
    assert any(kernel in line and line.rstrip().endswith("installed") for line in lines), status
    module = host.check_output(f"find /lib/modules/{kernel}/updates -name 'nvidia.ko*' | head -1")
    assert module, f"no nvidia.ko under /lib/modules/{kernel}/updates"
    # the open GPU kernel modules are MIT/GPL; the proprietary one says "NVIDIA"
    assert host.check_output(f"modinfo -F license {module}") == "Dual MIT/GPL"
    assert host.check_output(f"modinfo -F vermagic {module}").startswith(kernel + " ")


def test_nvidia_peermem_loads_at_boot_from_the_module_dkms_built(host):
    """nvidia_driver_peermem: the boot-time load names nvidia-peermem, which DKMS built for the generic kernel."""
    assert "nvidia-peermem" in host.file("/etc/modules-load.d/nvidia-peermem.conf").content_string.split()
    kernel = _generic_kernel(host)
    # Ubuntu 26.04's dkms (3.2) runs depmod only for a kernel whose image is installed ("Skipping depmod because
    # '/lib/modules/<kernel>/modules.dep' is missing", its do_depmod); this node has that kernel's headers only, so
    # depmod says here what it would write, as the kernel image's package runs it on a real node.
    deps = host.check_output(f"depmod -n {kernel}")
    assert re.search(r"^updates/dkms/nvidia-peermem\.ko(\.zst)?:", deps, re.M), deps[:2000]


def test_driver_packages_are_the_dkms_ones_and_held(host):
    assert host.package("nvidia-dkms-580-server-open").is_installed
    installed = host.check_output("dpkg-query -W -f '${Package} ${Status}\\n' 'linux-modules-nvidia-*' || true")
    assert " installed" not in installed, installed
    selections = host.check_output("dpkg --get-selections " + " ".join(HELD))
    for package in HELD:
        assert [package, "hold"] in [line.split() for line in selections.splitlines()], selections


def test_no_fabric_manager_without_nvswitches(host):
    assert not host.package("nvidia-fabricmanager-580").is_installed


def test_nouveau_is_blacklisted_and_persistenced_enabled(host):
    assert "blacklist nouveau" in host.file("/etc/modprobe.d/blacklist-nouveau.conf").content_string
    assert host.service("nvidia-persistenced").is_enabled


def test_dkms_under_secure_boot_without_a_mok_password_is_refused(host, second_rerun):
    # Mutation (conftest.py): the node's facts say Secure Boot is on (EFI stand-in); no nvidia_driver_mok_password
    # is set, so the role cannot queue a MOK for enrollment and must refuse before anything changes.
    said = second_rerun.said
    assert second_rerun.recap["drv-ubuntu2604"]["failed"] == 1, second_rerun.stdout
    assert "Secure Boot is enabled on drv-ubuntu2604, so the kernel loads only signed modules" in said, said
    assert "(/var/lib/shim-signed/mok/MOK.der), which the role creates." in said, said
    assert "Set nvidia_driver_mok_password (keep it in Ansible Vault). Nothing was changed." in said, said
    assert "Or set nvidia_driver_ubuntu_precompiled to true to use Canonical's signed modules." in said, said
    assert second_rerun.recap["drv-ubuntu2604"]["changed"] == 0, second_rerun.stdout
    assert not host.file("/var/lib/shim-signed/mok").exists
    assert not host.file("/etc/dkms/framework.conf.d/nvidia_driver-mok.conf").exists


def test_the_kernel_meta_package_is_held_and_released_with_the_variable(host, first_rerun):
    # nvidia_driver_hold_kernel is true in molecule.yml: the converge held the installed meta-package
    assert first_rerun.before["kernel_meta_selection"] == [KERNEL_META, "hold"]
    # the re-run with nvidia_driver_hold_kernel false released it, and changed nothing else
    assert first_rerun.recap["drv-ubuntu2604"]["failed"] == 0, first_rerun.stdout
    assert first_rerun.recap["drv-ubuntu2604"]["changed"] == 2, first_rerun.stdout  # the selection, the record
    assert host.check_output(f"dpkg --get-selections {KERNEL_META}").split() == [KERNEL_META, "install"]
    assert not host.file("/var/lib/gpu-node-provisioning/nvidia_driver-kernel-hold.json").exists
    # the driver packages keep their holds
    selections = host.check_output("dpkg --get-selections " + " ".join(HELD))
    assert all(line.split()[1] == "hold" for line in selections.splitlines()), selections
