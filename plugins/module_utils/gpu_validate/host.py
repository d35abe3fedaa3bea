# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's view of the node and the helpers every check family uses: Node (the commands it runs and the
files it reads; tests give a fake), the table row, Ansible's bool and Jinja's truncate.

The node-side module gpu_validate_checks imports this file as module_utils.gpu_validate.host.
Stdlib only, Python 3.8+ (the node's python3).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time

from ansible_collections.gpunode.provisioning.plugins.module_utils.system.units import boot_time


def truthy(value) -> bool:
    """Ansible's bool filter: yes/on/1/true (any case) and true values are True."""
    if isinstance(value, str):
        return value.strip().lower() in ("yes", "on", "1", "true", "y", "t")
    return bool(value)


def table_row(check: str, status: str, detail: str, fix: str = "") -> dict:
    return {"check": check, "status": status, "detail": " ".join(str(detail).split()), "fix": fix}


def truncate(text: str, length: int = 160, end: str = "...", leeway: int = 5) -> str:
    """Jinja's truncate filter with its defaults (whole words, leeway 5)."""
    if len(text) <= length + leeway:
        return text
    return text[: length - len(end)].rsplit(" ", 1)[0] + end


class Node:
    """What the checks read on the node: files and commands. Tests give fakes of both."""

    def __init__(self, timeout: int = 60):
        self.timeout = timeout

    def run(self, argv: list, timeout: int | None = None) -> tuple:
        """(rc, stdout, stderr) of a command; a missing command or a timeout is an rc and a message."""
        env = dict(os.environ, LC_ALL="C", LANG="C")
        timeout = timeout or self.timeout
        try:
            proc = subprocess.run(
                [str(a) for a in argv],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                env=env,
                check=False,
            )
        except FileNotFoundError as exc:
            return 2, "", str(exc)
        except subprocess.TimeoutExpired:
            return 124, "", f"{argv[0]} did not answer in {timeout} s"
        except OSError as exc:
            return 126, "", str(exc)
        return proc.returncode, proc.stdout.rstrip("\n"), proc.stderr.rstrip("\n")

    def which(self, name: str, opt_dirs: list) -> str | None:
        path = os.pathsep.join([os.environ.get("PATH", ""), *opt_dirs])
        return shutil.which(name, path=path)

    def lstat(self, path: str):
        try:
            return os.lstat(path)
        except OSError:
            return None

    def mtime(self, path: str) -> float | None:
        """Modification time of a file (symlinks followed, as date -r does), None when it is not there."""
        try:
            return os.stat(path).st_mtime
        except OSError:
            return None

    def glob(self, pattern: str) -> list:
        return sorted(glob.glob(pattern))

    def boot_time(self) -> float:
        """Seconds since the epoch at CLOCK_MONOTONIC zero, to place systemd's monotonic time stamps."""
        return boot_time()

    def temp_dir(self) -> str:
        return tempfile.mkdtemp(prefix="gpu-validate-")

    def write(self, path: str, text: str) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)

    def remove_tree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def read(self, path: str) -> str | None:
        """The text of a file, or None when it cannot be read."""
        try:
            with open(path, "rb") as handle:
                return handle.read().decode("utf-8", errors="replace")
        except OSError:
            return None
