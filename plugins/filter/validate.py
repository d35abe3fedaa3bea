# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Filters of the gpu_validate role: the per-node summary table and the inputs it reads.

Each check of the role is data, a mapping with four keys and the family of the check that built it:

    {"check": "docker: nvidia runtime", "status": "ok|warn|fail|skipped",
     "detail": "what was found", "fix": "what to do about it ('' when nothing)",
     "family": "docker"}   # plugins/module_utils/gpu_validate/families.py; kept where a row has one

`gpu_validate_table(results, host="")`
    The one table per node the role prints and writes to validate.txt: a headline with the
    overall status and the counts, then CHECK / STATUS / DETAIL / FIX columns, long cells
    wrapped. Deterministic (no time stamps), so a report that did not change is not rewritten.

`gpu_validate_summary(results)`
    Counts per status and the overall status: fail when a check failed, else warn when one
    warned, else ok (checks that were skipped do not make a node bad).

`gpu_validate_report(results, host="")`
    The JSON document written to validate.json: host, summary, health ({status, drain, reasons}: drain is true when a
    "GPU health: ..." row failed, for automation that cordons such nodes) and the checks.

`gpu_validate_failure(results, host="", report_dir="")`
    The message a node fails with when checks failed: how many, each failed check with its detail and fix,
    and where the whole table is (roles/gpu_validate/tasks/report.yml).

`gpu_validate_runtimes(node, asked=[])`
    The container runtimes the doctor checks: ``asked`` (gpu_validate_runtimes) when it names any, else those
    the node facts found installed, plus an RKE2/k3s agent's containerd (not on PATH, so not among
    runtimes_installed), which is checked through its own binary, socket and unit; each once, in order.

`gpu_validate_families(check_fuse=True, check_security=True, check_kubelet=True)`
    The families of checks the node-side module gpu_validate_checks runs (the registry
    plugins/module_utils/gpu_validate/families.py, in its order), the optional ones as the role's
    gpu_validate_check_* switches say.

`gpu_validate_files_pending(states, files, mode="0644")`
    Whether a report file must be written: ``files`` is a list of {path, content}, ``states`` the module's
    report_files ({path: {sha1, mode, uid, gid} or None}); True when one is missing, has other content, or
    another mode or owner than ``mode`` and root.

`gpu_validate_userns_missing(node, feature_gates={})` (a function molecule kubelet's test imports, not a filter)
    What this node lacks to run user-namespaced pods (hostUsers: false), one sentence per
    requirement (kernel, user namespace limit, CRI runtime, OCI runtime, kubelet and its
    feature gate), from the gpu_node facts and the kubelet's effective featureGates; [] when
    nothing is missing (gpu_validate_logic userns_missing).

Everything is a pure function of its arguments; the unit tests call them without Ansible.
"""

from __future__ import annotations

import hashlib
import textwrap
from collections.abc import Mapping, Sequence

from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import families as _families
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import logic as _logic

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
        check = {
            "check": name,
            "status": status,
            "detail": " ".join(str(item.get("detail") or "").split()),
            "fix": " ".join(str(item.get("fix") or "").split()),
        }
        if str(item.get("family") or "").strip():
            check["family"] = str(item["family"]).strip()
        checks.append(check)
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
    return {
        "host": host,
        "summary": gpu_validate_summary(checks),
        "health": _logic.node_health(checks),
        "checks": checks,
    }


def gpu_validate_failure(results, host: str = "", report_dir: str = "") -> str:
    """The message of a node whose checks failed: count, each failed check with its detail and fix, the table's file."""
    failed = [c for c in _checks(results) if c["status"] == "fail"]
    listed = "; ".join(f"{c['check']}: {c['detail']} (fix: {c['fix'] or EMPTY_FIX})" for c in failed)
    return (
        f"{len(failed)} check(s) failed on {host}: {listed}. The table above and {report_dir}/validate.txt show"
        " every check. gpu_validate_fail_on_error: false reports without failing."
    )


def gpu_validate_files_pending(states, files, mode: str = "0644") -> bool:
    """Whether one of ``files`` ({path, content}) differs from its state on the node (``states``): write them then."""
    if not isinstance(states, Mapping):
        raise AnsibleFilterError(
            f"gpu_validate_files_pending: the states must be a mapping, got {type(states).__name__}"
        )
    for item in files:
        state = states.get(item["path"])
        wanted = {
            "sha1": hashlib.sha1(str(item["content"]).encode("utf-8")).hexdigest(),
            "mode": mode,
            "uid": 0,
            "gid": 0,
        }
        if not isinstance(state, Mapping) or any(state.get(key) != value for key, value in wanted.items()):
            return True
    return False


def gpu_validate_families(check_fuse=True, check_security=True, check_kubelet=True) -> list:
    """The families of checks to run, in the doctor's order (the registry, gpu_validate_families.py): every family
    without a switch, and those whose switch (gpu_validate_check_<name>) is on."""
    switches = {
        "gpu_validate_check_fuse": check_fuse,
        "gpu_validate_check_security": check_security,
        "gpu_validate_check_kubelet": check_kubelet,
    }
    return [name for name in _families.NAMES if _families.SWITCHES[name] is None or switches[_families.SWITCHES[name]]]


def gpu_validate_runtimes(node, asked=()) -> list:
    """The runtimes to check: ``asked`` when it names any, else the node's installed ones and an agent's containerd."""
    if not isinstance(node, Mapping):
        raise AnsibleFilterError(f"gpu_validate_runtimes: the node facts must be a mapping, got {type(node).__name__}")
    if asked:
        runtimes = list(asked)
    else:
        installer = node.get("installer") if isinstance(node.get("installer"), Mapping) else {}
        containerd = installer.get("containerd") if isinstance(installer.get("containerd"), Mapping) else {}
        agent = containerd.get("config_regenerated") == "agent start" and bool(containerd.get("binary"))
        runtimes = list(node.get("runtimes_installed") or []) + (["containerd"] if agent else [])
    return list(dict.fromkeys(runtimes))


# --- the doctor's shared logic (plugins/module_utils/gpu_validate/logic.py, also run on the node) ---------


gpu_validate_userns_missing = _logic.userns_missing


class FilterModule:
    """Filters of the gpu_validate role."""

    def filters(self):
        return {
            "gpu_validate_table": gpu_validate_table,
            "gpu_validate_summary": gpu_validate_summary,
            "gpu_validate_report": gpu_validate_report,
            "gpu_validate_failure": gpu_validate_failure,
            "gpu_validate_files_pending": gpu_validate_files_pending,
            "gpu_validate_families": gpu_validate_families,
            "gpu_validate_runtimes": gpu_validate_runtimes,
        }
