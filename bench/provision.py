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

--converged times the no-op re-run only, on nodes that were converged once: the benchmark
prepares and converges ONE seed node (bench-seed-1), stops it (a clean shutdown), commits it to a
local image (gpunode-bench:converged) and starts every node count's nodes from that image: systemd
boots them, and their docker, containerd and the stand-in repository come up as on a converged node
after a reboot. docker's and containerd's stores are volumes, which a commit leaves out: the test
image is imported into them again (untimed), then site.yml runs once on all nodes (the timed no-op,
which must report changed=0). This is how 8 or 16 nodes fit on a small machine; the image goes at
the end unless --keep.

Next to the controller CPU each run records the CPU of the node containers themselves (their
cgroup's cpuacct/cpu.stat; nested containers the doctor starts are not in it on a cgroup v1 host),
their memory after the run (cgroup, counted as `docker stats` counts it) and the 1-minute load
average before and after it. Before the first run and after the last the benchmark also times a
fixed piece of pure-Python work on the controller (the yardstick: the best of five, in CPU
seconds): a quiet machine is not always a fast one, and CPU seconds measured at different
yardsticks are not comparable (bench/README.md).

Prints a table, the no-op runs as a Markdown table (bench/README.md, "Fleet scale"), and writes the
results as JSON to bench/results/<timestamp>.json.

Targets printed next to the results:
  - no-op re-run of one node <= 10 s and <= 60 tasks;
  - N nodes <= 1.3x the time of one node (per run kind and pipelining setting), with forks >= N.

Needs a Docker engine and the node image (tests/fixtures/images/build-node-image.sh debian12,
which `bash scripts/test.sh` or `bash scripts/demo.sh` build). The GPU roles are forced the way
the embedded default inventory forces them: inventories/local/group_vars is copied into the
generated inventory (--group-vars).

    .venv/bin/python bench/provision.py                    # 1 and 4 nodes, pipelining on and off, both strategies
    .venv/bin/python bench/provision.py --nodes 1 --pipelining on --strategy linear
    .venv/bin/python bench/provision.py --converged --nodes 1,4,8,16 --pipelining on   # fleet scale
"""

from __future__ import annotations

import argparse
import configparser
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
# GPUNODE_BENCH_NAME: another name for the node containers, so that two checkouts can run the benchmark at once
_NAME = os.environ.get("GPUNODE_BENCH_NAME", "bench")
NODE_PREFIX = f"{_NAME}-node-"
SEED_NODE = f"{_NAME}-seed-1"
CONVERGED_IMAGE = "gpunode-bench:converged"
# What a clone must not keep of the seed, recorded in the seed before the commit (bench/nodes.yml reads it):
# the files the converge wrote the seed's name into (the doctor's report), and the modes of the devices
# (a container has no udev to restore them at boot as the fuse role's rule does on a real node).
SEED_RECORD = f"""set -euo pipefail
mkdir -p /var/lib/gpunode-bench
find /etc /var/lib /srv /opt /usr/local -xdev -type f -size -1024k \\
    ! -path /etc/hostname ! -path /etc/hosts ! -path /etc/resolv.conf -print0 \\
  | xargs -0 grep -lIF -- {SEED_NODE} > /var/lib/gpunode-bench/named-files || true
for device in /dev/fuse; do [ ! -e "$device" ] || stat -c '%a %n' "$device"; done > /var/lib/gpunode-bench/device-modes
: > /etc/machine-id
"""
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
    controller_peak_mib: float | None = None  # the largest resident set of a controller process (run_playbook_measured)
    node_cpu_s: float | None = None  # CPU of the node containers' cgroups during the run, all nodes
    mem_mib_per_node: float | None = None  # mean memory of a node container right after the run
    host_mem_available_mib: float | None = None  # the host's MemAvailable right after the run
    load_before: float | None = None  # 1-minute load average when the run started
    load_after: float | None = None

    @property
    def s_per_task(self) -> float:
        return self.wall_s / self.tasks if self.tasks else 0.0

    @property
    def cpu_s_per_node(self) -> float:
        return self.cpu_s / self.nodes if self.nodes else 0.0

    @property
    def node_cpu_s_per_node(self) -> float | None:
        return None if self.node_cpu_s is None or not self.nodes else self.node_cpu_s / self.nodes

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
    parser.add_argument(
        "--template-cache",
        default="warm",
        choices=TEMPLATE_CACHE_MODES,
        help="the compiled-template cache of the timed runs (plugins/plugin_utils/template_cache.py): warm, the "
        "controller's own (what the runs before left there; a re-run from the same controller); cold, an empty one "
        "for each run (an AWX job in a fresh execution environment); off (default: warm)",
    )
    parser.add_argument(
        "--converged",
        action="store_true",
        help=f"converge one seed node once, commit it to {CONVERGED_IMAGE} and time only the no-op re-run on "
        "nodes started from that image (each node count gets fresh nodes); for 8, 16 or more nodes",
    )
    parser.add_argument(
        "--reuse-converged",
        action="store_true",
        help=f"with --converged: start the nodes from the {CONVERGED_IMAGE} an earlier --keep left instead of "
        "converging a seed node again",
    )
    parser.add_argument(
        "--keep", action="store_true", help=f"keep the node containers of the last run (and {CONVERGED_IMAGE})"
    )
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
    if args.reuse_converged and not args.converged:
        parser.error("--reuse-converged goes with --converged")
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


def project_callbacks() -> list[str]:
    """The callbacks ansible.cfg enables (callbacks_enabled): the benchmark runs them as a user's run does."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "ansible.cfg")
    return [
        name.strip() for name in parser.get("defaults", "callbacks_enabled", fallback="").split(",") if name.strip()
    ]


# The compiled-template cache's modes (--template-cache) and the variable that sets it for a run.
TEMPLATE_CACHE_MODES = ("warm", "cold", "off")
TEMPLATE_CACHE_ENV = "GPUNODE_TEMPLATE_CACHE"


def template_cache_env(mode: str, directory: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` for a timed run with the template cache ``mode``: cold runs get ``directory`` (empty), warm ones the
    controller's own (whatever the shell's environment said)."""
    env = {name: value for name, value in env.items() if name != TEMPLATE_CACHE_ENV}
    if mode == "off":
        env[TEMPLATE_CACHE_ENV] = "off"
    elif mode == "cold":
        env[TEMPLATE_CACHE_ENV] = str(directory)
    return env


def ansible_env(pipelining: bool, forks: int, stats_file: Path, strategy: str = "linear") -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "ANSIBLE_STRATEGY": STRATEGIES[strategy],
            "ANSIBLE_PIPELINING": "True" if pipelining else "False",
            "ANSIBLE_FORKS": str(forks),
            "ANSIBLE_CALLBACK_PLUGINS": str(BENCH / "callback_plugins"),
            # the environment replaces ansible.cfg's list: the project's callbacks, then the counter
            "ANSIBLE_CALLBACKS_ENABLED": ",".join([*project_callbacks(), "bench_count"]),
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
    rc, wall, cpu, _peak = run_playbook_measured(args, env, log)
    return rc, wall, cpu


def run_playbook_measured(args: list[str], env: dict[str, str], log: Path) -> tuple[int, float, float, float]:
    """run_playbook, and the controller's peak memory: the largest resident set of a process of its tree, in MiB
    (the kernel's maxrss of the reaped tree: the ansible-playbook process itself, whose forked workers share its
    pages)."""
    cpu_before = children_cpu_s()
    start = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen([ansible_playbook(), *args], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        _pid, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, time.monotonic() - start, children_cpu_s() - cpu_before, usage.ru_maxrss / 1024


def cgroup_dirs(container_id: str, controller: str, root: Path = Path("/sys/fs/cgroup")) -> list[Path]:
    """Where the kernel accounts a container: cgroup v1 (cgroupfs or systemd driver), then v2."""
    return [
        root / controller / "docker" / container_id,
        root / controller / "system.slice" / f"docker-{container_id}.scope",
        root / "system.slice" / f"docker-{container_id}.scope",
        root / "docker" / container_id,
    ]


def _stat_file(path: Path) -> dict[str, int]:
    return {key: int(value) for key, value in (line.split() for line in path.read_text().splitlines() if line.strip())}


def read_cgroup_cpu_s(directory: Path) -> float | None:
    """CPU seconds of a cgroup: v1 cpuacct.usage (nanoseconds) or v2 cpu.stat usage_usec."""
    if (directory / "cpuacct.usage").is_file():
        return int((directory / "cpuacct.usage").read_text().strip()) / 1e9
    if (directory / "cpu.stat").is_file():
        return _stat_file(directory / "cpu.stat")["usage_usec"] / 1e6
    return None


def read_cgroup_mem_mib(directory: Path) -> float | None:
    """Memory of a cgroup as `docker stats` counts it: usage less the inactive page cache, in MiB."""
    if (directory / "memory.usage_in_bytes").is_file():  # v1
        usage = int((directory / "memory.usage_in_bytes").read_text().strip())
        inactive = _stat_file(directory / "memory.stat").get("total_inactive_file", 0)
    elif (directory / "memory.current").is_file():  # v2
        usage = int((directory / "memory.current").read_text().strip())
        inactive = _stat_file(directory / "memory.stat").get("inactive_file", 0)
    else:
        return None
    return max(usage - inactive, 0) / 2**20


def _per_node(names: list[str], controller: str, read, root: Path) -> list[float] | None:
    found = subprocess.run(
        ["docker", "inspect", "--format", "{{.Id}}", *names], capture_output=True, text=True, check=False
    )
    ids = found.stdout.split()
    if found.returncode != 0 or len(ids) != len(names):
        return None
    values = []
    for container_id in ids:
        value = next(
            (v for d in cgroup_dirs(container_id, controller, root) if d.is_dir() and (v := read(d)) is not None),
            None,
        )
        if value is None:
            return None
        values.append(value)
    return values


def nodes_cpu_s(names: list[str], root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPU seconds the node containers used so far, all of them; None where a cgroup cannot be read."""
    values = _per_node(names, "cpuacct", read_cgroup_cpu_s, root)
    return None if values is None else sum(values)


def nodes_mem_mib(names: list[str], root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """Mean memory of the node containers now, in MiB (their cgroups; `docker stats` shows 0 on some hosts)."""
    values = _per_node(names, "memory", read_cgroup_mem_mib, root)
    return None if values is None else sum(values) / len(values)


def mem_available_mib(meminfo: Path = Path("/proc/meminfo")) -> float | None:
    """The host's MemAvailable in MiB."""
    try:
        fields = dict(line.split(":", 1) for line in meminfo.read_text().splitlines() if ":" in line)
        return int(fields["MemAvailable"].split()[0]) / 1024
    except (OSError, KeyError, ValueError):
        return None


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
    names: list[str] | None = None,
) -> Run:
    tag = f"{count}n-{'pipe' if pipelining else 'nopipe'}-{strategy}-{kind}"
    stats = logs / f"{stamp}-{tag}.stats.json"
    log = logs / f"{stamp}-{tag}.log"
    names = names if names is not None else node_names(count)
    env = ansible_env(pipelining, args.forks, stats, strategy)
    cold = Path(tempfile.mkdtemp(prefix="gpunode-templates-"))
    env = template_cache_env(getattr(args, "template_cache", "warm"), cold / "cache", env)
    load_before = os.getloadavg()[0]
    node_cpu_before = nodes_cpu_s(names)
    try:
        rc, wall, cpu, peak = run_playbook_measured(["-i", str(inventory), args.playbook], env, log)
    finally:
        shutil.rmtree(cold, ignore_errors=True)
    node_cpu_after = nodes_cpu_s(names)
    load_after = os.getloadavg()[0]
    mem = nodes_mem_mib(names)
    available = mem_available_mib()
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
        controller_peak_mib=round(peak, 1),
        node_cpu_s=(
            None if node_cpu_before is None or node_cpu_after is None else round(node_cpu_after - node_cpu_before, 2)
        ),
        mem_mib_per_node=None if mem is None else round(mem, 1),
        host_mem_available_mib=None if available is None else round(available),
        load_before=round(load_before, 2),
        load_after=round(load_after, 2),
    )


def create_nodes(
    names: list[str], inventory: Path, args: argparse.Namespace, log: Path, image: str, converged: bool = False
) -> None:
    """Start the node containers and prepare them (bench/nodes.yml); exit on failure."""
    rc, _, _ = run_playbook(
        [
            "-i",
            str(inventory),
            str(BENCH / "nodes.yml"),
            "-e",
            json.dumps(
                {"nodes": names, "bench_image": image, "bench_converged": converged, "bench_seed_name": SEED_NODE}
            ),
        ],
        ansible_env(True, args.forks, log.with_suffix(".stats.json")),
        log,
    )
    if rc != 0:
        raise SystemExit(f"creating the nodes failed (exit {rc}); see {log}")


def docker(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *argv], capture_output=True, text=True, check=False)


def converge_seed(args: argparse.Namespace, logs: Path, stamp: str) -> Run:
    """Prepare and converge one node, shut it down cleanly and commit it to CONVERGED_IMAGE.

    Returns the seed's converge run. docker's and containerd's stores are volumes and stay out of
    the image; nodes.yml imports the test image into them again (bench_converged).
    """
    names = [SEED_NODE]
    strategy, pipelining = args.strategies[0], args.pipelining_settings[0]
    remove_nodes(names)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-inventory-") as tmp:
            inventory = write_inventory(
                Path(tmp), names, Path(args.group_vars), connection_for(strategy, args.connection)
            )
            print(f"==> seed node {SEED_NODE}: creating from {args.image}", flush=True)
            create_nodes(names, inventory, args, logs / f"{stamp}-seed-nodes.log", args.image)
            print(f"==> seed node {SEED_NODE}: converge ({strategy})", flush=True)
            run = timed_run("converge", 1, pipelining, inventory, args, logs, f"{stamp}-seed", strategy, names)
            print(f"    {run.wall_s:.1f} s, {run.tasks} tasks, rc {run.rc} ({run.log})", flush=True)
            if run.rc != 0:
                raise SystemExit(f"converging the seed node failed (exit {run.rc}); see {run.log}")
        # what a clone must set for itself; every node started from the image makes its own machine id
        recorded = docker("exec", SEED_NODE, "bash", "-c", SEED_RECORD)
        if recorded.returncode != 0:
            raise SystemExit(f"recording the seed's names and device modes failed: {recorded.stderr.strip()}")
        stopped = docker("stop", "--time", "60", SEED_NODE)
        if stopped.returncode != 0:
            raise SystemExit(f"stopping {SEED_NODE} failed: {stopped.stderr.strip()}")
        committed = docker("commit", SEED_NODE, CONVERGED_IMAGE)
        if committed.returncode != 0:
            raise SystemExit(f"committing {SEED_NODE} to {CONVERGED_IMAGE} failed: {committed.stderr.strip()}")
        print(f"==> seed node {SEED_NODE}: committed to {CONVERGED_IMAGE}", flush=True)
    finally:
        remove_nodes(names)
    return run


def scenario(
    count: int,
    pipelining: bool,
    args: argparse.Namespace,
    logs: Path,
    stamp: str,
    last: bool,
    strategies: list[str] | None = None,
) -> list[Run]:
    """Fresh nodes for `count`, then each strategy's runs on them.

    Fresh (default): one strategy per call, first converge and no-op re-run. --converged: the nodes
    come from the converged image, and every strategy times its no-op re-run on the same nodes.
    """
    strategies = strategies or ["linear"]
    names = node_names(count)
    runs: list[Run] = []
    remove_nodes(names)  # leftovers of an interrupted run
    converged = getattr(args, "converged", False)
    image = CONVERGED_IMAGE if converged else args.image
    pipe = "pipe" if pipelining else "nopipe"
    with tempfile.TemporaryDirectory(prefix="bench-inventory-") as tmp:
        inventories = {}
        for strategy in strategies:
            (Path(tmp) / strategy).mkdir()
            inventories[strategy] = write_inventory(
                Path(tmp) / strategy, names, Path(args.group_vars), connection_for(strategy, args.connection)
            )
        label = f"{count} node(s), pipelining {'on' if pipelining else 'off'}"
        try:
            print(f"==> {label}: creating {', '.join(names)} from {image}", flush=True)
            first = inventories[strategies[0]]
            create_nodes(
                names, first, args, logs / f"{stamp}-{count}n-{pipe}-{strategies[0]}-nodes.log", image, converged
            )
            for strategy in strategies[1:]:  # the stand-in key each node trusts (bench/nodes.yml writes it)
                shutil.copytree(first / "host_vars", inventories[strategy] / "host_vars", dirs_exist_ok=True)
            for strategy in strategies:
                for kind in ("no-op",) if converged else ("converge", "no-op"):
                    print(f"==> {label}, {strategy}: {kind}", flush=True)
                    run = timed_run(kind, count, pipelining, inventories[strategy], args, logs, stamp, strategy, names)
                    runs.append(run)
                    print(
                        f"    {run.wall_s:.1f} s, {run.tasks} tasks, {run.cpu_s_per_node:.1f} CPU s/node, "
                        f"node CPU {_figure(run.node_cpu_s_per_node)} s/node, "
                        f"{_figure(run.mem_mib_per_node)} MiB/node, "
                        f"load {_load(run)}, changed {run.changed}, rc {run.rc} ({run.log})",
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
        "node CPU s/node",
        "MiB/node",
        "controller MiB",
        "load 1m",
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
            _figure(r.node_cpu_s_per_node),
            _figure(r.mem_mib_per_node, "{:.0f}"),
            _figure(r.controller_peak_mib, "{:.0f}"),
            _load(r),
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


def _figure(value: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def _load(run: Run) -> str:
    if run.load_before is None or run.load_after is None:
        return "-"
    return f"{run.load_before:.1f}->{run.load_after:.1f}"


def render_markdown(runs: list[Run]) -> str:
    """The no-op runs as a Markdown table, by strategy and node count (bench/README.md, "Fleet scale")."""
    lines = [
        "| strategy | nodes | tasks | changed | wall s | controller CPU s/node | node CPU s/node | MiB/node "
        "| controller peak MiB | load (1 min) before -> after |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted((r for r in runs if r.kind == "no-op"), key=lambda r: (r.strategy, not r.pipelining, r.nodes)):
        strategy = r.strategy if r.pipelining else f"{r.strategy}, no pipelining"
        changed = str(r.changed) if r.rc == 0 else f"{r.changed} (rc {r.rc})"
        lines.append(
            f"| {strategy} | {r.nodes} | {r.tasks} | {changed} | {r.wall_s:.1f} | {r.cpu_s_per_node:.1f} "
            f"| {_figure(r.node_cpu_s_per_node)} | {_figure(r.mem_mib_per_node, '{:.0f}')} "
            f"| {_figure(r.controller_peak_mib, '{:.0f}')} | {_load(r).replace('->', ' -> ')} |"
        )
    return "\n".join(lines)


# The yardstick's work: a loop of integer arithmetic, about 0.1 CPU s on the build machine. The best of YARDSTICK_ROUNDS
# runs: interference only makes a run slower, so the best one is the machine's speed.
YARDSTICK_LOOPS = 2_000_000
YARDSTICK_ROUNDS = 5


def yardstick(loops: int = YARDSTICK_LOOPS, rounds: int = YARDSTICK_ROUNDS) -> float:
    """The controller's speed now: the CPU seconds of a fixed pure-Python loop, the best of ``rounds`` runs."""
    best = float("inf")
    for _round in range(rounds):
        started = time.process_time()
        total = 0
        for number in range(loops):
            total += number * number % 7
        best = min(best, time.process_time() - started)
    return round(best, 4)


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


def run_record(run: Run) -> dict:
    return asdict(run) | {
        "s_per_task": round(run.s_per_task, 3),
        "cpu_s_per_node": round(run.cpu_s_per_node, 2),
        "node_cpu_s_per_node": None if run.node_cpu_s_per_node is None else round(run.node_cpu_s_per_node, 2),
    }


def results_document(
    args: argparse.Namespace,
    stamp: str,
    load_before: tuple[float, float, float],
    runs: list[Run],
    targets: list[Target],
    seed: Run | None = None,
    yardsticks: dict[str, float] | None = None,
) -> dict:
    """The JSON written to bench/results/<timestamp>.json."""
    return {
        "timestamp": stamp,
        "playbook": args.playbook,
        "image": args.image,
        "mode": "converged" if getattr(args, "converged", False) else "fresh",
        "forks": args.forks,
        "template_cache": getattr(args, "template_cache", "warm"),
        "versions": versions(),
        "load_average_before": [round(x, 2) for x in load_before],
        # the controller's speed before the first run and after the last (yardstick(): CPU s, smaller is faster)
        "yardstick_cpu_s": yardsticks or {},
        "seed_converge": None if seed is None else run_record(seed),
        "runs": [run_record(r) for r in runs],
        "targets": [asdict(t) for t in targets],
    }


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
    # --converged: each node count's nodes serve every strategy; fresh: every strategy gets fresh nodes
    groups = [args.strategies] if args.converged else [[s] for s in args.strategies]
    scenarios = [(g, p, n) for g in groups for p in args.pipelining_settings for n in args.node_counts]
    if args.reuse_converged and docker("image", "inspect", CONVERGED_IMAGE).returncode != 0:
        print(f"ERROR: {CONVERGED_IMAGE} is missing: run with --converged --keep first.", file=sys.stderr)
        return 2
    load_before = os.getloadavg()
    yardsticks = {"before": yardstick()}
    runs: list[Run] = []
    seed: Run | None = None
    path = results_dir / f"{stamp}.json"
    try:
        if args.converged and not args.reuse_converged:
            seed = converge_seed(args, results_dir, stamp)
        for index, (strategies, pipelining, count) in enumerate(scenarios):
            runs += scenario(
                count, pipelining, args, results_dir, stamp, last=index == len(scenarios) - 1, strategies=strategies
            )
            # after every node count, so that an interrupted benchmark keeps what it measured
            document = results_document(args, stamp, load_before, runs, [], seed, yardsticks)
            path.write_text(json.dumps(document, indent=2) + "\n")
    finally:
        if args.converged and not args.keep:
            docker("image", "rm", CONVERGED_IMAGE)
    targets = evaluate(runs)
    print()
    print(render(runs, targets))
    print()
    print(render_markdown(runs))
    load_after = os.getloadavg()
    yardsticks["after"] = yardstick()
    print(
        f"\nload average (1/5/15 min) before: {' '.join(f'{x:.2f}' for x in load_before)}, "
        f"after: {' '.join(f'{x:.2f}' for x in load_after)} on {os.cpu_count()} CPUs"
    )
    print(
        f"yardstick (CPU s of a fixed Python loop, smaller is faster): before {yardsticks['before']:.3f}, "
        f"after {yardsticks['after']:.3f}"
    )
    document = results_document(args, stamp, load_before, runs, targets, seed, yardsticks)
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"\nresults: {path}")
    return 0 if runs and all(r.rc == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
