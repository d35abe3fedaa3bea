"""The verify step's playbook runs, shared by the test files (one run on several nodes instead of one per node; the
nodes share nothing a run reads, and each test reads its own node's results, recap line, report and files):

- refused: site.yml without nvidia_container_toolkit_keep_gpu_pod_access on all three nodes (gp-aks after its
  converge with it; gp-cns and gp-gpuop as prepare left them, where false is that variable's default): each refuses;
- converged: gp-cns and gp-gpuop after their device plugin moved to cdi-cri;
- second_run: the same two again;
- door_mutations: one `--tags validate` run with a mutation on each (gp-cns: the plugin back on envvar; gp-gpuop:
  the Operator's config accepting the envvar again), both put back before the next test.

The tests run in stages (`pytest.mark.stage(n)`, unmarked: 1), each stage in file order: 0 on the nodes as prepare
and converge left them (the refusals, the Operator's door open), 1 after the converging run (and gp-aks's migration),
2 the second run, 3 the mutations."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import pytest
import testinfra
from helpers import (
    ENTRIES,
    ENVVAR_KEY,
    OPERATOR_CONFIG,
    RERUN,
    digest,
    rows,
    set_strategy,
    through,
)
from playbook_runner import folded, recap, run_playbook_on_nodes

SITE_NODES = ("gp-cns", "gp-gpuop")  # not in gpu_nodes: the tests run site.yml on them (rerun.yml)


def pytest_configure(config):
    config.addinivalue_line("markers", "stage(n): the verify stage a gpu_pods test runs in (conftest.py)")


def pytest_collection_modifyitems(items):
    def stage(item) -> int:
        marker = item.get_closest_marker("stage")
        return marker.args[0] if marker else 1

    items.sort(key=stage)  # stable: file order within a stage


def node(name: str):
    return testinfra.get_host(f"ansible://{name}", ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"])


@dataclass
class SiteRun:
    returncode: int
    stdout: str
    said: str  # as helpers.said: the callback folds long lines and doubles apostrophes
    recap: dict
    rows: dict  # each node's doctor rows right after this run (validate.json)


def _site(*args: str) -> SiteRun:
    """rerun.yml on both nodes at once (run_playbook_on_nodes' rerun_node_vars is unused: no node has variables of
    its own)."""
    run = run_playbook_on_nodes(RERUN, {name: {} for name in SITE_NODES}, *args)
    said = folded(run).replace("''", "'") + " " + " ".join(run.stderr.split())
    return SiteRun(run.returncode, run.stdout, said, recap(run.stdout), {n: _rows(n) for n in SITE_NODES})


def _rows(name: str) -> dict:
    """The node's doctor rows, or none where the run wrote no report (the tests check the run first)."""
    try:
        return rows(node(name))
    except ValueError:  # no validate.json, or not JSON
        return {}


@dataclass
class Refusal:
    returncode: int
    stdout: str
    recap: dict
    before: dict  # each node's files (helpers.digest) before the run
    plugin_running: dict  # whether each node's stand-in device plugin ran before the run


@pytest.fixture(scope="session")
def refused() -> Refusal:
    """site.yml without nvidia_container_toolkit_keep_gpu_pod_access on the three nodes: each refuses, changing
    nothing (gp-aks after its converge, gp-cns and gp-gpuop with their plugin on envvar)."""
    nodes = {name: node(name) for name in ("gp-aks", *SITE_NODES)}
    running = {name: host.service("gp-standin-device-plugin").is_running for name, host in nodes.items()}
    before = {name: digest(host) for name, host in nodes.items()}
    keep_off = json.dumps({"nvidia_container_toolkit_keep_gpu_pod_access": False})
    run = run_playbook_on_nodes(RERUN, {name: {} for name in nodes}, "-e", keep_off)
    return Refusal(run.returncode, run.stdout, recap(run.stdout), before, running)


@pytest.fixture(scope="session")
def converged() -> SiteRun:
    """Both nodes' first run that converges, after their device plugin moved to cdi-cri."""
    for name in SITE_NODES:
        set_strategy(node(name), "cdi-cri")
    return _site()


@pytest.fixture(scope="session")
def second_run(converged) -> SiteRun:
    return _site()


@dataclass
class DoorMutations:
    run: SiteRun
    reopened: tuple  # gp-gpuop: (ctr's result, NVIDIA's runtime's log) through nvidia-cdi, the envvar accepted again
    operator_config_restored: bool


@pytest.fixture(scope="session")
def door_mutations(second_run) -> DoorMutations:
    """gp-cns's plugin back on envvar and gp-gpuop's Operator config accepting the envvar again, one validate run;
    both put back before any other test runs."""
    cns, gpuop = node("gp-cns"), node("gp-gpuop")
    original = gpuop.file(OPERATOR_CONFIG).content_string
    closed = f"{ENVVAR_KEY} = false"
    assert closed in original
    mutated = original.replace(closed, f"{ENVVAR_KEY} = true")
    set_strategy(cns, "envvar")
    try:
        assert gpuop.run(f"cat > {OPERATOR_CONFIG} <<'EOF'\n{mutated}EOF").rc == 0
        reopened = through(gpuop, ENTRIES["nvidia-cdi"], "reopened")
        run = _site("--tags", "validate")
    finally:
        set_strategy(cns, "cdi-cri")
        gpuop.run(f"cat > {OPERATOR_CONFIG} <<'EOF'\n{original}EOF")
    return DoorMutations(run, reopened, gpuop.file(OPERATOR_CONFIG).content_string == original)
