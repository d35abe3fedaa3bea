"""Runs a scenario playbook again from a testinfra test, against one node.

Verify steps use it to drive a role with other variables (check mode, a changed
setting, bad input) and assert what ansible-playbook printed.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]


def run_playbook(host, playbook: Path, extra_vars: dict | None = None, *args: str) -> subprocess.CompletedProcess:
    """ansible-playbook PLAYBOOK against the testinfra host only, from the project root."""
    env = {k: v for k, v in os.environ.items() if k not in ("ANSIBLE_CONFIG", "ANSIBLE_FORCE_COLOR", "PY_COLORS")}
    env["ANSIBLE_NOCOLOR"] = "1"
    cmd = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], "--limit", host.backend.get_hostname()]
    if extra_vars:
        cmd += ["-e", json.dumps(extra_vars)]
    cmd += [*args, str(playbook)]
    return subprocess.run(cmd, cwd=PROJECT, env=env, capture_output=True, text=True, check=False)


def run_playbook_on_nodes(playbook: Path, node_vars: dict[str, dict], *args: str) -> subprocess.CompletedProcess:
    """ansible-playbook PLAYBOOK once against several nodes, each with its own variables.

    One run instead of one per node: the nodes run side by side. The playbook applies
    rerun_node_vars[inventory_hostname] with set_fact (molecule/nvidia_driver/converge.yml).
    """
    env = {k: v for k, v in os.environ.items() if k not in ("ANSIBLE_CONFIG", "ANSIBLE_FORCE_COLOR", "PY_COLORS")}
    env["ANSIBLE_NOCOLOR"] = "1"
    cmd = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], "--limit", ",".join(node_vars)]
    cmd += ["-e", json.dumps({"rerun_node_vars": node_vars}), *args, str(playbook)]
    return subprocess.run(cmd, cwd=PROJECT, env=env, capture_output=True, text=True, check=False)


def folded(run: subprocess.CompletedProcess) -> str:
    """What the run printed, its whitespace collapsed: the callback wraps long messages."""
    return " ".join(run.stdout.split())


def recap(stdout: str) -> dict[str, dict[str, int]]:
    """The PLAY RECAP counters per node: {"node": {"ok": 12, "changed": 0, "failed": 1, ...}}."""
    counters = {}
    for line in stdout.split("PLAY RECAP")[-1].splitlines():
        node, _, rest = line.partition(" : ")
        if rest:
            counters[node.strip()] = {k: int(v) for k, v in (item.split("=") for item in rest.split())}
    return counters
