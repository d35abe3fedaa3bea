"""The doctor's rows on a scenario node: gpu_node_facts, then gpu_validate_checks with those facts (the module the
gpu_validate role runs), through ad-hoc module calls (a few seconds each, no playbook)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.doctor_params import shared_doctor_params


def doctor_rows(host, families=("containerd", "kubelet"), **params) -> dict:
    facts = host.ansible("gpu_node_facts", check=False)["ansible_facts"]["gpu_node"]
    args = {
        "families": list(families),
        "node": facts,
        "runtimes": ["containerd"],
        "toolkit_installed": True,
        **shared_doctor_params(),
    }
    args.update(params)
    out = host.ansible("gpu_validate_checks", json.dumps(args), check=False)
    assert "checks" in out, out
    return {row["check"]: row for row in out["checks"]}
