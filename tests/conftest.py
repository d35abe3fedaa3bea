"""Project-wide pytest wiring.

- A timing line per stage (lint, unit, demo, each scenario), summed from the test
  reports, so it is right with and without pytest-xdist's workers.
- With pytest-xdist (`-n 2 --dist loadgroup`, as scripts/test.sh runs): the molecule
  scenarios stay one ordered group on one worker (one scenario at a time: a node of
  Debian testing owns the host's cgroup v2 tree), the demo is a group of its own,
  and lint and unit tests fill the other worker meanwhile. The demo's node
  (gpunode-local, apt cache slot gpunode-debian12-local) shares nothing with the
  scenarios' nodes.
"""

from __future__ import annotations

import re
from collections import OrderedDict

import pytest

_STAGES: OrderedDict[str, float] = OrderedDict()
_GROUPS = {"tests/molecule/": "molecule", "tests/demo/": "demo"}


def _stage(nodeid: str) -> str:
    path = nodeid.split("::")[0]
    if path.startswith("tests/molecule/"):
        scenario = re.search(r"\[([^\]]+)\]", nodeid)
        return f"molecule {scenario.group(1)}" if scenario else "molecule"
    if path.startswith("tests/unit/"):
        return "unit"
    if path.startswith("tests/demo/"):
        return "demo"
    if path.startswith("tests/test_lint"):
        return "lint"
    return path


def pytest_collection_modifyitems(items):
    for item in items:
        for prefix, group in _GROUPS.items():
            if item.nodeid.startswith(prefix):
                item.add_marker(pytest.mark.xdist_group(group))


def pytest_runtest_logreport(report):
    stage = _stage(report.nodeid)
    _STAGES[stage] = _STAGES.get(stage, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    if not _STAGES:
        return
    terminalreporter.section("stage timings")
    for stage, seconds in _STAGES.items():
        terminalreporter.write_line(f"timing: {stage} {seconds:.1f}s")
