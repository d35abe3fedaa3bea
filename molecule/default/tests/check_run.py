"""One `--check` run of converge.yml over every node of the scenario, shared by two test files.

tests/test_site.py asserts changed=0 on each converged node (gpu_nodes), tests/test_fresh_node_check.py that it
completes on site-fresh, which converge never touched. Each was its own run (138 s and 107 s in CI, most of it
ansible-playbook's own start and per-task cost, which one run of six nodes side by side pays once); the play,
the mode and each node's PLAY RECAP line the tests read are the same. site-fresh is put into gpu_nodes for this run
only (converge kept it out); a node's result does not depend on the others' (no batches: max_fail_percentage 100, and
the fleet report, the play's one run_once, is changed_when: false).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
from playbook_runner import run_playbook

FRESH = "site-fresh"
_RUN: dict[str, object] = {}


def check_run_on_every_node(host):
    """The run (made by the first test that asks): converge.yml --check on gpu_nodes and site-fresh."""
    if "run" not in _RUN:
        with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as extra:
            extra.write(f"all:\n  children:\n    gpu_nodes:\n      hosts:\n        {FRESH}:\n")
        try:
            # the last --limit wins over run_playbook's own (the test's host)
            _RUN["run"] = run_playbook(
                host, SCENARIO / "converge.yml", None, "--check", "-i", extra.name, "--limit", "gpu_nodes"
            )
        finally:
            Path(extra.name).unlink()
    return _RUN["run"]
