# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Filters of the gpu_validate role: the per-node summary table and the inputs it reads.

Each check of the role is data, a mapping with four keys:

    {"check": "docker: nvidia runtime", "status": "ok|warn|fail|skipped",
     "detail": "what was found", "fix": "what to do about it ('' when nothing)"}

`gpu_validate_table(results, host="")`
    The one table per node the role prints and writes to validate.txt: a headline with the
    overall status and the counts, then CHECK / STATUS / DETAIL / FIX columns, long cells
    wrapped. Deterministic (no time stamps), so a report that did not change is not rewritten.

`gpu_validate_summary(results)`
    Counts per status and the overall status: fail when a check failed, else warn when one
    warned, else ok (checks that were skipped do not make a node bad).

`gpu_validate_report(results, host="")`
    The JSON document written to validate.json: host, summary and the checks.

`gpu_validate_runtime_config(text)`
    The runtimes a `containerd config dump` or `crio config` lists and the default runtime,
    from the TOML text (read on the controller with tomllib; a regex fallback for text that
    does not parse).

`gpu_validate_json_problem(text)`
    Why a text is not a JSON object (a seccomp profile), or "" when it is one.

`gpu_validate_userns_missing(node, feature_gates={})`
    What this node lacks to run user-namespaced pods (hostUsers: false), one sentence per
    requirement (kernel, user namespace limit, CRI runtime, OCI runtime, kubelet and its
    feature gate), from the gpu_node facts and the kubelet's effective featureGates; [] when
    nothing is missing.

Everything is a pure function of its arguments; the unit tests call them without Ansible.
"""

from __future__ import annotations

import json
import re
import textwrap
import tomllib
from collections.abc import Mapping, Sequence

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - Ansible is always there when the role runs

    class AnsibleFilterError(Exception):
        pass


STATUSES = ("ok", "warn", "fail", "skipped")
KEYS = ("check", "status", "detail", "fix")
HEADERS = ("CHECK", "STATUS", "DETAIL", "FIX")
# Widths at which the DETAIL and FIX cells wrap; CHECK and STATUS are as wide as their longest cell.
DETAIL_WIDTH = 50
FIX_WIDTH = 50
EMPTY_FIX = "-"


def _checks(results) -> list[dict[str, str]]:
    """The checks as a list of dicts with the four keys as strings; refuse anything else."""
    if isinstance(results, (str, bytes)) or not isinstance(results, Sequence):
        raise AnsibleFilterError(f"gpu_validate: the results must be a list of checks, got {type(results).__name__}")
    checks = []
    for index, item in enumerate(results):
        if not isinstance(item, Mapping):
            raise AnsibleFilterError(f"gpu_validate: check #{index} is a {type(item).__name__}, not a mapping")
        name = str(item.get("check") or "").strip()
        if not name:
            raise AnsibleFilterError(f"gpu_validate: check #{index} has no name (key 'check')")
        status = str(item.get("status") or "").strip().lower()
        if status not in STATUSES:
            raise AnsibleFilterError(
                f"gpu_validate: check '{name}' has status {item.get('status')!r}; use one of {', '.join(STATUSES)}"
            )
        checks.append(
            {
                "check": name,
                "status": status,
                "detail": " ".join(str(item.get("detail") or "").split()),
                "fix": " ".join(str(item.get("fix") or "").split()),
            }
        )
    return checks


def gpu_validate_summary(results) -> dict:
    """Counts per status, the total and the overall status of a node."""
    checks = _checks(results)
    counts = {status: sum(1 for c in checks if c["status"] == status) for status in STATUSES}
    overall = "fail" if counts["fail"] else "warn" if counts["warn"] else "ok"
    return {**counts, "total": len(checks), "status": overall}


def _headline(summary: Mapping, host: str) -> str:
    counts = ", ".join(f"{summary[s]} {s}" for s in STATUSES)
    prefix = f"{host}: " if host else ""
    return f"{prefix}{summary['status'].upper()} - {summary['total']} checks ({counts})"


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False) or [""]


def gpu_validate_table(results, host: str = "", detail_width: int = DETAIL_WIDTH, fix_width: int = FIX_WIDTH) -> str:
    """Render the checks as one plain-text table under a headline; ends with a newline."""
    checks = _checks(results)
    summary = gpu_validate_summary(checks)
    rows = [
        (c["check"], c["status"], _wrap(c["detail"], detail_width), _wrap(c["fix"] or EMPTY_FIX, fix_width))
        for c in checks
    ]
    widths = [
        max([len(HEADERS[0])] + [len(r[0]) for r in rows]),
        max([len(HEADERS[1])] + [len(r[1]) for r in rows]),
        max([len(HEADERS[2])] + [len(line) for r in rows for line in r[2]]),
    ]

    def line(cells: Sequence[str]) -> str:
        padded = [cell.ljust(width) for cell, width in zip(cells[:3], widths, strict=True)]
        return "  ".join([*padded, cells[3]]).rstrip()

    fix_rule = max([len(HEADERS[3])] + [len(text) for r in rows for text in r[3]])
    out = [_headline(summary, host), line(HEADERS), line(["-" * w for w in widths] + ["-" * fix_rule])]
    for name, status, detail, fix in rows:
        for index in range(max(len(detail), len(fix))):
            out.append(
                line(
                    [
                        name if index == 0 else "",
                        status if index == 0 else "",
                        detail[index] if index < len(detail) else "",
                        fix[index] if index < len(fix) else "",
                    ]
                )
            )
    return "\n".join(out) + "\n"


def gpu_validate_report(results, host: str = "") -> dict:
    """The document written to validate.json."""
    checks = _checks(results)
    return {"host": host, "summary": gpu_validate_summary(checks), "checks": checks}


# --- runtime configuration dumps ---------------------------------------------------------------

_HEADER_RUNTIME = re.compile(r"""^\s*\[[^\]]*\bruntimes\.(?:"([^"]+)"|'([^']+)'|([A-Za-z0-9_-]+))\]\s*$""", re.M)
_DEFAULT_RUNTIME = re.compile(r"""^\s*default_runtime(?:_name)?\s*=\s*["']([^"']*)["']""", re.M)


