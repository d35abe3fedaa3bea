"""Verify the nvidia_driver role on Debian 12 with NVIDIA's CUDA repository (its TEST STAND-IN, prepare.yml) and the
proprietary modules, then on the same node as a GPU-less node without force: it skips and says why."""

from __future__ import annotations

from conftest import dpkg_version

testinfra_hosts = ["ansible://drv-debian12-cuda"]

PACKAGES = ("nvidia-driver-cuda", "nvidia-kernel-dkms", "nvidia-persistenced")
SOURCE = "/etc/apt/sources.list.d/nvidia-driver-cuda.list"
KEYRING = "/usr/share/keyrings/nvidia-driver-cuda-keyring.gpg"


def test_debian12_takes_the_newest_580_from_the_cuda_repository_with_the_proprietary_modules(host):
    """The stand-in suite for debian12 has 580.95.05, 580.105.08 and 595.58.03: the role's default branch on the CUDA
    repository is 580 (not Debian 12's own 535, past its end of life), the flavour proprietary: nvidia-kernel-dkms."""
    for package in PACKAGES:
        assert dpkg_version(host, package) == "580.105.08-1", package
    assert not host.package("nvidia-kernel-open-dkms").is_installed
    assert host.file("/usr/share/doc/nvidia-driver-cuda/STAND-IN").content_string.startswith("TEST STAND-IN package")
    # the stand-in's DKMS module, built for the Debian kernel whose headers the role installed
    assert "nvidia/580.105.08" in host.check_output("dkms status"), host.check_output("dkms status")


def test_debian12_packages_are_held_and_come_from_the_checked_source(host):
    listing = host.check_output("dpkg --get-selections " + " ".join(PACKAGES))
    selections = [line.split() for line in listing.splitlines()]
    for package in PACKAGES:
        assert [package, "hold"] in selections, selections
    source = host.file(SOURCE).content_string
    entries = [line for line in source.splitlines() if line.startswith("deb ")]
    assert entries == [f"deb [signed-by={KEYRING}] http://127.0.0.1:8766/cuda/debian12/x86_64/ /"], source


def test_node_without_gpu_is_skipped_says_why_and_keeps_its_driver(host, first_rerun):
    """The re-run without nvidia_driver_force: the node has no GPU, so the role changes nothing, says why, and
    removes nothing that an earlier forced run installed."""
    assert first_rerun.recap["drv-debian12-cuda"]["failed"] == 0, first_rerun.stdout
    assert "No NVIDIA GPU was found on drv-debian12-cuda" in first_rerun.said, first_rerun.stdout
    assert "Set nvidia_driver_force to true to install the driver anyway" in first_rerun.said, first_rerun.stdout
    assert first_rerun.recap["drv-debian12-cuda"]["changed"] == 0, first_rerun.stdout
    for package in PACKAGES:
        assert dpkg_version(host, package) == "580.105.08-1", package
