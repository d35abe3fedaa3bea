# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The fleet report of the doctor: every node's results in one document (roles/gpu_validate, tasks/fleet_report.yml).

`gpu_fleet_report(nodes, hosts=None)`
    ``nodes`` is a list of ``{"host": name, "checks": [...]}`` (the rows of gpu_validate, as in each node's
    validate.json), where ``checks`` is None for a node of the play that has no doctor result in this run (it
    failed or was unreachable earlier, or its batch has not run yet); or, with ``hosts``, the list of each
    host's checks in the order of ``hosts``. Returns the document written to
    gpu-fleet-report.json and rendered by templates/fleet_report.html.j2:

        {"summary":  {"nodes": {"fail": 1, "warn": 0, "ok": 2, "none": 0, "total": 3},
                      "drain": ["gpu-7"],                                     # the nodes to drain, first below
                      "cells": {"ok": .., "warn": .., "fail": .., "skipped": .., "total": ..}},
         "families": ["driver", "toolkit", "docker", ...],              # in the doctor's order
         "checks":   [{"check": name, "family": f, "fail": n, "warn": n}, ...],   # failures first
         "nodes":    [{"host": h, "status": "fail|warn|ok|none", "health": "fail|warn|ok|skipped|none",
                       "drain": bool, "drain_reasons": ["<check>: <detail>", ...], "summary": {...} or None,
                       "cells": {check: {"status", "detail", "fix"}}}, ...]}       # failures first

    Nodes: the nodes to drain first (a "GPU health: ..." row failed: gpu_node_health), then failed ones (most failed
    checks first), then warn, ok and nodes without a result, each
    group by name. Checks: those failing on most nodes first, then warning ones, then the doctor's order.
    No time stamp: the files change only when a result changed.

