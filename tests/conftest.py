"""Project-wide pytest wiring: a timing line per stage (lint, unit, each scenario)."""

from __future__ import annotations

import time
from collections import OrderedDict

_STAGES: OrderedDict[str, float] = OrderedDict()


def _stage(item) -> str:
    path = item.nodeid.split("::")[0]
    if path.startswith("tests/molecule/"):
        return f"molecule {item.callspec.params.get('scenario', '?')}" if hasattr(item, "callspec") else "molecule"
    if path.startswith("tests/unit/"):
        return "unit"
    if path.startswith("tests/demo/"):
        return "demo"
    if path.startswith("tests/test_lint"):
        return "lint"
    return path


def pytest_runtest_protocol(item, nextitem):
    item._gpunode_t0 = time.monotonic()


def pytest_runtest_teardown(item, nextitem):
    start = getattr(item, "_gpunode_t0", None)
    if start is not None:
        stage = _stage(item)
        _STAGES[stage] = _STAGES.get(stage, 0.0) + time.monotonic() - start


def pytest_terminal_summary(terminalreporter):
    if not _STAGES:
        return
    terminalreporter.section("stage timings")
    for stage, seconds in _STAGES.items():
        terminalreporter.write_line(f"timing: {stage} {seconds:.1f}s")
