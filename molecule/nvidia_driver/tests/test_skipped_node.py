"""Verify the nvidia_driver role on a GPU-less node without force: it skips and says why."""

from __future__ import annotations

import sys
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
from playbook_runner import run_playbook

testinfra_hosts = ["ansible://drv-skip"]


def test_node_without_gpu_is_skipped_and_says_why(host):
    assert not host.package("nvidia-driver").is_installed
    assert not host.package("nvidia-kernel-dkms").is_installed
    assert not host.file("/etc/modprobe.d/blacklist-nouveau.conf").exists
    run = run_playbook(host, SCENARIO / "converge.yml")
    assert run.returncode == 0, run.stdout + run.stderr
    said = " ".join(run.stdout.split())  # the callback may wrap long messages
    assert "No NVIDIA GPU was found on drv-skip" in said, run.stdout
    assert "Set nvidia_driver_force to true to install the driver anyway" in said, run.stdout
    assert "changed=0" in said, run.stdout
