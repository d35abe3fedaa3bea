"""`--check --diff` on a converged node: a pin change is previewed as a change, and nothing on the node changes.

Runs converge.yml again through ansible-playbook (with molecule's inventory) in check mode, asking for the
version the node does NOT have (side_effect moved it to 1.18.0-1). One run for both nodes (a module fixture): each
node's state is read before and after it, and each node's test reads its own recap line; a run per node (--limit)
cost 95 s and 158 s one after the other.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import testinfra

WATCHED = [
    "/etc/nvidia-container-runtime/config.toml",
    "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg",
    "/etc/apt/sources.list.d/nvidia-container-toolkit.list",
    "/etc/docker/daemon.json",
    "/etc/containerd/config.toml",
    "/var/run/cdi/nvidia.yaml",
]


def node_state(host) -> str:
    packages = host.check_output(
        "dpkg-query --show --showformat='${Package} ${Version} ${Status}\\n' nvidia-container-toolkit "
        "nvidia-container-toolkit-base libnvidia-container-tools libnvidia-container1"
    )
    files = host.run(f"sha256sum {' '.join(WATCHED)} 2>/dev/null").stdout
    return packages + "\n" + files


NODES = ("tk-debian12", "tk-debian13")


@pytest.fixture(scope="module")
def check_run(request) -> tuple[dict, subprocess.CompletedProcess, dict]:
    """Both nodes' state before, the one `--check --diff` run of converge.yml on both, their state after."""
    inventory = request.config.option.ansible_inventory or os.environ["MOLECULE_INVENTORY_FILE"]
    nodes = {
        name: testinfra.get_host(
            f"ansible://{name}", ansible_inventory=inventory, force_ansible=request.config.option.force_ansible
        )
        for name in NODES
    }
    before = {name: node_state(node) for name, node in nodes.items()}
    scenario = Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"])
    run = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "--inventory",
            os.environ["MOLECULE_INVENTORY_FILE"],
            "--limit",
            ",".join(NODES),
            "--check",
            "--diff",
            "--extra-vars",
            "nvidia_container_toolkit_version=1.17.8-1",
            str(scenario / "converge.yml"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=540,
        env={**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"},
    )
    after = {name: node_state(node) for name, node in nodes.items()}
    return before, run, after


def test_check_mode_previews_a_pin_change_and_writes_nothing(host, check_run):
    name = host.ansible.get_variables()["inventory_hostname"]
    before, run, after = check_run
    assert "1.18.0-1 hold ok installed" in before[name]
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    recap = re.search(rf"^{re.escape(name)}\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=0", run.stdout, re.M)
    assert recap, run.stdout[-2000:]
    assert int(recap.group(1)) > 0, "check mode did not preview the downgrade"
    assert after[name] == before[name]
