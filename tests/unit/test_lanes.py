"""The test command's work units and their order (tests/lanes.py), under the scheduler tests/conftest.py gives
pytest-xdist, simulated here with workers that run a test once they hold the next one (or are told to shut
down), as xdist's workers do (xdist/remote.py, run_one_test), each test taking the seconds the simulation gives it."""

from __future__ import annotations

import heapq
import itertools
from types import SimpleNamespace

import pytest

from tests import lanes
from tests.conftest import pytest_xdist_make_scheduler
from tests.lanes import EXPECTED_SECONDS, ROOT, SCENARIO_ORDER, apt_slot_first, group_of, is_cgroup2_scenario, work_key
from tests.molecule.test_scenarios import _scenarios

RUN = "tests/molecule/test_scenarios.py::test_molecule_scenario[{}]"


@pytest.fixture(autouse=True)
def images_built(monkeypatch):
    """Every node image there (the order of a machine that has run the tests), whatever this machine has."""
    monkeypatch.setattr(lanes, "image_missing", lambda image: False)


LEFT = "tests/molecule/test_scenarios.py::test_molecule_scenario_left_no_node[{}]"


def test_every_unpinned_scenario_and_the_demo_have_an_expected_time():
    unpinned = {name for name in _scenarios() if not is_cgroup2_scenario(name)}
    assert set(EXPECTED_SECONDS) == unpinned | {"demo"}
    assert {"harness", "runtime_config", "default"} <= set(_scenarios()) - unpinned


def test_the_work_units_and_their_order():
    assert group_of(RUN.format("default")) == group_of(LEFT.format("harness")) == "molecule-cgroup2"
    assert group_of(RUN.format("kubelet")) == group_of(LEFT.format("kubelet")) == "molecule kubelet"
    assert group_of("tests/demo/test_demo.py::test_x") == "demo"
    assert group_of("tests/unit/test_lanes.py::test_x") is None
    # a file whose module fixture runs a playbook, or whose tests share a cached --list-tasks: one unit, on one worker
    for file in ("tests/unit/test_role_variables.py", "tests/unit/test_tags.py"):
        assert group_of(f"{file}::test_a[fuse]") == group_of(f"{file}::test_b") == f"unit {file}"
    assert work_key("unit tests/unit/test_role_variables.py", 2, 3) == work_key("tests/unit/x.py::t", 2, 3)
    assert work_key("molecule-cgroup2", 0, 3) < work_key("tests/unit/x.py::t", 2, 3) < work_key("demo", 1, 3)
    assert work_key("molecule-cgroup2", 1, 3) is None and work_key("molecule-cgroup2", 0, 1) == (0, 0)
    assert work_key("molecule nvidia_driver", 1, 3) < work_key("molecule gpu_settings", 1, 3)
    assert work_key("molecule kubelet", 2, 3)[0] == SCENARIO_ORDER


def test_each_worker_takes_its_own_apt_slots(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert apt_slot_first() == 0
    firsts = set()
    for worker in range(3):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker}")
        firsts.add(apt_slot_first())
    assert sorted(firsts) == [0, 8, 16]
    # create.yml counts each node's slot from there (GPUNODE_APT_SLOT_FIRST, set by test_scenarios.py)
    assert "GPUNODE_APT_SLOT_FIRST" in (ROOT / "molecule" / "resources" / "create.yml").read_text()


class Worker:
    """A simulated xdist worker: runs its tests in the order it got them, each once it holds the next."""

    def __init__(self, number: int):
        self.gateway = SimpleNamespace(id=f"gw{number}")
        self.shutting_down = False
        self.queue: list[int] = []
        self.running: int | None = None

    def send_runtest_some(self, indices):
        self.queue.extend(indices)

    def shutdown(self):
        self.shutting_down = True

    def next_test(self) -> int | None:
        if self.running is None and self.queue and (len(self.queue) >= 2 or self.shutting_down):
            self.running = self.queue.pop(0)
            return self.running
        return None


def simulate(collection: list[str], seconds: dict[str, float], workers: int = 3, up: list[int] | None = None):
    """Runs the collection through the scheduler: each worker's tests with their start, end and worker. ``up``: the
    order in which the workers came up (xdist's is whatever order they were ready in)."""
    config = SimpleNamespace(
        getvalue=lambda name: {"dist": "loadgroup", "tx": [f"{workers}*popen"]}[name],
        option=SimpleNamespace(loadscopereorder=False),
    )
    scheduler = pytest_xdist_make_scheduler(config, None)
    nodes = [Worker(n) for n in range(workers)]
    for number in up or range(workers):
        scheduler.add_node(nodes[number])
    for node in nodes:
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    now, events, ran = 0.0, [], {}

    def start_what_can_start():
        for node in nodes:
            index = node.next_test()
            if index is not None:
                nodeid = collection[index]
                pending = scheduler._pending_of(scheduler.assigned_work[node])
                ran[nodeid] = {"worker": node.gateway.id, "start": now, "pending": pending}
                heapq.heappush(events, (now + seconds.get(nodeid, 1.0), nodeid, nodes.index(node)))

    start_what_can_start()
    while events:
        now, nodeid, number = heapq.heappop(events)
        node = nodes[number]
        ran[nodeid]["end"] = now
        node.running = None
        scheduler.mark_test_complete(node, collection.index(nodeid))
        start_what_can_start()
    assert set(ran) == set(collection), f"never ran: {sorted(set(collection) - set(ran))}"
    assert scheduler.tests_finished
    return ran


