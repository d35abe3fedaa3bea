# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's cdi family (issue 38): the row "CDI spec", every CDI spec the container runtimes read checked against
the node: its device nodes against /dev, NVIDIA's driver version against the loaded driver, and device names that two
specs claim.

What a spec holds (CDI, cncf-tags/container-device-interface specs-go/config.go): cdiVersion, kind
(vendor/class), devices[] with name and containerEdits, and containerEdits common to all devices; a containerEdits'
deviceNodes[] have path, hostPath (the node on the host where it differs), type (c, b, u; a character device when
empty), major and minor (omitted when 0). The runtimes read the *.json and *.yaml files (no other suffix, no
subdirectory) of their spec directories (default /etc/cdi then /var/run/cdi); a device name is qualified by the
kind (nvidia.com/gpu=0); the same qualified name in two directories: the later directory wins; in one directory:
CDI drops the device as a conflict (pkg/cdi/spec-dirs.go, scanSpecDirs; pkg/cdi/cache.go, resolveConflict).

NVIDIA's generated spec (nvidia-container-toolkit v1.20.0): the device nodes carry the major and minor numbers
nvidia-ctk read from the host when it generated the spec (internal/edits/device.go, fromPathOrDefault; no type:
character devices), and the driver version it was generated for is the `--host-driver-version=<version>` argument of
its enable-cuda-compat hook (internal/discover/compat_libs.go, pkg/nvcdi/driver-nvml.go); the mounts of the
driver's libraries end in that version too (libcuda.so.<version>), the fallback where the hook is not there.

