"""The repository is the collection gpunode.provisioning (issue 51): its face, its imports, its names.

- galaxy.yml names it; a checkout resolves it through ansible.cfg's collections_path and the link
  collections/ansible_collections/gpunode/provisioning -> the root, with no install step;
- modules live in plugins/modules/, library/ holds one link per module (kubespray's layout);
- module_utils are subject packages, controller-only code is in plugins/plugin_utils/;
- project code is imported by its package path only: no loader by path, no ansible.module_utils.<ours>;
- roles, playbooks and templates name the collection's modules, filters and lookups by FQCN (an installed
  collection's roles find filters and lookups only so).
The built artifact installing and running the demo is tests/demo/test_demo.py's.
"""

from __future__ import annotations

import ast
import configparser
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
FQ = f"{GALAXY['namespace']}.{GALAXY['name']}"
PACKAGE = f"ansible_collections.{GALAXY['namespace']}.{GALAXY['name']}"
PLUGIN_DIRS = ("action", "filter", "lookup", "strategy", "doc_fragments", "modules", "module_utils", "plugin_utils")


def _python_files(*dirs: str) -> list[Path]:
    return sorted(p for d in dirs for p in (ROOT / "plugins" / d).rglob("*.py"))


def _names(kind: str) -> list[str]:
    """The names the collection's plugins of ``kind`` (filter) register."""
    names = []
    for path in _python_files(kind):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "filters":
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Dict):
                        names += [k.value for k in sub.keys if isinstance(k, ast.Constant)]
    return sorted(names)


MODULES = sorted(p.stem for p in (ROOT / "plugins/modules").glob("*.py"))
FILTERS = _names("filter")
LOOKUPS = sorted(p.stem for p in (ROOT / "plugins/lookup").glob("*.py"))


def test_galaxy_yml_names_the_collection():
    assert (GALAXY["namespace"], GALAXY["name"]) == ("gpunode", "provisioning")
    assert yaml.safe_load((ROOT / "meta/runtime.yml").read_text())["requires_ansible"]


def test_a_checkout_resolves_the_collection_through_ansible_cfg_with_no_install():
    link = ROOT / "collections/ansible_collections" / GALAXY["namespace"] / GALAXY["name"]
    assert link.is_symlink() and link.resolve() == ROOT
    config = configparser.ConfigParser(interpolation=None)
    config.read(ROOT / "ansible.cfg")
    assert config["defaults"]["collections_path"].split(":")[0] == "collections"
    # the project's plugins come from the collection, not from legacy plugin paths
    for option in ("module_utils", "filter_plugins", "lookup_plugins", "doc_fragment_plugins"):
        assert option not in config["defaults"], f"ansible.cfg still sets {option}"


def test_molecule_resolves_the_collection_as_ansible_cfg_does():
    """molecule writes its own ansible.cfg: its shared config names the collection's path, and no legacy plugin path
    of the project (a plugin found there would not be the collection's)."""
    env = yaml.safe_load((ROOT / ".config/molecule/config.yml").read_text())["provisioner"]["env"]
    assert env["ANSIBLE_COLLECTIONS_PATH"] == "${MOLECULE_PROJECT_DIRECTORY}/collections"
    stale = {"ANSIBLE_MODULE_UTILS", "ANSIBLE_FILTER_PLUGINS", "ANSIBLE_LOOKUP_PLUGINS", "ANSIBLE_DOC_FRAGMENT_PLUGINS"}
    assert not stale & set(env), stale & set(env)


def test_library_holds_one_link_per_module_as_kubespray_does():
    library = sorted((ROOT / "library").iterdir())
    assert [p.stem for p in library] == MODULES
    for path in library:
        assert path.is_symlink(), f"{path} is a file: modules live in plugins/modules/"
        assert path.resolve() == ROOT / "plugins/modules" / path.name


def test_module_utils_are_subject_packages():
    flat = [p.name for p in (ROOT / "plugins/module_utils").glob("*.py") if p.name != "__init__.py"]
    assert flat == [], f"module_utils files outside a subject package: {flat}"
    mu = ROOT / "plugins/module_utils"
    packages = sorted(p.name for p in mu.iterdir() if p.is_dir() and p.name != "__pycache__")
    for package in packages:
        assert (ROOT / "plugins/module_utils" / package / "__init__.py").is_file(), package
    assert {"containerd", "gpu_validate", "node_facts", "nvidia", "files"} <= set(packages)


