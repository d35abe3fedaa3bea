# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Filters of the kubelet role for its configuration files and what follows a restart.

The KubeletConfiguration text (parsed, written, merged in place with comments kept), the configuration the
kubelet ends up with (main file and drop-ins), and the decisions after a restart: the health URL, the state
files to reset, the flags still on the command line, the service state and the rollback plan. The checks of
the role's variables and the fields it composes are in kubelet.py. Pure functions of their arguments, as there.
"""

from __future__ import annotations

import base64
import copy
import io
import itertools
import re
from collections.abc import Mapping

import yaml
from ansible_collections.gpunode.provisioning.plugins.module_utils.files import merge as _merge
from ansible_collections.gpunode.provisioning.plugins.plugin_utils import controller_files

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - Ansible is always there when the role runs

    class AnsibleFilterError(Exception):
        pass


_type_name = controller_files.type_name

API_VERSION = "kubelet.config.k8s.io/v1beta1"
KIND = "KubeletConfiguration"


def kubelet_parse_config(text, path: str = "the kubelet configuration") -> dict:
    """Parse a KubeletConfiguration file's text; empty text is ``{}``."""
    if text is None or not str(text).strip():
        return {}
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise AnsibleFilterError(
            f"{path} is not valid YAML{where}: {problem}. Fix the file (the kubelet cannot read it either), "
            "then run again."
        ) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AnsibleFilterError(
            f"{path} holds {_type_name(data)} at the top level, not a KubeletConfiguration mapping. "
            "Fix the file, then run again."
        )
    kind = data.get("kind")
    if kind not in (None, KIND):
        raise AnsibleFilterError(
            f"{path} is a {kind}, not a {KIND}. Point kubelet_main_config_path at the kubelet's --config file."
        )
    return data


