"""Verify the nvidia_driver role on Ubuntu 24.04 (branch 580) and 26.04 (branch 595, kernel 7.0) with
Canonical's precompiled, signed open modules, on nodes whose GPU facts say HGX H100 with NVSwitches and
Secure Boot on (the sysfs stand-in of prepare.yml): no DKMS, the fabric manager at the driver's exact
version. The verify steps' re-runs (conftest.py) take drv-ubuntu2404-signed only."""

from __future__ import annotations

import pytest
from conftest import FABRIC_MANAGER_APART, SIGNED_BRANCH

testinfra_hosts = [f"ansible://{name}" for name in SIGNED_BRANCH]


def _branch(host) -> str:
    return SIGNED_BRANCH[host.backend.get_hostname()]


def _version(host, package: str) -> str:
    return host.check_output(f"dpkg-query -W -f '${{Version}}' {package}")


def test_precompiled_signed_modules_and_no_dkms(host):
    flavour = host.file("/etc/gpunode-test-kernel-flavour").content_string.strip()  # <ABI>-generic
    branch = _branch(host)
    assert host.package(f"linux-modules-nvidia-{branch}-server-open-{flavour}").is_installed
    assert not host.package("dkms").is_installed
    assert not host.package(f"nvidia-dkms-{branch}-server-open").is_installed
    module = host.check_output(f"find /lib/modules/{flavour} -path '*nvidia*' -name 'nvidia.ko*' | head -1")
    assert module, f"the precompiled package installed no nvidia.ko for {flavour}"
    assert host.check_output(f"modinfo -F vermagic {module}").startswith(flavour + " ")
    assert host.check_output(f"modinfo -F license {module}") == "Dual MIT/GPL"
    assert host.check_output(f"modinfo -F signer {module}"), f"{module} is not signed"


def test_fabric_manager_has_the_drivers_exact_version_and_is_held(host):
    branch = _branch(host)
    driver = _version(host, f"nvidia-kernel-common-{branch}-server")
    assert _version(host, f"nvidia-fabricmanager-{branch}") == driver
    assert host.service("nvidia-fabricmanager").is_enabled
    held = (
        f"nvidia-headless-no-dkms-{branch}-server-open",
        f"nvidia-utils-{branch}-server",
        f"nvidia-fabricmanager-{branch}",
    )
    selections = host.check_output("dpkg --get-selections " + " ".join(held))
    for package in held:
        assert [package, "hold"] in [line.split() for line in selections.splitlines()], selections


def test_auto_flavour_chose_open_from_the_h100s_device_id(first_rerun):
    # nvidia_driver_flavour is auto on this node (molecule.yml): the open packages above come from the
    # stand-in's H100 (10de:2330). A node with a Pascal and a Blackwell GPU fails before anything changes.
    assert first_rerun.recap["drv-ubuntu2404-signed"]["failed"] == 1, first_rerun.stdout
    assert (
        "No NVIDIA kernel module drives all the GPUs of this node: 0000:02:00.0 (0x2b85, Blackwell or newer) need "
        "the open GPU kernel modules, and 0000:01:00.0 (0x1b80, pre-Turing (Maxwell, Pascal, Volta or older)) work "
        "only with the proprietary ones." in first_rerun.said
    ), first_rerun.stdout
    assert first_rerun.recap["drv-ubuntu2404-signed"]["changed"] == 0, first_rerun.stdout


def test_a_fabric_manager_apart_from_the_driver_fails_the_refusing_run_with_the_fix(host, second_rerun):
    # Mutation (conftest.py): the package database said the fabric manager is 580.95.05 (as after a driver update
    # that left it behind); site.yml's refusing run must fail before changing anything and name the fix.
    if host.backend.get_hostname() != "drv-ubuntu2404-signed":
        pytest.skip("the verify steps' re-runs take drv-ubuntu2404-signed")
    assert second_rerun.before["fabric_manager"] == FABRIC_MANAGER_APART
    driver = _version(host, "nvidia-kernel-common-580-server").split("-")[0]
    said = second_rerun.said
    assert second_rerun.recap["drv-ubuntu2404-signed"]["failed"] == 1, second_rerun.stdout
    assert (
        f"drv-ubuntu2404-signed has NVIDIA Fabric Manager 580.95.05 (nvidia-fabricmanager-580) but NVIDIA driver "
        f"{driver}." in said
    ), second_rerun.stdout
    assert (
        f"apt-get install --allow-change-held-packages --allow-downgrades nvidia-fabricmanager-580={driver}-*" in said
    )
    assert second_rerun.recap["drv-ubuntu2404-signed"]["changed"] == 0, second_rerun.stdout
    assert _version(host, "nvidia-fabricmanager-580").startswith(driver + "-")


def test_the_next_boot_kernel_has_the_installed_drivers_precompiled_module(host):
    # The precompiled modules pulled in Ubuntu's real kernel image of that ABI: the reboot readiness check ran
    # on a real /boot/vmlinuz-<ABI>-generic.
    flavour = host.file("/etc/gpunode-test-kernel-flavour").content_string.strip()
    assert host.file(f"/boot/vmlinuz-{flavour}").is_file
    module = host.check_output(f"find /lib/modules/{flavour} -path '*nvidia*' -name 'nvidia.ko*' | head -1")
    driver = _version(host, f"nvidia-kernel-common-{_branch(host)}-server").split("-")[0]
    assert host.check_output(f"modinfo -F version {module}") == driver
