"""Verify the nvidia_driver role on a GPU-less node without force: it skips and says why."""

from __future__ import annotations

testinfra_hosts = ["ansible://drv-skip"]


def test_node_without_gpu_is_skipped_and_says_why(host, first_rerun):
    assert not host.package("nvidia-driver").is_installed
    assert not host.package("nvidia-kernel-dkms").is_installed
    assert not host.file("/etc/modprobe.d/blacklist-nouveau.conf").exists
    assert first_rerun.recap["drv-skip"]["failed"] == 0, first_rerun.stdout
    assert "No NVIDIA GPU was found on drv-skip" in first_rerun.said, first_rerun.stdout
    assert "Set nvidia_driver_force to true to install the driver anyway" in first_rerun.said, first_rerun.stdout
    assert first_rerun.recap["drv-skip"]["changed"] == 0, first_rerun.stdout