def _plain(value):
    """A deep copy of ``value`` made of plain dict, list, str, int, float, bool and None.

    Ansible hands filters tagged subclasses of these types, which PyYAML's
    safe dumper refuses to represent.
    """
    if isinstance(value, Mapping):
        return {_plain(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    for kind in (bool, str, int, float):
        if isinstance(value, kind):
            return kind(value)
    return value


def _dump(data: dict) -> str:
    data = _plain(data)
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)
    if yaml.safe_load(text) != data:  # pragma: no cover - a guard against serialiser surprises
        raise AnsibleFilterError("internal error: the KubeletConfiguration does not read back as written")
    return text


def kubelet_config_document(fields: dict) -> str:
    """A full KubeletConfiguration document (apiVersion and kind first) holding ``fields``, as YAML."""
    return _dump({"apiVersion": API_VERSION, "kind": KIND, **fields})  # _dump's _plain copies


def kubelet_merge_config(text, fields: dict, absent=None, path: str = "the kubelet configuration") -> dict:
    """Merge ``fields`` into the main configuration file's text and drop the ``absent`` fields.

    Returns ``changed``, ``content`` (the original text when nothing changes,
    so formatting is only touched when the content must change) and
    ``config`` (the merged data). Lists are replaced, as the kubelet does.
    """
    current = kubelet_parse_config(text, path)
    data = copy.deepcopy(current)
    data.setdefault("apiVersion", API_VERSION)
    data.setdefault("kind", KIND)
    _merge.remove_paths(data, list(absent or []))
    _merge.merge_into(data, fields, "replace")
    changed = not _merge.values_equal(current, data)
    if not changed:
        return {"changed": False, "content": text, "config": data}
    return {"changed": True, "content": _merge_text(text or "", fields, absent, data, path), "config": data}


def _sequence_offset(text: str) -> int:
    """How far the file indents a list's dashes under its key (0 for kubeadm's ``key:\n- item``)."""
    lines = text.splitlines()
    for before, line in itertools.pairwise(lines):
        dash = re.match(r"( *)- ", line)
        key = re.match(r"( *)[^\s#-][^#]*:\s*\Z", before)
        if dash and key:
            return max(0, len(dash.group(1)) - len(key.group(1)))
    return 0


def _merge_text(text: str, fields: dict, absent, data: dict, path: str) -> str:
    """The file's text with the change made in place by a round-trip YAML library: comments, key order,
    quoting and the list indentation of everything else are kept; new keys go to the end of their mapping."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    yaml_rt = YAML(typ="rt")
    yaml_rt.preserve_quotes = True
    yaml_rt.width = 4096
    offset = _sequence_offset(text)
    yaml_rt.indent(mapping=2, sequence=offset + 2, offset=offset)
    doc = yaml_rt.load(text) if text.strip() else None
    if doc is None:
        doc = CommentedMap()
    for position, (key, value) in enumerate((("apiVersion", API_VERSION), ("kind", KIND))):
        if key not in doc:
            doc.insert(position, key, value)
    _merge.remove_paths(doc, list(absent or []))
    _merge.merge_into(doc, copy.deepcopy(_plain(fields)), "replace")
    stream = io.StringIO()
    yaml_rt.dump(doc, stream)
    result = stream.getvalue()
    if yaml.safe_load(result) != _plain(data):  # pragma: no cover - a guard against serialiser surprises
        raise AnsibleFilterError(f"internal error: the merged {path} does not read back as intended")
    return result


def kubelet_effective_config(main_config: dict, *dropins) -> dict:
    """The configuration the kubelet ends up with: the main file, then each drop-in over it (lists replaced)."""
    result = copy.deepcopy(main_config or {})
    for dropin in dropins:
        _merge.merge_into(result, dropin or {}, "replace")
    return result


def kubelet_healthz_url(config: dict) -> str:
    """The kubelet's healthz URL from its effective configuration; '' when healthzPort is 0 (disabled)."""
    config = config or {}
    port = config.get("healthzPort", 10248)
    if port in (0, "0"):
        return ""
    host = config.get("healthzBindAddress") or "127.0.0.1"
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1" if host == "0.0.0.0" else "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/healthz"


def kubelet_state_resets(old: dict, new: dict) -> list[str]:
    """State files under the kubelet root that must go before a restart with ``new`` after ``old``.

    The kubelet refuses to start when its CPU (memory) manager checkpoint was
    written under another policy or reserved CPU set (reserved memory).
    """
    old, new = old or {}, new or {}

    def cpu(config):
        return (str(config.get("cpuManagerPolicy") or "none").lower(), str(config.get("reservedSystemCPUs") or ""))

    def memory(config):
        return (str(config.get("memoryManagerPolicy") or "None").lower(), config.get("reservedMemory") or [])

    resets = []
    if cpu(old) != cpu(new):
        resets.append("cpu_manager_state")
    if memory(old) != memory(new):
        resets.append("memory_manager_state")
    return resets


def kubelet_flags_in_text(text, names) -> list[str]:
    """Which of the flag ``names`` appear in an environment file's text (e.g. kubeadm-flags.env)."""
    found = []
    for name in names or []:
        if re.search(rf"(?:^|[\s\"'=])--{re.escape(name)}(?:[=\s\"']|$)", text or "", re.MULTILINE):
            found.append(name)
    return found


def kubelet_service_state(result, service: str = "kubelet") -> str:
    """The state (``running``, ``stopped``, ...) of ``service`` in a registered service_facts result; 'unknown'."""
    services = ((result or {}).get("ansible_facts") or {}).get("services") or {}
    entry = services.get(service if service.endswith(".service") else f"{service}.service") or {}
    return entry.get("state") or "unknown"


def _loop_results(registered) -> list[dict]:
    """The per-item results of a registered loop (a skipped or missing register: none)."""
    results = (registered or {}).get("results") if isinstance(registered, Mapping) else None
    return [result for result in results or [] if isinstance(result, Mapping)]


def kubelet_rollback_plan(pairs, read_results, stat_results) -> list[dict]:
    """What undoes this run's kubelet changes: one entry per file whose result changed.

    ``pairs`` is ``[[path, registered result], ...]`` (the role's file tasks). ``read_results`` and
    ``stat_results`` are the registered loops (slurp, stat) over the same paths, taken before any change.
    Each entry: ``{"path", "existed", "content", "mode", "owner", "group"}``; a file that did not exist
    before (``existed`` false) is to be removed, the others get their content, mode and owner back.
    A changed file that was not read before the change is an error: the role would not know its old bytes.
    """
    contents = {}
    for result in _loop_results(read_results):
        if "content" in result:
            contents[result.get("item")] = base64.b64decode(result["content"]).decode("utf-8")
    stats = {}
    for result in _loop_results(stat_results):
        if "item" in result and "stat" in result:
            stats[result["item"]] = result.get("stat") or {}
    plan, seen = [], set()
    for path, result in pairs or []:
        if not (isinstance(result, dict) and result.get("changed")) or path in seen:
            continue
        seen.add(path)
        if path not in stats:
            raise AnsibleFilterError(f"kubelet_rollback_plan: {path} changed but was not looked at before the change")
        stat = stats[path]
        if not stat.get("exists"):
            plan.append({"path": path, "existed": False, "content": "", "mode": "", "owner": "", "group": ""})
            continue
        if path not in contents:
            raise AnsibleFilterError(
                f"kubelet_rollback_plan: {path} changed but its content was not read before the change"
            )
        plan.append(
            {
                "path": path,
                "existed": True,
                "content": contents[path],
                "mode": stat.get("mode", ""),
                "owner": str(stat.get("uid", "")),
                "group": str(stat.get("gid", "")),
            }
        )
    return plan


class FilterModule:
    """Filters of the kubelet role: its configuration files and what follows a restart (kubelet_merge_config and
    kubelet_flags_in_text: the plan's, plugins/filter/kubelet_plan.py)."""

    def filters(self):
        return {
            "kubelet_parse_config": kubelet_parse_config,
            "kubelet_config_document": kubelet_config_document,
            "kubelet_effective_config": kubelet_effective_config,
            "kubelet_healthz_url": kubelet_healthz_url,
            "kubelet_state_resets": kubelet_state_resets,
            "kubelet_service_state": kubelet_service_state,
            "kubelet_rollback_plan": kubelet_rollback_plan,
        }
