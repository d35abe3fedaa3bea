"""Verify the nvidia_driver role on Ubuntu 24.04 with DKMS: a real build of the open kernel
modules (nvidia-dkms-580-server-open) against Ubuntu's generic kernel headers."""

from __future__ import annotations

testinfra_hosts = ["ansible://drv-ubuntu2404"]

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
