"""bench/provision.py and its callback, without Docker: arguments, inventory, targets, table, task counts."""

from __future__ import annotations

import importlib.util
import json
import subprocess
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


def run(nodes, kind, wall, pipelining=True, rc=0, changed=0, tasks=100, strategy="linear", cpu_s=0.0, **extra):
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
        **extra,
    )


def test_defaults_run_one_and_four_nodes_with_pipelining_on_and_off_and_enough_forks():
    args = provision.parse_args([])
    assert args.node_counts == [1, 4]
    assert args.pipelining_settings == [True, False]
    assert args.forks == 4
    assert args.playbook == "site.yml"
    assert args.strategies == ["linear", "mitogen"]
    assert args.connection == "docker"
    assert args.converged is False


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
        ["--reuse-converged"],
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
    # ansible.cfg's callbacks run as in a user's run (the plugin warm-up), then the counter
    assert env["ANSIBLE_CALLBACKS_ENABLED"] == "gpunode.provisioning.plugin_warmup,bench_count"
    assert env["ANSIBLE_CALLBACK_PLUGINS"].endswith("bench/callback_plugins")
    assert env["BENCH_STATS_FILE"] == str(tmp_path / "s.json")
    assert env["ANSIBLE_STRATEGY"] == "linear"
    assert provision.ansible_env(True, 4, tmp_path / "s.json", "mitogen")["ANSIBLE_STRATEGY"] == "gpunode_mitogen"


def _fake_ansible_playbook(tmp_path, monkeypatch, script: str) -> None:
    """An ansible-playbook that is the shell ``script``, for run_playbook to start."""
    path = tmp_path / "ansible-playbook"
    path.write_text(f"#!/bin/sh\n{script}")
    path.chmod(0o755)
    monkeypatch.setattr(provision, "ansible_playbook", lambda: str(path))


def test_run_playbook_counts_the_cpu_of_the_whole_process_tree(tmp_path, monkeypatch):
    """A child that burns CPU in a grandchild: the grandchild's seconds are in the figure."""
    _fake_ansible_playbook(
        tmp_path,
        monkeypatch,
        "python3 -c 'import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass'\n",
    )
    rc, wall, cpu = provision.run_playbook([], {}, tmp_path / "log")
    assert rc == 0
    assert 0.45 <= cpu <= wall + 0.1


def test_the_controller_peak_memory_is_the_largest_process_of_the_tree(tmp_path, monkeypatch):
    """Issue 47: the table gives the controller's peak memory; a grandchild that holds 200 MiB shows in it."""
    _fake_ansible_playbook(
        tmp_path,
        monkeypatch,
        "python3 -c 'block = bytearray(200 << 20); block[::4096] = b\"x\" * len(block[::4096])'\nexit 3\n",
    )
    rc, _wall, _cpu, peak = provision.run_playbook_measured([], {}, tmp_path / "log")
    assert rc == 3
    assert 200 <= peak < 400


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
        "node",
        "CPU",
        "s/node",
        "MiB/node",
        "controller",
        "MiB",
        "load",
        "1m",
        "changed",
        "failed",
        "rc",
    ]
    assert lines[2].split() == [
        "1",
        "on",
        "linear",
        "converge",
        "100.0",
        "100",
        "100",
        "1.00",
        "61.0",
        "-",
        "-",
        "-",
        "-",
        "0",
        "0",
        "0",
    ]
    assert lines[3].split()[8] == "5.0"  # 20 CPU seconds over 4 nodes
    assert "  NOTE  the no-op re-run on 4 node(s), pipelining on, linear changed 2 task result(s)" in lines
    runs = [run(1, "no-op", 8.0, tasks=243)]
    lines = provision.render(runs, provision.evaluate(runs)).splitlines()
    assert "  PASS  no-op re-run, 1 node, pipelining on, linear: 8.0 s (limit 10.0 s)" in lines
    assert "  FAIL  no-op re-run tasks, 1 node, pipelining on, linear: 243 tasks (limit 60 tasks)" in lines


def test_converged_mode_is_a_flag_and_takes_the_same_counts():
    args = provision.parse_args(["--converged", "--nodes", "16,1,8,4", "--pipelining", "on"])
    assert args.converged is True
    assert args.node_counts == [1, 4, 8, 16]
    assert args.forks == 16
    assert args.pipelining_settings == [True]
    assert args.reuse_converged is False
    assert provision.parse_args(["--converged", "--reuse-converged"]).reuse_converged is True


