# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Workload facts: what GPU pods have now, which a change must not take away (DESIGN.md, "Never take away what
runs"): the device plugin, the processes that use GPUs, each installed runtime's default runtime and CDI, and the
NVIDIA runtime's config. The runtimes' configs are read by nvidia/runtime.py (re-exported by gpu_pods.py) through
containerd/tables.py, the reader the doctor uses too.

Part of gpu_node_facts (plugins/modules/gpu_node_facts.py). Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import glob
import os
from typing import TYPE_CHECKING

from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd.tables import read_tables
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd.versions import load_order
from ansible_collections.gpunode.provisioning.plugins.module_utils.kubernetes.gpu_pods import (
    containerd_runtime_state,
    crio_runtime_state,
    device_plugin_facts,
    docker_runtime_state,
    gpu_processes,
    toolkit_config_facts,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.host import (
    read_text,
    rooted,
    version_at_least,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.installers import RANCHER_INSTALLERS

if TYPE_CHECKING:  # annotations only
    from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.host import RunCommand

CONTAINERD_CONFIG = "/etc/containerd/config.toml"


CRIO_CONFIGS = ("/etc/crio/crio.conf", "/etc/crio/crio.conf.d/*")


DOCKER_DAEMON_JSON = "/etc/docker/daemon.json"


def _containerd_texts(root: str) -> list:
    """config.toml and the files its `imports` name, in the order containerd reads them (containerd_versions.
    load_order: an entry relative to the importing file's directory, a pattern globbed, imports of imports, each
    file once); None for a file that cannot be read."""
    texts = {}

    def read_parsed(path):
        texts[path] = read_text(rooted(root, path))
        return read_tables(texts[path])[0] if texts[path] else None

    def node_glob(pattern):
        top = rooted(root, "/")
        return sorted("/" + os.path.relpath(found, top) for found in glob.glob(rooted(root, pattern)))

    return [texts[path] for path, _parsed in load_order(CONTAINERD_CONFIG, read_parsed, node_glob)]


def runtime_defaults(root: str, services: dict, run_command: RunCommand | None, installer: dict | None = None) -> dict:
    """Per installed runtime, its current default runtime and whether CDI is on (module_utils/kubernetes/gpu_pods.py):
    containerd from `containerd config dump` when commands run (else config.toml and its imports), CRI-O from
    crio.conf and crio.conf.d, docker from daemon.json. On RKE2/k3s the containerd is the installer's (its binary
    dumps the config the agent generated), which wins over a distribution containerd the node may also have."""
    states = {}
    docker = services["docker"]
    if docker["installed"]:
        states["docker"] = docker_runtime_state(read_text(rooted(root, DOCKER_DAEMON_JSON)))
    containerd = services["containerd"]
    own = (installer or {}).get("containerd") or {}
    if (installer or {}).get("name") in RANCHER_INSTALLERS and own.get("binary"):
        containerd = {
            "installed": True,
            "binary": own["binary"],
            "version": own.get("version"),
            "config": own["config"],
        }
    if containerd["installed"]:
        dump = None
        config = containerd.get("config")
        if run_command is not None:
            argv = [containerd["binary"], *(["--config", config] if config else []), "config", "dump"]
            result = run_command(argv)
            dump = result[1] if result and result[0] == 0 else None
        if dump:
            texts = [dump]
        elif config:
            texts = [read_text(rooted(root, config))]
        else:
            texts = _containerd_texts(root)
        state = containerd_runtime_state(texts, containerd["version"])
        state["cdi_supported"] = version_at_least(containerd["version"], (1, 7)) is not False
        state["source"] = "containerd config dump" if dump else "files"
        states["containerd"] = state
    if services["crio"]["installed"]:
        texts = [read_text(rooted(root, CRIO_CONFIGS[0]))]
        texts += [read_text(path) for path in sorted(glob.glob(rooted(root, CRIO_CONFIGS[1])))]
        states["crio"] = crio_runtime_state(texts)
    return states


def workload_facts(root: str, toolkit_config: str) -> dict:
    """The facts device_plugin, gpu_workloads and toolkit_config (the file at `toolkit_config`)."""
    device_plugin = device_plugin_facts(root)
    return {
        "device_plugin": device_plugin,
        "gpu_workloads": gpu_processes(root, exclude=device_plugin["pids"]),
        "toolkit_config": toolkit_config_facts(root, toolkit_config),
    }
