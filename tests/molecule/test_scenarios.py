"""Runs each molecule scenario (full test sequence) as one test.

Scenarios with a node of Debian testing run one at a time (such a node owns the
host's cgroup v2 tree on a cgroup v1 host), `harness` first (it proves the node
containers) and `default` (site.yml end to end) last; with the test command's
three workers the other scenarios run meanwhile on the others, the longest first
(tests/lanes.py). Each scenario's output goes to
.ci-logs/molecule-<scenario>.log; a failure says in its first line the step, the node,
the task or test and the reason (tests/failure_reason.py), then shows the log's tail.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tests import payload_cache
from tests.cpu_seconds import NodeCpu
from tests.failure_reason import molecule_failure
from tests.lanes import apt_slot_first, scenario_images, scenario_platforms

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / ".ci-logs"
FIRST, LAST = ["harness"], ["default"]
BINFMT_QEMU_AARCH64 = "/proc/sys/fs/binfmt_misc/qemu-aarch64"  # where scripts/lib.sh registers arm64 emulation
RAN: set[str] = set()  # the scenarios this process ran (molecule test), for test_molecule_scenario_left_no_node


def _scenarios() -> list[str]:
    names = sorted(p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml"))
    middle = [n for n in names if n not in FIRST + LAST]
    return [n for n in FIRST if n in names] + middle + [n for n in LAST if n in names]


def _node_names(scenario: str) -> set[str]:
    """The names of the scenario's node containers (its molecule.yml platforms)."""
    return {platform["name"] for platform in scenario_platforms(scenario)}


def _arm64_unavailable() -> str:
    """Why the arm64 node cannot run here ("" where it can): scripts/test.sh's reason (GPUNODE_ARM64_UNAVAILABLE: no
    emulation, or GPUNODE_TEST_ARM64=0), else qemu-aarch64 missing from binfmt_misc (pytest run without test.sh)."""
    if why := os.environ.get("GPUNODE_ARM64_UNAVAILABLE", ""):
        return why
    if platform.machine() != "aarch64" and not Path(BINFMT_QEMU_AARCH64).exists():
        return f"{BINFMT_QEMU_AARCH64} is missing: scripts/test.sh registers qemu-user-static (scripts/lib.sh)"
    return ""


@pytest.mark.molecule
@pytest.mark.parametrize("scenario", _scenarios())
def test_molecule_scenario(scenario, record_property):
    if scenario == "arm64" and (why := _arm64_unavailable()):
        pytest.skip(f"molecule/arm64 (qemu-user) not run: {why}")
    LOGS.mkdir(exist_ok=True)
    log = LOGS / f"molecule-{scenario}.log"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env = payload_cache.environment(env)  # TEST HARNESS: the runs share their module payloads
    env["GPUNODE_APT_SLOT_FIRST"] = str(apt_slot_first())
    env.setdefault("ANSIBLE_FORCE_COLOR", "0")
    env["PY_COLORS"] = "0"
    with log.open("w") as out, NodeCpu(_node_names(scenario)) as nodes:
        RAN.add(scenario)

        def run(cmd: list[str]) -> subprocess.CompletedProcess:
            return subprocess.run(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env, check=False)

        # its node images first, where they are missing or outdated (scripts/test.sh's setup builds none: on a new
        # machine the builds overlap the other workers' tests; another worker's build of one is waited for)
        images = scenario_images(scenario)
        result = run(["bash", "-c", f". scripts/lib.sh; ensure_images {' '.join(images)}"])
        if result.returncode == 0:
            result = run([str(Path(sys.executable).parent / "molecule"), "test", "-s", scenario])
    record_property("node_cpu_seconds", nodes.total())  # the stage timings' CPU of its nodes (tests/conftest.py)
    if result.returncode != 0:
        text = log.read_text(errors="replace")
        if result.args[0] == "bash":  # the image builds, before molecule
            last = next((line for line in reversed(text.splitlines()) if line.strip()), "")
            reason = f"molecule {scenario}: building its node image ({', '.join(images)}) failed: {last}"
            header = f"scripts/lib.sh's ensure_images exited with rc {result.returncode}; last lines of {log}:"
        else:
            reason = molecule_failure(scenario, text)
            header = f"`molecule test -s {scenario}` exited with rc {result.returncode}; last lines of {log}:"
        pytest.fail("\n".join([reason, header, *text.splitlines()[-80:]]))


@pytest.mark.molecule
@pytest.mark.parametrize("scenario", _scenarios())
def test_molecule_scenario_left_no_node(scenario):
    """After its run (the same work unit, tests/lanes.py), no node container of the scenario is left: a leftover
    node keeps its apt cache slot, its memory and, for a forky node, the host's cgroup v2 tree from the next runs.
    This test also lets its worker start the scenario's run: an xdist worker runs a test once it holds the next one."""
    if scenario not in RAN:
        pytest.skip(f"molecule/{scenario} did not run in this worker (skipped, deselected, or on another worker)")
    names = _node_names(scenario)
    listed = subprocess.run(
        ["docker", "ps", "--all", "--format", "{{.Names}}"], capture_output=True, text=True, check=True
    )
    assert names.isdisjoint(listed.stdout.split()), f"molecule/{scenario} left node containers: {sorted(names)}"