def _cgroup(root, *parts, **files):
    directory = root.joinpath(*parts)
    directory.mkdir(parents=True)
    for name, text in files.items():
        (directory / name.replace("__", ".")).write_text(text)
    return directory


def test_cgroup_cpu_and_memory_are_read_from_cgroup_v1_and_v2(tmp_path):
    v1 = _cgroup(tmp_path, "cpuacct", "docker", "abc", cpuacct__usage="2500000000\n")
    v2 = _cgroup(
        tmp_path,
        "system.slice",
        "docker-def.scope",
        cpu__stat="usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n",
        memory__current=str(300 * 2**20),
        memory__stat=f"anon 1\ninactive_file {100 * 2**20}\n",
    )
    mem_v1 = _cgroup(
        tmp_path,
        "memory",
        "docker",
        "abc",
        memory__usage_in_bytes=str(200 * 2**20),
        memory__stat=f"cache 5\ntotal_inactive_file {50 * 2**20}\n",
    )
    assert provision.read_cgroup_cpu_s(v1) == 2.5
    assert provision.read_cgroup_cpu_s(v2) == 1.5
    assert provision.read_cgroup_mem_mib(mem_v1) == 150.0
    assert provision.read_cgroup_mem_mib(v2) == 200.0
    assert provision.read_cgroup_cpu_s(mem_v1) is None
    assert provision.read_cgroup_mem_mib(v1) is None
    assert v1 in provision.cgroup_dirs("abc", "cpuacct", tmp_path)
    assert v2 in provision.cgroup_dirs("def", "cpuacct", tmp_path)


def _docker_inspect(stdout, rc=0):
    return lambda argv, **kwargs: SimpleNamespace(returncode=rc, stdout=stdout, stderr="")


def test_node_cpu_is_summed_memory_averaged_and_none_when_a_cgroup_is_missing(tmp_path, monkeypatch):
    for container_id, cpu_ns, mem_mib in (("aaa", "1000000000", 100), ("bbb", "3000000000", 300)):
        _cgroup(tmp_path, "cpuacct", "docker", container_id, cpuacct__usage=cpu_ns)
        _cgroup(
            tmp_path,
            "memory",
            "docker",
            container_id,
            memory__usage_in_bytes=str(mem_mib * 2**20),
            memory__stat="total_inactive_file 0\n",
        )
    monkeypatch.setattr(provision.subprocess, "run", _docker_inspect("aaa\nbbb\n"))
    assert provision.nodes_cpu_s(["n1", "n2"], tmp_path) == 4.0
    assert provision.nodes_mem_mib(["n1", "n2"], tmp_path) == 200.0
    monkeypatch.setattr(provision.subprocess, "run", _docker_inspect("aaa\nccc\n"))
    assert provision.nodes_cpu_s(["n1", "n2"], tmp_path) is None  # no cgroup for ccc
    assert provision.nodes_mem_mib(["n1", "n2"], tmp_path) is None
    monkeypatch.setattr(provision.subprocess, "run", _docker_inspect("aaa\n", rc=1))
    assert provision.nodes_cpu_s(["n1", "n2"], tmp_path) is None  # n2 is gone


def test_host_memory_available_is_read_from_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24576000 kB\nMemAvailable:   20480000 kB\n")
    assert provision.mem_available_mib(meminfo) == 20000.0
    assert provision.mem_available_mib(tmp_path / "missing") is None


