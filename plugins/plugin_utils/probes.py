# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Probes answered on the controller from files a role_read task has already read (issue 47).

A probe is a module run in check mode that says whether its task would change anything (plugins/action/role_read.py).
The kubelet role's probes (its drop-in writes, the drop-ins it removes, the flags in the kubelet's environment file)
were a task of their own after the read: a worker, three module payloads built on the controller and three module
runs on the node on every re-run. Each of them decides from a file's bytes and its owner, group and mode, which the
read task has just read (slurp and stat, one node_files run). ``answer`` works the probe out from those, with the
module's own code where the content is edited (kubelet_flags' ``compute``), and returns what the probe would
register (``changed``); it returns None where it cannot be sure (a file the read did not read, an argument it does
not know, a symbolic mode, bytes that are not UTF-8, an error the module would report), and the probe then runs on
the node as before. Where the answer is "changed", the role's real task runs and decides again on the node.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping

from ansible_collections.gpunode.provisioning.plugins.plugin_utils.controller_files import COLLECTION

_OCTAL_MODE = re.compile(r"^0?[0-7]{3,4}$")


def builtin_names(short: str) -> set[str]:
    """The names a task may give one of ansible-core's modules by: bare, ansible.legacy. and ansible.builtin."""
    return {short, f"ansible.legacy.{short}", f"ansible.builtin.{short}"}


def collection_names(short: str) -> set[str]:
    """The names a task may give one of this collection's modules by: bare, ansible.legacy. and the FQCN."""
    return {short, f"ansible.legacy.{short}", f"{COLLECTION}.{short}"}


CONFIG_FILE_WRITE = collection_names("config_file_write")
KUBELET_FLAGS = collection_names("kubelet_flags")
FILE = builtin_names("file")
# the arguments each probe may give for an answer here; any other one: the module runs
CONFIG_FILE_WRITE_ARGS = {"path", "dest", "content", "owner", "group", "mode", "create_dirs", "backup", "show_diff"}
KUBELET_FLAGS_ARGS = {
    "path",
    "variable",
    "flags",
    "flags_absent",
    "node_labels",
    "node_labels_absent",
    "backup",
    "create",
    "owner",
    "group",
    "mode",
}


class KnownFile:
    """What a read task learnt of one path: its bytes (None: missing), stat following links, stat of the link."""

    def __init__(self):
        self.read = False
        self.content: bytes | None = None
        self.stat: Mapping | None = None
        self.lstat: Mapping | None = None


def known_files(entries) -> dict[str, KnownFile]:
    """The files a read task read, from (module kind, arguments, result) of each of its stat and slurp runs."""
    files: dict[str, KnownFile] = {}
    for kind, arguments, result in entries:
        path = arguments.get("path") or arguments.get("src")
        if not path:
            continue
        known = files.setdefault(str(path), KnownFile())
        if kind == "slurp":
            if "content" not in result:  # a missing file (missing_ok keeps its failure's message)
                if "not found" in str(result.get("msg", "")).lower():
                    known.read, known.content = True, None
                continue
            if result.get("encoding") == "base64" and "content" in result:
                known.read, known.content = True, base64.b64decode(result["content"])
        elif kind == "stat" and isinstance(result.get("stat"), Mapping):
            if arguments.get("follow", False):
                known.stat = result["stat"]
            else:
                known.lstat = result["stat"]
    return files


def _mode(value) -> int | None:
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _OCTAL_MODE.match(value):
        return int(value, 8)
    return None


def attributes_differ(stat: Mapping, owner, group, mode) -> bool | None:
    """Whether owner, group or mode (those given) differ from ``stat``; None where it cannot tell."""
    if mode is not None:
        wanted = _mode(mode)
        if wanted is None or "mode" not in stat:
            return None
        if int(str(stat["mode"]), 8) != wanted:
            return True
    for value, name_key, id_key in ((owner, "pw_name", "uid"), (group, "gr_name", "gid")):
        if value is None:
            continue
        value = str(value)
        if value.isdigit():
            if id_key not in stat:
                return None
            if int(value) != int(stat[id_key]):
                return True
        elif stat.get(name_key) in (None, ""):
            return None
        elif stat[name_key] != value:
            return True
    return False


def _content_and_attributes(known: KnownFile | None, arguments: Mapping) -> tuple[bytes | None, bool] | None:
    """(bytes or None for a missing file, whether the attributes differ) where the read knows both; else None."""
    if known is None or not known.read:
        return None
    if known.content is None:
        return None, False
    if known.stat is None or not known.stat.get("exists"):
        return None
    differ = attributes_differ(known.stat, arguments.get("owner"), arguments.get("group"), arguments.get("mode"))
    if differ is None:
        return None
    return known.content, differ


def _config_file_write(arguments: Mapping, files: Mapping[str, KnownFile]) -> dict | None:
    if not set(arguments) <= CONFIG_FILE_WRITE_ARGS:
        return None
    path = arguments.get("path") or arguments.get("dest")
    content = arguments.get("content")
    if not isinstance(content, str):
        return None
    found = _content_and_attributes(files.get(str(path)), arguments)
    if found is None:
        return None
    current, differ = found
    return {"changed": current is None or current != content.encode("utf-8") or differ, "path": path}


def _file_absent(arguments: Mapping, files: Mapping[str, KnownFile]) -> dict | None:
    if set(arguments) != {"path", "state"} or arguments["state"] != "absent":
        return None
    known = files.get(str(arguments["path"]))
    if known is None or known.lstat is None:
        return None
    return {"changed": bool(known.lstat.get("exists")), "path": arguments["path"]}


def _kubelet_flags(arguments: Mapping, files: Mapping[str, KnownFile]) -> dict | None:
    from ansible_collections.gpunode.provisioning.plugins.modules import kubelet_flags as module

    if not set(arguments) <= KUBELET_FLAGS_ARGS or "path" not in arguments:
        return None
    found = _content_and_attributes(files.get(str(arguments["path"])), arguments)
    if found is None:
        return None
    current, differ = found
    if current is None and not arguments.get("create", True):
        return None  # the module fails: it says so
    try:
        text = None if current is None else current.decode("utf-8")
        path, variable = str(arguments["path"]), arguments.get("variable", "KUBELET_EXTRA_ARGS")
        flags, flags_absent = module.normalize_flags(arguments.get("flags") or {}, arguments.get("flags_absent") or [])
        labels, labels_absent = module.normalize_labels(
            arguments.get("node_labels") or {}, arguments.get("node_labels_absent") or []
        )
        computed = module.compute(text, path, variable, flags, flags_absent, labels, labels_absent)
        if computed["changed"]:
            managed = computed["node_labels"] if (labels or labels_absent) else None
            module.check_result(computed["after"], path, variable, flags, flags_absent, managed)
    except Exception:  # the module reports its own errors: it runs
        return None
    return {"changed": bool(computed["changed"]) or differ, "path": arguments["path"]}


def answer(module: str, arguments: Mapping, files: Mapping[str, KnownFile]) -> dict | None:
    """What the probe ``module`` with ``arguments`` registers (``changed``, ``path``, ``answered_on_controller``),
    worked out from ``files``; None: run it."""
    if module in CONFIG_FILE_WRITE:
        found = _config_file_write(arguments, files)
    elif module in FILE:
        found = _file_absent(arguments, files)
    elif module in KUBELET_FLAGS:
        found = _kubelet_flags(arguments, files)
    else:
        found = None
    return None if found is None else {**found, "answered_on_controller": True}
