# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Pure functions of the doctor (role gpu_validate), shared by the node and the controller.

The node-side module gpu_validate_checks imports this file as module_utils.gpu_validate.logic;
the role's filters (plugins/filter/validate.py) import it and expose the same functions as
filters. Stdlib only, Python 3.8+ (the node's python3), so no tomllib and no PyYAML here:

`runtime_config(text)`
    The runtimes a `containerd config dump` or `crio config` lists and the default runtime.
    tomllib where the python has it (3.11+), else a reader of the TOML that those dumps are made of
    (tables, `key = value`, strings, numbers, booleans, arrays); a regex over the table headers for
    text that is not TOML (log lines around it).

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

from ansible_collections.gpunode.provisioning.plugins.module_utils.system.versions import version_tuple

try:
    from collections.abc import Mapping
except ImportError:  # pragma: no cover - Python 2 is no target
    Mapping = dict

try:
    import tomllib
except ImportError:  # Python < 3.11: the node's python3 on Debian 11/12, Ubuntu 22.04, EL 9
    tomllib = None


# --- runtime configuration dumps ---------------------------------------------------------------

_HEADER_RUNTIME = re.compile(r"""^\s*\[[^\]]*\bruntimes\.(?:"([^"]+)"|'([^']+)'|([A-Za-z0-9_-]+))\]\s*$""", re.M)
_DEFAULT_RUNTIME = re.compile(r"""^\s*default_runtime(?:_name)?\s*=\s*["']([^"']*)["']""", re.M)
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class TomlError(ValueError):
    """The text is not TOML that the small reader understands."""


def _toml_key(text: str) -> tuple:
    """A dotted key (a.'b.c'."d") as its parts."""
    parts, pos, text = [], 0, text.strip()
    while True:
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos < len(text) and text[pos] in "\"'":
            quote = text[pos]
            end = text.find(quote, pos + 1)
            if end < 0:
                raise TomlError(f"unterminated key: {text}")
            raw = text[pos + 1 : end]
            parts.append(json.loads(f'"{raw}"') if quote == '"' else raw)
            pos = end + 1
        else:
            match = _BARE_KEY.match(text, pos)
            if not match:
                raise TomlError(f"bad key: {text}")
            parts.append(match.group(0))
            pos = match.end()
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos == len(text):
            return tuple(parts)
        if text[pos] != ".":
            raise TomlError(f"bad key: {text}")
        pos += 1


def _split_value(line: str) -> tuple:
    """(key part, value part) of `key = value`, the `=` outside quotes."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "=":
            return line[:index], line[index + 1 :].strip()
    raise TomlError(f"not a key = value line: {line}")


def _balanced(text: str) -> bool:
    """Whether the brackets of an array or inline table are closed (strings and comments skipped)."""
    depth, quote, index = 0, None, 0
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\" and quote == '"':
                index += 1
            elif char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "#":
            while index < len(text) and text[index] != "\n":
                index += 1
            continue
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        index += 1
    return depth <= 0


def _nothing_after(rest: str, text: str) -> None:
    """Only a comment may follow a value."""
    rest = rest.strip()
    if rest and not rest.startswith("#"):
        raise TomlError(f"text after the value: {text}")


def _scalar(text: str):
    """A TOML value: strings, booleans and numbers as such; arrays and inline tables as their text."""
    text = text.strip()
    if text.startswith('"'):
        end = 1
        while end < len(text) and text[end] != '"':
            end += 2 if text[end] == "\\" else 1
        if end >= len(text):
            raise TomlError(f"unterminated string: {text}")
        _nothing_after(text[end + 1 :], text)
        return json.loads(text[: end + 1])
    if text.startswith("'"):
        end = text.find("'", 1)
        if end < 0:
            raise TomlError(f"unterminated string: {text}")
        _nothing_after(text[end + 1 :], text)
        return text[1:end]
    value = text.split("#", 1)[0].strip()
    if value in ("true", "false"):
        return value == "true"
    if re.fullmatch(r"[+-]?\d[\d_]*", value):
        return int(value.replace("_", ""))
    if value.startswith(("[", "{")):
        return value
    try:
        return float(value)
    except ValueError:
        raise TomlError(f"value not understood: {text}") from None


def toml_tables(text: str) -> dict:
    """The nested tables of a configuration dump (see the module docstring); raises TomlError."""
    if tomllib is not None:
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise TomlError(str(exc)) from None
    doc: dict = {}
    table = doc
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        index += 1
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            array = line.startswith("[[")
            inner = line[2:] if array else line[1:]
            close = inner.rfind("]]" if array else "]")
            if close < 0 or inner[close + (2 if array else 1) :].split("#", 1)[0].strip():
                raise TomlError(f"bad table header: {line}")
            table = doc
            for part in _toml_key(inner[:close]):
                table = table.setdefault(part, {})
                if not isinstance(table, dict):
                    raise TomlError(f"table {line} redefines a value")
            continue
        key, value = _split_value(line)
        if value.startswith('"""') or value.startswith("'''"):
            fence = value[:3]
            while value.count(fence) < 2 and index < len(lines):
                value += "\n" + lines[index]
                index += 1
            if value.count(fence) < 2:
                raise TomlError(f"unterminated multi-line string: {line}")
            parsed = value[3 : value.index(fence, 3)]
        else:
            while value[:1] in "[{" and not _balanced(value) and index < len(lines):
                value += "\n" + lines[index]
                index += 1
            parsed = _scalar(value)
        parts = _toml_key(key)
        target = table
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = parsed
    return doc


def _walk_runtimes(node, found: dict, defaults: list) -> None:
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


def runtime_config(text) -> dict:
    """Runtimes and the default runtime of a containerd or CRI-O configuration dump.

    containerd: every `...containerd.runtimes.<name>` table and `default_runtime_name` next to it
    (config v1, v2 and v3 alike). CRI-O: `crio.runtime.runtimes.<name>` and `crio.runtime.default_runtime`.
    Returns {"runtimes": [names, sorted], "default": name or None, "parsed": True when the text was TOML,
    "default_entry": {"runtime_type", "binary"} of the default runtime's table (runc's when no default is
    named: the CRI plugin's and CRI-O's own default), empty strings where the dump does not say}.
    """
    text = str(text or "")
    found: dict = {}
    defaults: list = []
    try:
        _walk_runtimes(toml_tables(text), found, defaults)
        parsed = True
    except TomlError:
        # Log lines or a tool's oddities around the TOML: read the table headers and the key instead.
        parsed = False
        found, defaults = {}, []
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