def _walk_runtimes(node, found: dict[str, Mapping], defaults: list[str]) -> None:
    if not isinstance(node, Mapping):
        return
    runtimes = node.get("runtimes")
    if isinstance(runtimes, Mapping) and all(isinstance(v, Mapping) for v in runtimes.values()):
        found.update((str(name), entry) for name, entry in runtimes.items())
        for key in ("default_runtime_name", "default_runtime"):
            if isinstance(node.get(key), str) and node[key]:
                defaults.append(node[key])
                break
    for value in node.values():
        _walk_runtimes(value, found, defaults)


def _runtime_entry(entry) -> dict:
    """What starts a container of one runtime table: the shim (containerd's runtime_type), the OCI runtime
    binary (containerd's options.BinaryName, CRI-O's runtime_path; '' = the shim's own default, runc) and
    CRI-O's runtime_type."""
    entry = entry if isinstance(entry, Mapping) else {}
    options = entry.get("options") if isinstance(entry.get("options"), Mapping) else {}
    binary = options.get("BinaryName") or entry.get("runtime_path") or ""
    return {"runtime_type": str(entry.get("runtime_type") or ""), "binary": str(binary)}


def gpu_validate_runtime_config(text) -> dict:
    """Runtimes and the default runtime of a containerd or CRI-O configuration dump.

    containerd: every `...containerd.runtimes.<name>` table and `default_runtime_name` next to it
    (config v1, v2 and v3 alike). CRI-O: `crio.runtime.runtimes.<name>` and `crio.runtime.default_runtime`.
    Returns {"runtimes": [names, sorted], "default": name or None, "parsed": True when the text was TOML,
    "default_entry": {"runtime_type", "binary"} of the default runtime's table (runc's when no default is
    named: the CRI plugin's and CRI-O's own default), empty strings where the dump does not say}.
    """
    text = str(text or "")
    found: dict[str, Mapping] = {}
    defaults: list[str] = []
    try:
        _walk_runtimes(tomllib.loads(text), found, defaults)
        parsed = True
    except tomllib.TOMLDecodeError:
        # Log lines or a tool's oddities around the TOML: read the table headers and the key instead.
        parsed = False
        for match in _HEADER_RUNTIME.finditer(text):
            found[next(g for g in match.groups() if g)] = {}
        defaults.extend(m.group(1) for m in _DEFAULT_RUNTIME.finditer(text) if m.group(1))
    default = defaults[0] if defaults else None
    return {
        "runtimes": sorted(found),
        "default": default,
        "parsed": parsed,
        "default_entry": _runtime_entry(found.get(default or "runc")),
    }


def gpu_validate_json_problem(text) -> str:
    """'' when the text is a JSON object (what a seccomp profile is), else why it is not."""
    try:
        value = json.loads(str(text or ""))
    except ValueError as exc:
        return f"not valid JSON ({exc})"
    if not isinstance(value, dict):
        return f"a JSON {type(value).__name__}, not an object"
    return ""


