"""Which worker lane each part of the test command runs in (scripts/test.sh, tests/conftest.py).

A lane is a pytest-xdist worker that keeps a group of tests to itself, in order:
- lane 0: the demo first (its node runs Debian 12), then "molecule-cgroup2": the
  scenarios with a node of Debian testing (forky), one at a time (such a node owns
  the host's cgroup v2 tree on a cgroup v1 host), harness first and default last,
  and the scenarios SCENARIO_GROUPS puts there;
- lane 1: the lint and unit tests (which any lane takes when it is free), then
  "molecule", the other scenarios, one at a time;
- lane 2: "molecule-2", the scenarios SCENARIO_GROUPS puts there, one at a time.
The scenarios are spread so that the lanes take about as long (idle-machine times of
the CI runs, docs/test-times.md); a new scenario goes to lane 1 unless listed.
With fewer workers, lanes share them (lane % workers); with one, every lane is that
worker. Each molecule lane takes apt cache slots from its own range
(molecule/resources/create.yml), so two nodes created at the same moment never pick
the same slot.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# group -> (lane, whether it runs before the unpinned tests on its lane)
LANES = {"molecule-cgroup2": (0, True), "demo": (0, True), "molecule": (1, False), "molecule-2": (2, False)}
# the first apt cache slot of each molecule lane's nodes (create.yml takes <image>-<n> from here on)
APT_SLOT_FIRST = {"molecule-cgroup2": 0, "molecule": 8, "molecule-2": 16}
# scenarios without a forky node that run on lane 0 or 2 instead of lane 1, to even the lanes out
# (fleet to lane 2: with kubelet, nvidia_driver, fuse_security and nvidia_runtime lane 1 was the longest;
# nvidia_runtime to lane 2 as well: in CI's runs of af030ca and f3aa190 lane 2 ended 5-8 min before lane 1, whose
# nvidia_driver alone takes about 29 min; docs/test-times.md)
SCENARIO_GROUPS = {
    "fleet": "molecule-2",
    "gpu_pods": "molecule-2",
    "gpu_settings": "molecule-2",
    "installers": "molecule-2",
    "nvidia_container_toolkit": "molecule-2",
    "nvidia_runtime": "molecule-2",
}


def scenario_group(scenario: str) -> str:
    """The group of a molecule scenario: molecule-cgroup2 when one of its nodes runs Debian testing, else the
    one SCENARIO_GROUPS names, else molecule."""
    text = (ROOT / "molecule" / scenario / "molecule.yml").read_text()
    return "molecule-cgroup2" if "gpunode:forky" in text else SCENARIO_GROUPS.get(scenario, "molecule")


def group_of(nodeid: str) -> str | None:
    """The xdist group of a test by its node id (None: any lane)."""
    if nodeid.startswith("tests/demo/"):
        return "demo"
    if nodeid.startswith("tests/molecule/") and "[" in nodeid:
        return scenario_group(nodeid.split("[", 1)[1].split("]", 1)[0])
    return None
