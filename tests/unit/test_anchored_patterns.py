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
    text = (ROOT / "roles" / "nvidia_container_toolkit" / "tasks" / "preflight.yml").read_text()
    checks = re.findall(r"__nvidia_container_toolkit_fingerprint is regex\(([^)]*)\)", text)
    assert checks and all(check.endswith("match_type='fullmatch'") for check in checks), checks
