"""bench/provision.py and its callback, without Docker: arguments, inventory, targets, table, task counts."""

from __future__ import annotations

import importlib.util
import json
import sys
from types import SimpleNamespace

import pytest
import yaml
from conftest import ROOT, load_module


def _load_registered(name: str, path):
    """Import a script whose dataclasses need their module in sys.modules."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


provision = _load_registered("_bench_provision_under_test", ROOT / "bench" / "provision.py")
bench_count = load_module("bench_count", subdir="bench/callback_plugins")


def run(nodes, kind, wall, pipelining=True, rc=0, changed=0, tasks=100, strategy="linear", cpu_s=0.0):
    return provision.Run(
        nodes=nodes,
        pipelining=pipelining,
        kind=kind,
        wall_s=wall,
        rc=rc,
        tasks=tasks,
        task_results=tasks * nodes,
        changed=changed,
        failed=0,
        log="bench/results/x.log",
        strategy=strategy,
        cpu_s=cpu_s,
    )


def test_defaults_run_one_and_four_nodes_with_pipelining_on_and_off_and_enough_forks():
    args = provision.parse_args([])
    assert args.node_counts == [1, 4]
    assert args.pipelining_settings == [True, False]
    assert args.forks == 4
    assert args.playbook == "site.yml"
    assert args.strategies == ["linear", "mitogen"]
    assert args.connection == "docker"


def test_forks_follow_the_largest_node_count():
    assert provision.parse_args(["--nodes", "1,8", "--pipelining", "off"]).forks == 8
    assert provision.parse_args(["--nodes", "1,8", "--pipelining", "off"]).pipelining_settings == [False]


@pytest.mark.parametrize(
    "argv",
    [
        ["--nodes", "x"],
        ["--nodes", "0"],
        ["--pipelining", "maybe"],
        ["--nodes", "1,6", "--forks", "4"],
        ["--strategy", "free"],
        ["--connection", "ssh"],
    ],
)
def test_bad_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        provision.parse_args(argv)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_inventory_puts_the_nodes_in_gpu_nodes_over_docker_and_copies_group_vars(tmp_path):
    group_vars = tmp_path / "gv" / "all"
    group_vars.mkdir(parents=True)
    (group_vars / "demo.yml").write_text("nvidia_driver_force: true\n")
    inventory = tmp_path / "inv"
    inventory.mkdir()
    provision.write_inventory(inventory, provision.node_names(2), tmp_path / "gv")
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())["all"]["children"]["gpu_nodes"]["hosts"]
    assert hosts == {
        "bench-node-1": {"ansible_connection": "community.docker.docker"},
        "bench-node-2": {"ansible_connection": "community.docker.docker"},
    }
    assert (inventory / "group_vars" / "all" / "demo.yml").read_text() == "nvidia_driver_force: true\n"


@pytest.mark.parametrize(
    ("strategy", "connection", "expected"),
    [
        ("linear", "docker", {"ansible_connection": "community.docker.docker"}),
        ("linear", "docker_api", {"ansible_connection": "community.docker.docker_api"}),
        # mitogen takes over the short name only, and its interpreter discovery fails on the nodes
        ("mitogen", "docker", {"ansible_connection": "docker", "ansible_python_interpreter": "/usr/bin/python3"}),
    ],
)
def test_inventory_connection_follows_the_strategy(tmp_path, strategy, connection, expected):
    provision.write_inventory(tmp_path, ["n1"], tmp_path / "none", provision.connection_for(strategy, connection))
    hosts = yaml.safe_load((tmp_path / "hosts.yml").read_text())["all"]["children"]["gpu_nodes"]["hosts"]
    assert hosts == {"n1": expected}


def test_environment_sets_pipelining_forks_and_the_counting_callback(tmp_path):
    env = provision.ansible_env(False, 4, tmp_path / "s.json")
    assert env["ANSIBLE_PIPELINING"] == "False"
    assert env["ANSIBLE_FORKS"] == "4"
    assert env["ANSIBLE_CALLBACKS_ENABLED"] == "bench_count"
    assert env["ANSIBLE_CALLBACK_PLUGINS"].endswith("bench/callback_plugins")
    assert env["BENCH_STATS_FILE"] == str(tmp_path / "s.json")
    assert env["ANSIBLE_STRATEGY"] == "linear"
    assert provision.ansible_env(True, 4, tmp_path / "s.json", "mitogen")["ANSIBLE_STRATEGY"] == "gpunode_mitogen"


def test_run_playbook_counts_the_cpu_of_the_whole_process_tree(tmp_path, monkeypatch):
    """A child that burns CPU in a grandchild: the grandchild's seconds are in the figure."""
    script = tmp_path / "ansible-playbook"
    script.write_text(
        "#!/bin/sh\npython3 -c 'import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass'\n"
    )
    script.chmod(0o755)
    monkeypatch.setattr(provision, "ansible_playbook", lambda: str(script))
    rc, wall, cpu = provision.run_playbook([], {}, tmp_path / "log")
    assert rc == 0
    assert 0.45 <= cpu <= wall + 0.1


