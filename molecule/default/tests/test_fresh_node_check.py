"""site-fresh, a node that was never converged: a `--check` run of site.yml completes without
errors, and the toolkit role without force skips it (no GPU) and says why."""

from __future__ import annotations

import sys
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
from playbook_runner import run_playbook

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_run import check_run_on_every_node

testinfra_hosts = ["ansible://site-fresh"]


def test_check_mode_on_a_fresh_node_completes(host):
    # site-fresh is kept out of gpu_nodes so converge never touches it; the shared run puts it in (check_run.py)
    run = check_run_on_every_node(host)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    recap = [line for line in run.stdout.splitlines() if line.startswith("site-fresh ")]
    assert recap, run.stdout[-3000:]
    assert " failed=0 " in recap[-1] and " unreachable=0 " in recap[-1], recap
    assert not host.package("nvidia-container-toolkit").is_installed, "check mode installed the toolkit"
    assert not host.file("/etc/apt/sources.list.d/nvidia-container-toolkit.list").exists


def test_toolkit_skips_a_gpu_less_node_unless_forced(host):
    run = run_playbook(host, SCENARIO / "toolkit_unforced.yml", {"nvidia_container_toolkit_force": False})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    # the read task's report is a warning of the run (role_read's `report`): on stderr, as ansible prints them
    said = " ".join(run.stderr.split())
    skipping = "Skipping the NVIDIA container toolkit on site-fresh: no NVIDIA GPU on PCI and no NVIDIA driver"
    assert f"[WARNING]: {skipping}" in said
    assert "Set nvidia_container_toolkit_force: true to install it anyway" in said
    recap = [line for line in run.stdout.splitlines() if line.startswith("site-fresh ")]
    assert recap and " changed=0 " in recap[-1], recap
    assert not host.package("nvidia-container-toolkit").is_installed
