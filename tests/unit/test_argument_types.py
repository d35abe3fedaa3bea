"""Typed inputs: every list variable of every role is a list, and a string for one is refused.

Ansible's own role argument validation splits a string given for a ``type: list`` option at commas and
lets it pass, while the role goes on with the string. The argument_types action, the first task of
every role, refuses it. Checked three ways:
- every list option of every role's meta/argument_specs.yml sets ``elements``, and every role with list
  or dict options starts with the argument_types task;
- the pure function on the values that matter;
- for real: ansible-playbook runs each role on localhost with a string for each of its list variables
  (and a string for each dict variable); each run stops at that task, before any other task of the role,
  with a message that names the variable and the expected type.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import load_module, run_local_playbook

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(path for path in (ROOT / "roles").iterdir() if (path / "meta" / "argument_specs.yml").is_file())
TASK_NAME = "Refuse variables of the wrong type (a string for a list) before anything changes"

argument_types = load_module("argument_types", subdir="plugins/action")


def _options(role: Path) -> dict:
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
    return specs["argument_specs"]["main"].get("options") or {}


def _typed(kind: str) -> list[tuple[str, str]]:
    return [
        (role.name, name) for role in ROLES for name, option in _options(role).items() if option.get("type") == kind
    ]


LISTS = _typed("list")
DICTS = _typed("dict")


def test_there_are_list_variables_to_check():
    assert ("security_profiles", "security_profiles_apparmor_mount_fstypes") in LISTS
    assert len({role for role, _ in LISTS}) >= 5


@pytest.mark.parametrize(("role", "name"), LISTS, ids=[n for _, n in LISTS])
def test_every_list_variable_declares_its_elements(role, name):
    option = _options(ROOT / "roles" / role)[name]
    assert option.get("elements"), f"{role}: {name} is type list without elements"


@pytest.mark.parametrize("role", sorted({r for r, _ in LISTS + DICTS}))
def test_every_role_with_list_or_dict_variables_checks_their_types_first(role):
    tasks = yaml.safe_load((ROOT / "roles" / role / "tasks" / "main.yml").read_text())
    first = tasks[0]
    while "block" in first:  # a role may wrap its tasks in one tagged block: its first task runs first
        first = first["block"][0]
    assert first["name"] == TASK_NAME, f"{role}: the first task is {first.get('name')!r}"
    assert first["argument_types"] == {"spec": "{{ role_path }}/meta/argument_specs.yml"}


OPTIONS = {
    "x_list": {"type": "list", "elements": "str"},
    "x_dicts": {"type": "list", "elements": "dict"},
    "x_map": {"type": "dict"},
    "x_str": {"type": "str"},
}


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"x_list": ["fuse", "fuse.*"], "x_dicts": [{"a": 1}], "x_map": {}, "x_str": "a"}, []),
        (
            {"x_list": "fuse.*"},
            [
                "x_list must be a list of str (got a string ('fuse.*')); write it as a YAML list,"
                " e.g. x_list: ['fuse.*']"
            ],
        ),
        (
            {"x_list": 5},
            ["x_list must be a list of str (got a number (5)); write it as a YAML list, e.g. x_list: [...]"],
        ),
        ({"x_list": ["a", ["b"]]}, ["x_list must be a list of str, but item 1 is a list"]),
        ({"x_dicts": ["a=1"]}, ["x_dicts must be a list of dict, but item 0 is a string ('a=1')"]),
        ({"x_map": "a=1"}, ["x_map must be a mapping (got a string ('a=1')); write it as YAML key: value pairs"]),
        ({"x_map": ["a"]}, ["x_map must be a mapping (got a list); write it as YAML key: value pairs"]),
        ({"x_list": None, "x_other": "ignored"}, []),
    ],
)
def test_type_problems(values, expected):
    assert argument_types.type_problems(OPTIONS, values) == expected


PLAY = """
- name: A string for {name}
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Run the role with the wrong type
      block:
        - name: Include the role
          ansible.builtin.include_role:
            name: {role}
          vars:
            {name}: {value}
        - name: The role went on
          ansible.builtin.copy:
            content: "went on"
            dest: "{out}"
            mode: "0644"
          check_mode: false
      rescue:
        - name: Keep what refused it
          ansible.builtin.copy:
            content: "{{{{ {{'task': ansible_failed_task.name, 'msg': ansible_failed_result.msg}} | to_json }}}}"
            dest: "{out}"
            mode: "0644"
          check_mode: false
"""


def test_each_role_refuses_a_string_for_each_list_and_dict_variable_before_anything_else(tmp_path):
    # A string Ansible's own validation lets through: one of the choices where the option has some.
    cases = [
        (role, name, json.dumps((_options(ROOT / "roles" / role)[name].get("choices") or ["fuse.*, a"])[0]))
        for role, name in LISTS
    ]
    cases += [(role, name, json.dumps("a=1")) for role, name in DICTS]
    plays = "".join(
        PLAY.format(role=role, name=name, value=value, out=tmp_path / f"{role}-{name}.json")
        for role, name, value in cases
    )
    (tmp_path / "playbook.yml").write_text(plays)
    # The roles run against this machine: in check mode, so that a role that went on past a bad
    # variable (the failure this test looks for) still changes nothing here.
    run = run_local_playbook(tmp_path / "playbook.yml", "--check")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    problems = []
    for role, name, _value in cases:
        text = (tmp_path / f"{role}-{name}.json").read_text()
        if text == "went on":
            problems.append(f"{role}/{name}: the role went on with a string")
            continue
        said = json.loads(text)
        if said.get("task") != TASK_NAME:
            problems.append(f"{role}/{name}: stopped at {said.get('task')!r}: {said.get('msg')}")
            continue
        kind = "a mapping" if (role, name) in DICTS else "a list"
        if f"{name} must be {kind}" not in said["msg"]:
            problems.append(f"{role}/{name}: {said['msg']}")
    assert problems == []


DEFAULTS_PLAY = """
- name: The defaults of {role} as the role sees them
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files: [{shared}, {defaults}]
  tasks:
    - name: Check the types of the defaults of {role}
      argument_types:
        spec: {spec}
"""


def test_each_role_accepts_its_own_defaults_including_templated_ones(tmp_path):
    """A list variable whose value is a template ("{{ other | default([]) }}", as gpu_validate_runtimes is by
    default) is judged by what it renders to, not refused as a string. Only the check runs, on the controller."""
    roles = sorted(p.parent.parent.name for p in ROOT.glob("roles/*/meta/argument_specs.yml"))
    plays = "".join(
        DEFAULTS_PLAY.format(
            role=role,
            shared=ROOT / "roles" / "gpu_node_facts" / "vars" / "main.yml",  # the dependency's values the defaults use
            defaults=ROOT / "roles" / role / "defaults" / "main.yml",
            spec=ROOT / "roles" / role / "meta" / "argument_specs.yml",
        )
        for role in roles
        if (ROOT / "roles" / role / "defaults" / "main.yml").exists()
    )
    templated = (ROOT / "roles" / "gpu_validate" / "defaults" / "main.yml").read_text()
    assert 'gpu_validate_runtimes: "{{' in templated  # the case this test is about is still there
    (tmp_path / "playbook.yml").write_text(plays)
    run = run_local_playbook(tmp_path / "playbook.yml")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert run.stdout.count("ok: [localhost]") == plays.count("argument_types:")
