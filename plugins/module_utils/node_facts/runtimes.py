# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Runtime facts: the container runtimes (docker, containerd, CRI-O), the kubelet and the OCI runtimes (runc,
crun): installed where, which version, running or not.

Part of gpu_node_facts (plugins/modules/gpu_node_facts.py). Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd.versions import parse_containerd_version
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.host import (
    command_output,
    rooted,
    running_processes,
    unit_states,
    version_at_least,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.system.versions import parse_version_token

if TYPE_CHECKING:  # annotations only
    from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.host import RunCommand, Which

KUBELET_CONFIG_DIR_MIN = (1, 30)


OCI_RUNTIMES = ("runc", "crun")


def parse_docker_version(text: str | None) -> tuple[str | None, str | None]:
    """`dockerd --version`: "Docker version 20.10.24+dfsg1, build 297e128"."""
    match = re.search(r"Docker version\s+(\S+)", text or "")
    return parse_version_token(match.group(1)) if match else (None, None)


def parse_crio_version(text: str | None) -> tuple[str | None, str | None]:
    """`crio --version`: "crio version 1.30.0" and/or a "Version:  1.30.0" line (log lines may come first)."""
    lines = (text or "").splitlines()
    for line in lines:
        match = re.match(r"\s*crio version\s+(\S+)", line, re.IGNORECASE)
        if match:
            return parse_version_token(match.group(1))
    for line in lines:
        match = re.match(r"Version:\s+(\S+)", line.strip())
        if match:
            return parse_version_token(match.group(1))
    return None, None


def parse_kubelet_version(text: str | None) -> tuple[str | None, str | None]:
    """`kubelet --version`: "Kubernetes v1.31.2"."""
    match = re.search(r"Kubernetes\s+(\S+)", text or "")
    return parse_version_token(match.group(1)) if match else (None, None)


def parse_oci_runtime_version(text: str | None) -> tuple[str | None, str | None]:
    """`runc --version` / `crun --version`: first line "runc version 1.1.5+ds1" / "crun version 1.9.2"."""
    match = re.search(r"^\s*(?:runc|crun) version\s+(\S+)", text or "", re.MULTILINE)
    return parse_version_token(match.group(1)) if match else (None, None)


# name, binary, systemd unit, API sockets, version parser
RUNTIMES = (
    ("docker", "dockerd", "docker.service", ("/run/docker.sock", "/var/run/docker.sock"), parse_docker_version),
    ("containerd", "containerd", "containerd.service", ("/run/containerd/containerd.sock",), parse_containerd_version),
    ("crio", "crio", "crio.service", ("/var/run/crio/crio.sock", "/run/crio/crio.sock"), parse_crio_version),
)


KUBELET = ("kubelet", "kubelet", "kubelet.service", (), parse_kubelet_version)


def service_facts(
    root: str,
    spec: tuple,
    binary: str | None,
    version_output: str | None,
    service_state: str | None,
    processes: set[str] | None,
) -> dict:
    _name, binary_name, _unit, sockets, parse_version = spec
    version, version_full = parse_version(version_output) if version_output else (None, None)
    socket = next((path for path in sockets if os.path.exists(rooted(root, path))), None)
    if service_state is not None:
        running = service_state == "active" or binary_name in (processes or ())
    elif processes is not None:
        running = binary_name in processes
    else:
        running = socket is not None
    return {
        "installed": binary is not None,
        "binary": binary,
        "version": version,
        "version_full": version_full,
        "running": running,
        "service_state": service_state,
        "socket": socket,
    }


def oci_runtime_facts(run_command: RunCommand | None, which: Which) -> dict:
    facts = {}
    for name in OCI_RUNTIMES:
        binary = which(name)
        output = command_output(run_command, [binary, "--version"]) if binary else None
        version, version_full = parse_oci_runtime_version(output)
        facts[name] = {
            "installed": binary is not None,
            "binary": binary,
            "version": version,
            "version_full": version_full,
        }
    return facts


def runtime_facts(root: str, run_command: RunCommand | None, which: Which) -> dict:
    """The facts runtimes, runtimes_installed, runtimes_running, kubelet and oci_runtimes."""
    processes = running_processes(root)
    specs = (*RUNTIMES, KUBELET)
    binaries = {spec[0]: which(spec[1]) for spec in specs}
    states = unit_states(run_command, which, root, [spec[2] for spec in specs])
    services = {}
    for spec in specs:
        binary = binaries[spec[0]]
        version_output = command_output(run_command, [binary, "--version"]) if binary else None
        services[spec[0]] = service_facts(root, spec, binary, version_output, states.get(spec[2]), processes)
    kubelet = services.pop("kubelet")
    kubelet["config_dir_supported"] = version_at_least(kubelet["version"], KUBELET_CONFIG_DIR_MIN)
    return {
        "runtimes": services,
        "runtimes_installed": [name for name, facts in services.items() if facts["installed"]],
        "runtimes_running": [name for name, facts in services.items() if facts["running"]],
        "kubelet": kubelet,
        "oci_runtimes": oci_runtime_facts(run_command, which),
    }
