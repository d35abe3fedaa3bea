"""Project-wide pytest wiring.

- A timing line per stage (lint, unit, demo, each scenario), summed from the test
  reports, so it is right with and without pytest-xdist's workers: its wall seconds, the CPU
  seconds of the worker and the runs it waited for, and a scenario's node containers' CPU
  seconds (tests/cpu_seconds.py). On two busy cores the CPU is what a stage costs the run.
- For every failed test, one unshortened line of why (a molecule scenario's says the step,
  the node, the task or test and the reason: tests/failure_reason.py), printed just above
  pytest's own summary, so a red run says why in its last lines.
- With pytest-xdist (`-n 3 --dist loadgroup`, as scripts/test.sh runs it): the
  work units and their order of tests/lanes.py. The scenarios with a Debian testing
  node run one at a time on worker 0; lint and the unit tests, then the demo and the
  other scenarios, the longest first, on whichever worker is free.
"""

from __future__ import annotations

import re
from collections import OrderedDict

import pytest

from tests.cpu_seconds import process_cpu
from tests.lanes import SCENARIO_ORDER, group_of, work_key

_STAGES: OrderedDict[str, float] = OrderedDict()
_CPU: dict[str, float] = {}  # stage -> CPU seconds of the workers and their waited-for runs
_NODE_CPU: dict[str, float] = {}  # stage -> CPU seconds of its node containers (tests/molecule/test_scenarios.py)
_CPU_AT = pytest.StashKey[float]()
_WHY: OrderedDict[str, str] = OrderedDict()


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


def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup with the work units of tests.lanes: a group of tests stays on one worker, in order; each worker
    takes the unit tests.lanes.work_key puts first among those it may take.

    The groups come from the node ids (tests.lanes.group_of), not from xdist_group marks: xdist 3.8
    turns those into node id suffixes through an attribute pytest 9 no longer reads."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    def number(node) -> int:
        return int(node.gateway.id.removeprefix("gw"))

    class LaneScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid) or nodeid

        def schedule(self) -> None:
            """xdist shuts down the workers it has no unit for, the last ones up first: worker 0 must stay, as it
            alone takes the pinned group (with `-k harness`, one unit, it would otherwise run nothing)."""
            if self.collection is None:
                order = sorted(self.assigned_work, key=number)
                self.assigned_work = {node: self.assigned_work[node] for node in order}
            super().schedule()

        def _rank(self, node, scope: str) -> tuple[int, int] | None:
            return work_key(scope, number(node), self.numnodes)

        def _assign_work_unit(self, node) -> None:
            ranks = ((self._rank(node, scope), n, scope) for n, scope in enumerate(self.workqueue))
            ranked = [entry for entry in ranks if entry[0] is not None]
            if not ranked:
                return
            key, _, scope = min(ranked)
            if key[0] == SCENARIO_ORDER and self._pending_of(self.assigned_work.get(node, {})) > 1:
                # A scenario goes to a worker only once it is idle, not behind what it runs. Idle is one test left:
                # an xdist worker starts a test once it holds the next one (or is told to shut down), so its last
                # test waits for the next unit (the scenario's own last test, test_molecule_scenario_left_no_node,
                # is what lets it start the scenario's run).
                return
            work_unit = self.workqueue.pop(scope)
            self.assigned_work.setdefault(node, {})[scope] = work_unit
            collection = self.registered_collections[node]
            node.send_runtest_some([collection.index(nodeid) for nodeid, done in work_unit.items() if not done])

        def _reschedule(self, node) -> None:
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) > 2:
                return
            self._assign_work_unit(node)
            if self._pending_of(self.assigned_work[node]) == 0:
                node.shutdown()  # what is left belongs to another worker

    return LaneScheduling(config, log)


def failure_line(report) -> str:
    """The first line of a failed report's message (for pytest.fail: without pytest's "Failed: ")."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = crash.message if crash is not None else str(report.longrepr or "")
    first = next((line for line in message.splitlines() if line.strip()), "no message")
    return first.removeprefix("Failed: ")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[_CPU_AT] = process_cpu()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Each report (setup, call, teardown) carries the CPU seconds its phase used in this worker: user_properties
    travel from an xdist worker to the controller with the report."""
    report = yield
    now = process_cpu()
    report.user_properties.append(("cpu_seconds", now - item.stash.get(_CPU_AT, now)))
    item.stash[_CPU_AT] = now
    return report


def pytest_runtest_logreport(report):
    stage = _stage(report.nodeid)
    _STAGES[stage] = _STAGES.get(stage, 0.0) + report.duration
    for name, value in report.user_properties:
        # a property a test records (node_cpu_seconds) is in each report after it (the teardown's too): once
        if name == "cpu_seconds" or (name == "node_cpu_seconds" and report.when == "call"):
            into = _CPU if name == "cpu_seconds" else _NODE_CPU
            into[stage] = into.get(stage, 0.0) + float(value)
    if report.failed:
        _WHY[f"{report.nodeid} ({report.when})" if report.when != "call" else report.nodeid] = failure_line(report)


def timing_line(stage: str, seconds: float, cpu: float | None, node_cpu: float | None) -> str:
    """A stage's line: its wall seconds (summed over its tests), then what it cost in CPU seconds."""
    line = f"timing: {stage} {seconds:.1f}s"
    if cpu is not None:
        line += f", CPU {cpu:.0f}s"
    if node_cpu:
        line += f" + {node_cpu:.0f}s in its nodes"
    return line


def pytest_terminal_summary(terminalreporter):
    if _STAGES:
        terminalreporter.section("stage timings")
        for stage, seconds in _STAGES.items():
            terminalreporter.write_line(timing_line(stage, seconds, _CPU.get(stage), _NODE_CPU.get(stage)))
        cpu, nodes = sum(_CPU.values()), sum(_NODE_CPU.values())
        terminalreporter.write_line(
            f"timing: CPU in all {cpu + nodes:.0f}s ({cpu:.0f}s tests and their runs, {nodes:.0f}s nodes)"
        )
    if _WHY:
        terminalreporter.section("why it failed")
        for nodeid, why in _WHY.items():
            terminalreporter.write_line(why if why.startswith("molecule ") else f"{nodeid}: {why}")


def pytest_configure(config):
    """Once a test command (not in each xdist worker): the payload cache's keys no run used for days go."""
    if not hasattr(config, "workerinput"):
        from tests import payload_cache

        payload_cache.prune()
