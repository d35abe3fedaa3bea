"""Verify the nvidia_driver role on the node where installation is forced: a real DKMS build."""

from __future__ import annotations

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
