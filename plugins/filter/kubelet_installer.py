# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Filters of the kubelet role for RKE2 and k3s nodes: the kubelet's labels, taints and flags in the agent config.

RKE2 and k3s start the kubelet themselves, from /etc/rancher/<installer>/config.yaml and then
config.yaml.d/*.yaml|*.yml in alphanumeric order: the last value of a key wins and a list REPLACES the lists
of earlier files (k3s-io/k3s#3205, "Support conf.d style config loading"). The keys are the agent's options:
``node-label`` ("key=value"), ``node-taint`` ("key=value:Effect") and ``kubelet-arg`` ("flag=value", the
kubelet flag without its dashes). So the role writes one drop-in of its own and never touches config.yaml,
and since its lists replace the earlier files' lists, the drop-in carries the entries of config.yaml and of
the drop-ins before it that the role does not own (merged, ours win per label key, per taint key and effect,
per flag).
"""

from __future__ import annotations

import re

import yaml

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - Ansible is always there when the role runs

    class AnsibleFilterError(Exception):
        pass


KEYS = ("node-label", "node-taint", "kubelet-arg")
HEADER = (
    "# Managed by Ansible (kubelet role). Local changes are overwritten.\n"
    "# {installer} reads this after config.yaml; its lists replace those of the earlier files, so it repeats\n"
    "# their node-label, node-taint and kubelet-arg entries that the kubelet role does not set.\n"
)
# fields the agent sets itself (the runtime endpoint is the installer's containerd; taints are node-taint)
AGENT_FIELDS = ("containerRuntimeEndpoint", "registerWithTaints")
_TAINT = re.compile(r"([^=:]+)(?:=([^:]*))?:(NoSchedule|PreferNoSchedule|NoExecute)")
_FLAG = re.compile(r"[a-z0-9][a-z0-9-]*")


def _load(text: str | None, path: str) -> dict:
    if not text or not text.strip():
        return {}
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AnsibleFilterError(
            f"{path} is not valid YAML ({exc}); the agent could not start with it either."
        ) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AnsibleFilterError(f"{path} must be a mapping of agent options (key: value), found {type(data).__name__}")
    return data


def _entries(config: dict, key: str, path: str) -> list:
    value = config.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise AnsibleFilterError(f"{path}: {key} must be a list of strings, found {value!r}")
    return list(value)


def _earlier(files: dict, own: str) -> dict:
    """node-label / node-taint / kubelet-arg as the agent reads them from the files before ``own``."""
    merged: dict = {}
    for path in sorted(files, key=lambda p: (not p.endswith("/config.yaml"), p)):
        if path == own or (not path.endswith("/config.yaml") and path > own):
            continue
        config = _load(files[path], path)
        for key in KEYS:
            if key in config:
                merged[key] = _entries(config, key, path)
    return merged


def _flag_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return ",".join(f"{key}={_flag_value(item)}" for key, item in value.items())
    if isinstance(value, list):
        return ",".join(_flag_value(item) for item in value)
    return str(value)


def _check_text(what: str, text: str) -> None:
    if "\n" in text or "\r" in text or not text.strip():
        raise AnsibleFilterError(f"{what} {text!r} is empty or holds a line break: the agent cannot take it.")


def kubelet_installer_dropin(
    params: dict, labels: dict, taints: list, field_flags: dict, installer: dict, files: dict, own_path: str
) -> dict:
    """Plan the agent config drop-in: ``{'content': text ('' = none needed), 'node-label': [...], ...}``.

    The inputs are what the kubeadm path of the role works out: ``labels`` (kubelet_compose_labels: labels to
    set and keys to remove), ``taints`` (registerWithTaints entries), ``field_flags`` (the KubeletConfiguration
    fields the role sets, by their flag names: kubelet_flag_for_field), and ``params`` for kubelet_flags and
    kubelet_flags_absent. ``files`` maps the paths read (config.yaml and the drop-ins of config.yaml.d) to their
    text (absent files left out); ``own_path`` is this role's drop-in.
    """
    earlier = _earlier(files, own_path)
    for key, value in labels["labels"].items():
        _check_text("node label", f"{key}={value}")
    ours_labels = [f"{key}={value}" for key, value in labels["labels"].items()]
    gone = set(labels["absent"]) | set(labels["labels"])
    node_labels = [entry for entry in earlier.get("node-label", []) if entry.split("=", 1)[0] not in gone]
    node_labels += ours_labels

    ours_taints = [
        f"{t['key']}={t['value']}:{t['effect']}" if t.get("value") else f"{t['key']}:{t['effect']}" for t in taints
    ]
    taken = {(t["key"], t["effect"]) for t in taints}
    node_taints = []
    for entry in earlier.get("node-taint", []):
        match = _TAINT.fullmatch(entry)
        if not match or (match.group(1), match.group(3)) not in taken:
            node_taints.append(entry)  # not ours to judge when it does not parse: the agent reads it as before
    node_taints += ours_taints

    args = {flag: _flag_value(value) for flag, value in (field_flags or {}).items()}
    for name, value in (params.get("kubelet_flags") or {}).items():
        args[str(name).lstrip("-")] = _flag_value(value)
    for flag, value in args.items():
        if not _FLAG.fullmatch(flag):
            raise AnsibleFilterError(
                f"kubelet flag {flag!r} is not a flag name the agent can pass (kubelet-arg takes 'name=value' with "
                "the flag's name in lower case, e.g. max-pods=110)"
            )
        _check_text(f"kubelet flag {flag}", value)
    absent = {str(name).lstrip("-") for name in params.get("kubelet_flags_absent") or []}
    kubelet_args = [
        entry
        for entry in earlier.get("kubelet-arg", [])
        if entry.lstrip("-").split("=", 1)[0] not in set(args) | absent
    ]
    kubelet_args += [f"{flag}={value}" for flag, value in args.items()]

    plan = {"node-label": node_labels, "node-taint": node_taints, "kubelet-arg": kubelet_args}
    body = {key: value for key, value in plan.items() if value and value != earlier.get(key, [])}
    content = ""
    if body:
        content = HEADER.format(installer=installer.get("name")) + yaml.safe_dump(
            body, default_flow_style=False, sort_keys=False
        )
    return {**plan, "content": content}


class FilterModule:
    def filters(self):
        return {"kubelet_installer_dropin": kubelet_installer_dropin}
