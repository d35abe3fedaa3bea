# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""gpu_node_facts' view of the node, which every subject file uses: files read below a root (tests give a tree
in a temporary directory), commands run through a callable (None runs none), binaries looked up through a callable,
and the version-string helpers.

The module plugins/modules/gpu_node_facts.py imports the node_facts/*.py files by package path.
Stdlib only, Python 3.8+ (the node's python3).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

# Where binaries are looked for besides PATH (and the only places looked at below a `root` other than /).
BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


if TYPE_CHECKING:  # annotations only; typing's spelling, which Python 3.8 (and pylint for it) reads
    from typing import Callable, List, Optional, Tuple

    RunCommand = Callable[[List[str]], Optional[Tuple[int, str, str]]]
    Which = Callable[[str], Optional[str]]


def version_at_least(version: str | None, minimum: tuple[int, ...]) -> bool | None:
    if not version:
        return None
    return tuple(int(part) for part in version.split(".")[: len(minimum)]) >= minimum


def rooted(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except (OSError, ValueError):
        return None


def read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (OSError, ValueError):
        return None


def first_line(path: str) -> str:
    text = read_text(path)
    return text.splitlines()[0].strip() if text and text.strip() else ""


def command_output(run_command: RunCommand | None, argv: list[str]) -> str | None:
    """stdout and stderr of a command, or null when commands are off or it could not run."""
    if run_command is None:
        return None
    result = run_command(argv)
    if result is None:
        return None
    _rc, out, err = result
    return f"{out}\n{err}"


def unit_states(run_command: RunCommand | None, which: Which, root: str, units: list[str]) -> dict:
    """Unit -> `systemctl is-active` answer, when systemd is the init system and commands are on."""
    if run_command is None or not os.path.isdir(rooted(root, "/run/systemd/system")):
        return {}
    systemctl = which("systemctl")
    if not systemctl:
        return {}
    result = run_command([systemctl, "is-active", *units])
    if result is None:
        return {}
    states = result[1].split()
    return dict(zip(units, states)) if len(states) == len(units) else {}


def running_processes(root: str) -> set[str] | None:
    """Command names (comm) of the processes in <root>/proc; null when no process can be read."""
    proc = rooted(root, "/proc")
    try:
        entries = os.listdir(proc)
    except OSError:
        return None
    names = set()
    for entry in entries:
        if entry.isdigit():
            comm = read_text(os.path.join(proc, entry, "comm"))
            if comm and comm.strip():
                names.add(comm.strip())
    return names or None


def find_binary(root: str, name: str, directories: tuple[str, ...] = BIN_DIRS) -> str | None:
    """Path (as seen on the node) of an executable `name` in `directories` below `root`."""
    for directory in directories:
        candidate = os.path.join(directory, name)
        real = rooted(root, candidate)
        if os.path.isfile(real) and os.access(real, os.X_OK):
            return candidate
    return None


def executable(root: str, path: str) -> bool:
    real = rooted(root, path)
    return os.path.isfile(real) and os.access(real, os.X_OK)
