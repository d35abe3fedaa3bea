"""Issue 40: the house stays easy to find one's way in. Python files split by subject, vars files that hold
data, one platform mechanism, short task names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from conftest import PLATFORM_DATA_IN_GPU_NODE_FACTS, platform_names

ROOT = Path(__file__).resolve().parents[2]

MAX_PYTHON_LINES = 700


def test_no_python_file_in_library_or_plugins_is_over_700_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for path in sorted([*ROOT.glob("library/*.py"), *ROOT.glob("plugins/*/*.py")])
        if (n := len(path.read_text().splitlines())) > MAX_PYTHON_LINES
    }
    assert not long, f"split these files by subject (at most {MAX_PYTHON_LINES} lines each): {long}"


# Task names say what happens in a few words; the detail goes into a comment above the task: every role's tasks and
# handlers, and the playbooks.
SHORT_NAMED = [
    *sorted(str(path.relative_to(ROOT)) for path in ROOT.glob("roles/*/tasks")),
    *sorted(str(path.relative_to(ROOT)) for path in ROOT.glob("roles/*/handlers")),
    "playbooks",
    "playbooks/tasks",
]
MAX_TASK_NAME = 70


def _task_names(node):
    if isinstance(node, list):
        for item in node:
            yield from _task_names(item)
    elif isinstance(node, dict):
        if isinstance(node.get("name"), str):
            yield node["name"]
        for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
            yield from _task_names(node.get(key))


def test_task_and_play_names_are_short():
    long = [
        f"{path.relative_to(ROOT)}: {name!r} ({len(name)})"
        for folder in SHORT_NAMED
        for path in sorted((ROOT / folder).glob("*.yml"))
        for name in _task_names(yaml.safe_load(path.read_text()))
        if len(name) > MAX_TASK_NAME
    ]
    assert not long, f"shorten these names to {MAX_TASK_NAME} characters, the detail in a comment:\n" + "\n".join(long)


# ---- one platform mechanism (issue 40, item 3) -------------------------------------------------------------------
# A role with platform data loads it in tasks/set_vars.yml, one include_vars of the first found of
# __gpu_node_facts_platform_files (roles/gpu_node_facts/vars/main.yml), as linux-system-roles/timesync's
# tasks/set_vars.yml does (commit 2330086). Nowhere else does a role pick values by platform.
SET_VARS_TASK = {
    "name": "Load the platform data",
    "ansible.builtin.include_vars": "{{ lookup('ansible.builtin.first_found', __gpu_node_facts_platform_files) }}",
}
# A role whose decisions are one plan filter (nvidia_driver, issue 51) reads the same file as data in the plan's one
# render instead: its set_vars.yml is one set_fact of the plan over that first found file.
FIRST_FOUND = "lookup('ansible.builtin.first_found', __gpu_node_facts_platform_files)"
PLATFORM_FILE = re.compile(r"(default|[A-Z][A-Za-z]*(_[0-9.]+)?)\.yml")
ROLE_DIRS = sorted(path for path in (ROOT / "roles").iterdir() if (path / "tasks" / "main.yml").is_file())
# A value chosen by platform anywhere but the platform files: a map indexed by the OS family or distribution, a
# comparison with one, a first_found lookup of files.
PLATFORM_CHOICE = re.compile(
    r"first_found|\[\s*ansible_facts(\.|\[')(os_family|distribution)('\])?\s*\]"
    r"|ansible_facts(\.|\[')(os_family|distribution)('\])?\s*(==|!=|in\b|not in\b)"
)


def _platform_files(role: Path) -> list[str]:
    return sorted(path.name for path in (role / "vars").glob("*.yml") if PLATFORM_FILE.fullmatch(path.name))


def _imports(role: Path) -> list[str]:
    found = []

    def walk(node, path):
        if isinstance(node, list):
            for item in node:
                walk(item, path)
        elif isinstance(node, dict):
            target = node.get("ansible.builtin.import_tasks")
            if target:
                found.append(f"{path.name}: {target}")
            for key in ("block", "rescue", "always"):
                walk(node.get(key), path)

    for path in sorted((role / "tasks").glob("*.yml")):
        walk(yaml.safe_load(path.read_text()), path)
    return found


@pytest.mark.parametrize("role", ROLE_DIRS, ids=lambda path: path.name)
def test_a_role_with_platform_data_loads_it_through_set_vars(role):
    files = _platform_files(role)
    set_vars = role / "tasks" / "set_vars.yml"
    if not files:
        assert not set_vars.exists(), f"{set_vars.relative_to(ROOT)} loads no platform file: remove it"
        return
    assert "default.yml" in files, f"{role.name}: vars/default.yml is the data of a platform without a file of its own"
    assert set_vars.is_file(), f"{role.name} has platform files {files} but no tasks/set_vars.yml loading them"
    tasks = yaml.safe_load(set_vars.read_text())
    if tasks != [SET_VARS_TASK]:
        plan = f"__{role.name}_plan"
        assert len(tasks) == 1 and list(tasks[0]["ansible.builtin.set_fact"]) == [plan], tasks
        assert (
            f"lookup('ansible.builtin.file', {FIRST_FOUND}) | from_yaml" in tasks[0]["ansible.builtin.set_fact"][plan]
        )
    imports = [entry for entry in _imports(role) if entry.endswith(": set_vars.yml")]
    assert len(imports) == 1, f"{role.name} must import tasks/set_vars.yml once (statically): {imports}"
    for name in files:
        data = yaml.safe_load((role / "vars" / name).read_text()) or {}
        assert all(key.startswith(f"__{role.name}_") for key in data), (name, sorted(data))


@pytest.mark.parametrize("role", PLATFORM_DATA_IN_GPU_NODE_FACTS)
def test_the_no_op_paths_platform_data_is_loaded_once_by_gpu_node_facts(role):
    """One include_vars per play for every role on site.yml's no-op path (issue 47): their platform data is in
    gpu_node_facts' vars/<platform>.yml, every platform file sets each role's names, and the role loads none itself."""
    assert not _platform_files(ROOT / "roles" / role)
    assert not (ROOT / "roles" / role / "tasks" / "set_vars.yml").exists()
    facts = ROOT / "roles" / "gpu_node_facts" / "vars"
    names = {
        path.name: set(platform_names(role, yaml.safe_load(path.read_text())))
        for path in facts.glob("*.yml")
        if path.name != "main.yml"
    }
    if role == "nvidia_container_toolkit":  # each package manager has its own files; every platform names its manager
        assert all("__gpu_node_facts_toolkit_package_manager" in found for found in names.values()), names
    else:
        assert names["default.yml"] and all(found == names["default.yml"] for found in names.values()), names


def test_nothing_else_chooses_by_platform():
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted(
            [
                *ROOT.glob("roles/*/tasks/*.yml"),
                *ROOT.glob("roles/*/vars/main.yml"),
                *ROOT.glob("roles/*/defaults/main.yml"),
                *ROOT.glob("roles/*/handlers/*.yml"),
            ]
        )
        if path.name != "set_vars.yml"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if PLATFORM_CHOICE.search(line) and not line.lstrip().startswith("#")
    ]
    assert not found, "choose platform values in vars/<platform>.yml, loaded by tasks/set_vars.yml:\n" + "\n".join(
        found
    )


def test_the_platform_files_are_named_once():
    shared = yaml.safe_load((ROOT / "roles" / "gpu_node_facts" / "vars" / "main.yml").read_text())
    assert shared["__gpu_node_facts_platform_files"]["files"][-1] == "default.yml"
    assert shared["__gpu_node_facts_platform_files"]["paths"] == ["{{ role_path }}/vars"]