nvidia-ctk writes YAML (gopkg.in/yaml.v3 through CDI's pkg/cdi/spec.go) or JSON by the file's suffix. JSON is read
with json, YAML with PyYAML where the node has it, else with read_yaml below: the block YAML that yaml.v3 and
sigs.k8s.io/yaml write (mappings, sequences, quoted and plain scalars, [] and {}).

The node-side module gpu_validate_checks imports this file as module_utils.gpu_validate.cdi.
Stdlib only, Python 3.8+ (the node's python3).
"""

from __future__ import annotations

import json
import os
import re
import stat

from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd.tables import (
    TomlError,
    cri_config,
    toml_tables,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.doors import string_list
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import Node, table_row, truthy

NAME = "CDI spec"
SPEC_SUFFIXES = (".json", ".yaml")
# Where the loaded NVIDIA kernel module says its version: the module's own sysfs entry, then the driver's proc file
# ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  ...", the open modules "... Open Kernel Module for
# x86_64  580.95.05 ..."), which is there whatever the module's name (Debian's is nvidia_current in sysfs).
DRIVER_VERSION_FILES = ("/sys/module/nvidia/version", "/proc/driver/nvidia/version")
_PROC_VERSION = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)")
_HOOK_VERSION = re.compile(r"^--host-driver-version=(\S+)$")
_LIBRARY_VERSION = re.compile(r"/lib(?:cuda|nvidia-ml)\.so\.(\d+\.\d+(?:\.\d+)?)$")
_DEVICE_TYPES = {"c": stat.S_ISCHR, "u": stat.S_ISCHR, "b": stat.S_ISBLK}
MAX_PROBLEMS = 6


# ---- reading a spec ------------------------------------------------------------------------------------------


class YamlError(ValueError):
    pass


def _strip_comment(text: str) -> str:
    """A line without its comment (a # at the start or after a blank, outside quotes)."""
    quote = ""
    for index, char in enumerate(text):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'" and (index == 0 or text[index - 1] in " \t:-[{,"):
            quote = char
        elif char == "#" and (index == 0 or text[index - 1] in " \t"):
            return text[:index].rstrip()
    return text.rstrip()


def _key_split(text: str):
    """(key, rest) of `key: rest` / `key:`, None when the text is no mapping entry."""
    if text[:1] in "\"'":
        end = text.find(text[0], 1)
        while text[0] == "'" and end != -1 and text[end + 1 : end + 2] == "'":
            end = text.find("'", end + 2)
        if end == -1 or not re.match(r":(\s|$)", text[end + 1 :]):
            return None
        return _scalar(text[: end + 1]), text[end + 2 :].strip()
    match = re.match(r"^([^\s\[\]{},#&*!|>%@`][^#]*?):(?:\s+(.*))?$", text)
    if not match or ": " in match.group(1):
        return None
    return match.group(1).strip(), (match.group(2) or "").strip()


def _scalar(text: str):
    text = text.strip()
    if text.startswith('"'):
        if len(text) < 2 or not text.endswith('"'):
            raise YamlError(f"unclosed double quote: {text}")
        try:
            return json.loads(text)
        except ValueError:
            return text[1:-1]
    if text.startswith("'"):
        if len(text) < 2 or not text.endswith("'"):
            raise YamlError(f"unclosed single quote: {text}")
        return text[1:-1].replace("''", "'")
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if re.match(r"^[-+]?(0|[1-9][0-9]*)$", text):
        return int(text)
    if text.startswith("["):
        if not text.endswith("]"):
            raise YamlError(f"a flow sequence over several lines is not read here: {text}")
        inner = text[1:-1].strip()
        return [_scalar(item) for item in inner.split(",")] if inner else []
    if text == "{}":
        return {}
    if text[:1] in "{|>&*!":
        raise YamlError(f"not read here (flow mapping, block scalar, anchor or tag): {text}")
    return text


def _node(lines: list, index: int, indent: int):
    """(value, next index) of the block node whose first line is lines[index], at this indent."""
    _number, text = lines[index]
    if text == "-" or text.startswith("- "):
        return _sequence(lines, index, indent)
    if _key_split(text) is not None:
        return _mapping(lines, index, indent)
    return _scalar(text), index + 1


def _sequence(lines: list, index: int, indent: int):
    items = []
    while index < len(lines) and lines[index][0] == indent and (lines[index][1] == "-" or lines[index][1][:2] == "- "):
        rest = lines[index][1][1:].lstrip()
        if not rest:  # "-" alone: the item is the block below
            if index + 1 < len(lines) and lines[index + 1][0] > indent:
                value, index = _node(lines, index + 1, lines[index + 1][0])
            else:
                value, index = None, index + 1
        else:  # "- rest": rest starts a node at the column it is at
            column = indent + len(lines[index][1]) - len(rest)
            lines[index] = (column, rest)
            value, index = _node(lines, index, column)
        items.append(value)
    return items, index


def _mapping(lines: list, index: int, indent: int):
    result = {}
    while index < len(lines) and lines[index][0] == indent:
        split = _key_split(lines[index][1])
        if split is None:
            raise YamlError(f"expected `key: value`, got {lines[index][1]!r}")
        key, rest = split
        index += 1
        if rest:
            result[key] = _scalar(rest)
            continue
        following = lines[index] if index < len(lines) else None
        if following and (
            following[0] > indent or (following[0] == indent and (following[1] == "-" or following[1][:2] == "- "))
        ):
            result[key], index = _node(lines, index, following[0])
        else:
            result[key] = None
    return result, index


def read_yaml(text: str):
    """The block YAML that Go's YAML writers put out, as PyYAML would read it; YamlError for what it does not read."""
    lines = []
    for raw in text.splitlines():
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise YamlError("a tab in the indentation")
        line = _strip_comment(raw)
        if not line.strip() or line.strip() in ("---", "..."):
            continue
        lines.append((len(line) - len(line.lstrip(" ")), line.strip()))
    if not lines:
        return None
    value, index = _node(lines, 0, lines[0][0])
    if index != len(lines):
        raise YamlError(f"unexpected indentation at {lines[index][1]!r}")
    return value


def parse_spec(path: str, text: str) -> dict:
    """A spec file's content (JSON by its suffix, else YAML); ValueError with the reason when it is not a CDI spec."""
    if path.endswith(".json"):
        data = json.loads(text)
    else:
        try:
            import yaml  # optional on the node
        except ImportError:
            data = read_yaml(text)
        else:
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ValueError(" ".join(str(exc).split())) from exc
    if not isinstance(data, dict):
        raise ValueError("not a mapping")
    kind = data.get("kind")
    if not isinstance(kind, str) or not re.match(r"^[^/=]+/[^/=]+$", kind):
        raise ValueError(f"kind {kind!r} is not vendor/class")
    if not data.get("cdiVersion"):
        raise ValueError("no cdiVersion")
    devices = data.get("devices")
    if not isinstance(devices, list) or not all(isinstance(d, dict) and d.get("name") for d in devices):
        raise ValueError("devices is not a list of named devices")
    return data


# ---- what a spec says, and the node --------------------------------------------------------------------------


def _edits(spec: dict) -> list:
    """Every containerEdits of a spec: the common ones, then each device's."""
    edits = [spec.get("containerEdits") or {}]
    edits += [d.get("containerEdits") or {} for d in spec["devices"]]
    return [e for e in edits if isinstance(e, dict)]


def spec_device_nodes(spec: dict) -> list:
    """Each device node a spec names, once: {path, host_path, type, major, minor}."""
    found = {}
    for edits in _edits(spec):
        for entry in edits.get("deviceNodes") or []:
            if not isinstance(entry, dict) or not entry.get("path"):
                continue
            host_path = str(entry.get("hostPath") or entry["path"])
            node = {
                "path": str(entry["path"]),
                "host_path": host_path,
                "type": str(entry.get("type") or ""),
                "major": int(entry.get("major") or 0),
                "minor": int(entry.get("minor") or 0),
            }
            found.setdefault(host_path, node)
    return list(found.values())


def spec_driver_version(spec: dict) -> str:
    """The NVIDIA driver version a spec was generated for ('' when it records none)."""
    for edits in _edits(spec):
        for hook in edits.get("hooks") or []:
            for arg in (hook.get("args") or []) if isinstance(hook, dict) else []:
                match = _HOOK_VERSION.match(str(arg))
                if match:
                    return match.group(1)
    for edits in _edits(spec):
        for mount in edits.get("mounts") or []:
            match = _LIBRARY_VERSION.search(str(mount.get("hostPath") or "") if isinstance(mount, dict) else "")
            if match:
                return match.group(1)
    return ""


def loaded_driver_version(host: Node, node: dict) -> str:
    """The loaded NVIDIA kernel module's version: its sysfs entry, the driver's proc file, else the node facts."""
    sysfs = (host.read(DRIVER_VERSION_FILES[0]) or "").strip()
    if sysfs:
        return sysfs
    match = _PROC_VERSION.search(host.read(DRIVER_VERSION_FILES[1]) or "")
    if match:
        return match.group(1)
    driver = node.get("driver") or {}
    return str(driver.get("version") or "") if truthy(driver.get("loaded")) else ""


def device_node_problem(entry: dict, st) -> str:
    """What is wrong with one device node of a spec on the host (st: its lstat, None when missing); '' when right."""
    where = entry["host_path"]
    if st is None:
        return f"{where} is missing"
    if not (stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)):
        return f"{where} is not a device node"
    kind = entry["type"]
    if kind and kind in _DEVICE_TYPES and not _DEVICE_TYPES[kind](st.st_mode):
        return f"{where} is not a {'block' if kind == 'b' else 'character'} device (type {kind} in the spec)"
    rdev = getattr(st, "st_rdev", None) or 0
    have = (os.major(rdev), os.minor(rdev))
    if (entry["major"] or entry["minor"]) and have != (entry["major"], entry["minor"]):
        return f"{where} is {have[0]}:{have[1]} in /dev, {entry['major']}:{entry['minor']} in the spec"
    return ""


# ---- the spec directories ------------------------------------------------------------------------------------


def _find_key(tree, key: str) -> list:
    """The values of every `key` in a nested TOML tree."""
    found = []
    if isinstance(tree, dict):
        for name, value in tree.items():
            if name == key:
                found.append(value)
            else:
                found += _find_key(value, key)
    return found


def cdi_spec_dirs(text) -> list:
    """Every cdi_spec_dirs of a runtime's TOML config (`containerd config dump`, `crio config`)."""
    try:
        tree = toml_tables(str(text or ""))
    except TomlError:
        return []
    return [d for value in _find_key(tree, "cdi_spec_dirs") for d in string_list(value)]


def cdi_enabled(text):
    """enable_cdi of a runtime's TOML config dump (containerd's CRI table, containerd/tables.py cri_config): True,
    False, or None when the dump names none (a containerd before 1.7, or no dump)."""
    try:
        return cri_config(toml_tables(text))["enable_cdi"]
    except TomlError:
        return None


def spec_dirs(params: dict, host: Node, containerd=None, crio=None) -> list:
    """The spec directories to check, in CDI's order of precedence (later wins): cdi_spec_dirs, then those the
    runtimes' configs name (containerd's and CRI-O's cdi_spec_dirs, docker's cdi-spec-dirs, the toolkit's
    nvidia-container-runtime.modes.cdi.spec-dirs)."""
    dirs = list(params["cdi_spec_dirs"])
    if containerd is not None:
        dirs += containerd.get("cdi_spec_dirs") or []
    if crio is not None and crio.get("ok"):
        dirs += cdi_spec_dirs(crio["dump"][1])
    daemon = host.read(params["docker_daemon_json"])
    if daemon:
        try:
            named = json.loads(daemon).get("cdi-spec-dirs")
        except (ValueError, AttributeError):
            named = None
        dirs += [str(d) for d in named] if isinstance(named, list) else []
    tree = host.read(params["toolkit_config"])
    if tree:
        try:
            cdi = ((toml_tables(tree).get("nvidia-container-runtime") or {}).get("modes") or {}).get("cdi") or {}
        except TomlError:
            cdi = {}
        dirs += string_list(cdi.get("spec-dirs"))
    return [os.path.normpath(d) for d in dict.fromkeys(d for d in dirs if d)]


# ---- the row -------------------------------------------------------------------------------------------------


def cdi_row(specs: list, loaded: str, dirs: list) -> dict:
    """specs: [{path, dir, spec (or None), error, problems}] in the order the runtimes read them; loaded: the loaded
    driver's version ('' without one)."""
    if not specs:
        return table_row(NAME, "skipped", f"no CDI spec in {', '.join(dirs)}")
    failed = []
    for item in specs:
        if item["spec"] is None:
            failed.append(f"{item['path']}: not a CDI spec ({item['error']})")
        else:
            failed += [f"{item['path']}: {problem}" for problem in item["problems"]]
    # which spec serves each qualified device name: the last directory wins; two in one directory: none does
    owners: dict = {}
    for item in specs:
        if item["spec"] is not None:
            for device in item["spec"]["devices"]:
                owners.setdefault(f"{item['spec']['kind']}={device['name']}", []).append(item)
    shadowed, conflicts = [], []
    for name, items in owners.items():
        if len(items) < 2:
            continue
        dirs_of = [i["dir"] for i in items]
        paths = " and ".join(i["path"] for i in items)
        if dirs_of.count(dirs_of[-1]) > 1:
            conflicts.append(f"{name} is in {paths} (one directory: CDI drops the device)")
        else:
            shadowed.append(f"{name} is in {paths} (the runtimes use {items[-1]['path']})")
    failed += conflicts
    good = [i for i in specs if i["spec"] is not None]
    names = ", ".join(f"{i['path']} ({i['spec']['kind']}, {len(i['spec']['devices'])} devices)" for i in good)
    if failed:
        more = f"; and {len(failed) - MAX_PROBLEMS} more" if len(failed) > MAX_PROBLEMS else ""
        return table_row(
            NAME,
            "fail",
            "; ".join(failed[:MAX_PROBLEMS]) + more,
            "Regenerate the spec where NVIDIA's toolkit wrote it (systemctl restart nvidia-cdi-refresh.service, or "
            "site.yml --tags toolkit; by hand: nvidia-ctk cdi generate --output=<the spec>), or remove a stale spec",
        )
    if shadowed:
        more = f"; and {len(shadowed) - MAX_PROBLEMS} more" if len(shadowed) > MAX_PROBLEMS else ""
        return table_row(
            NAME,
            "warn",
            "two specs claim the same device: " + "; ".join(shadowed[:MAX_PROBLEMS]) + more,
            "Keep one spec per device: remove the stale one (a static spec in /etc/cdi shadowed by the generated "
            "/var/run/cdi/nvidia.yaml, or the other way round)",
        )
    driver = f"; driver {loaded} loaded" if loaded else ""
    return table_row(NAME, "ok", f"device nodes as in /dev{driver}: {names}")


def check_spec(path: str, text, loaded: str, host: Node) -> dict:
    """One spec file read and checked against the node: {path, dir, spec, error, problems}."""
    item = {"path": path, "dir": os.path.dirname(path), "spec": None, "error": "", "problems": []}
    if text is None:
        item["error"] = "cannot be read"
        return item
    try:
        spec = parse_spec(path, text)
        nodes = spec_device_nodes(spec)  # ValueError: a major or minor that is no number
    except ValueError as exc:  # json.JSONDecodeError and YamlError are ValueErrors
        item["error"] = " ".join(str(exc).split())[:200]
        return item
    item["spec"] = spec
    for entry in nodes:
        problem = device_node_problem(entry, host.lstat(entry["host_path"]))
        if problem:
            item["problems"].append(problem)
    version = spec_driver_version(item["spec"])
    if version and not loaded:
        item["problems"].append(f"generated for driver {version}, but no NVIDIA driver is loaded")
    elif version and version != loaded:
        item["problems"].append(f"generated for driver {version}, but {loaded} is loaded")
    return item


def check_cdi(params: dict, node: dict, host: Node, containerd=None, crio=None) -> list:
    """The cdi family: one row for every spec in the runtimes' CDI directories (containerd: containerd_state(),
    crio: crio_state(); None when that runtime is not checked)."""
    dirs = spec_dirs(params, host, containerd, crio)
    paths = [p for d in dirs for p in sorted(host.glob(f"{d}/*")) if p.endswith(SPEC_SUFFIXES)]
    loaded = loaded_driver_version(host, node) if paths else ""
    specs = [check_spec(p, host.read(p), loaded, host) for p in dict.fromkeys(paths)]
    return [cdi_row(specs, loaded, dirs)]
