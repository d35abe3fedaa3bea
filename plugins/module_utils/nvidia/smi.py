# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""nvidia-smi's query output, read the one way the GPU settings module and the doctor's health family read it.

Every query runs as ``nvidia-smi --query-<kind>=<fields> --format=csv,noheader,nounits`` (NVIDIA's nvidia-smi(1),
"SELECTIVE QUERY OPTIONS": ``--query-gpu``, ``--query-remapped-rows``, with ``--format=csv`` and its modifiers
``noheader`` and ``nounits``; the man page of driver 550.90.12 as Ubuntu ships it,
https://manpages.ubuntu.com/manpages/plucky/man1/nvidia-smi.1.html, and ``nvidia-smi --help-query-gpu``): one line
per GPU, the fields in the order asked, separated by ", "; a field the GPU does not support reads "[N/A]" or
"[Not Supported]" (older drivers: "N/A", "Not Supported"), a field the driver does not know fails the whole query
with "Field ... is not a valid field to query." (exit 2).

The node-side modules import this file as module_utils.nvidia.smi. Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import re

NOT_AVAILABLE = ("", "n/a", "[n/a]", "not supported", "[not supported]", "[unknown error]", "unknown error")


def query_argv(smi: str, fields, kind: str = "gpu") -> list:
    """The argument list of one query of ``kind`` (gpu, remapped-rows) for ``fields``."""
    return [smi, f"--query-{kind}={','.join(fields)}", "--format=csv,noheader,nounits"]


def parse_query(text: str, fields) -> list:
    """nvidia-smi's CSV answer as one dict per line, keyed by field; lines with another field count are dropped."""
    rows = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        values = [value.strip() for value in line.split(", ")]
        if len(values) != len(fields):
            values = [value.strip() for value in line.split(",")]
        if len(values) == len(fields):
            rows.append(dict(zip(fields, values)))
    return rows


def available(value) -> bool:
    """Whether a field holds a value (not "[N/A]", "[Not Supported]" or empty)."""
    return str(value if value is not None else "").strip().lower() not in NOT_AVAILABLE


def number(value):
    """A field's number (units dropped), None where it holds none."""
    if not available(value):
        return None
    match = re.match(r"^\s*(-?\d+(?:\.\d+)?)", str(value))
    return float(match.group(1)) if match else None


def active(value) -> bool:
    """A clocks_event_reasons.* field: "Active" (or 1, yes) is True, "Not Active" False."""
    return str(value or "").strip().lower() in ("active", "1", "yes", "true")


def yes(value) -> bool:
    """A yes/no field of nvidia-smi (remapped_rows.pending, retired_pages.pending): "Yes"/"1" is True."""
    return str(value or "").strip().lower() in ("yes", "1", "true", "enabled")


def bus_id(address: str) -> str:
    """A PCI address as sysfs names it (0000:17:00.0), from nvidia-smi's pci.bus_id (00000000:17:00.0) or sysfs's."""
    text = str(address or "").strip().lower()
    match = re.match(r"^(?:([0-9a-f]{4,8}):)?([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$", text)
    if not match:
        return text
    domain = (match.group(1) or "0000")[-4:]
    return f"{domain}:{match.group(2)}:{match.group(3)}.{match.group(4)}"


def invalid_field(message: str) -> bool:
    """Whether nvidia-smi refused a query for a field this driver does not know."""
    return "is not a valid field" in (message or "")
