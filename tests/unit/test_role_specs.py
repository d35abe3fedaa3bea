"""Every role's meta/argument_specs.yml (its one entry point) must describe exactly its defaults/main.yml.

The role's role_variables task checks its variables against argument_specs before the role changes anything,
so a variable that is in defaults but not in the spec escapes the check, and a spec option without a default in
defaults/main.yml is a variable users cannot find. Each spec uses only what role_variables checks (an option
key it does not know, such as `required`, would be a check that nothing makes). Roles are discovered under
roles/, so a new role is checked without touching this file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import load_module

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(path for path in (ROOT / "roles").iterdir() if path.is_dir() and not path.name.startswith("."))
ENTRY_POINT = load_module("role_variables", subdir="plugins/action").ENTRY_POINT
# What role_variables reads of an option (type, elements, choices, default; no_log hides a value it names) and
# what is documentation only. Ansible's own validation, which would check more (required, aliases, options of a
# dict, mutually_exclusive...), does not run.
OPTION_KEYS = {"description", "type", "elements", "choices", "default", "no_log", "version_added"}


def _yaml(path: Path) -> dict:
    if not path.is_file():
        return {}
    return yaml.safe_load(path.read_text()) or {}


def _spec_options(role: Path) -> dict:
    specs = _yaml(role / "meta" / "argument_specs.yml")
    return ((specs.get("argument_specs") or {}).get(ENTRY_POINT) or {}).get("options") or {}


def _defaults(role: Path) -> dict:
    return _yaml(role / "defaults" / "main.yml")


def test_there_are_roles_to_check():
    assert ROLES, f"no roles found under {ROOT / 'roles'}"


@pytest.mark.parametrize("role", ROLES, ids=[role.name for role in ROLES])
def test_argument_spec_options_equal_the_defaults(role):
    options = set(_spec_options(role))
    defaults = set(_defaults(role))
    if not options and not defaults:
        return  # a role without variables needs neither file
    assert (role / "meta" / "argument_specs.yml").is_file(), f"{role.name} has defaults but no meta/argument_specs.yml"
    assert options - defaults == set(), f"{role.name}: in argument_specs but not in defaults/main.yml"
    assert defaults - options == set(), f"{role.name}: in defaults/main.yml but not in argument_specs"


@pytest.mark.parametrize("role", ROLES, ids=[role.name for role in ROLES])
def test_the_one_entry_point_is_not_main_and_uses_only_what_role_variables_checks(role):
    """`main` would make Ansible prepend its own validation task to the role, a second type check."""
    specs = _yaml(role / "meta" / "argument_specs.yml").get("argument_specs")
    if specs is None:
        return
    assert list(specs) == [ENTRY_POINT] != ["main"], f"{role.name}: entry points {list(specs)}"
    assert set(specs[ENTRY_POINT]) <= {"short_description", "description", "author", "options"}, role.name
    unknown = {name: sorted(set(option) - OPTION_KEYS) for name, option in _spec_options(role).items()}
    assert {name: keys for name, keys in unknown.items() if keys} == {}, role.name


@pytest.mark.parametrize("role", ROLES, ids=[role.name for role in ROLES])
def test_argument_spec_options_are_described_typed_and_default_like_defaults(role):
    defaults = _defaults(role)
    problems = []
    for name, option in _spec_options(role).items():
        if not option.get("description"):
            problems.append(f"{name} has no description")
        if not option.get("type"):
            problems.append(f"{name} has no type")
        if "default" in option and name in defaults and option["default"] != defaults[name]:
            problems.append(f"{name}: default {option['default']!r} differs from defaults/main.yml {defaults[name]!r}")
        if not name.startswith(f"{role.name}_"):
            problems.append(f"{name} does not start with the role prefix {role.name}_")
    assert problems == [], f"{role.name}: " + "; ".join(problems)


@pytest.mark.parametrize("role", ROLES, ids=[role.name for role in ROLES])
def test_readme_points_to_ansible_doc_and_it_renders_every_variable(role):
    """The role README names no variable table of its own: ansible-doc renders argument_specs, the one description."""
    readme = (role / "README.md").read_text()
    assert f"`ansible-doc -t role {role.name}`" in readme, f"{role.name}/README.md does not point to ansible-doc"
    assert "| Variable | Default |" not in readme, f"{role.name}/README.md repeats a variable table"
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-doc"), "-j", "-t", "role", role.name],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rendered = json.loads(result.stdout)[role.name]["entry_points"][ENTRY_POINT].get("options") or {}
    assert set(rendered) == set(_defaults(role)), f"{role.name}: ansible-doc renders {sorted(rendered)}"
