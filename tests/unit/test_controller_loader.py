"""One loader for the project's module_utils on the controller.

Controller plugins cannot import plugins/module_utils as ansible.module_utils.*: each
loads plugins/module_utils/controller_files.py by path with the same few lines
(`_controller_files`) and gets every other module_utils file from its
`load_module_util`, so a file used by two plugins is one module in the process."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = sorted(
    p for p in (ROOT / "plugins").glob("*/*.py") if p.parent.name in ("action", "filter", "strategy", "lookup")
)


def _functions_loading_by_path(path: Path) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(path.read_text())
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            calls = [c for c in ast.walk(node) if isinstance(c, ast.Call)]
            if any(isinstance(c.func, ast.Attribute) and c.func.attr == "spec_from_file_location" for c in calls):
                found[node.name] = node
    return found


def test_every_plugin_loads_module_utils_only_through_the_one_bootstrap():
    bootstraps = {}
    for path in PLUGINS:
        loaders = _functions_loading_by_path(path)
        assert set(loaders) <= {"_controller_files"}, f"{path.relative_to(ROOT)} loads files by path in {set(loaders)}"
        if loaders:
            body = loaders["_controller_files"].body
            body = body[1:] if isinstance(body[0], ast.Expr) else body  # the docstring may differ
            bootstraps[path.name] = ast.dump(ast.Module(body=body, type_ignores=[]))
    assert {"toml_merge.py", "containerd_config.py", "kubelet.py"} <= set(bootstraps), bootstraps.keys()
    assert len(set(bootstraps.values())) == 1, "the _controller_files bootstraps differ: " + ", ".join(bootstraps)


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"_test_loader_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_module_util_used_by_an_action_and_a_filter_plugin_is_one_module():
    kubelet = _load(ROOT / "plugins" / "filter" / "kubelet.py")
    toml_merge = _load(ROOT / "plugins" / "action" / "toml_merge.py")
    shared = toml_merge._controller_files().load_module_util("config_merge")
    assert kubelet._merge is shared
    assert sys.modules["gpu_node_provisioning_config_merge"] is shared
