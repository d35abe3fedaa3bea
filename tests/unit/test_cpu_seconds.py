"""The stage timings' CPU seconds (tests/cpu_seconds.py, tests/conftest.py): a node container's CPU read from each
cgroup layout Docker makes, a scenario's nodes summed by container, a stage's line."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests import conftest, cpu_seconds
from tests.conftest import timing_line

CID = "3de8ad6179ea2e28eaa53d1759c678c66ff95aaa72c0efbe3c32f26da11f3179"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize(
    ("relative", "text"),
    [
        ("cpuacct/docker/{cid}/cpuacct.usage", "37787129421\n"),  # v1, cgroupfs (this build machine)
        ("cpu,cpuacct/docker/{cid}/cpuacct.usage", "37787129421\n"),  # v1, the joint mount's own name
        ("system.slice/docker-{cid}.scope/cpu.stat", "usage_usec 37787129\nuser_usec 30000000\n"),  # v2, systemd
        ("docker/{cid}/cpu.stat", "usage_usec 37787129\nuser_usec 30000000\n"),  # v2, cgroupfs
    ],
)
def test_a_containers_cpu_is_read_from_each_cgroup_layout(tmp_path, relative, text):
    write(tmp_path / relative.format(cid=CID), text)
    assert cpu_seconds.container_cpu(CID, tmp_path) == pytest.approx(37.787, abs=0.001)
    assert cpu_seconds.container_cpu("another", tmp_path) is None


def test_the_nodes_cpu_is_each_containers_last_reading_summed(tmp_path, monkeypatch):
    listed = {"out": ""}

    def docker_ps(argv, **kwargs):
        assert argv[:2] == ["docker", "ps"]
        return subprocess.CompletedProcess(argv, 0, stdout=listed["out"], stderr="")

    monkeypatch.setattr(cpu_seconds.subprocess, "run", docker_ps)
    usage = tmp_path / "cpuacct" / "docker"
    write(usage / "a1" / "cpuacct.usage", "10000000000")
    write(usage / "b1" / "cpuacct.usage", "5000000000")
    write(usage / "x1" / "cpuacct.usage", "99000000000")  # another scenario's node: not counted
    nodes = cpu_seconds.NodeCpu(["node-a", "node-b"], root=tmp_path)
    listed["out"] = "a1 node-a\nb1 node-b\nx1 other-node\n"
    nodes.read()
    write(usage / "a1" / "cpuacct.usage", "12000000000")
    nodes.read()
    # node-b was removed and made again under its name: a second container, whose CPU adds to the first's
    listed["out"] = "a1 node-a\nb2 node-b\n"
    write(usage / "b2" / "cpuacct.usage", "3000000000")
    nodes.read()
    listed["out"] = ""  # all gone: their last readings stay
    nodes.read()
    assert nodes.seen == {"a1": 12.0, "b1": 5.0, "b2": 3.0}
    assert nodes.total() == pytest.approx(20.0)


def test_the_reader_runs_beside_the_scenario_and_a_failed_read_is_no_failure(tmp_path, monkeypatch):
    calls = []

    def docker_ps(argv, **kwargs):
        calls.append(argv)
        if len(calls) == 1:
            raise subprocess.TimeoutExpired(argv, 60)
        return subprocess.CompletedProcess(argv, 0, stdout="a1 node-a\n", stderr="")

    monkeypatch.setattr(cpu_seconds.subprocess, "run", docker_ps)
    write(tmp_path / "cpuacct" / "docker" / "a1" / "cpuacct.usage", "2500000000")
    with cpu_seconds.NodeCpu(["node-a"], interval=0.01, root=tmp_path) as nodes:
        deadline = time.monotonic() + 10
        while not nodes.seen and time.monotonic() < deadline:
            time.sleep(0.01)
    assert len(calls) >= 2 and nodes.total() == pytest.approx(2.5)


def test_process_cpu_counts_the_children_waited_for():
    before = cpu_seconds.process_cpu()
    subprocess.run(["sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"], check=True)
    assert cpu_seconds.process_cpu() - before > 0.05


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("molecule default", 1136.52, 703.4, 895.2), "timing: molecule default 1136.5s, CPU 703s + 895s in its nodes"),
        (("unit", 2112.0, 1650.6, None), "timing: unit 2112.0s, CPU 1651s"),
        (("lint", 287.0, None, None), "timing: lint 287.0s"),
    ],
)
def test_a_stage_line_says_its_wall_and_cpu_seconds(args, line):
    assert timing_line(*args) == line


def test_a_stage_sums_each_phases_cpu_and_its_nodes_cpu_once(monkeypatch):
    """A property a test records is copied into every report after it (call and teardown): counted once."""
    monkeypatch.setattr(conftest, "_STAGES", type(conftest._STAGES)())
    monkeypatch.setattr(conftest, "_CPU", {})
    monkeypatch.setattr(conftest, "_NODE_CPU", {})
    nodeid = "tests/molecule/test_scenarios.py::test_molecule_scenario[gpu_settings]"
    for when, props in [
        ("setup", [("cpu_seconds", 0.5)]),
        ("call", [("node_cpu_seconds", 17.0), ("cpu_seconds", 46.0)]),
        ("teardown", [("node_cpu_seconds", 17.0), ("cpu_seconds", 0.25)]),
    ]:
        report = type("Report", (), {"nodeid": nodeid, "when": when, "duration": 1.0, "failed": False})()
        report.user_properties = props
        conftest.pytest_runtest_logreport(report)
    assert conftest._CPU == {"molecule gpu_settings": 46.75}
    assert conftest._NODE_CPU == {"molecule gpu_settings": 17.0}
    assert conftest._STAGES == {"molecule gpu_settings": 3.0}