def _collection(units: int = 40) -> tuple[list[str], dict[str, float]]:
    scenarios = _scenarios()
    collection = [f"tests/unit/test_u.py::test_{n}" for n in range(units)]
    collection += [f"tests/demo/test_demo.py::test_{n}" for n in range(3)]
    collection += [RUN.format(name) for name in scenarios] + [LEFT.format(name) for name in scenarios]
    seconds = {RUN.format(name): float(EXPECTED_SECONDS.get(name, 1500)) for name in scenarios}
    seconds.update({f"tests/demo/test_demo.py::test_{n}": 120.0 for n in range(3)})
    seconds.update({nodeid: 30.0 for nodeid in collection if nodeid.startswith("tests/unit/")})
    return collection, seconds


@pytest.mark.parametrize("workers", [3, 2, 1])
def test_every_test_runs_and_the_forky_scenarios_one_after_another_on_worker_0(workers):
    collection, seconds = _collection()
    ran = simulate(collection, seconds, workers)
    pinned = [RUN.format(name) for name in _scenarios() if is_cgroup2_scenario(name)]
    assert [ran[nodeid]["worker"] for nodeid in pinned] == ["gw0"] * len(pinned)
    in_order = sorted(pinned, key=lambda nodeid: ran[nodeid]["start"])
    assert in_order[0] == RUN.format("harness") and in_order[-1] == RUN.format("default")
    for before, after in itertools.pairwise(in_order):
        assert ran[before]["end"] <= ran[after]["start"]


def test_a_scenario_starts_on_an_idle_worker_the_longest_first():
    collection, seconds = _collection()
    ran = simulate(collection, seconds)
    runs = [RUN.format(name) for name in _scenarios()]
    floating = [nodeid for nodeid in runs if group_of(nodeid) != "molecule-cgroup2"]
    by_start = sorted(floating, key=lambda nodeid: (ran[nodeid]["start"], -seconds[nodeid]))  # two start at once
    assert by_start == sorted(floating, key=lambda nodeid: -seconds[nodeid])
    for nodeid in floating:
        # nothing else was running on its worker: the scenario did not wait behind another one
        worker, start = ran[nodeid]["worker"], ran[nodeid]["start"]
        others = [o for o, r in ran.items() if o != nodeid and r["worker"] == worker and r["start"] < start]
        assert all(ran[o]["end"] <= start for o in others), nodeid
    # the workers end close together: no worker idles while a long scenario queues behind another
    ends = {}
    for r in ran.values():
        ends[r["worker"]] = max(ends.get(r["worker"], 0), r["end"])
    assert max(ends.values()) - min(ends.values()) <= max(seconds.values())
    longest = max(floating, key=lambda nodeid: seconds[nodeid])
    assert ran[longest]["worker"] != "gw0"


@pytest.mark.parametrize("up", [[2, 1, 0], [1, 0, 2], [0, 1, 2]])
@pytest.mark.parametrize("names", [["harness"], ["harness", "kubelet"], ["kubelet"], ["default", "fleet", "kubelet"]])
def test_a_narrow_selection_runs_whatever_order_the_workers_came_up_in(names, up):
    """`-k harness` is one work unit for three workers: xdist shuts down the workers it has no unit for, the last
    ones up first; worker 0 stays, as it alone takes the forky scenarios (without that, `-k harness` ran nothing and
    `-k "harness or kubelet"` never ended)."""
    collection = [RUN.format(name) for name in names] + [LEFT.format(name) for name in names]
    ran = simulate(collection, {}, 3, up)
    for name in names:
        if is_cgroup2_scenario(name):
            assert ran[RUN.format(name)]["worker"] == "gw0"
        assert ran[RUN.format(name)]["end"] <= ran[LEFT.format(name)]["start"]


def test_a_scenario_whose_image_is_still_to_build_starts_earlier(monkeypatch):
    """On a new machine molecule/arm64 first builds its image (tests/lanes.py IMAGE_BUILD_SECONDS): its work unit then
    comes before the scenarios that take less than that and the build together."""
    built = work_key("molecule arm64", 1, 3)
    assert built == (SCENARIO_ORDER, -EXPECTED_SECONDS["arm64"])
    monkeypatch.setattr(lanes, "image_missing", lambda image: image == "debian12-arm64")
    missing = work_key("molecule arm64", 1, 3)
    assert missing == (SCENARIO_ORDER, -EXPECTED_SECONDS["arm64"] - lanes.IMAGE_BUILD_SECONDS["debian12-arm64"])
    assert missing < work_key("molecule kubelet", 1, 3) and built > work_key("molecule kubelet", 1, 3)
    # every slow image is one a scenario runs (a name that matches none would never count)
    assert set(lanes.IMAGE_BUILD_SECONDS) <= {image for name in _scenarios() for image in lanes.scenario_images(name)}


def test_scenario_images_are_its_platforms_images_once_each():
    assert lanes.scenario_images("arm64") == ["debian12-arm64"]
    assert lanes.scenario_images("nvidia_driver") == ["debian12", "debian13", "ubuntu2604", "ubuntu2404"]