def test_markdown_table_lists_the_noop_runs_by_strategy_and_node_count():
    runs = [
        run(16, "no-op", 300.0, strategy="mitogen", cpu_s=96.0, node_cpu_s=160.0, mem_mib_per_node=180.4),
        run(1, "converge", 40.0),
        run(4, "no-op", 60.0, cpu_s=32.0, load_before=3.14, load_after=5.0, controller_peak_mib=411.6),
        run(1, "no-op", 17.0, tasks=75, cpu_s=8.4),
        run(8, "no-op", 90.0, rc=2, changed=1, cpu_s=80.0),
    ]
    lines = provision.render_markdown(runs).splitlines()
    assert lines[0].startswith("| strategy | nodes | tasks | changed | wall s | controller CPU s/node |")
    assert lines[2:] == [
        "| linear | 1 | 75 | 0 | 17.0 | 8.4 | - | - | - | - |",
        "| linear | 4 | 100 | 0 | 60.0 | 8.0 | - | - | 412 | 3.1 -> 5.0 |",
        "| linear | 8 | 100 | 1 (rc 2) | 90.0 | 10.0 | - | - | - | - |",
        "| mitogen | 16 | 100 | 0 | 300.0 | 6.0 | 10.0 | 180 | - | - |",
    ]


def test_results_document_records_the_mode_the_seed_and_per_node_figures(monkeypatch):
    monkeypatch.setattr(provision, "versions", lambda: {"ansible": "x"})
    args = provision.parse_args(["--converged", "--nodes", "1,4"])
    runs = [run(4, "no-op", 40.0, cpu_s=30.0, node_cpu_s=20.0, mem_mib_per_node=150.0)]
    seed = run(1, "converge", 50.0, cpu_s=15.0)
    document = json.loads(json.dumps(provision.results_document(args, "T", (1.0, 2.0, 3.0), runs, [], seed)))
    assert document["mode"] == "converged"
    assert document["forks"] == 4
    assert document["seed_converge"]["kind"] == "converge"
    record = document["runs"][0]
    assert (record["cpu_s_per_node"], record["node_cpu_s_per_node"], record["mem_mib_per_node"]) == (7.5, 5.0, 150.0)
    assert provision.results_document(provision.parse_args([]), "T", (0, 0, 0), [], [], None)["mode"] == "fresh"
    assert document["template_cache"] == "warm"
    yardsticks = {"before": 0.11, "after": 0.12}
    document = provision.results_document(args, "T", (1.0, 2.0, 3.0), runs, [], seed, yardsticks)
    assert document["yardstick_cpu_s"] == yardsticks


def test_the_template_cache_of_the_timed_runs_is_the_controllers_an_empty_one_or_none(tmp_path):
    assert provision.parse_args([]).template_cache == "warm"
    shell = {"PATH": "/bin", "GPUNODE_TEMPLATE_CACHE": "off"}
    assert provision.template_cache_env("warm", tmp_path, shell) == {"PATH": "/bin"}
    cold = provision.template_cache_env("cold", tmp_path / "c", shell)
    assert cold == {"PATH": "/bin", "GPUNODE_TEMPLATE_CACHE": str(tmp_path / "c")}
    assert provision.template_cache_env("off", tmp_path, {})["GPUNODE_TEMPLATE_CACHE"] == "off"
    # the variable is the cache's own
    from ansible_collections.gpunode.provisioning.plugins.plugin_utils import template_cache

    assert provision.TEMPLATE_CACHE_ENV == template_cache.ENV
    with pytest.raises(SystemExit):
        provision.parse_args(["--template-cache", "lukewarm"])


def test_the_yardstick_is_the_best_of_its_rounds_and_grows_with_its_work(monkeypatch):
    # a machine's speed: interference only slows a round down, so the fastest round is the figure
    assert provision.yardstick(loops=0, rounds=1) < provision.yardstick(loops=200_000, rounds=1)
    clock = iter([0.0, 3.0, 10.0, 11.0, 20.0, 25.0])
    monkeypatch.setattr(provision.time, "process_time", lambda: next(clock))
    assert provision.yardstick(loops=1, rounds=3) == 1.0


