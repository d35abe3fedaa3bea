#!/usr/bin/env python3
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Benchmark of site.yml on local node containers: first converge and no-op re-run.

For every strategy (default linear and mitogen), node count (default 1 and 4) and pipelining
setting (default on and off) the benchmark creates fresh node containers bench-node-1..N (bench/nodes.yml: the molecule
node definition, docker and containerd inside), converges them with site.yml, runs site.yml
again (which must change nothing), and removes them. Each run is timed on the wall clock and
its tasks are counted by a tiny callback plugin (bench/callback_plugins/bench_count.py), and
the controller CPU it cost is taken from the kernel's accounting of the ansible-playbook process
tree (user + system seconds of every process it started and reaped: workers, `docker exec`,
mitogen's multiplexer; getrusage(RUSAGE_CHILDREN)). The Docker daemon's own CPU is not in it.

Strategies: `linear` is ansible-core's, over the community.docker.docker connection;
`mitogen` is plugins/strategy/gpunode_mitogen.py (mitogen_linear when mitogen is installed,
linear otherwise) over the short-named `docker` connection that mitogen takes over.
--connection docker_api runs the linear runs over community.docker.docker_api instead.

Prints a table and writes the results as JSON to bench/results/<timestamp>.json.

Targets printed next to the results:
  - no-op re-run of one node <= 10 s and <= 60 tasks;
  - N nodes <= 1.3x the time of one node (per run kind and pipelining setting), with forks >= N.

Needs a Docker engine and the node image (tests/fixtures/images/build-node-image.sh debian12,
which `bash scripts/test.sh` or `bash scripts/demo.sh` build). The GPU roles are forced the way
the embedded default inventory forces them: inventories/local/group_vars is copied into the
generated inventory (--group-vars).

    .venv/bin/python bench/provision.py                    # 1 and 4 nodes, pipelining on and off, both strategies
    .venv/bin/python bench/provision.py --nodes 1 --pipelining on --strategy linear
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
NODE_PREFIX = "bench-node-"
NOOP_TARGET_S = 10.0
NOOP_TARGET_TASKS = 60
STRATEGIES = {"linear": "linear", "mitogen": "gpunode_mitogen"}
CONNECTIONS = {"docker": "community.docker.docker", "docker_api": "community.docker.docker_api"}
SCALE_TARGET = 1.3


@dataclass
class Run:
    nodes: int
    pipelining: bool
    kind: str  # "converge" or "no-op"
    wall_s: float
    rc: int
    tasks: int  # tasks and handlers started, each once however many hosts ran it
    task_results: int  # results over all hosts (ok + changed + skipped + failed + ...)
    changed: int
    failed: int
    log: str
    results: dict = field(default_factory=dict)
    strategy: str = "linear"
    connection: str = "community.docker.docker"
    cpu_s: float = 0.0  # controller CPU (user + system) of the ansible-playbook process tree

    @property
    def s_per_task(self) -> float:
        return self.wall_s / self.tasks if self.tasks else 0.0

    @property
    def cpu_s_per_node(self) -> float:
        return self.cpu_s / self.nodes if self.nodes else 0.0

    @property
    def label(self) -> str:
        return f"pipelining {'on' if self.pipelining else 'off'}, {self.strategy}"


@dataclass
class Target:
    name: str
    limit_s: float
    actual_s: float
    passed: bool
    unit: str = "s"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(
            "Time site.yml on local node containers: first converge and no-op re-run, on 1 and N nodes, "
            "with Ansible pipelining (ANSIBLE_PIPELINING) on and off. Needs a Docker engine and the node image."
        ),
        epilog=(
            f"Targets: no-op re-run of one node <= {NOOP_TARGET_S:g} s; N nodes <= {SCALE_TARGET:g}x one node. "
            "Results: bench/results/<timestamp>.json."
        ),
    )
    parser.add_argument(
        "--nodes",
        default="1,4",
        help="comma-separated node counts to run; each count gets fresh nodes (default: 1,4)",
    )
    parser.add_argument(
        "--pipelining",
        default="on,off",
        help="comma-separated ANSIBLE_PIPELINING settings to run: on, off (default: on,off)",
    )
    parser.add_argument(
        "--strategy",
        default="linear,mitogen",
        help="comma-separated strategies to run: linear (ansible-core), mitogen (plugins/strategy/gpunode_mitogen.py, "
        "linear when mitogen is not installed) (default: linear,mitogen)",
    )
    parser.add_argument(
        "--connection",
        default="docker",
        choices=sorted(CONNECTIONS),
        help="connection of the linear runs: docker (community.docker.docker, `docker exec`) or docker_api "
        "(community.docker.docker_api, the Docker API from Python); mitogen runs always use its own docker "
        "connection (default: docker)",
    )
    parser.add_argument(
        "--forks", type=int, default=0, help="ansible forks (default: the largest node count, at least 4)"
    )
    parser.add_argument("--image", default="gpunode:debian12", help="node image (default: gpunode:debian12)")
    parser.add_argument("--playbook", default="site.yml", help="playbook to time (default: site.yml)")
    parser.add_argument(
        "--group-vars",
        default=str(ROOT / "inventories" / "local" / "group_vars"),
        help="group_vars directory copied into the generated inventory, which forces the GPU roles on GPU-less "
        "nodes (default: inventories/local/group_vars)",
    )
    parser.add_argument(
        "--results-dir", default=str(BENCH / "results"), help="where the JSON and the logs go (default: bench/results)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the node containers of the last run")
    args = parser.parse_args(argv)
    try:
        args.node_counts = sorted({int(n) for n in args.nodes.split(",") if n.strip()})
    except ValueError:
        parser.error(f"--nodes must be comma-separated numbers, got {args.nodes!r}")
    if not args.node_counts or min(args.node_counts) < 1:
        parser.error("--nodes needs at least one count of 1 or more")
    settings = [p.strip().lower() for p in args.pipelining.split(",") if p.strip()]
    if not settings or set(settings) - {"on", "off"}:
        parser.error(f"--pipelining takes on and/or off, got {args.pipelining!r}")
    args.pipelining_settings = [p == "on" for p in dict.fromkeys(settings)]
    strategies = [p.strip().lower() for p in args.strategy.split(",") if p.strip()]
    if not strategies or set(strategies) - set(STRATEGIES):
        parser.error(f"--strategy takes linear and/or mitogen, got {args.strategy!r}")
    args.strategies = list(dict.fromkeys(strategies))
    args.forks = args.forks or max(4, *args.node_counts)
    if args.forks < max(args.node_counts):
        parser.error(f"--forks {args.forks} is below the largest node count {max(args.node_counts)}")
    return args


