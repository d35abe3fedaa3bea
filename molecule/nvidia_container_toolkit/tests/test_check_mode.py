"""`--check --diff` on a converged node: a pin change is previewed as a change, and nothing on the node changes.

Runs converge.yml again through ansible-playbook (with molecule's inventory) in check mode, asking for the
version the node does NOT have (side_effect moved it to 1.18.0-1).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

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


def test_check_mode_previews_a_pin_change_and_writes_nothing(host):
    name = host.ansible.get_variables()["inventory_hostname"]
    before = node_state(host)
    assert "1.18.0-1 hold ok installed" in before
    scenario = Path(os.environ["MOLECULE_SCENARIO_DIRECTORY"])
    run = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "--inventory",
            os.environ["MOLECULE_INVENTORY_FILE"],
            "--limit",
            name,
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
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    recap = re.search(rf"^{re.escape(name)}\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=0", run.stdout, re.M)
    assert recap, run.stdout[-2000:]
    assert int(recap.group(1)) > 0, "check mode did not preview the downgrade"
    assert node_state(host) == before
