"""Which worker runs each part of the test command, and in what order (scripts/test.sh, tests/conftest.py).

A pytest-xdist worker takes one work unit at a time, the first of those it may take in work_key's order:
- worker 0 first takes "molecule-cgroup2": the scenarios with a node of Debian testing (forky), one after another,
  harness first and default last. Such a node owns the host's cgroup v2 tree on a cgroup v1 host, so two of them never
  run at once.
- Then any worker takes lint and the unit tests, each test a unit of its own, except a unit test file whose tests
  share work (a module-scoped fixture or a functools.cache): one unit, so that the shared work (a playbook run of
  minutes, e.g. test_role_variables.py's `refused`, or test_tags.py's --list-tasks of each tag) runs once, not once on
  each worker that takes one of its tests.
- Then the demo and the other scenarios, each a unit of its own, the longest first (EXPECTED_SECONDS), each to a
  worker that is idle: a long scenario started last, or queued behind another, keeps one worker busy while the others
  wait for it. Fixed lanes of scenarios ended up to
  20 minutes apart on this 2-core machine (docs/test-times.md).
With fewer workers than 3, worker 0's group goes to the first; with one, every unit runs in order on it.
Each worker's nodes take apt cache slots from its own range (APT_SLOTS_PER_WORKER, molecule/resources/create.yml),
so two nodes created at the same moment on two workers never pick the same slot.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

# the groups pinned to a worker, which runs them before anything else
PINNED = {"molecule-cgroup2": 0}
# Seconds each unpinned scenario and the demo took in a CI-like run of the whole test command (three workers on two
# cores: c12e66c, docs/test-times.md; arm64 alone). Only their order matters: the longest starts first.
EXPECTED_SECONDS = {
    "nvidia_driver": 2118,
    "nvidia_container_toolkit": 1004,
    "gpu_pods": 930,
    "installers": 863,
    "kubelet": 783,
    "arm64": 500,  # 238 s alone, 630 in the whole run (2026-12-02), 1020 linear; its image on a new machine: 705 more
    "demo": 365,
    "fleet": 345,
    "nvidia_runtime": 334,
    "fuse_security": 216,
    "gpu_settings": 99,
}
# Every scenario builds the node images it names when it runs (scenario_images, tests/molecule/test_scenarios.py), not
# scripts/test.sh's setup: on a new machine the builds overlap the other workers' tests. An image that takes long to
# build where the machine has none yet adds its seconds to its scenario's EXPECTED_SECONDS then, so that on a new
# machine that scenario starts early, not last: debian12-arm64, under emulation (705 s beside a scenario, 2026-12-02).
# The amd64 images take about 1 to 3 minutes each and are shared by several scenarios: not counted.
IMAGE_BUILD_SECONDS = {"debian12-arm64": 705}
# work_key's first number for the demo and the unpinned scenarios: only an idle worker takes one
SCENARIO_ORDER = 2
# apt cache slots of each worker's nodes (create.yml takes <image>-<n> from the worker's first slot on)
APT_SLOTS_PER_WORKER = 8


def is_cgroup2_scenario(scenario: str) -> bool:
    """Whether one of the scenario's nodes runs Debian testing (forky)."""
    return "forky" in scenario_images(scenario)


SHARED_WORK = re.compile(r"fixture\(scope=\"module\"|@functools\.(?:cache|lru_cache)\b")


@functools.cache
def shares_work(path: str) -> bool:
    """Whether the test file's tests share work: a fixture of scope module or a functools cache (computed once in
    each worker that runs one of its tests)."""
    file = ROOT / path
    return file.is_file() and SHARED_WORK.search(file.read_text()) is not None


def group_of(nodeid: str) -> str | None:
    """The work unit of a test by its node id: "demo", "molecule-cgroup2", "molecule <scenario>", "unit <file>" (a
    unit test file whose tests share work), or None (the test is a unit of its own)."""
    path = nodeid.split("::", 1)[0]
    if path.startswith("tests/unit/") and shares_work(path):
        return f"unit {path}"
    if nodeid.startswith("tests/demo/"):
        return "demo"
    if nodeid.startswith("tests/molecule/") and "[" in nodeid:
        scenario = nodeid.split("[", 1)[1].split("]", 1)[0]
        return "molecule-cgroup2" if is_cgroup2_scenario(scenario) else f"molecule {scenario}"
    return None


def work_key(unit: str, worker: int, workers: int) -> tuple[int, int] | None:
    """The order in which a worker takes a work unit (the smallest first), or None where the unit is pinned to
    another worker."""
    if unit in PINNED:
        return (0, 0) if PINNED[unit] % workers == worker % workers else None
    name = unit.removeprefix("molecule ")
    if unit == "demo" or name != unit:
        slow = [image for image in scenario_images(name) if image in IMAGE_BUILD_SECONDS] if name != unit else []
        building = sum(IMAGE_BUILD_SECONDS[image] for image in slow if image_missing(image))
        return (SCENARIO_ORDER, -EXPECTED_SECONDS.get(name, 0) - building)  # a scenario not listed yet: last
    return (1, 0)


@functools.cache
def scenario_platforms(scenario: str) -> tuple[dict, ...]:
    """The scenario's nodes: its molecule.yml platforms (name, image ...), read once a process."""
    return tuple(yaml.safe_load((ROOT / "molecule" / scenario / "molecule.yml").read_text())["platforms"])


def scenario_images(scenario: str) -> list[str]:
    """The node images the scenario's nodes run (gpunode:<image>), each once, in their order."""
    return list(dict.fromkeys(platform["image"].removeprefix("gpunode:") for platform in scenario_platforms(scenario)))


@functools.cache
def image_missing(image: str) -> bool:
    """Whether the machine has no node image gpunode:<image> yet (its scenario builds it when it runs)."""
    try:
        inspect = subprocess.run(["docker", "image", "inspect", f"gpunode:{image}"], capture_output=True, check=False)
    except OSError:  # no docker client: no scenario runs here
        return False
    return inspect.returncode != 0


def apt_slot_first() -> int:
    """The first apt cache slot of this worker's nodes (0 without pytest-xdist)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(worker.removeprefix("gw")) * APT_SLOTS_PER_WORKER