# What pods with hostUsers: false need (Kubernetes "Use a User Namespace With a Pod"; containerd and
# CRI-O docs): idmapped tmpfs (Linux 6.3), a CRI runtime that creates the user namespace (containerd
# 2.0, CRI-O 1.25; containerd 1.6 silently ignores hostUsers: false), an OCI runtime with idmapped
# mounts (runc 1.2, crun 1.9), and the kubelet's UserNamespacesSupport gate (beta and off from 1.30,
# on by default from 1.33, locked on from 1.36).
USERNS_MIN_KERNEL = (6, 3)
USERNS_MIN_CRI = {"containerd": (2, 0), "crio": (1, 25)}
USERNS_MIN_OCI = {"runc": (1, 2), "crun": (1, 9)}
USERNS_MIN_KUBELET = (1, 30)
USERNS_KUBELET_DEFAULT_ON = (1, 33)
USERNS_KUBELET_LOCKED_ON = (1, 36)
USERNS_GATE = "UserNamespacesSupport"


def _version_tuple(version) -> tuple[int, ...] | None:
    match = re.match(r"v?(\d+(?:\.\d+)*)", str(version or ""))
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in version)


def _installed(tools: Mapping, minimums: Mapping) -> tuple[list[str], bool]:
    """('name version' of each installed tool, whether one of them is new enough)."""
    found, ok = [], False
    for name, minimum in minimums.items():
        facts = tools.get(name) or {}
        if not facts.get("installed"):
            continue
        version = _version_tuple(facts.get("version"))
        found.append(f"{name} {facts.get('version') or '(version unknown)'}")
        ok = ok or (version is not None and version >= minimum)
    return found, ok


def gpu_validate_userns_missing(node, feature_gates=None) -> list[str]:
    node = node or {}
    gates = feature_gates if isinstance(feature_gates, Mapping) else {}
    missing = []
    kernel = node.get("kernel") or {}
    kernel_version = _version_tuple(kernel.get("version"))
    if kernel_version is None or kernel_version < USERNS_MIN_KERNEL:
        missing.append(f"Linux >= {_dotted(USERNS_MIN_KERNEL)} (has {kernel.get('release') or 'unknown'})")
    if kernel.get("max_user_namespaces") == 0:
        missing.append("user namespaces on (sysctl user.max_user_namespaces is 0)")
    names = {"containerd": "containerd", "crio": "CRI-O"}
    found, ok = _installed(node.get("runtimes") or {}, USERNS_MIN_CRI)
    if not ok:
        wanted = " or ".join(f"{names[n]} >= {_dotted(v)}" for n, v in USERNS_MIN_CRI.items())
        missing.append(f"{wanted} (has {', '.join(found) or 'none'})")
    found, ok = _installed(node.get("oci_runtimes") or {}, USERNS_MIN_OCI)
    if not ok:
        wanted = " or ".join(f"{n} >= {_dotted(v)}" for n, v in USERNS_MIN_OCI.items())
        missing.append(f"{wanted} (has {', '.join(found) or 'none'})")
    kubelet = node.get("kubelet") or {}
    kubelet_version = _version_tuple(kubelet.get("version"))
    gate = gates.get(USERNS_GATE)
    if not kubelet.get("installed"):
        missing.append(f"a kubelet >= {_dotted(USERNS_MIN_KUBELET)} (none installed)")
    elif kubelet_version is None:
        missing.append(f"a kubelet >= {_dotted(USERNS_MIN_KUBELET)} (version unknown)")
    elif kubelet_version < USERNS_MIN_KUBELET:
        missing.append(f"a kubelet >= {_dotted(USERNS_MIN_KUBELET)} (has {kubelet.get('version')})")
    elif kubelet_version < USERNS_KUBELET_DEFAULT_ON and gate is not True:
        missing.append(
            f"the kubelet feature gate {USERNS_GATE}: true (off by default in kubelet {kubelet.get('version')})"
        )
    elif kubelet_version < USERNS_KUBELET_LOCKED_ON and gate is False:
        missing.append(f"the kubelet feature gate {USERNS_GATE} (set to false)")
    return missing


class FilterModule:
    """Filters of the gpu_validate role."""

    def filters(self):
        return {
            "gpu_validate_table": gpu_validate_table,
            "gpu_validate_summary": gpu_validate_summary,
            "gpu_validate_report": gpu_validate_report,
            "gpu_validate_runtime_config": gpu_validate_runtime_config,
            "gpu_validate_json_problem": gpu_validate_json_problem,
            "gpu_validate_userns_missing": gpu_validate_userns_missing,
        }
