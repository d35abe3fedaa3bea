"""One run of converge.yml for both refused changes of the verify step, in-k3s and in-rke2 side by side.

test_rollback.py's template the k3s agent cannot render and test_doctor.py's kubelet setting the RKE2 agent refuses
each ran converge.yml on its node (85 s and 103 s, one after the other); run_playbook_on_nodes gives each node its
own variables in one run. The state each test checks is read right after the run, as each test read it after its
own, and each node's messages are read from the lines ansible-playbook printed for that node.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import testinfra

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
sys.path.insert(0, str(SCENARIO / "tests"))
from doctor import doctor_rows
from playbook_runner import recap, run_playbook_on_nodes
from test_installers import NODES, _cri, _etc, _generated

K3S_TEMPLATE = f"{_etc(NODES['in-k3s'])}/config.toml.tmpl"
RKE2_DROPIN = "/etc/rancher/rke2/config.yaml.d/90-gpu-node-kubelet.yaml"
REFUSED = {
    # a Go template action the agent cannot render ({{"{{"}} keeps Ansible from templating it);
    # 3 health checks, not the role's 30: the agent that cannot render its template never comes back
    "in-k3s": {
        "runtime_config_installer_template_extra": '{{"{{"}} template "nonexistent" . }}',
        "runtime_config_health_retries": 3,
    },
    "in-rke2": {
        "kubelet_flags": {"max-pods": 200, "feature-gates": "UnknownGpunodeGate=true"},
        "kubelet_healthz_timeout": 15,
    },
}


def node_output(stdout: str, name: str) -> str:
    """What ansible-playbook printed for one node: the lines that name it (`[name]`, `[name -> ...]`) and the
    indented lines of each such result."""
    lines, keep = [], False
    for line in stdout.splitlines():
        if line and not line[0].isspace():
            keep = f"[{name}]" in line or f"[{name} ->" in line
        if keep:
            lines.append(line)
    return "\n".join(lines)


@pytest.fixture(scope="session")
def refused_runs(request) -> dict:
    inventory = request.config.option.ansible_inventory or os.environ["MOLECULE_INVENTORY_FILE"]
    k3s, rke2 = (
        testinfra.get_host(
            f"ansible://{name}", ansible_inventory=inventory, force_ansible=request.config.option.force_ansible
        )
        for name in ("in-k3s", "in-rke2")
    )
    before = {"in-k3s": k3s.file(K3S_TEMPLATE).content_string, "in-rke2": rke2.file(RKE2_DROPIN).content_string}
    run = run_playbook_on_nodes(SCENARIO / "converge.yml", REFUSED)
    counters = recap(run.stdout)
    return {
        "run": run,
        "failed": {name: counters.get(name, {}).get("failed", 0) for name in REFUSED},
        "output": {name: node_output(run.stdout, name) for name in REFUSED},
        "before": before,
        "after": {
            "in-k3s": {
                "file": k3s.file(K3S_TEMPLATE).content_string,
                "running": k3s.service(NODES["in-k3s"]["unit"]).is_running,
                "runtimes": _cri(_generated(k3s, NODES["in-k3s"]))["runtimes"],
            },
            "in-rke2": {
                "file": rke2.file(RKE2_DROPIN).content_string,
                "running": rke2.service(NODES["in-rke2"]["unit"]).is_running,
                "kubelet_row": doctor_rows(rke2, families=["kubelet"])["kubelet configuration"],
            },
        },
    }
