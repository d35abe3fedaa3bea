# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Filter of the kubelet role for GPU allocation through NVIDIA's DRA driver (issue 39; the paths are
plugins/module_utils/node_facts_dra.py's, which the node facts and the doctor share).

`gpu_node_dra_paths(root_dir)`
    Where the kubelet of root_dir (its --root-dir) and NVIDIA's DRA kubelet plugin meet: kubelet_root_dir,
    plugins_registry, plugins_dir, device_plugins_dir and checkpoint (the GPU plugin's checkpoint.json).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _controller_files():
    """plugins/module_utils/controller_files.py, loaded by path. A copy in every controller plugin by design: a
    plugin cannot import this project's module_utils as ansible.module_utils.*, and the loader cannot come from
    the files it loads."""
    name = "gpu_node_provisioning_controller_files"
    if name not in sys.modules:
        path = Path(__file__).resolve().parent.parent / "module_utils" / "controller_files.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


_logic = _controller_files().load_module_util("node_facts_dra")


def gpu_node_dra_paths(root_dir):
    return _logic.dra_paths(str(root_dir).rstrip("/") or "/")


class FilterModule:
    """Filters of GPU allocation through DRA."""

    def filters(self):
        return {"gpu_node_dra_paths": gpu_node_dra_paths}
