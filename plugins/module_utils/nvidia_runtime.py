# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""What "NVIDIA's runtime" is: the one definition the facts, the GPU-pods guard, the merges and the doctor use.

An entry of a container runtime's config (docker `runtimes.<name>.path`, containerd
`runtimes.<name>.options.BinaryName`, CRI-O `runtimes.<name>.runtime_path`) is NVIDIA's runtime when its binary
is NVIDIA's runtime, whatever the entry is called and whatever directory holds the binary:

- `nvidia-container-runtime`, and its mode-specific executables `nvidia-container-runtime.cdi` and
  `nvidia-container-runtime.legacy` (NVIDIA/nvidia-container-toolkit v1.20.0: cmd/nvidia-container-runtime.cdi,
  cmd/nvidia-container-runtime.legacy; cmd/nvidia-ctk-installer/container/operator/operator.go registers the
  runtimes `nvidia`, `nvidia-cdi` and `nvidia-legacy` with the binaries "nvidia-container-runtime" and
  "nvidia-container-runtime."+mode for the modes "cdi" and "legacy", under the toolkit directory).
- The GPU Operator installs them under `/usr/local/nvidia/toolkit/` (NVIDIA/gpu-operator v26.7.0:
  controllers/object_controls.go DefaultToolkitInstallDir = "/usr/local/nvidia"; the installer's toolkit
  sub-directory, cmd/nvidia-ctk-installer/main.go toolkitSubDir = "toolkit") and its RuntimeClasses name
  `nvidia-cdi` and `nvidia-legacy` (assets/pre-requisites/0210_runtime_class_legacy.yaml, 0220_runtime_class_cdi.yaml).
- AKS and microk8s call the entry `nvidia-container-runtime`, k3s `nvidia`, `nvidia-experimental`, `nvidia-cdi`
  (shared REFERENCE.md, fourth wave): only the binary tells.

An entry named like the project's runtime (`nvidia`) whose binary cannot be read still counts, as before: the
project itself registers that name with NVIDIA's binary.

Stdlib only, Python 3.8+: node-side modules import it as ansible.module_utils.nvidia_runtime; controller-side code
loads it by path (plugins/module_utils/controller_files.py load_module_util, or a sibling loader).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

RUNTIME_BINARY = "nvidia-container-runtime"
MODES = ("cdi", "legacy")
BINARIES = frozenset([RUNTIME_BINARY] + [f"{RUNTIME_BINARY}.{mode}" for mode in MODES])


def is_nvidia_binary(path) -> bool:
    """True when ``path`` (a name or a path in any directory) is NVIDIA's runtime or one of its mode executables."""
    if not isinstance(path, str):
        return False
    name = posixpath.basename(path.strip().strip("\"'").rstrip("/"))
    return name in BINARIES


def entry_binary(kind: str, entry):
    """The OCI runtime binary of one runtime entry (a dict), or None where the entry does not name one.

    kind: docker (`path`), containerd (`options.BinaryName`, spelled in any case, as containerd decodes options
    case-insensitively), crio (`runtime_path`)."""
    if not isinstance(entry, Mapping):
        return None
    if kind == "docker":
        value = entry.get("path")
    elif kind == "containerd":
        options = entry.get("options") if isinstance(entry.get("options"), Mapping) else {}
        value = next((v for k, v in options.items() if isinstance(k, str) and k.lower() == "binaryname"), None)
    elif kind == "crio":
        value = entry.get("runtime_path")
    else:
        raise ValueError(f"unknown runtime kind {kind!r}")
    return value if isinstance(value, str) and value else None


def is_nvidia_entry(name, binary, project_name: str = "nvidia") -> bool:
    """Whether the runtime entry ``name`` with ``binary`` (None: not known) is NVIDIA's runtime."""
    if binary:
        return is_nvidia_binary(binary)
    return bool(name) and name == project_name


def nvidia_entries(kind: str, runtimes, project_name: str = "nvidia") -> dict:
    """{name: binary} of the entries of ``runtimes`` ({name: entry}) that are NVIDIA's runtime."""
    found = {}
    for name, entry in (runtimes or {}).items() if isinstance(runtimes, Mapping) else ():
        binary = entry_binary(kind, entry)
        if is_nvidia_entry(name, binary, project_name):
            found[str(name)] = binary
    return found


def describe(name, binary) -> str:
    """How a message names an entry: `nvidia-cdi (/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi)`."""
    return f"{name} ({binary})" if binary else str(name)
