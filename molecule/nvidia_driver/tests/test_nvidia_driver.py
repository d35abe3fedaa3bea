"""Verify the nvidia_driver role: real DKMS build on the forced node, a clean skip on the other."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
from playbook_runner import run_playbook

DRIVER_PACKAGES = ("nvidia-driver", "nvidia-kernel-dkms")


def _forced(host) -> bool:
    return host.backend.get_hostname() == "drv-debian12"


@pytest.fixture
def forced(host):
    if not _forced(host):
        pytest.skip("checks of the forced installation run on drv-debian12")
    return host


@pytest.fixture
def skipped(host):
    if _forced(host):
        pytest.skip("checks of the skip run on drv-skip")
    return host


def test_apt_sources_gained_the_components_and_kept_the_comment(forced):
    sources = forced.file("/etc/apt/sources.list").content_string
    assert sources.startswith("# Admin note: local mirror switch planned, keep this comment.\n")
    for line in (entry for entry in sources.splitlines() if entry.startswith("deb ")):
        assert line.split()[3:] == ["main", "contrib", "non-free", "non-free-firmware"], line


def test_dkms_built_and_installed_the_module(forced):
    status = forced.check_output("dkms status")
    lines = [line for line in status.splitlines() if line.startswith("nvidia")]
    assert lines, status
    assert all(line.rstrip().endswith("installed") for line in lines), status
    kernel = forced.check_output("ls /lib/modules | grep -- -amd64 | sort -V | tail -1")
    assert kernel in status
    modules = forced.check_output(f"find /lib/modules/{kernel}/updates -name 'nvidia*.ko*'")
    assert "nvidia-current.ko" in modules or "nvidia.ko" in modules, modules


def test_driver_packages_are_installed_and_held(forced):
    selections = forced.check_output("dpkg --get-selections " + " ".join(DRIVER_PACKAGES))
    for package in DRIVER_PACKAGES:
        assert [package, "hold"] in [line.split() for line in selections.splitlines()], selections
        assert forced.package(package).is_installed


def test_nouveau_is_blacklisted(forced):
    blacklist = forced.file("/etc/modprobe.d/blacklist-nouveau.conf").content_string
    assert "blacklist nouveau" in blacklist
    assert "options nouveau modeset=0" in blacklist


def test_persistenced_is_enabled(forced):
    assert forced.service("nvidia-persistenced").is_enabled


def test_node_without_gpu_is_skipped_and_says_why(skipped):
    assert not skipped.package("nvidia-driver").is_installed
    assert not skipped.package("nvidia-kernel-dkms").is_installed
    run = run_playbook(skipped, SCENARIO / "converge.yml")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "no NVIDIA GPU" in run.stdout, run.stdout
    assert "nvidia_driver_force" in run.stdout, run.stdout