def test_converged_scenario_starts_nodes_once_and_times_each_strategys_noop_on_them(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(provision, "remove_nodes", lambda names: calls.append(("rm", tuple(names))))

    def create(names, inventory, args, log, image, converged=False):
        calls.append(("create", image, converged))
        (inventory / "host_vars" / "bench-node-1.yml").write_text("key: 1\n")

    monkeypatch.setattr(provision, "create_nodes", create)

    def timed(kind, count, pipelining, inventory, args, logs, stamp, strategy="linear", names=None):
        hosts = yaml.safe_load((inventory / "hosts.yml").read_text())["all"]["children"]["gpu_nodes"]["hosts"]
        trusted = (inventory / "host_vars" / "bench-node-1.yml").read_text()
        calls.append(("time", kind, strategy, hosts["bench-node-1"]["ansible_connection"], trusted, tuple(names)))
        return run(count, kind, 1.0, strategy=strategy)

    monkeypatch.setattr(provision, "timed_run", timed)
    args = provision.parse_args(["--converged", "--nodes", "2", "--group-vars", str(tmp_path / "none")])
    runs = provision.scenario(2, True, args, tmp_path, "T", last=True, strategies=["linear", "mitogen"])
    names = ("bench-node-1", "bench-node-2")
    assert calls == [
        ("rm", names),
        ("create", provision.CONVERGED_IMAGE, True),
        ("time", "no-op", "linear", "community.docker.docker", "key: 1\n", names),
        ("time", "no-op", "mitogen", "docker", "key: 1\n", names),
        ("rm", names),
    ]
    assert [(r.kind, r.strategy) for r in runs] == [("no-op", "linear"), ("no-op", "mitogen")]
    calls.clear()
    fresh = provision.parse_args(["--group-vars", str(tmp_path / "none")])
    provision.scenario(2, True, fresh, tmp_path, "T", True, strategies=["mitogen"])
    assert [c[:3] for c in calls if c[0] != "rm"] == [
        ("create", "gpunode:debian12", False),
        ("time", "converge", "mitogen"),
        ("time", "no-op", "mitogen"),
    ]


def test_seed_is_converged_shut_down_committed_and_removed(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(provision, "remove_nodes", lambda names: calls.append(("rm", *names)))
    monkeypatch.setattr(provision, "create_nodes", lambda names, *a, **k: calls.append(("create", *names)))
    rc = {"converge": 0, "commit": 0}
    monkeypatch.setattr(
        provision,
        "timed_run",
        lambda kind, count, *a, **k: run(count, kind, 30.0, rc=rc["converge"]),
    )
    monkeypatch.setattr(
        provision,
        "docker",
        lambda *argv: calls.append(argv) or SimpleNamespace(returncode=rc.get(argv[0], 0), stderr="no space"),
    )
    args = provision.parse_args(["--converged", "--group-vars", str(tmp_path / "none")])
    seed = provision.converge_seed(args, tmp_path, "T")
    assert seed.kind == "converge" and seed.nodes == 1
    assert calls == [
        ("rm", "bench-seed-1"),
        ("create", "bench-seed-1"),
        ("exec", "bench-seed-1", "bash", "-c", provision.SEED_RECORD),
        ("stop", "--time", "60", "bench-seed-1"),
        ("commit", "bench-seed-1", "gpunode-bench:converged"),
        ("rm", "bench-seed-1"),
    ]
    rc["commit"] = 1
    with pytest.raises(SystemExit, match="committing bench-seed-1 to gpunode-bench:converged failed: no space"):
        provision.converge_seed(args, tmp_path, "T")
    rc.update(commit=0, converge=2)
    calls.clear()
    with pytest.raises(SystemExit, match="converging the seed node failed"):
        provision.converge_seed(args, tmp_path, "T")
    assert ("commit", "bench-seed-1", "gpunode-bench:converged") not in calls
    assert calls[-1] == ("rm", "bench-seed-1")


def test_seed_record_is_valid_bash_that_names_the_seed():
    checked = subprocess.run(["bash", "-n", "-c", provision.SEED_RECORD], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr
    assert "grep -lIF -- bench-seed-1 > /var/lib/gpunode-bench/named-files" in provision.SEED_RECORD


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


def test_the_floor_starts_as_many_tasks_as_site_ymls_noop_path():
    """bench/floor.yml: the minimal facts, then one trivial module a task, as many tasks as site.yml's no-op path counts
    (tests/unit/test_noop_tasks.py), so that the two runs' figures compare task for task."""
    from test_noop_tasks import site_headers

    (play,) = yaml.safe_load((ROOT / "bench" / "floor.yml").read_text())
    assert play["hosts"] == "gpu_nodes" and play["gather_facts"] is False
    first, *rest = play["tasks"]
    assert first["ansible.builtin.setup"] == {"gather_subset": ["min"]}
    assert all(sorted(task) == ["ansible.builtin.ping", "name"] for task in rest)
    assert len(play["tasks"]) == len(site_headers())
