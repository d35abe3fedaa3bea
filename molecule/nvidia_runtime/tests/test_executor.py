"""This scenario runs under the shipped opt-in strategy gpunode_mitogen (molecule.yml's provisioner env, which the
verifier inherits): mitogen takes over each node although molecule's inventory names the connection
community.docker.docker (the strategy hands mitogen its short name). The oracle is on the node: two tasks' commands
have one parent process, mitogen's persistent Python (under linear each task starts a Python of its own)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

RESOURCES = Path(__file__).resolve().parents[2] / "resources"
sys.path.insert(0, str(RESOURCES))
from playbook_runner import run_playbook

PROBE = RESOURCES / "executor_probe.yml"
testinfra_hosts = ["ansible://nv-debian13", "ansible://nv-ubuntu2604"]


def test_the_scenario_runs_under_gpunode_mitogen():
    assert os.environ.get("ANSIBLE_STRATEGY") == "gpunode.provisioning.gpunode_mitogen", (
        "molecule.yml's provisioner env sets it"
    )


def test_mitogen_runs_every_task_of_a_node_in_one_python(host):
    run = run_playbook(host, PROBE, None, "-v")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "mitogen is not usable" not in run.stdout + run.stderr
    parents = re.findall(r"PARENT=(\d+)", run.stdout)
    assert len(parents) == 2 and parents[0] == parents[1], run.stdout