def node_names(count: int) -> list[str]:
    return [f"{NODE_PREFIX}{i}" for i in range(1, count + 1)]


def connection_for(strategy: str, connection: str = "docker") -> str:
    """mitogen takes over the short-named docker connection only; linear runs use the collection's name."""
    return "docker" if strategy == "mitogen" else CONNECTIONS[connection]


def write_inventory(
    directory: Path, names: list[str], group_vars: Path, connection: str = "community.docker.docker"
) -> Path:
    """hosts.yml with the nodes in gpu_nodes (docker connection), plus a copy of group_vars."""
    lines = ["---", "all:", "  children:", "    gpu_nodes:", "      hosts:"]
    for name in names:
        lines += [f"        {name}:", f"          ansible_connection: {connection}"]
        if connection == "docker":
            # mitogen's interpreter discovery fails on these nodes: name the interpreter
            lines.append("          ansible_python_interpreter: /usr/bin/python3")
    (directory / "hosts.yml").write_text("\n".join(lines) + "\n")
    if group_vars.is_dir():
        shutil.copytree(group_vars, directory / "group_vars", dirs_exist_ok=True)
    (directory / "host_vars").mkdir(exist_ok=True)  # bench/nodes.yml writes each node's stand-in key here
    return directory


def ansible_env(pipelining: bool, forks: int, stats_file: Path, strategy: str = "linear") -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "ANSIBLE_STRATEGY": STRATEGIES[strategy],
            "ANSIBLE_PIPELINING": "True" if pipelining else "False",
            "ANSIBLE_FORKS": str(forks),
            "ANSIBLE_CALLBACK_PLUGINS": f"{ROOT / 'plugins' / 'callback'}:{BENCH / 'callback_plugins'}",
            "ANSIBLE_CALLBACKS_ENABLED": "bench_count",
            "ANSIBLE_NOCOLOR": "1",
            "BENCH_STATS_FILE": str(stats_file),
        }
    )
    return env


def ansible_playbook() -> str:
    candidate = Path(sys.executable).parent / "ansible-playbook"
    return str(candidate) if candidate.exists() else "ansible-playbook"


