# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Node facts for GPU allocation: the kubelet's root directory and which GPU plugins are registered with it (NVIDIA's
device plugin, NVIDIA's DRA kubelet plugin), read from the files of the node. Issue 39.

gpu_node_facts returns them as ``ansible_facts.gpu_node.dra``; the doctor's dra family (gpu_validate_dra) uses the
same functions. Stdlib only, Python 3.8+ (the node's python3).

Where the paths come from (kubernetes-sigs/dra-driver-nvidia-gpu at commit 95932046683719c43b6a0dd9613c2e5aad5d6703):
- deployments/helm/dra-driver-nvidia-gpu/values.yaml: kubeletPlugin.kubeletRegistrarDirectoryPath
  ``/var/lib/kubelet/plugins_registry`` and kubeletPlugin.kubeletPluginsDirectoryPath ``/var/lib/kubelet/plugins``
  (the kubelet's own --root-dir default, ``/var/lib/kubelet``, under both);
- vendor/k8s.io/dynamic-resource-allocation/kubeletplugin/draplugin.go: the registration socket in the registrar
  directory is ``<driver name>-reg.sock`` (``<driver name>-<uid>-reg.sock`` with rolling updates);
- cmd/gpu-kubelet-plugin/main.go: the GPU driver's name ``gpu.nvidia.com`` (DriverName), its directory
  ``<plugins directory>/gpu.nvidia.com`` (DriverPluginPath) and its checkpoint ``checkpoint.json`` there
  (DriverPluginCheckpointFileBasename).
NVIDIA's device plugin registers through the kubelet's device-plugins directory, not plugins_registry: its socket
is ``<root-dir>/device-plugins/nvidia-*.sock`` (gpu_pods.DEVICE_PLUGIN_SOCKET_GLOB).
"""

from __future__ import annotations

import glob
import os

KUBELET_ROOT_DIR_DEFAULT = "/var/lib/kubelet"
DRA_GPU_DRIVER = "gpu.nvidia.com"
DRA_CHECKPOINT = "checkpoint.json"
REGISTRATION_SUFFIX = "-reg.sock"
DEVICE_PLUGIN_GLOB = "nvidia-*.sock"


def _rooted(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/")) if root not in ("", "/") else path


def root_dir_from_argv(argv: list) -> str | None:
    """The value of --root-dir in a kubelet's command line (``--root-dir=X`` or ``--root-dir X``), None without."""
    for index, arg in enumerate(argv):
        if arg.startswith("--root-dir="):
            return arg.split("=", 1)[1] or None
        if arg == "--root-dir" and index + 1 < len(argv):
            return argv[index + 1] or None
    return None


def _is_kubelet(argv: list) -> bool:
    """A kubelet's command line: its program is called kubelet, or an interpreter runs a file called kubelet."""
    names = [os.path.basename(arg) for arg in argv[:2]]
    return bool(names) and (names[0] == "kubelet" or (len(names) > 1 and names[1] == "kubelet"))


def kubelet_root_dir(root: str = "/") -> str:
    """The running kubelet's --root-dir (its process's command line), else the kubelet's default /var/lib/kubelet."""
    proc = _rooted(root, "/proc")
    try:
        entries = sorted((entry for entry in os.listdir(proc) if entry.isdigit()), key=int)
    except OSError:
        entries = []
    for entry in entries:
        try:
            with open(os.path.join(proc, entry, "cmdline"), "rb") as handle:
                argv = [a.decode("utf-8", "replace") for a in handle.read().split(b"\0") if a]
        except OSError:
            continue
        if _is_kubelet(argv):
            found = root_dir_from_argv(argv)
            if found:
                return os.path.normpath(found)
    return KUBELET_ROOT_DIR_DEFAULT


def registered_drivers(socket_names: list) -> list:
    """The DRA driver names of registration sockets (``gpu.nvidia.com-reg.sock``, ``gpu.nvidia.com-<uid>-reg.sock``);
    other sockets (CSI drivers' ``<name>-reg.sock`` too) are named as they are, without the suffix."""
    drivers = []
    for name in socket_names:
        if not name.endswith(REGISTRATION_SUFFIX):
            continue
        driver = name[: -len(REGISTRATION_SUFFIX)]
        if driver.startswith(DRA_GPU_DRIVER + "-"):
            driver = DRA_GPU_DRIVER
        if driver not in drivers:
            drivers.append(driver)
    return drivers


def dra_paths(root_dir: str) -> dict:
    """Where the kubelet of root_dir and NVIDIA's DRA driver meet (see the module docstring)."""
    return {
        "kubelet_root_dir": root_dir,
        "plugins_registry": os.path.join(root_dir, "plugins_registry"),
        "plugins_dir": os.path.join(root_dir, "plugins"),
        "device_plugins_dir": os.path.join(root_dir, "device-plugins"),
        "checkpoint": os.path.join(root_dir, "plugins", DRA_GPU_DRIVER, DRA_CHECKPOINT),
    }


def dra_facts(root: str = "/", root_dir: str | None = None) -> dict:
    """The kubelet's plugin directories and what is registered there: the DRA drivers' registration sockets, whether
    NVIDIA's GPU DRA plugin (gpu.nvidia.com) and NVIDIA's device plugin (its socket) are registered, and whether the
    DRA plugin's checkpoint is there."""
    paths = dra_paths(root_dir or kubelet_root_dir(root))
    sockets = sorted(
        os.path.basename(p) for p in glob.glob(os.path.join(_rooted(root, paths["plugins_registry"]), "*"))
    )
    device_plugin_sockets = sorted(
        os.path.join(paths["device_plugins_dir"], os.path.basename(p))
        for p in glob.glob(os.path.join(_rooted(root, paths["device_plugins_dir"]), DEVICE_PLUGIN_GLOB))
    )
    drivers = registered_drivers(sockets)
    return dict(
        paths,
        plugins_registry_exists=os.path.isdir(_rooted(root, paths["plugins_registry"])),
        plugins_dir_exists=os.path.isdir(_rooted(root, paths["plugins_dir"])),
        registrations=sockets,
        dra_drivers=drivers,
        dra_gpu_registered=DRA_GPU_DRIVER in drivers,
        device_plugin_sockets=device_plugin_sockets,
        device_plugin_registered=bool(device_plugin_sockets),
        checkpoint_exists=os.path.isfile(_rooted(root, paths["checkpoint"])),
    )