@pytest.mark.parametrize("path", _python_files(*PLUGIN_DIRS), ids=lambda p: str(p.relative_to(ROOT)))
def test_project_code_is_imported_by_its_package_path_only(path):
    text = path.read_text()
    tree = ast.parse(text)
    ours = {p.stem for p in _python_files(*PLUGIN_DIRS)} - {"__init__"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}:{node.lineno}: a relative import"
            module = node.module or ""
            if module.startswith("ansible.module_utils."):
                assert module.split(".")[2] not in ours, f"{path.name}:{node.lineno}: {module} (use {PACKAGE}...)"
            assert module.split(".")[0] not in ours, f"{path.name}:{node.lineno}: import {module} by a bare name"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                assert alias.name.split(".")[0] not in ours, f"{path.name}:{node.lineno}: import {alias.name}"
                assert alias.name != "importlib.util", f"{path.name}:{node.lineno}: importlib.util (a loader)"
    assert "spec_from_file_location" not in text, f"{path.name} loads code by path"
    assert "sys.path" not in text, f"{path.name} changes sys.path"


def test_controller_only_code_is_not_in_module_utils():
    for path in _python_files("module_utils"):
        tree = ast.parse(path.read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        controller = sorted(m for m in imported if m and m.startswith(("ansible.errors", "ansible.plugins")))
        assert not controller, f"{path.relative_to(ROOT)} imports controller code {controller}: plugins/plugin_utils/"


def _content_files():
    for top in ("roles", "playbooks", "molecule", "inventories"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix in (".yml", ".yaml", ".j2") and ".molecule" not in path.parts:
                yield path
    yield ROOT / "site.yml"


def test_roles_and_playbooks_name_the_collections_plugins_by_fqcn():
    short_filter = re.compile(rf"\|\s*({'|'.join(FILTERS)})\b(?![.\w])")
    short_lookup = re.compile(rf"\b(?:lookup|query)\(\s*['\"]({'|'.join(LOOKUPS)})['\"]")
    short_module = re.compile(rf"^\s*(?:- )?(?:ansible\.legacy\.)?({'|'.join(MODULES)}):\s*$", re.M)
    found = []
    for path in _content_files():
        text = path.read_text()
        rel = path.relative_to(ROOT)
        found += [f"{rel}: filter {m.group(1)}" for m in short_filter.finditer(text)]
        found += [f"{rel}: lookup {m.group(1)}" for m in short_lookup.finditer(text)]
        if "tasks" in path.parts or "handlers" in path.parts or path.parent.name in ("playbooks", "tasks"):
            found += [f"{rel}: module {m.group(1)}" for m in short_module.finditer(text)]
    assert not found, f"short names where {FQ}.<name> is needed:\n" + "\n".join(found)


def test_the_fqcn_check_sees_a_short_name():
    """The check above can fail: a role task with a short filter name is found."""
    assert re.search(rf"\|\s*({'|'.join(FILTERS)})\b(?![.\w])", "{{ x | kubelet_plan }}")
    assert not re.search(rf"\|\s*({'|'.join(FILTERS)})\b(?![.\w])", f"{{{{ x | {FQ}.kubelet_plan }}}}")


def test_version_tuple_is_written_once():
    """Issue 51: one version_tuple (plugins/module_utils/system/versions.py); no copy under another name."""
    copies = []
    for path in _python_files(*PLUGIN_DIRS):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.lstrip("_") == "version_tuple":
                copies.append(str(path.relative_to(ROOT)))
    assert copies == ["plugins/module_utils/system/versions.py"]
    from ansible_collections.gpunode.provisioning.plugins.module_utils.system.versions import version_tuple

    assert version_tuple("v1.31.2-rc.1") == (1, 31, 2)
    assert version_tuple("580.95.05") == (580, 95, 5)
    assert version_tuple("") is None and version_tuple(None) is None and version_tuple("unknown") is None
