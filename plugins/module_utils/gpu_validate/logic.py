# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Pure functions of the doctor (role gpu_validate), shared by the node and the controller.

The node-side module gpu_validate_checks imports this file as module_utils.gpu_validate.logic;
the role's filters (plugins/filter/validate.py) import it and expose the same functions as
filters. Stdlib only, Python 3.8+ (the node's python3), so no PyYAML here:

`runtime_config(text)`
    The runtimes a `containerd config dump` or `crio config` lists and the default runtime, read by the
    node-side TOML reader of containerd/tables.py (tomllib where the python has it); lines around the
    TOML (log lines) are left out.

`json_problem(text)`
    Why a text is not a JSON object (a seccomp profile), or "" when it is one.

`feature_gates(text)`
    The featureGates of a KubeletConfiguration file (YAML or JSON) as {name: value}.

`userns_missing(node, feature_gates={})`
    What this node lacks to run user-namespaced pods (hostUsers: false), one sentence per
    requirement, from the gpu_node facts and the kubelet's effective featureGates; [] when nothing is.
"""

from __future__ import annotations

import json
import re

from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd.tables import (
    TomlError,
    cri_config,
    crio_config,
    toml_tables,
    toml_tables_around,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.system.versions import version_tuple

try:
    from collections.abc import Mapping
except ImportError:  # pragma: no cover - Python 2 is no target
    Mapping = dict

# --- runtime configuration dumps ---------------------------------------------------------------


def _runtime_entry(entry) -> dict:
    """What starts a container of one runtime table: the shim (containerd's runtime_type), the OCI runtime
    binary (containerd's options.BinaryName, CRI-O's runtime_path; '' = the shim's own default, runc) and
    CRI-O's runtime_type."""
    entry = entry if isinstance(entry, Mapping) else {}
    options = entry.get("options") if isinstance(entry.get("options"), Mapping) else {}
    binary = options.get("BinaryName") or entry.get("runtime_path") or ""
    return {"runtime_type": str(entry.get("runtime_type") or ""), "binary": str(binary)}


def runtime_config(text) -> dict:
    """Runtimes and the default runtime of a containerd or CRI-O configuration dump, as the runtime reads them
    (containerd/tables.py): containerd's CRI table of the dump's config version (cri_config), CRI-O's
    [crio.runtime] (crio_config).

    Returns {"runtimes": [names, sorted], "default": name or None, "parsed": True when the text was TOML (False:
    lines around it were left out, toml_tables_around; nothing read when even that fails), "default_entry":
    {"runtime_type", "binary"} of the default runtime's table (runc's when no default is named: the CRI plugin's
    and CRI-O's own default), empty strings where the dump does not say}.
    """
    parsed = True
    try:
        tree = toml_tables(text)
    except TomlError:
        parsed = False
        try:
            tree = toml_tables_around(text)[0]
        except TomlError:
            tree = {}
    config = crio_config(tree) if isinstance(tree.get("crio"), Mapping) else cri_config(tree)
    found, default = config["runtimes"], config["default"]
    return {
        "runtimes": sorted(found),
        "default": default,
        "parsed": parsed,
        "default_entry": _runtime_entry(found.get(default or "runc")),
    }


# --- JSON and the kubelet's feature gates ----------------------------------------------------------


def json_problem(text) -> str:
    """'' when the text is a JSON object (what a seccomp profile is), else why it is not."""
    try:
        value = json.loads(str(text or ""))
    except ValueError as exc:
        return f"not valid JSON ({exc})"
    if not isinstance(value, dict):
        return f"a JSON {type(value).__name__}, not an object"
    return ""


_YAML_TRUE = ("true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON")
_YAML_FALSE = ("false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF")


def _yaml_scalar(text: str):
    """A plain YAML 1.1 scalar as PyYAML (and the kubelet's sigs.k8s.io/yaml) reads a gate's value."""
    text = text.strip()
    if text[:1] in "\"'" and text[-1:] == text[:1] and len(text) > 1:
        return text[1:-1]
    if text in _YAML_TRUE:
        return True
    if text in _YAML_FALSE:
        return False
    return text


def _uncomment(line: str) -> str:
    return re.sub(r"(^|\s)#.*$", "", line).rstrip()


def feature_gates(text) -> dict:
    """featureGates of a KubeletConfiguration file, YAML (block or flow mapping) or JSON; {} without any."""
    text = str(text or "")
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        gates = doc.get("featureGates")
        return dict(gates) if isinstance(gates, dict) else {}
    gates: dict = {}
    lines = text.splitlines()
    for index, raw in enumerate(lines):
        match = re.match(r"""^["']?featureGates["']?\s*:\s*(.*)$""", _uncomment(raw))
        if not match:
            continue
        rest = match.group(1).strip()
        if rest.startswith("{"):
            for item in rest.strip("{}").split(","):
                if ":" in item:
                    name, value = item.split(":", 1)
                    gates[name.strip().strip("\"'")] = _yaml_scalar(value)
            continue
        for line in lines[index + 1 :]:
            line = _uncomment(line)
            if not line.strip():
                continue
            if not line[:1].isspace():
                break
            item = re.match(r"""^\s+["']?([^"':\s]+)["']?\s*:\s*(.*)$""", line)
            if item:
                gates[item.group(1)] = _yaml_scalar(item.group(2))
    return gates


# --- what user-namespaced FUSE pods need --------------------------------------------------------------

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


def _dotted(version: tuple) -> str:
    return ".".join(str(part) for part in version)


def _installed(tools: Mapping, minimums: Mapping) -> tuple:
    """('name version' of each installed tool, whether one of them is new enough)."""
    found, ok = [], False
    for name, minimum in minimums.items():
        facts = tools.get(name) or {}
        if not facts.get("installed"):
            continue
        version = version_tuple(facts.get("version"))
        found.append(f"{name} {facts.get('version') or '(version unknown)'}")
        ok = ok or (version is not None and version >= minimum)
    return found, ok


def userns_missing(node, feature_gates=None) -> list:
    """What this node lacks to run user-namespaced pods, one sentence per requirement; [] when nothing."""
    node = node or {}
    gates = feature_gates if isinstance(feature_gates, Mapping) else {}
    missing = []
    kernel = node.get("kernel") or {}
    kernel_version = version_tuple(kernel.get("version"))
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
    kubelet_version = version_tuple(kubelet.get("version"))
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


# The doctor's GPU health rows (gpu_validate/health.py) are named "GPU health: <what>"; a failed one means the GPU needs
# a reset, a drain or a replacement.
HEALTH_PREFIX = "GPU health: "


def node_health(checks) -> dict:
    """A node's GPU health from its doctor rows: {status, drain, reasons}. status: the worst of its "GPU health: ..."
    rows (fail, warn, ok; "skipped" where all were skipped, "none" where it has none); drain: whether one of them
    failed; reasons: "<check>: <detail>" of each failed one (validate.json's "health", the fleet report's column)."""
    rows = [row for row in checks or [] if str(row.get("check") or "").startswith(HEALTH_PREFIX)]
    failed = [row for row in rows if row.get("status") == "fail"]
    statuses = {row.get("status") for row in rows}
    status = next((s for s in ("fail", "warn", "ok") if s in statuses), "skipped" if rows else "none")
    return {
        "status": status,
        "drain": bool(failed),
        "reasons": [f"{row['check']}: {row.get('detail', '')}" for row in failed],
    }
