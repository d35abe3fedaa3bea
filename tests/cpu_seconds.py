"""CPU seconds of the test command's parts, for its stage timings (tests/conftest.py): the test command runs on two
cores with every core busy, so a part's wall time says how much the others slowed it; its CPU seconds say what it
costs the run (docs/test-times.md).

- process_cpu(): this process's CPU and that of the children it waited for (the ansible-playbook, molecule and
  pytest runs a test starts; not the node containers, whose processes are the Docker engine's children);
- NodeCpu: the CPU of named node containers while a scenario runs, read from their cgroups (cgroup v1's cpuacct, or
  v2's cpu.stat), each container's last reading before it went: read every 30 s (a `docker ps` costs the engine
  and the CLI about 0.05 CPU s, so every 5 s would cost the run more than 100 CPU s), so a node's last seconds
  before its removal (its share of the verify's end and the destroy) may be missing.
"""

from __future__ import annotations

import contextlib
import resource
import subprocess
import threading
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def process_cpu() -> float:
    """User + system CPU seconds of this process and of its waited-for children so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def container_cpu(container_id: str, root: Path = CGROUP) -> float | None:
    """CPU seconds a Docker container used so far (its cgroup, all of its processes), None where no cgroup of it is
    found (the cgroupfs driver on v1: cpuacct/docker/<id>; the systemd driver on v2: system.slice/docker-<id>.scope;
    cgroupfs on v2: docker/<id>)."""
    for v1 in ("cpuacct", "cpu,cpuacct"):
        path = root / v1 / "docker" / container_id / "cpuacct.usage"
        if path.is_file():
            return int(path.read_text()) / 1e9
    for v2 in (root / "system.slice" / f"docker-{container_id}.scope", root / "docker" / container_id):
        stat = v2 / "cpu.stat"
        if stat.is_file():
            for line in stat.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
    return None


class NodeCpu:
    """Reads the CPU of the containers named ``names`` every ``interval`` seconds until stop(); total() is the sum of
    each container's last reading (a node recreated under the same name is a second container)."""

    def __init__(self, names, interval: float = 30.0, root: Path = CGROUP):
        self.names = set(names)
        self.interval = interval
        self.root = root
        self.seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def read(self) -> None:
        listed = subprocess.run(
            ["docker", "ps", "--no-trunc", "--format", "{{.ID}} {{.Names}}"],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        for line in listed.stdout.splitlines():
            cid, _, name = line.partition(" ")
            if name in self.names:
                used = container_cpu(cid, self.root)
                if used is not None:
                    self.seen[cid] = max(used, self.seen.get(cid, 0.0))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            # a figure for the timings only: never a reason for a test to fail
            with contextlib.suppress(OSError, ValueError, subprocess.SubprocessError):
                self.read()

    def __enter__(self) -> NodeCpu:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def total(self) -> float:
        return sum(self.seen.values())
