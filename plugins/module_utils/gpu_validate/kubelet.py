# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's kubelet family: the kubelet role's drop-in (or merge) on kubeadm-style nodes, the agent config of
RKE2/k3s, and kubespray's inventory.

The node-side module gpu_validate_checks imports this file as module_utils.gpu_validate.kubelet.
Stdlib only, Python 3.8+ (the node's python3).
"""

from __future__ import annotations

import re

from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.containerd import agent_managed
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import (
    Node,
    table_row,
    truncate,
    truthy,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.system.units import main_start_argv, main_start_us
from ansible_collections.gpunode.provisioning.plugins.module_utils.system.versions import version_tuple


def kubelet_row(params: dict, node: dict, dropin_exists: bool, main_exists: bool, env_text) -> dict:
    """env_text: the kubelet's environment file, None when unread."""
    kubelet = node.get("kubelet") or {}
    installed = truthy(kubelet.get("installed"))
    version = kubelet.get("version") or ""
    dropin = f"{params['kubelet_config_dir']}/{params['kubelet_dropin_name']}"
    main = params["kubelet_main_config"]
    merge = params["kubelet_config_mode"] == "merge" or bool(
        version and (version_tuple(version) or ()) < (version_tuple(params["kubelet_dropin_min"]) or ())
    )
    check = "kubelet configuration"
    if dropin_exists and installed and "--config-dir" not in (env_text or ""):
        return table_row(
            check,
            "warn",
            f"drop-in {dropin} is there, but {params['kubelet_env_file']} passes no --config-dir:"
            " the kubelet does not read it",
            "Run site.yml --tags kubelet",
        )
    if dropin_exists:
        return table_row(
            check, "ok", f"drop-in {dropin}" + (f" (kubelet {version})" if version else " (no kubelet yet)")
        )
    if merge and main_exists:
        return table_row(check, "ok", f"merged into {main} (kubelet {version or '?'} reads no drop-ins)")
    if installed:
        return table_row(
            check,
            "fail",
            f"no drop-in at {dropin} on a node with kubelet {version or '(version unknown)'}",
            "Run site.yml --tags kubelet",
        )
    return table_row(check, "skipped", "no kubelet installed and no drop-in")


AGENT_KEYS = ("node-label", "node-taint", "kubelet-arg")


def _scalar(text: str) -> str:
    text = text.strip()
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'" else text


def agent_settings(text: str) -> dict:
    """The kubelet keys of one RKE2/k3s agent config file (node-label, node-taint, kubelet-arg): YAML read with
    PyYAML where the node has it, else the flat forms the installers document (key: value, key: [a, b], a
    block list). ValueError names the line or the problem."""
    try:
        import yaml  # optional on the node
    except ImportError:
        yaml = None
    if yaml is not None:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(str(exc).replace("\n", " ")) from exc
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise ValueError(f"a mapping of agent options is expected, not {type(data).__name__}")
        return {k: v if isinstance(v, list) else [] if v is None else [v] for k, v in data.items() if k in AGENT_KEYS}
    found: dict = {}
    key = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip() or line.strip() == "---":
            continue
        item = re.match(r"^\s*-\s+(.*)$", line)
        if item and key is not None:
            found.setdefault(key, []).append(_scalar(item.group(1)))
            continue
        match = re.match(r"^([A-Za-z0-9_.+-]+):\s*(.*)$", line)
        if not match:
            raise ValueError(f"line {number} is not key: value ({raw.strip()!r})")
        key, value = match.group(1), match.group(2).strip()
        if key not in AGENT_KEYS:
            key = None
            continue
        if value.startswith("[") and value.endswith("]"):
            found[key] = [_scalar(v) for v in value[1:-1].split(",") if v.strip()]
        else:
            found[key] = [_scalar(value)] if value else []
    return found


def kubelet_agent_row(params: dict, node: dict, files: list, dropin_mtime, started) -> dict:
    """RKE2/k3s: the kubelet's labels, taints and flags come from the agent config (config.yaml, then the
    config.yaml.d files in order; a later file's list replaces an earlier one's), which the agent reads at start.
    files: [(path, text)] in that order; dropin_mtime: the kubelet role's drop-in's mtime (None: missing);
    started: the agent's start as seconds since the epoch (None: unknown or not running)."""
    installer = node.get("installer") or {}
    name, unit = installer.get("name"), installer.get("service") or ""
    kubelet = installer.get("kubelet") or {}
    dropin = kubelet.get("dropin") or ""
    check = "kubelet configuration"
    effective: dict = {}
    for path, text in files:
        try:
            effective.update(agent_settings(text or ""))
        except ValueError as exc:
            return table_row(
                check,
                "fail",
                f"{path} cannot be read as {name}'s agent config: {truncate(str(exc), 200)}; the agent would not start",
                f"Fix {path}, then restart {unit}",
            )
    if dropin_mtime is None:
        return table_row(
            check,
            "fail",
            f"no drop-in {dropin} on a {name} node: its kubelet, which {unit} starts from {kubelet.get('config')}"
            " and config.yaml.d, gets none of the GPU node's labels, taints and flags",
            "Run site.yml --tags kubelet",
        )
    if started is not None and dropin_mtime >= started:
        return table_row(
            check,
            "warn",
            f"{dropin} was written after {unit} started: the running kubelet does not have its settings",
            f"Restart {unit} (systemctl restart {unit}), or rerun site.yml --tags kubelet",
        )
    counts = ", ".join(f"{key} x{len(effective.get(key) or [])}" for key in AGENT_KEYS)
    version = installer.get("version") or "?"
    return table_row(check, "ok", f"drop-in {dropin}: {name} {version}'s agent passes its kubelet {counts}")


def kubelet_kubespray_row(params: dict, node: dict, dropin_exists: bool, env_text) -> dict:
    """kubespray renders the kubelet's environment file and KubeletConfiguration from its inventory at every run
    (roles/kubernetes/node/tasks/kubelet.yml): the kubelet role's drop-in counts only where that file passes
    --config-dir."""
    kubelet = (node.get("installer") or {}).get("kubelet") or {}
    env, config = (kubelet.get("files") or ["/etc/kubernetes/kubelet.env"])[0], kubelet.get("config") or ""
    dropin = f"{params['kubelet_config_dir']}/{params['kubelet_dropin_name']}"
    check = "kubelet configuration"
    if dropin_exists and "--config-dir" in (env_text or ""):
        return table_row(check, "ok", f"drop-in {dropin}, passed by kubespray's {env} (--config-dir)")
    return table_row(
        check,
        "warn",
        f"kubespray renders {env} and {config} from its inventory at every run"
        + (f"; {env} passes no --config-dir, so the kubelet does not read {dropin}" if dropin_exists else "")
        + ": the GPU node's labels, taints and kubelet settings belong in that inventory",
        "Set node_labels, node_taints, kubelet_config_extra_args (or kubelet_custom_flags) in the kubespray inventory"
        " and rerun kubespray",
    )


def check_kubelet(params: dict, node: dict, host: Node) -> list:
    installer = node.get("installer") or {}
    if agent_managed(installer) and (installer.get("kubelet") or {}).get("dropin"):
        kubelet = installer["kubelet"]
        dropins = kubelet.get("dropin_dir") or ""
        paths = [kubelet.get("config") or "", *sorted(host.glob(f"{dropins}/*.yaml") + host.glob(f"{dropins}/*.yml"))]
        files = [(path, host.read(path)) for path in paths if path and host.lstat(path) is not None]
        rc, out, _err = host.run(main_start_argv(installer.get("service") or ""))
        started_us = main_start_us(rc, out)
        started = host.boot_time() + started_us / 1e6 if started_us else None
        dropin_mtime = host.mtime(kubelet["dropin"]) if host.lstat(kubelet["dropin"]) is not None else None
        return [kubelet_agent_row(params, node, files, dropin_mtime, started)]
    if installer.get("name") == "kubespray":
        dropin = host.lstat(f"{params['kubelet_config_dir']}/{params['kubelet_dropin_name']}") is not None
        env = ((installer.get("kubelet") or {}).get("files") or ["/etc/kubernetes/kubelet.env"])[0]
        return [kubelet_kubespray_row(params, node, dropin, host.read(env))]
    dropin = host.lstat(f"{params['kubelet_config_dir']}/{params['kubelet_dropin_name']}") is not None
    main = host.lstat(params["kubelet_main_config"]) is not None
    env_text = host.read(params["kubelet_env_file"]) if dropin else None
    return [kubelet_row(params, node, dropin, main, env_text)]
