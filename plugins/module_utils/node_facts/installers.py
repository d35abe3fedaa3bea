# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Installer facts: which cluster installer laid the node out (RKE2, k3s, kubespray, kubeadm) and where it keeps
containerd and the kubelet's settings, so that no role edits a file the installer regenerates.

Part of gpu_node_facts (plugins/modules/gpu_node_facts.py). Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd.versions import parse_containerd_version
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.host import (
    command_output,
    executable,
    rooted,
    unit_states,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.system.versions import parse_version_token

if TYPE_CHECKING:  # annotations only
    from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.host import RunCommand, Which

RANCHER_INSTALLERS = {
    # name: (data dir, installer binary candidates, bin dir below the data dir, units (server first))
    "rke2": (
        "/var/lib/rancher/rke2",
        ("/usr/local/bin/rke2", "/usr/bin/rke2", "/opt/rke2/bin/rke2"),
        "bin",
        ("rke2-server.service", "rke2-agent.service"),
    ),
    "k3s": (
        "/var/lib/rancher/k3s",
        ("/usr/local/bin/k3s", "/usr/bin/k3s", "/opt/bin/k3s"),
        "data/current/bin",
        ("k3s.service", "k3s-agent.service"),
    ),
}


RANCHER_SOCKET = "/run/k3s/containerd/containerd.sock"


UNIT_DIRS = ("/etc/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")


KUBEADM_DROPINS = tuple(f"{d}/kubelet.service.d/10-kubeadm.conf" for d in UNIT_DIRS)


KUBESPRAY_KUBELET_ENV = "/etc/kubernetes/kubelet.env"


KUBESPRAY_KUBELET_CONFIG = "/etc/kubernetes/kubelet-config.yaml"


KUBESPRAY_BASE_SPEC = "/etc/containerd/cri-base.json"


# the kubelet role's drop-in in the agent config directory (read after config.yaml and earlier drop-ins)
KUBELET_AGENT_DROPIN = "90-gpu-node-kubelet.yaml"


# {minor: first patch release}; minors after the last key have it from .0
BASE_TEMPLATE_GATE = {24: 17, 25: 13, 26: 8, 27: 5, 28: 1}


DEFAULT_RUNTIME_GATE = {26: 12, 27: 9, 28: 5}


CONTAINERD2_GATE = {"rke2": {31: 6, 32: 2}, "k3s": {31: 6, 32: 2}}


def parse_rancher_version(text: str | None) -> tuple[str | None, str | None]:
    """`rke2 --version` / `k3s --version`: "rke2 version v1.31.6+rke2r1 (2a0aa7b...)" -> ("1.31.6", "1.31.6+rke2r1")."""
    match = re.search(r"^\s*(?:rke2|k3s) version\s+(\S+)", text or "", re.MULTILINE)
    return parse_version_token(match.group(1)) if match else (None, None)


def release_gate(version: str | None, gate: dict, first: int | None = None) -> bool | None:
    """True when ``version`` ("1.28.5") is at or after the gate's release for its minor (1.x only); null when
    the version is unknown. Minors below the gate's lowest key are before it, above its highest are after."""
    if not version:
        return None
    parts = [int(part) for part in version.split(".")[:3]] + [0, 0]
    major, minor, patch = parts[:3]
    if major != 1:
        return major > 1
    lowest = first if first is not None else min(gate)
    if minor < lowest:
        return False
    if minor > max(gate):
        return True
    return minor in gate and patch >= gate[minor]


def unit_file(root: str, unit: str) -> str | None:
    return next((f"{d}/{unit}" for d in UNIT_DIRS if os.path.isfile(rooted(root, f"{d}/{unit}"))), None)


def _rancher_installer(root: str, name: str, run_command: RunCommand | None, states: dict) -> dict | None:
    data_dir, binaries, bin_subdir, units = RANCHER_INSTALLERS[name]
    binary = next((path for path in binaries if executable(root, path)), None)
    unit_files = {unit: unit_file(root, unit) for unit in units}
    config_dir = f"/etc/rancher/{name}"
    evidence = [path for path in (binary, *unit_files.values()) if path]
    if os.path.isdir(rooted(root, f"{data_dir}/agent")):
        evidence.append(f"{data_dir}/agent")
    if not evidence:
        return None
    active = [unit for unit in units if states.get(unit) == "active"]
    service = (active or [unit for unit in units if unit_files[unit]] or [units[-1]])[0]
    version, version_full = parse_rancher_version(
        command_output(run_command, [binary, "--version"]) if binary else None
    )
    bin_dir = f"{data_dir}/{bin_subdir}"
    containerd_binary = f"{bin_dir}/containerd" if executable(root, f"{bin_dir}/containerd") else None
    containerd_version = None
    if containerd_binary:
        containerd_version = parse_containerd_version(command_output(run_command, [containerd_binary, "--version"]))[0]
    if containerd_version:
        containerd2 = int(containerd_version.split(".")[0]) >= 2
    else:
        containerd2 = release_gate(version, CONTAINERD2_GATE[name])
    etc = f"{data_dir}/agent/etc/containerd"
    template = f"{etc}/config-v3.toml.tmpl" if containerd2 else f"{etc}/config.toml.tmpl"
    return {
        "name": name,
        "version": version,
        "version_full": version_full,
        "binary": binary,
        "data_dir": data_dir,
        "bin_dir": bin_dir,
        "service": service,
        "service_state": states.get(service),
        "evidence": evidence,
        "containerd": {
            "binary": containerd_binary,
            "version": containerd_version,
            "socket": RANCHER_SOCKET,
            "running": os.path.exists(rooted(root, RANCHER_SOCKET)),
            "config": f"{etc}/config.toml",
            "config_regenerated": "agent start",
            "template": template if containerd2 is not None else None,
            "templates": [f"{etc}/config-v3.toml.tmpl", f"{etc}/config.toml.tmpl"],
            "template_base": release_gate(version, BASE_TEMPLATE_GATE),
            "nvidia_detection": True if release_gate(version, DEFAULT_RUNTIME_GATE) else None,
            "default_runtime_option": release_gate(version, DEFAULT_RUNTIME_GATE),
        },
        "kubelet": {
            "settings": "agent_config_dropin",
            "config": f"{config_dir}/config.yaml",
            "dropin_dir": f"{config_dir}/config.yaml.d",
            "dropin": f"{config_dir}/config.yaml.d/{KUBELET_AGENT_DROPIN}",
            "files": [f"{config_dir}/config.yaml", f"{config_dir}/config.yaml.d"],
        },
    }


def _kubespray_installer(root: str) -> dict | None:
    markers = [path for path in (KUBESPRAY_KUBELET_ENV, KUBESPRAY_BASE_SPEC) if os.path.isfile(rooted(root, path))]
    if not markers:
        return None
    binary = "/usr/local/bin/containerd"
    return {
        "name": "kubespray",
        "version": None,  # kubespray leaves no version on the node
        "version_full": None,
        "binary": None,
        "data_dir": None,
        "bin_dir": "/usr/local/bin",
        "service": "kubelet.service",
        "service_state": None,
        "evidence": markers,
        "containerd": {
            "binary": binary if executable(root, binary) else None,
            "version": None,
            "socket": "/run/containerd/containerd.sock",
            "running": os.path.exists(rooted(root, "/run/containerd/containerd.sock")),
            "config": "/etc/containerd/config.toml",
            "config_regenerated": "kubespray run",
            "template": None,
            "templates": [],
            "template_base": None,
            "nvidia_detection": False,
            "default_runtime_option": True,  # inventory: containerd_default_runtime
        },
        "kubelet": {
            "settings": "kubespray_inventory",
            "config": KUBESPRAY_KUBELET_CONFIG,
            "dropin_dir": None,
            "files": [KUBESPRAY_KUBELET_ENV, KUBESPRAY_KUBELET_CONFIG],
        },
    }


def _kubeadm_installer(root: str, kubelet: dict) -> dict | None:
    dropin = next((path for path in KUBEADM_DROPINS if os.path.isfile(rooted(root, path))), None)
    if dropin is None:
        return None
    return {
        "name": "kubeadm",
        "version": kubelet.get("version"),
        "version_full": kubelet.get("version_full"),
        "binary": None,
        "data_dir": None,
        "bin_dir": None,
        "service": "kubelet.service",
        "service_state": kubelet.get("service_state"),
        "evidence": [dropin],
        "containerd": {
            "binary": None,
            "version": None,
            "socket": "/run/containerd/containerd.sock",
            "running": os.path.exists(rooted(root, "/run/containerd/containerd.sock")),
            "config": "/etc/containerd/config.toml",
            "config_regenerated": None,
            "template": None,
            "templates": [],
            "template_base": None,
            "nvidia_detection": False,
            "default_runtime_option": None,
        },
        "kubelet": {
            "settings": "kubelet_flags",
            "config": "/var/lib/kubelet/config.yaml",
            "dropin_dir": "/etc/kubernetes/kubelet.conf.d",
            "files": [dropin],
        },
    }


def installer_facts(root: str, run_command: RunCommand | None, which: Which, kubelet: dict) -> dict:
    """Which cluster installer laid the node out (rke2, k3s, kubespray, kubeadm, unknown) and where it keeps
    containerd and the kubelet's settings. RKE2 and k3s first: they run their own containerd; kubespray before
    kubeadm: kubespray runs kubeadm too."""
    units = [unit for name in RANCHER_INSTALLERS for unit in RANCHER_INSTALLERS[name][3]]
    present = [unit for unit in units if unit_file(root, unit)]
    states = unit_states(run_command, which, root, present) if present else {}
    found = []
    for name in RANCHER_INSTALLERS:
        entry = _rancher_installer(root, name, run_command, states)
        if entry:
            found.append(entry)
    for entry in (_kubespray_installer(root), _kubeadm_installer(root, kubelet)):
        if entry:
            found.append(entry)
    if not found:
        return {
            "name": "unknown",
            "found": [],
            "version": None,
            "version_full": None,
            "binary": None,
            "data_dir": None,
            "bin_dir": None,
            "service": None,
            "service_state": None,
            "evidence": [],
            "containerd": None,
            "kubelet": None,
        }
    active = [entry for entry in found if entry.get("service_state") == "active"]
    chosen = dict((active or found)[0])
    chosen["found"] = [entry["name"] for entry in found]
    return chosen
