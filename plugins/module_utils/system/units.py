# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""When systemd started a unit's main process, for the node-side modules (Python 3.8+, stdlib only).

systemd < 251 has no --timestamp=unix, so the start time is read as µs of CLOCK_MONOTONIC and placed on the
wall clock with boot_time()."""

from __future__ import annotations

import re
import time


def main_start_argv(unit: str) -> list:
    """The command that prints when systemd started the unit's main process, in µs of CLOCK_MONOTONIC."""
    return ["systemctl", "show", unit, "-p", "ExecMainStartTimestampMonotonic", "--value"]


def main_start_us(rc: int, out: str):
    """µs of CLOCK_MONOTONIC from main_start_argv's result (0: never started); None when systemctl failed or
    printed something else."""
    value = out.strip() or "0"
    if rc != 0 or not re.fullmatch(r"[0-9]+", value):
        return None
    return int(value)


def boot_time() -> float:
    """Seconds since the epoch at CLOCK_MONOTONIC zero."""
    return time.time() - time.clock_gettime(time.CLOCK_MONOTONIC)
