"""Run a script fed on stdin as Ansible's command and shell modules feed it, and say how much of stdin it left unread.

Ansible starts the command with a pipe on its stdin and writes the `stdin:` value into it afterwards
(module_utils/basic.py, run_command). A script that exits before reading all of it makes that write fail with EPIPE
("[Errno 32] Broken pipe", rc 32) whenever the write comes late, which on a loaded machine is now and then. Two
ways to see it here, neither hoping for a race:

- `fed_run(..., delayed=False)`: the whole input is in the pipe before the script starts (the pipe is made big
  enough), the write end closed; when the script has exited, FIONREAD on the pipe counts the bytes it never read.
- `fed_run(..., delayed=True)`: the writer holds the input back until the script has exited or one of its processes
  waits in read(2) on that pipe (/proc/<pid>/syscall; a fixed delay where /proc cannot tell), then writes: a
  script that exits without reading fails the write with EPIPE, every time, as Ansible's late write does. (A
  script that reads part and stops, as `cmp -s -` does, is seen by the count of the first way.)
"""

from __future__ import annotations

import fcntl
import os
import platform
import struct
import subprocess
import termios
import time
from dataclasses import dataclass

# read(2)'s number in /proc/<pid>/syscall (arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/unistd.h)
_READ = {"x86_64": "0", "aarch64": "63"}.get(platform.machine())
_PIPE_SIZE = 1 << 20  # fs/pipe.c: pipe_max_size, 1 MiB by default
_FALLBACK_DELAY = 0.2


@dataclass
class Fed:
    returncode: int
    stdout: str
    stderr: str
    unread: int  # bytes of stdin left in the pipe when the script had exited (prefilled runs)
    epipe: bool  # the late write failed with EPIPE (delayed runs)


def _children(pid: int) -> list[int]:
    found, waiting = [], [pid]
    while waiting:
        current = waiting.pop()
        found.append(current)
        try:
            with open(f"/proc/{current}/task/{current}/children") as children:
                waiting.extend(int(child) for child in children.read().split())
        except OSError:
            continue
    return found


def _waits_in_read(pid: int, pipe: str) -> bool | None:
    """Some process of the script's tree waits in read(2) on fd 0, and fd 0 is the pipe; None where /proc cannot
    tell (another architecture, or no ptrace access to /proc/<pid>/syscall)."""
    if _READ is None:
        return None
    for process in _children(pid):
        try:
            if os.readlink(f"/proc/{process}/fd/0") != pipe:
                continue
            with open(f"/proc/{process}/syscall") as syscall:
                fields = syscall.read().split()
        except PermissionError:
            return None
        except OSError:
            continue
        if len(fields) > 1 and fields[0] == _READ and int(fields[1], 16) == 0:
            return True
    return False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fed_run(argv, data: bytes, env=None, cwd=None, delayed: bool = False, wait: float = 30.0) -> Fed:
    """Run argv with `data` on stdin through a pipe (see the module's docstring); never raises on EPIPE."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
    assert len(data) < _PIPE_SIZE, "the input must fit in the pipe, so that a prefilled run cannot block"
    pipe = f"pipe:[{os.fstat(read_end).st_ino}]"
    keep = os.dup(read_end)
    epipe = False
    try:
        if not delayed:
            _write_all(write_end, data)
            os.close(write_end)
        proc = subprocess.Popen(argv, stdin=read_end, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
        os.close(read_end)
        if delayed:
            os.close(keep)  # the script's processes hold the only read ends, as under Ansible
            keep = -1
            deadline = time.monotonic() + wait
            while proc.poll() is None and time.monotonic() < deadline:
                waits = _waits_in_read(proc.pid, pipe)
                if waits:
                    break
                if waits is None:  # /proc cannot tell: a fixed delay, which still fails a script that exits at once
                    deadline = min(deadline, time.monotonic() + _FALLBACK_DELAY)
                time.sleep(0.001)
            try:
                _write_all(write_end, data)
            except BrokenPipeError:
                epipe = True
            os.close(write_end)
        stdout, stderr = proc.communicate(timeout=120)
        unread = 0
        if keep >= 0:
            unread = struct.unpack("i", fcntl.ioctl(keep, termios.FIONREAD, b"\0\0\0\0"))[0]
        return Fed(proc.returncode, stdout.decode(errors="replace"), stderr.decode(errors="replace"), unread, epipe)
    finally:
        if keep >= 0:
            os.close(keep)
