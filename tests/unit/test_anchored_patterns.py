"""Validation patterns in role vars match the whole value: a trailing newline is not a valid value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _var(role: str, name: str) -> str:
    return yaml.safe_load((ROOT / "roles" / role / "vars" / "main.yml").read_text())[name]


@pytest.mark.parametrize(
    ("role", "name", "good"),
    [
        ("nvidia_driver", "__nvidia_driver_version_regex", "550.54.15"),
        ("nvidia_driver", "__nvidia_driver_branch_regex", "550"),
        ("nvidia_container_toolkit", "__nvidia_container_toolkit_version_pattern", "1.17.8-1"),
    ],
)
def test_a_version_pattern_refuses_a_trailing_newline(role, name, good):
    pattern = _var(role, name)
    assert re.match(pattern, good)  # the roles use the `match`/`regex` tests: re.match / re.search
    assert not re.match(pattern, good + "\n")
    assert not re.search(pattern, good + "\n")


def test_the_fingerprint_check_matches_the_whole_value():
    text = (ROOT / "roles" / "nvidia_container_toolkit" / "vars" / "main.yml").read_text()
    checks = re.findall(r"__nvidia_container_toolkit_fingerprint is regex\(([^)]*)\)", text)
    assert checks and all(check.endswith("match_type='fullmatch'") for check in checks), checks


# `is match('^...$')` in a task: Python's `$` also matches before a final newline, so "0666\n" or
# "nvidia\n" would pass. A pattern test anchored at the end must anchor with \Z or fullmatch.
_PATTERN_TEST = re.compile(r"is\s+(?:match|regex|search)\(\s*'((?:[^'\\]|\\.)*)'([^)]*)\)")


def _pattern_tests():
    for path in sorted((ROOT / "roles").glob("*/tasks/*.yml")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for pattern, rest in _PATTERN_TEST.findall(line):
                yield f"{path.relative_to(ROOT)}:{number}", pattern, rest
    # the rules of the roles' variables (vars/main.yml), which the role_variables task checks
    for path in sorted((ROOT / "roles").glob("*/vars/main.yml")):
        rules = yaml.safe_load(path.read_text()).get(f"__{path.parent.parent.name}_variable_checks") or {}
        for name, rule in rules.items():
            for pattern, rest in _PATTERN_TEST.findall(" ".join(str(rule["ok"]).split())):
                yield f"{path.relative_to(ROOT)}:{name}", pattern, rest


def test_there_are_pattern_tests_in_the_roles():
    assert len(list(_pattern_tests())) >= 3


def _anchored_at_the_end(pattern: str) -> bool:
    return pattern.endswith("$") and not pattern.endswith("\\$")


@pytest.mark.parametrize(("where", "pattern", "rest"), list(_pattern_tests()), ids=lambda v: str(v)[:60])
def test_a_task_pattern_anchored_at_the_end_matches_the_whole_value(where, pattern, rest):
    assert "fullmatch" in rest or not _anchored_at_the_end(pattern), (
        f"{where}: '{pattern}' lets a trailing newline through; use match_type='fullmatch' or end it with \\Z"
    )