def children_cpu_s() -> float:
    """User + system seconds of every terminated and reaped descendant of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_playbook(args: list[str], env: dict[str, str], log: Path) -> tuple[int, float, float]:
    """Run ansible-playbook; return its exit status, wall seconds and the CPU seconds of its process tree."""
    cpu_before = children_cpu_s()
    start = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        rc = subprocess.run(
            [ansible_playbook(), *args], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, check=False
        ).returncode
    return rc, time.monotonic() - start, children_cpu_s() - cpu_before


def remove_nodes(names: list[str]) -> None:
    subprocess.run(["docker", "rm", "-f", "-v", *names], capture_output=True, check=False)


def timed_run(
    kind: str,
    count: int,
    pipelining: bool,
    inventory: Path,
    args: argparse.Namespace,
    logs: Path,
    stamp: str,
    strategy: str = "linear",
) -> Run:
    tag = f"{count}n-{'pipe' if pipelining else 'nopipe'}-{strategy}-{kind}"
    stats = logs / f"{stamp}-{tag}.stats.json"
    log = logs / f"{stamp}-{tag}.log"
    rc, wall, cpu = run_playbook(
        ["-i", str(inventory), args.playbook], ansible_env(pipelining, args.forks, stats, strategy), log
    )
    counted = json.loads(stats.read_text()) if stats.exists() else {}
    results = counted.get("results", {})
    return Run(
        nodes=count,
        pipelining=pipelining,
        kind=kind,
        wall_s=round(wall, 2),
        rc=rc,
        tasks=counted.get("tasks_started", 0) + counted.get("handlers_started", 0),
        task_results=sum(results.values()),
        changed=results.get("changed", 0),
        failed=results.get("failed", 0) + results.get("unreachable", 0),
        log=str(log.relative_to(ROOT) if log.is_relative_to(ROOT) else log),
        results=results,
        strategy=strategy,
        connection=connection_for(strategy, getattr(args, "connection", "docker")),
        cpu_s=round(cpu, 2),
    )


def scenario(
    count: int,
    pipelining: bool,
    args: argparse.Namespace,
    logs: Path,
    stamp: str,
    last: bool,
    strategy: str = "linear",
) -> list[Run]:
    names = node_names(count)
    runs: list[Run] = []
    remove_nodes(names)  # leftovers of an interrupted run
    with tempfile.TemporaryDirectory(prefix="bench-inventory-") as tmp:
        inventory = write_inventory(Path(tmp), names, Path(args.group_vars), connection_for(strategy, args.connection))
        label = f"{count} node(s), pipelining {'on' if pipelining else 'off'}, {strategy}"
        try:
            print(f"==> {label}: creating {', '.join(names)}", flush=True)
            setup_log = logs / f"{stamp}-{count}n-{'pipe' if pipelining else 'nopipe'}-{strategy}-nodes.log"
            rc, _, _ = run_playbook(
                [
                    "-i",
                    str(inventory),
                    str(BENCH / "nodes.yml"),
                    "-e",
                    json.dumps({"nodes": names, "bench_image": args.image}),
                ],
                ansible_env(True, args.forks, logs / f"{stamp}-nodes.stats.json"),
                setup_log,
            )
            if rc != 0:
                raise SystemExit(f"creating the nodes failed (exit {rc}); see {setup_log}")
            for kind in ("converge", "no-op"):
                print(f"==> {label}: {kind}", flush=True)
                run = timed_run(kind, count, pipelining, inventory, args, logs, stamp, strategy)
                runs.append(run)
                print(
                    f"    {run.wall_s:.1f} s, {run.tasks} tasks, {run.cpu_s_per_node:.1f} CPU s/node, "
                    f"rc {run.rc} ({run.log})",
                    flush=True,
                )
                if run.rc != 0:
                    break
        finally:
            if not (args.keep and last):
                remove_nodes(names)
    return runs


def evaluate(runs: list[Run]) -> list[Target]:
    targets = []
    for run in runs:
        if run.kind == "no-op" and run.nodes == 1:
            targets.append(
                Target(
                    f"no-op re-run, 1 node, {run.label}",
                    NOOP_TARGET_S,
                    run.wall_s,
                    run.rc == 0 and run.wall_s <= NOOP_TARGET_S,
                )
            )
            targets.append(
                Target(
                    f"no-op re-run tasks, 1 node, {run.label}",
                    NOOP_TARGET_TASKS,
                    run.tasks,
                    run.rc == 0 and run.tasks <= NOOP_TARGET_TASKS,
                    unit="tasks",
                )
            )
    for run in runs:
        if run.nodes == 1:
            continue
        base = next(
            (
                r
                for r in runs
                if r.nodes == 1 and r.kind == run.kind and r.pipelining == run.pipelining and r.strategy == run.strategy
            ),
            None,
        )
        if base is None:
            continue
        limit = round(base.wall_s * SCALE_TARGET, 2)
        targets.append(
            Target(
                f"{run.kind}, {run.nodes} nodes vs 1, {run.label}",
                limit,
                run.wall_s,
                run.rc == 0 and run.wall_s <= limit,
            )
        )
    return targets


def render(runs: list[Run], targets: list[Target]) -> str:
    header = (
        "nodes",
        "pipelining",
        "strategy",
        "run",
        "wall s",
        "tasks",
        "results",
        "s/task",
        "CPU s/node",
        "changed",
        "failed",
        "rc",
    )
    rows = [
        (
            str(r.nodes),
            "on" if r.pipelining else "off",
            r.strategy,
            r.kind,
            f"{r.wall_s:.1f}",
            str(r.tasks),
            str(r.task_results),
            f"{r.s_per_task:.2f}",
            f"{r.cpu_s_per_node:.1f}",
            str(r.changed),
            str(r.failed),
            str(r.rc),
        )
        for r in runs
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    lines.append("targets:")
    for t in targets:
        if t.unit == "s":
            measured = f"{t.actual_s:.1f} s (limit {t.limit_s:.1f} s)"
        else:
            measured = f"{t.actual_s:g} {t.unit} (limit {t.limit_s:g} {t.unit})"
        lines.append(f"  {'PASS' if t.passed else 'FAIL'}  {t.name}: {measured}")
    for r in runs:
        if r.kind == "no-op" and r.changed:
            lines.append(f"  NOTE  the no-op re-run on {r.nodes} node(s), {r.label} changed {r.changed} task result(s)")
    return "\n".join(lines)


def versions() -> dict[str, str]:
    out = subprocess.run([ansible_playbook(), "--version"], capture_output=True, text=True, check=False).stdout
    docker = subprocess.run(
        ["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True, text=True, check=False
    ).stdout
    return {
        "ansible": out.splitlines()[0] if out else "",
        "docker": docker.strip(),
        "python": platform.python_version(),
        "host": platform.node(),
        "cpus": str(os.cpu_count()),
        "mitogen": mitogen_version(),
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def mitogen_version() -> str:
    try:
        import mitogen  # optional; only reported
    except ImportError:
        return "not installed"
    return ".".join(str(p) for p in mitogen.__version__)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        print("ERROR: no Docker engine answers ('docker info' failed): start one, then rerun.", file=sys.stderr)
        return 2
    image = subprocess.run(["docker", "image", "inspect", args.image], capture_output=True, check=False)
    if image.returncode != 0:
        print(
            f"ERROR: node image {args.image} is missing: build it with "
            f"tests/fixtures/images/build-node-image.sh {args.image.split(':')[-1]}",
            file=sys.stderr,
        )
        return 2
    results_dir = Path(args.results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    scenarios = [(s, p, n) for s in args.strategies for p in args.pipelining_settings for n in args.node_counts]
    load_before = os.getloadavg()
    runs: list[Run] = []
    for index, (strategy, pipelining, count) in enumerate(scenarios):
        runs += scenario(
            count, pipelining, args, results_dir, stamp, last=index == len(scenarios) - 1, strategy=strategy
        )
    targets = evaluate(runs)
    print()
    print(render(runs, targets))
    load_after = os.getloadavg()
    print(
        f"\nload average (1/5/15 min) before: {' '.join(f'{x:.2f}' for x in load_before)}, "
        f"after: {' '.join(f'{x:.2f}' for x in load_after)} on {os.cpu_count()} CPUs"
    )
    document = {
        "timestamp": stamp,
        "playbook": args.playbook,
        "image": args.image,
        "forks": args.forks,
        "versions": versions(),
        "load_average_before": [round(x, 2) for x in load_before],
        "runs": [
            asdict(r) | {"s_per_task": round(r.s_per_task, 3), "cpu_s_per_node": round(r.cpu_s_per_node, 2)}
            for r in runs
        ],
        "targets": [asdict(t) for t in targets],
    }
    path = results_dir / f"{stamp}.json"
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nresults: {path}")
    return 0 if all(r.rc == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