def test_targets_noop_under_ten_seconds_and_four_nodes_within_1_3x():
    runs = [run(1, "converge", 100.0), run(1, "no-op", 9.5), run(4, "converge", 131.0), run(4, "no-op", 12.0)]
    targets = {t.name: t for t in provision.evaluate(runs)}
    assert targets["no-op re-run, 1 node, pipelining on, linear"].passed
    assert not targets["no-op re-run tasks, 1 node, pipelining on, linear"].passed  # 100 tasks > 60
    converge = targets["converge, 4 nodes vs 1, pipelining on, linear"]
    assert converge.limit_s == 130.0 and not converge.passed
    noop = targets["no-op, 4 nodes vs 1, pipelining on, linear"]
    assert noop.limit_s == pytest.approx(12.35) and noop.passed


def test_each_strategy_is_judged_against_its_own_one_node_run():
    runs = [
        run(1, "no-op", 20.0),
        run(1, "no-op", 5.0, tasks=60, strategy="mitogen"),
        run(4, "no-op", 6.0, strategy="mitogen"),
    ]
    targets = {t.name: t for t in provision.evaluate(runs)}
    assert targets["no-op re-run tasks, 1 node, pipelining on, mitogen"].passed
    assert targets["no-op, 4 nodes vs 1, pipelining on, mitogen"].limit_s == 6.5
    assert "no-op, 4 nodes vs 1, pipelining on, linear" not in targets


def test_a_failed_run_misses_its_target_and_slow_noop_fails():
    targets = provision.evaluate(
        [run(1, "no-op", 3.0, rc=2, tasks=50), run(1, "no-op", 10.5, pipelining=False, tasks=50)]
    )
    assert [t.passed for t in targets] == [False, False, False, True]


def test_table_lists_each_run_the_targets_and_a_noop_that_changed_something():
    runs = [run(1, "converge", 100.0, cpu_s=61.0), run(4, "no-op", 8.0, changed=2, cpu_s=20.0)]
    text = provision.render(runs, provision.evaluate(runs))
    lines = text.splitlines()
    assert lines[0].split() == [
        "nodes",
        "pipelining",
        "strategy",
        "run",
        "wall",
        "s",
        "tasks",
        "results",
        "s/task",
        "CPU",
        "s/node",
        "changed",
        "failed",
        "rc",
    ]
    assert lines[2].split() == ["1", "on", "linear", "converge", "100.0", "100", "100", "1.00", "61.0", "0", "0", "0"]
    assert lines[3].split()[8] == "5.0"  # 20 CPU seconds over 4 nodes
    assert "  NOTE  the no-op re-run on 4 node(s), pipelining on, linear changed 2 task result(s)" in lines
    runs = [run(1, "no-op", 8.0, tasks=243)]
    lines = provision.render(runs, provision.evaluate(runs)).splitlines()
    assert "  PASS  no-op re-run, 1 node, pipelining on, linear: 8.0 s (limit 10.0 s)" in lines
    assert "  FAIL  no-op re-run tasks, 1 node, pipelining on, linear: 243 tasks (limit 60 tasks)" in lines


def _result(changed=False):
    return SimpleNamespace(_result={"changed": changed})


def test_callback_counts_tasks_once_and_results_per_host(tmp_path, monkeypatch):
    stats_file = tmp_path / "stats.json"
    monkeypatch.setenv("BENCH_STATS_FILE", str(stats_file))
    callback = bench_count.CallbackModule()
    for _task in range(3):
        callback.v2_playbook_on_task_start(None, False)
        callback.v2_runner_on_ok(_result())
        callback.v2_runner_on_ok(_result(changed=True))
    callback.v2_playbook_on_handler_task_start(None)
    callback.v2_runner_on_skipped(_result())
    callback.v2_runner_on_failed(_result(), ignore_errors=True)
    stats = SimpleNamespace(processed={"n1": 1, "n2": 1}, summarize=lambda host: {"ok": 3, "changed": 1})
    callback.v2_playbook_on_stats(stats)
    document = json.loads(stats_file.read_text())
    assert document["tasks_started"] == 3
    assert document["handlers_started"] == 1
    assert document["results"] == {"changed": 3, "ignored": 1, "ok": 3, "skipped": 1}
    assert document["recap"] == {"n1": {"ok": 3, "changed": 1}, "n2": {"ok": 3, "changed": 1}}
