"""Issue 40: the house stays easy to find one's way in. Python files split by subject, vars files that hold
data, one platform mechanism, short task names."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

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