`gpu_fleet_results(hosts, hostvars)`
    Each host's fact gpu_validate_results, None where a host has none: the ``nodes`` of gpu_fleet_report. A host's
    fact gpu_rollout_results (the row "rollout: <playbook>" of a rollout that stopped on it, playbooks/tasks/
    rollout.yml, read back from the node's annotation on later runs) is added to its rows.

`gpu_node_health(checks)`
    A node's GPU health from its doctor rows (the "GPU health: ..." rows, family health): {status, drain, reasons}; the
    fleet report's health column and its list of nodes to drain, and validate.json's "health" (automation cordons the
    nodes whose drain is true).

`gpu_fleet_with_others(results, hosts, existing)`
    The ``nodes`` of gpu_fleet_report for this play's ``hosts`` (their ``results``, in order), followed by the nodes
    of ``existing`` (the text of the fleet report JSON already on the controller, '' where there is none) that are
    not hosts of this play, their rows as that report holds them. An inventory run in slices (AWX's job slicing: each
    slice a play over its share of the hosts) so keeps one report of every node: each slice replaces its own nodes'
    rows and leaves the other slices' rows alone. A node that left the inventory stays until the report is removed.

`gpu_fleet_files_pending(files)` (a function of this file, no longer a filter: gpu_fleet_report_pending and the
    action fleet_report_write call it)
    Whether the fleet report must be written: ``files`` is a list of {path, content} on the controller; True when
    one is missing or holds other text (it reads the controller's files: the role rewrites them only then). An item
    with a ``key`` (the HTML page: ``gpu_fleet_report_key``) whose file carries that key (``key_marker``) is the page
    of the same JSON by the same template: its content, which renders the whole page, is then not compared (a no-op
    re-run rendered it for nothing, issue 47). The write (fleet_report_write) compares the whole text.

`gpu_fleet_report_pending(json_text, path, template)`
    Whether the role writes the fleet report at ``path`` (its .json and .html): gpu_fleet_files_pending of the JSON
    text and the page's key, from one rendering of the JSON (the role's condition; a no-op re-run rendered it twice).

`gpu_fleet_report_key(json_text, template)`
    The key the HTML page carries: SHA-256 of the template file's bytes and the JSON report's text.

Families: each row carries its family (``family``: the doctor's family whose checks built it, set by the node-side
module; "rollout" for a rollout's row), the filter of the HTML page; ``families`` lists them in the doctor's order,
the registry plugins/module_utils/gpu_validate/families.py (others after it, by name).

`gpu_fleet_family(check)` (used by gpu_fleet_report, not a filter)
    Only for a row without a family (a node report of a version before issue 51): the family from the row's name
    (LEGACY_FAMILY_RULES), else the prefix before ": ", else "other".

Pure functions; the unit tests call them without Ansible.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence

from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import families as _families
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import logic as _logic

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - Ansible is always there when the role runs

    class AnsibleFilterError(Exception):
        pass


STATUSES = ("ok", "warn", "fail", "skipped")
NODE_STATUSES = ("fail", "warn", "ok", "none")
# Only for the rows of a node report from a version of this project before rows carried their family (issue 51): a
# node's validate.json or a fleet report written then. (pattern on the check's name, family of the registry), first
# match wins; the unit tests hold every row the doctor builds now to these rules.
LEGACY_FAMILY_RULES = (
    (r"^(NVIDIA driver|nvidia-smi|nvidia-peermem|driver\b)", "driver"),
    (r"^container toolkit$", "toolkit"),
    (r"^container runtime$", "runtime"),
    (r"^(docker|containerd|crio): GPU isolation \(default, CAP_SYS_ADMIN\)$|^device plugin vs node$", "isolation"),
    (r"^door: |^toolkit: GPU by volume mount$|^(containerd|crio): CDI annotations of pods$", "doors"),
    (r"^docker:", "docker"),
    (r"^containerd:", "containerd"),
    (r"^crio:", "crio"),
    (r"^CDI spec", "cdi"),
    (r"^MIG$", "mig"),
    (r"^(IMEX|NVLink fabric)$", "fabric"),
    (r"^(GPU health: |GPU settings$)", "health"),
    (r"^/dev/fuse$", "fuse"),
    (r"^(AppArmor|seccomp) profile\b", "security"),
    (r"^FUSE confinement$", "confinement"),
    (r"^kubelet\b", "kubelet"),
    (r"^(GPU allocation|DRA prerequisites)$", "dra"),
)


def gpu_fleet_family(check: str) -> str:
    """The family of a row that carries none (a report of an older version; LEGACY_FAMILY_RULES) from its name; a
    name no rule knows: its prefix before ': ', else 'other'."""
    name = str(check or "")
    for pattern, family in LEGACY_FAMILY_RULES:
        if re.search(pattern, name):
            return family
    prefix, sep, _rest = name.partition(": ")
    return prefix.strip().lower() if sep and prefix.strip() else "other"


def _rows(host: str, checks) -> list[dict]:
    if isinstance(checks, (str, bytes)) or not isinstance(checks, Sequence):
        raise AnsibleFilterError(f"gpu_fleet_report: the checks of {host} must be a list, got {type(checks).__name__}")
    rows = []
    for index, item in enumerate(checks):
        if not isinstance(item, Mapping) or not str(item.get("check") or "").strip():
            raise AnsibleFilterError(f"gpu_fleet_report: check #{index} of {host} is not a mapping with a 'check' name")
        status = str(item.get("status") or "").strip().lower()
        if status not in STATUSES:
            raise AnsibleFilterError(
                f"gpu_fleet_report: check '{item['check']}' of {host} has status {item.get('status')!r}; "
                f"use one of {', '.join(STATUSES)}"
            )
        rows.append(
            {
                "check": str(item["check"]).strip(),
                "status": status,
                "detail": " ".join(str(item.get("detail") or "").split()),
                "fix": " ".join(str(item.get("fix") or "").split()),
                "family": str(item.get("family") or "").strip(),  # '' for a row of an older version
            }
        )
    return rows


def gpu_fleet_report(nodes, hosts=None) -> dict:
    """The fleet document of the nodes' doctor results (module docstring). With ``hosts``, ``nodes`` is the list
    of each host's checks (None: no result), in the order of ``hosts``."""
    if isinstance(nodes, (str, bytes, Mapping)) or not isinstance(nodes, Sequence):
        raise AnsibleFilterError(f"gpu_fleet_report: nodes must be a list, got {type(nodes).__name__}")
    if hosts is not None:
        if isinstance(hosts, (str, bytes)) or len(hosts) != len(nodes):
            raise AnsibleFilterError("gpu_fleet_report: hosts must be a list as long as the list of results")
        nodes = [{"host": host, "checks": checks} for host, checks in zip(hosts, nodes, strict=True)]
    order: list[str] = []  # check names in the doctor's order, first seen first
    carried: dict[str, str] = {}  # check name: the family its rows carry (the first node's that carries one)
    documents = []
    for entry in nodes:
        if not isinstance(entry, Mapping) or not str(entry.get("host") or "").strip():
            raise AnsibleFilterError(f"gpu_fleet_report: every node needs a 'host' name, got {entry!r}")
        host = str(entry["host"]).strip()
        checks = entry.get("checks")
        if checks is None:
            documents.append(
                {
                    "host": host,
                    "status": "none",
                    "health": "none",
                    "drain": False,
                    "drain_reasons": [],
                    "summary": None,
                    "cells": {},
                }
            )
            continue
        rows = _rows(host, checks)
        for row in rows:
            if row["check"] not in order:
                order.append(row["check"])
            if row["family"]:
                carried.setdefault(row["check"], row["family"])
        counts = {status: sum(1 for row in rows if row["status"] == status) for status in STATUSES}
        status = "fail" if counts["fail"] else "warn" if counts["warn"] else "ok"
        health = gpu_node_health(rows)
        documents.append(
            {
                "host": host,
                "status": status,
                "health": health["status"],
                "drain": health["drain"],
                "drain_reasons": health["reasons"],
                "summary": {**counts, "total": len(rows), "status": status},
                "cells": {row["check"]: {k: row[k] for k in ("status", "detail", "fix")} for row in rows},
            }
        )

    def count(check: str, status: str) -> int:
        return sum(1 for doc in documents if doc["cells"].get(check, {}).get("status") == status)

    checks = [
        {
            "check": name,
            "family": carried.get(name) or gpu_fleet_family(name),
            "fail": count(name, "fail"),
            "warn": count(name, "warn"),
        }
        for name in order
    ]
    checks.sort(key=lambda c: (-c["fail"], -c["warn"]))  # stable: the doctor's order within equal counts
    documents.sort(
        key=lambda d: (
            not d["drain"],
            NODE_STATUSES.index(d["status"]),
            -(d["summary"] or {}).get("fail", 0),
            -(d["summary"] or {}).get("warn", 0),
            d["host"],
        )
    )
    found = {c["family"] for c in checks}
    known = _families.NAMES
    families = [f for f in known if f in found] + sorted(found.difference(known))
    node_counts = {status: sum(1 for d in documents if d["status"] == status) for status in NODE_STATUSES}
    cell_counts = {status: sum(count(c["check"], status) for c in checks) for status in STATUSES}
    return {
        "summary": {
            "nodes": {**node_counts, "total": len(documents)},
            "drain": [d["host"] for d in documents if d["drain"]],
            "cells": {**cell_counts, "total": sum(cell_counts.values())},
        },
        "families": families,
        "checks": checks,
        "nodes": documents,
    }


gpu_node_health = _logic.node_health
# The doctor's families in its order (the one registry; the node-side module reads the same file).


def gpu_fleet_results(
    hosts, hostvars, name: str = "gpu_validate_results", rollout: str = "gpu_rollout_results"
) -> list:
    """Each host's doctor results (the fact ``name``) from ``hostvars``, None for a host without them; a host's
    rollout rows (the fact ``rollout``, playbooks/tasks/rollout.yml: a failed or stopped rollout step) follow its
    doctor's rows, or stand alone where it has none."""
    results = []
    for host in hosts or []:
        variables = hostvars[host] if host in hostvars else {}  # noqa: SIM401 (Ansible's lazy HostVars: membership, then item)
        rows = variables[name] if name in variables else None  # noqa: SIM401 (as above)
        extra = variables[rollout] if rollout in variables else None  # noqa: SIM401 (as above)
        if extra:
            rows = [*(rows or []), *extra]
        results.append(rows)
    return results


def gpu_fleet_with_others(results, hosts, existing) -> list:
    """This play's nodes, then the nodes of the ``existing`` report text that are not among ``hosts`` (docstring)."""
    if isinstance(hosts, (str, bytes)) or len(hosts) != len(results):
        raise AnsibleFilterError("gpu_fleet_with_others: hosts must be a list as long as the list of results")
    nodes = [{"host": host, "checks": checks} for host, checks in zip(hosts, results, strict=True)]
    try:
        document = json.loads(existing) if str(existing or "").strip() else {}
    except ValueError:
        document = {}  # a report someone broke by hand is written anew
    ours = set(hosts)
    document = document if isinstance(document, Mapping) else {}
    # the report's cells hold no family: each check's family is in its list of checks
    families = {c.get("check"): c.get("family") for c in document.get("checks") or [] if isinstance(c, Mapping)}
    for entry in document.get("nodes") or []:
        if not isinstance(entry, Mapping) or entry.get("host") in ours or not entry.get("host"):
            continue
        cells = entry.get("cells") or {}
        checks = (
            None
            if entry.get("status") == "none"
            else [{"check": name, **cell, "family": families.get(name) or ""} for name, cell in cells.items()]
        )
        nodes.append({"host": entry["host"], "checks": checks})
    return nodes


def key_marker(key: str) -> str:
    """The line of the HTML page that names its key (templates/fleet_report.html.j2 writes it)."""
    return f'<meta name="gpunode-fleet-report" content="{key}">'


def gpu_fleet_report_key(json_text, template) -> str:
    """SHA-256 of the template file's bytes and the JSON report's text: the page they render carries it."""
    digest = hashlib.sha256()
    with open(str(template), "rb") as handle:
        digest.update(handle.read())
    digest.update(b"\0" + str(json_text).encode("utf-8"))
    return digest.hexdigest()


def gpu_fleet_report_pending(json_text, path, template) -> bool:
    """Whether the fleet report at ``path`` (.json, .html) must be written for the JSON text ``json_text``: the JSON
    file holds other text, or the page does not carry the key of that text and ``template`` (the role's pending
    condition renders the JSON once, here, not once for each file)."""
    text = str(json_text)
    files = [
        {"path": f"{path}.json", "content": text},
        {"path": f"{path}.html", "key": gpu_fleet_report_key(text, template)},
    ]
    return gpu_fleet_files_pending(files)


def gpu_fleet_files_pending(files) -> bool:
    """Whether one of ``files`` ({path, content}, or with a ``key``) is missing on the controller or holds other text
    (or, with a key, does not carry it)."""
    for item in files:
        try:
            with open(item["path"], encoding="utf-8", newline="") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError):
            return True
        if item.get("key"):
            if key_marker(str(item["key"])) not in text:
                return True
        elif text != str(item["content"]):
            return True
    return False


class FilterModule:
    """Filters of the doctor's fleet report."""

    def filters(self):
        return {
            "gpu_fleet_report": gpu_fleet_report,
            "gpu_fleet_results": gpu_fleet_results,
            "gpu_fleet_with_others": gpu_fleet_with_others,
            "gpu_fleet_report_pending": gpu_fleet_report_pending,
            "gpu_fleet_report_key": gpu_fleet_report_key,
        }
