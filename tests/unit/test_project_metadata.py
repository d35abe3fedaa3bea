"""Issue 41: what a user expects of a project: a LICENSE, a version in one home that the changelog follows,
requirements for running the playbooks apart from the test stack, and an example inventory with current pins."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _pins(name: str) -> dict[str, str]:
    pins = {}
    for line in (ROOT / name).read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            package, version = line.split("==")
            pins[re.sub(r"\[.*\]", "", package).lower()] = version
    return pins


def test_the_license_the_files_point_at_is_apache_2():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    for meta in ROOT.glob("roles/*/meta/main.yml"):
        assert yaml.safe_load(meta.read_text())["galaxy_info"]["license"] == "Apache-2.0", meta


def test_the_version_has_one_home_and_the_changelog_follows_it():
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION)
    assert not (ROOT / "VERSION").exists()
    # galaxy.yml must carry a version of its own (ansible-galaxy reads no other file): it says pyproject.toml's
    assert yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"] == VERSION
    for meta in ROOT.glob("roles/*/meta/main.yml"):
        info = yaml.safe_load(meta.read_text())
        assert "version" not in info and "version" not in info["galaxy_info"], meta
    changelog = (ROOT / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\]", changelog, re.MULTILINE)
    assert headings[0] == "Unreleased", headings
    assert headings[1] == VERSION, f"the newest release in CHANGELOG.md is {headings[1]}, pyproject.toml says {VERSION}"
    assert "Keep a Changelog" in changelog
    assert "### Test times" not in changelog  # those live in docs/test-times.md
    assert (ROOT / "docs" / "test-times.md").is_file() and "docs/test-times.md" in changelog


def _controller_imports() -> set[str]:
    """Top-level modules the controller-side plugins import (action, filter, strategy plugins)."""
    names = set()
    for path in [
        *ROOT.glob("plugins/action/*.py"),
        *ROOT.glob("plugins/filter/*.py"),
        *ROOT.glob("plugins/strategy/*.py"),
    ]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def test_requirements_txt_runs_the_playbooks_and_the_test_stack_is_apart():
    runtime, test = _pins("requirements.txt"), _pins("requirements-test.txt")
    assert (ROOT / "requirements-test.txt").read_text().count("-r requirements.txt\n") == 1
    assert not set(runtime) & set(test), set(runtime) & set(test)
    for tool in ("molecule", "pytest", "ansible-lint", "grpcio-tools", "hypothesis", "ruff", "yamllint"):
        assert tool not in runtime and tool in test, tool
    distributions = {"tomlkit": "tomlkit", "ruamel": "ruamel.yaml", "ansible_mitogen": "mitogen", "yaml": "pyyaml"}
    stdlib_or_ansible = {"ansible", "ansible_collections", "__future__"}
    for module in _controller_imports():
        if module in distributions:
            assert distributions[module] in runtime, f"the controller imports {module}: pin it in requirements.txt"
        else:
            assert module in stdlib_or_ansible or module in __import__("sys").stdlib_module_names, module


def test_the_example_inventory_pins_are_current():
    toolkit = yaml.safe_load((ROOT / "inventories/example/group_vars/gpu_nodes/toolkit.yml").read_text())
    driver = yaml.safe_load((ROOT / "inventories/example/group_vars/gpu_nodes/driver.yml").read_text())
    pin = toolkit["nvidia_container_toolkit_version"]
    assert toolkit["nvidia_container_toolkit_cdi_refresh"] is True
    # cdi_refresh needs the nvidia-cdi-refresh units, shipped from toolkit 1.18 on
    assert tuple(int(p) for p in pin.split("-")[0].split(".")) >= (1, 18, 0), pin
    assert pin == "1.20.0-1"
    assert str(driver["nvidia_driver_branch"]) == "580"
    # the stand-in packages are versioned as the binaries they carry: 1.20.0-1 is built, the demo pins it
    builder = (ROOT / "tests/fixtures/nvidia-container-toolkit-standin/build-standin-repo.sh").read_text()
    assert re.search(r"versions=\([^)]*\b1\.20\.0-1\b", builder)
    demo = yaml.safe_load((ROOT / "inventories/local/group_vars/all/demo.yml").read_text())
    assert demo["nvidia_container_toolkit_version"] == pin
