"""Verify the nvidia_driver role on the node where installation is forced: a real DKMS build."""

from __future__ import annotations

import sys
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
from playbook_runner import run_playbook

testinfra_hosts = ["ansible://drv-debian12"]

DRIVER_PACKAGES = ("nvidia-driver", "nvidia-kernel-dkms")


def test_apt_sources_gained_the_components_and_kept_the_comment(host):
    sources = host.file("/etc/apt/sources.list").content_string
    assert sources.startswith("# Admin note: local mirror switch planned, keep this comment.\n")
    for line in (entry for entry in sources.splitlines() if entry.startswith("deb ")):
        assert line.split()[3:] == ["main", "contrib", "non-free", "non-free-firmware"], line


def test_dkms_built_and_installed_the_module(host):
    status = host.check_output("dkms status")
    lines = [line for line in status.splitlines() if line.startswith("nvidia")]
    assert lines, status
    assert all(line.rstrip().endswith("installed") for line in lines), status
    kernel = host.check_output("ls /lib/modules | grep -- -amd64 | sort -V | tail -1")
    assert kernel in status
    modules = host.check_output(f"find /lib/modules/{kernel}/updates -name 'nvidia*.ko*'")
    assert "nvidia-current.ko" in modules or "nvidia.ko" in modules, modules


def test_driver_packages_are_installed_and_held(host):
    selections = host.check_output("dpkg --get-selections " + " ".join(DRIVER_PACKAGES))
    for package in DRIVER_PACKAGES:
        assert [package, "hold"] in [line.split() for line in selections.splitlines()], selections
        assert host.package(package).is_installed


def test_nouveau_is_blacklisted(host):
    blacklist = host.file("/etc/modprobe.d/blacklist-nouveau.conf").content_string
    assert "blacklist nouveau" in blacklist
    assert "options nouveau modeset=0" in blacklist


def test_persistenced_is_enabled(host):
    assert host.service("nvidia-persistenced").is_enabled


def _standin_kernel(host) -> str:
    images = host.check_output("ls /boot | sed -n 's/^vmlinuz-//p'").split()
    assert len(images) == 1, images
    return images[0]


def test_the_installed_kernel_boots_with_the_installed_drivers_module(host):
    kernel = _standin_kernel(host)  # the stand-in image of the kernel whose headers DKMS built against
    module = host.check_output(f"find /lib/modules/{kernel}/updates -name 'nvidia-current.ko*' | head -1")
    assert module, f"no NVIDIA module for the installed kernel {kernel}"
    driver = host.check_output("dpkg-query -W -f '${Version}' nvidia-kernel-dkms").split("-")[0]
    assert host.check_output(f"modinfo -F version {module}") == driver


def test_a_newer_kernel_without_headers_fails_the_run_before_any_reboot(host):
    # Mutation: an update installed a newer kernel image (TEST STAND-IN) without its headers; the boot loader
    # starts it next and it has no NVIDIA module, and the archive has no headers for it.
    kernel = "6.1.0-999-amd64"
    host.run_expect([0], f"echo 'TEST STAND-IN kernel image' > /boot/vmlinuz-{kernel}")
    try:
        run = run_playbook(host, SCENARIO / "converge.yml")
    finally:
        host.run_expect([0], f"rm -f /boot/vmlinuz-{kernel}")
    said = " ".join(run.stdout.split())
    assert run.returncode != 0, run.stdout
    assert (
        f"drv-debian12 would boot without its NVIDIA driver: kernel {kernel} (the kernel the boot loader starts "
        f"next, newest /boot/vmlinuz-*) has no NVIDIA module and DKMS could not build one: its headers "
        f"linux-headers-{kernel} are not installed and not in the package sources;" in said
    ), run.stdout
    assert "Do not reboot into such a kernel." in said, run.stdout
    assert "changed=0" in said, run.stdout
