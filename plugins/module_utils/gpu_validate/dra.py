# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's dra family (issue 39): which GPU plugin the kubelet has registered against the node's choice
(gpu_node_facts_gpu_allocation), and what NVIDIA's DRA kubelet plugin needs from the node.

- "GPU allocation": fail when NVIDIA's device plugin and NVIDIA's DRA GPU plugin (gpu.nvidia.com) are both
  registered with the kubelet, or only the one not chosen is; warn while the chosen one is not registered yet (a node
  between the device plugin going and the DRA plugin coming, README "Moving a cluster from the device plugin to DRA");
  skipped where no kubelet runs or the node has no GPU.
- "DRA prerequisites" (DRA chosen only): CDI on with /var/run/cdi among the spec directories of each runtime's
  effective configuration (containerd's config dump, CRI-O's `crio config`, docker's `docker info`), the GPU device
  nodes and the unit that creates them at boot before the kubelet, the kubelet's plugin directories.

The paths are node_facts_dra's. The node-side module gpu_validate_checks imports this file as
module_utils.gpu_validate.dra. Stdlib only, Python 3.8+ (the node's python3).
"""

from __future__ import annotations

import json
import os

from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.cdi import cdi_spec_dirs
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import Node, table_row, truthy
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.dra import (
    DEVICE_PLUGIN_GLOB,
    DRA_GPU_DRIVER,
    KUBELET_ROOT_DIR_DEFAULT,
    dra_paths,
    registered_drivers,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.system.versions import version_tuple

# The directory NVIDIA's DRA kubelet plugin writes its transient CDI specs to (the runtimes must read it).
DRA_CDI_DIR = "/var/run/cdi"
# The device nodes every CUDA container needs besides /dev/nvidia<N>, those `nvidia-ctk system create-device-nodes
# --control-devices` makes (nvidia-modeset and nvidia-uvm-tools are not needed by CUDA).
CONTROL_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm")
# CRI-O has CDI always on; its default cdi_spec_dirs (cri-o v1.35.6, `crio config` of the build in
# shared/upstream/cri-o: "# cdi_spec_dirs = [ "/etc/cdi", "/var/run/cdi" ]").
CRIO_DEFAULT_CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
ALLOCATION_VARIABLE = "gpu_node_facts_gpu_allocation"


def _has_cdi_dir(dirs: list) -> bool:
    """/var/run/cdi among dirs (/run/cdi is the same directory: /var/run links to /run)."""
    wanted = {os.path.normpath(DRA_CDI_DIR), "/run/cdi"}
    return any(os.path.normpath(str(d)) in wanted for d in dirs)


def registered(host: Node, root_dir: str) -> dict:
    """What is registered with the kubelet of root_dir now: DRA drivers in plugins_registry, NVIDIA's device
    plugin's sockets in device-plugins."""
    paths = dra_paths(root_dir)
    names = [os.path.basename(p) for p in host.glob(os.path.join(paths["plugins_registry"], "*"))]
    return {
        "paths": paths,
        "dra_drivers": registered_drivers(names),
        "device_plugin": host.glob(os.path.join(paths["device_plugins_dir"], DEVICE_PLUGIN_GLOB)),
    }


def _root_dir(node: dict) -> str:
    return (node.get("dra") or {}).get("kubelet_root_dir") or KUBELET_ROOT_DIR_DEFAULT


def allocation_row(params: dict, node: dict, host: Node) -> dict:
    check = "GPU allocation"
    chosen = params["gpu_allocation"]
    kubelet = node.get("kubelet") or {}
    if not truthy(kubelet.get("running")):
        return table_row(check, "skipped", f"no kubelet runs on this node ({chosen} chosen)")
    if not truthy(node.get("has_gpu")):
        return table_row(check, "skipped", f"no GPU on this node ({chosen} chosen)")
    found = registered(host, _root_dir(node))
    dra = DRA_GPU_DRIVER in found["dra_drivers"]
    plugin = bool(found["device_plugin"])
    dra_text = f"DRA plugin {DRA_GPU_DRIVER} ({found['paths']['plugins_registry']})"
    plugin_text = f"NVIDIA's device plugin ({', '.join(found['device_plugin'])})"
    if dra and plugin:
        return table_row(
            check,
            "fail",
            f"{plugin_text} and {dra_text} are both registered with the kubelet: both hand out this node's GPUs",
            f"Keep only the {chosen} ({ALLOCATION_VARIABLE}={chosen}): take the "
            + (
                "device plugin's DaemonSet off this node"
                if chosen == "dra"
                else "DRA driver's kubelet plugin off this node"
            )
            + " (README, Moving a cluster from the device plugin to DRA)",
        )
    wrong = plugin if chosen == "dra" else dra
    if wrong:
        return table_row(
            check,
            "fail",
            f"{plugin_text if chosen == 'dra' else dra_text} is registered, but this node is set to {chosen}",
            f"Set {ALLOCATION_VARIABLE} to what the node runs, or move the node (README, Moving a cluster from the "
            "device plugin to DRA)",
        )
    if not (dra if chosen == "dra" else plugin):
        return table_row(
            check,
            "warn",
            f"{chosen} chosen, but no {'DRA plugin ' + DRA_GPU_DRIVER if chosen == 'dra' else 'NVIDIA device plugin'}"
            " is registered with the kubelet yet: pods get no GPU on this node",
            "Deploy NVIDIA's DRA driver (its kubelet plugin) to this node"
            if chosen == "dra"
            else "Deploy NVIDIA's device plugin to this node",
        )
    return table_row(check, "ok", f"{chosen}: {dra_text if chosen == 'dra' else plugin_text}")


def _runtime_problems(params: dict, node: dict, host: Node, containerd, crio) -> tuple:
    """(problems, notes) about CDI in the runtimes' effective configurations."""
    problems, notes = [], []
    runtimes = node.get("runtimes") or {}
    if "containerd" in params["runtimes"] and containerd is not None:
        if not containerd.get("ok"):
            problems.append(
                f"containerd: no config dump ({containerd.get('error') or 'containerd config dump failed'})"
            )
        else:
            if containerd.get("enable_cdi") is not True:
                problems.append(
                    "containerd: enable_cdi is " + ("off" if containerd.get("enable_cdi") is False else "not set")
                )
            dirs = containerd.get("cdi_spec_dirs") or []
            if not _has_cdi_dir(dirs):
                problems.append(f"containerd: cdi_spec_dirs {dirs} lack {DRA_CDI_DIR}")
            else:
                notes.append("containerd CDI " + ", ".join(dirs))
    if "crio" in params["runtimes"] and crio is not None and crio.get("ok"):
        # `crio config` prints a setting left at its default as a comment: CRI-O's own cdi_spec_dirs then
        dirs = cdi_spec_dirs(crio["dump"][1]) or list(CRIO_DEFAULT_CDI_DIRS)
        if not _has_cdi_dir(dirs):
            problems.append(f"CRI-O: cdi_spec_dirs {dirs} lack {DRA_CDI_DIR}")
        else:
            notes.append("CRI-O CDI " + ", ".join(dirs))
    docker = runtimes.get("docker") or {}
    if "docker" in params["runtimes"] and truthy(docker.get("running")):
        version = docker.get("version") or ""
        if version and (version_tuple(version) or ()) < (25,):
            notes.append(f"docker {version} has no CDI (25+; pods reach docker only through cri-dockerd)")
        else:
            rc, out, err = host.run(["docker", "info", "--format", "{{json .CDISpecDirs}}"])
            try:
                dirs = json.loads(out) if rc == 0 else None
            except ValueError:
                dirs = None
            if rc != 0 or (dirs is None and out.strip() != "null"):
                problems.append(f"docker: `docker info` gave no CDI directories ({(err or out).strip()[:80]})")
            elif not dirs:
                problems.append("docker: CDI is off (features.cdi)")
            elif not _has_cdi_dir(dirs):
                problems.append(f"docker: cdi-spec-dirs {dirs} lack {DRA_CDI_DIR}")
            else:
                notes.append("docker CDI " + ", ".join(dirs))
    return problems, notes


def _boot_problems(params: dict, node: dict, host: Node) -> tuple:
    """(problems, notes) about the GPU device nodes and the unit that creates them before the kubelet."""
    problems, notes = [], []
    unit = params["dra_device_nodes_unit"]
    rc, out, _err = host.run(["systemctl", "is-enabled", unit])
    if out.strip() != "enabled":
        problems.append(f"{unit} is {out.strip() or 'not installed'}: no device nodes at boot")
    rc, out, _err = host.run(["systemctl", "show", "--property", "After", "--value", "kubelet.service"])
    if rc == 0 and truthy((node.get("kubelet") or {}).get("installed")) and unit not in out.split():
        problems.append(f"kubelet.service does not start after {unit}")
    if truthy(node.get("has_gpu")):
        missing = [d for d in CONTROL_DEVICES if host.lstat(d) is None]
        if not host.glob("/dev/nvidia[0-9]*"):
            missing.append("/dev/nvidia<N>")
        if missing:
            problems.append("missing device nodes " + ", ".join(missing))
        else:
            notes.append("device nodes there")
    else:
        notes.append("no GPU: device nodes not checked")
    return problems, notes


def prerequisites_row(params: dict, node: dict, host: Node, containerd=None, crio=None) -> dict:
    check = "DRA prerequisites"
    if params["gpu_allocation"] != "dra":
        return table_row(check, "skipped", f"device plugin chosen ({ALLOCATION_VARIABLE})")
    root_dir = _root_dir(node)
    paths = dra_paths(root_dir)
    problems, notes = _runtime_problems(params, node, host, containerd, crio)
    boot_problems, boot_notes = _boot_problems(params, node, host)
    problems += boot_problems
    notes += boot_notes
    missing = [paths[key] for key in ("plugins_dir", "plugins_registry") if host.lstat(paths[key]) is None]
    if missing:
        problems.append("missing kubelet plugin directories " + ", ".join(missing))
    relocated = (
        f"; kubelet root-dir {root_dir}: give the DRA driver's Helm chart kubeletPlugin.kubeletRegistrarDirectoryPath="
        f"{paths['plugins_registry']} and kubeletPlugin.kubeletPluginsDirectoryPath={paths['plugins_dir']}"
        if root_dir != KUBELET_ROOT_DIR_DEFAULT
        else ""
    )
    if problems:
        return table_row(check, "fail", "; ".join(problems) + relocated, "Run site.yml (roles runtime_config, kubelet)")
    return table_row(check, "ok", "; ".join([*notes, f"plugin directories under {root_dir}"]) + relocated)


def check_dra(params: dict, node: dict, host: Node, containerd=None, crio=None) -> list:
    return [allocation_row(params, node, host), prerequisites_row(params, node, host, containerd, crio)]
