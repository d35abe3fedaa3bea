"""The one check of a role's variables (the role_variables action): types and choices first, then the rules.

Ansible's own role argument validation splits a string given for a ``type: list`` option at commas and
lets it pass, while the role goes on with the string. It does not run here (the argument specs have no
``main`` entry point, test_role_specs); the role_variables action, each role's one variable check, refuses
such a string, checks the choices Ansible's validation would have checked, and then the role's rules
(vars/main.yml: __<role>_variable_checks, {ok, msg} each). Checked four ways:
- every list option of every role's meta/argument_specs.yml sets ``elements``, and every role with
  variables runs the role_variables task with its rules before any task that reads or changes the node;
- the pure functions on the values that matter (type_problems, choice_problems, rule_problems), the
  choices against Ansible's own validator for every option of every role;
- for real: ansible-playbook runs each role on localhost with a string for each of its list variables
  (and a string for each dict variable, and a value outside the choices for every option with choices);
  each run stops at that task, before any other task of the role, with a message that names the variable
  and the expected type or the allowed values;
- for real: a rule that does not hold fails the task with every such rule's message.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import load_module, run_local_playbook

ROOT = Path(__file__).resolve().parents[2]
ROLES = sorted(path for path in (ROOT / "roles").iterdir() if (path / "meta" / "argument_specs.yml").is_file())
# gpu_node_facts checks its variables too: gpu_node_facts_gpu_allocation (issue 39) is a choice every role reads
CHECKED_ROLES = ROLES
TASK_NAME = "Check the {role} variables"
# gpu_node_facts runs in every play (the other roles' dependency), so it has one task there, not two: its facts action
# (plugins/action/gpu_node_facts.py) runs the role_variables check on its own spec and checks before it reads the node.
# The roles whose one read of the node decides their path check their variables in that read's task (the role_read
# action runs the same check before it reads anything: plugins/action/role_read.py; the no-op re-run counts every task).
FQ = "gpunode.provisioning"
CHECKING_TASKS = {
    "gpu_node_facts": (f"{FQ}.gpu_node_facts", "Check the variables and gather the GPU node facts"),
    "gpu_settings": (f"{FQ}.gpu_settings", "Keep the GPUs at their declared settings"),
    "fuse": (f"{FQ}.role_read", "Check the fuse variables and read what FUSE needs on the node"),
    "security_profiles": (f"{FQ}.role_read", "Check the security_profiles variables and look up the profiles"),
    "kubelet": (f"{FQ}.role_read", "Check the kubelet variables and read the kubelet files"),
    "runtime_config": (f"{FQ}.role_read", "Check the runtime_config variables, read binary, files, restarts"),
    "gpu_validate": (f"{FQ}.role_read", "Check the gpu_validate variables and run the checks on the node"),
    "nvidia_container_toolkit": (f"{FQ}.role_read", "Check the nvidia_container_toolkit variables and read the node"),
}


# nvidia_mig: a node that names no layout has nothing to change and runs one task of the role, the include; each
# file it includes imports tasks/check.yml first (test_nvidia_mig_checks_its_variables_first_wherever_it_acts).
# fuse, security_profiles, kubelet, the toolkit: their one task includes tasks/run.yml where gpu_node_facts' read
# ahead did not decide them (its guard reads no variable of the role: a bad variable reaches the check), and
# tasks/run.yml imports their read (tasks/read.yml), which checks first; the read ahead runs that read, check first.
CHECK_FILES = {
    "nvidia_mig": "check.yml",
    **dict.fromkeys(("fuse", "security_profiles", "kubelet", "nvidia_container_toolkit"), "run.yml"),
}


def check_task_name(role: str) -> str:
    """The name of the task that checks the role's variables (the one a refusal stops at)."""
    return CHECKING_TASKS[role][1] if role in CHECKING_TASKS else TASK_NAME.format(role=role)


role_variables = load_module("role_variables", subdir="plugins/action")


def _options(role: Path) -> dict:
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
    return specs["argument_specs"][role_variables.ENTRY_POINT].get("options") or {}


def _typed(kind: str) -> list[tuple[str, str]]:
    return [
        (role.name, name) for role in ROLES for name, option in _options(role).items() if option.get("type") == kind
    ]


LISTS = _typed("list")
DICTS = _typed("dict")
CHOICES = {
    role.name: [name for name, option in _options(role).items() if "choices" in option]
    for role in ROLES
    if any("choices" in option for option in _options(role).values())
}


def test_the_documented_entry_point_is_the_one_the_action_reads():
    doc = yaml.safe_load(load_module("role_variables").DOCUMENTATION)
    assert doc["options"]["entry_point"]["default"] == role_variables.ENTRY_POINT != "main"


def test_there_are_list_variables_to_check():
    assert ("security_profiles", "security_profiles_apparmor_mount_fstypes") in LISTS
    assert len({role for role, _ in LISTS}) >= 5
    assert {role for role, _ in LISTS + DICTS} <= {role.name for role in CHECKED_ROLES}


@pytest.mark.parametrize(("role", "name"), LISTS, ids=[n for _, n in LISTS])
def test_every_list_variable_declares_its_elements(role, name):
    option = _options(ROOT / "roles" / role)[name]
    assert option.get("elements"), f"{role}: {name} is type list without elements"


def _tasks_in_order(role: Path, file: str = "main.yml") -> list[dict]:
    """The tasks of a role's task file in the order they run: blocks opened, import_tasks followed."""
    tasks = []
    for task in yaml.safe_load((role / "tasks" / file).read_text()):
        if "block" in task:
            tasks += [t for item in task["block"] for t in _tasks_in_order_one(role, item)]
        else:
            tasks += _tasks_in_order_one(role, task)
    return tasks


def _tasks_in_order_one(role: Path, task: dict) -> list[dict]:
    if "ansible.builtin.import_tasks" in task:
        return _tasks_in_order(role, task["ansible.builtin.import_tasks"])
    if "block" in task:
        return [t for item in task["block"] for t in _tasks_in_order_one(role, item)]
    return [task]


@pytest.mark.parametrize("role", CHECKED_ROLES, ids=[role.name for role in CHECKED_ROLES])
def test_every_role_checks_its_variables_once_before_anything_else(role):
    """One role_variables task per role (gpu_node_facts: its facts task, whose action runs the same check), with the
    role's rules, the role's first task but for the platform data."""
    action = CHECKING_TASKS.get(role.name, ("gpunode.provisioning.role_variables",))[0]
    tasks = _tasks_in_order(role, CHECK_FILES.get(role.name, "main.yml"))
    checker = "gpunode.provisioning.role_variables"
    checks = [i for i, task in enumerate(tasks) if checker in task or "spec" in (task.get(action) or {})]
    assert len(checks) == 1, f"{role.name}: {len(checks)} role_variables tasks"
    # Only the platform data (tasks/set_vars.yml: an include_vars, nothing on the node) may come first, where the
    # rules read it (gpu_node_facts: its own load after its facts task; the roles on site.yml's no-op path get theirs
    # from that dependency).
    before = [t.get("name") for t in tasks[: checks[0]]]
    assert before in ([], ["Load the platform data"]), before
    task = tasks[checks[0]]
    assert task["name"] == check_task_name(role.name)
    assert {name: task[action][name] for name in ("spec", "checks")} == {
        "spec": "{{ role_path }}/meta/argument_specs.yml",
        "checks": f"__{role.name}_variable_checks",
    }
    rules = yaml.safe_load((role / "vars" / "main.yml").read_text())[f"__{role.name}_variable_checks"]
    assert rules and all({"ok", "msg"} <= set(rule) <= {"ok", "msg", "loop"} for rule in rules.values()), rules


def test_nvidia_mig_checks_its_variables_first_wherever_it_acts():
    role = ROOT / "roles" / "nvidia_mig"
    (include,) = [task for task in yaml.safe_load((role / "tasks" / "main.yml").read_text())[0]["block"]]
    files = include["ansible.builtin.include_tasks"]["file"]
    for name in ("layout.yml", "left_alone.yml"):
        assert f"'{name}'" in files
        first = yaml.safe_load((role / "tasks" / name).read_text())[0]
        assert first["ansible.builtin.import_tasks"] == "check.yml", name
    # the guard and the file name read the layout's name and the facts only: a bad variable reaches the check
    assert include["when"] == "nvidia_mig_config is not none and nvidia_mig_config != ''"
    assert "__nvidia_mig" not in files


@pytest.mark.parametrize("role", ROLES, ids=[role.name for role in ROLES])
def test_no_role_checks_variables_another_way(role):
    """No assert or fail on variables beside the one task: no argument_types, no assert loop, no fail of a list."""
    text = "".join(path.read_text() for path in sorted((role / "tasks").glob("*.yml")))
    assert "argument_types" not in text
    assert "_variable_errors" not in text and "__kubelet_errors" not in text


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
    assert role_variables.type_problems(OPTIONS, values) == expected


CHOICE_OPTIONS = {
    "x_mode": {"type": "str", "choices": ["auto", "dropin"]},
    "x_policy": {"type": "str", "choices": ["none", "static", None]},
    "x_runtimes": {"type": "list", "elements": "str", "choices": ["docker", "crio"]},
    "x_secret": {"type": "str", "choices": ["a"], "no_log": True},
}


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"x_mode": "auto", "x_policy": None, "x_runtimes": ["crio", "docker"], "x_secret": "a"}, []),
        ({"x_policy": "static", "x_runtimes": []}, []),
        ({"x_mode": "drop-in"}, ["x_mode must be one of auto, dropin (got 'drop-in')"]),
        ({"x_mode": None}, ["x_mode must be one of auto, dropin (got null)"]),
        ({"x_policy": "Static"}, ["x_policy must be one of none, static, null (got 'Static')"]),
        ({"x_policy": True}, ["x_policy must be one of none, static, null (got true)"]),
        ({"x_runtimes": ["docker", "cri-o"]}, ["x_runtimes may list only docker, crio, but item 1 is 'cri-o'"]),
        ({"x_secret": "hunter2"}, ["x_secret must be one of a (got a value not shown (no_log))"]),
        (
            {"x_mode": "x", "x_runtimes": ["x"]},
            [
                "x_mode must be one of auto, dropin (got 'x')",
                "x_runtimes may list only docker, crio, but item 0 is 'x'",
            ],
        ),
    ],
)
def test_choice_problems(values, expected):
    assert role_variables.choice_problems(CHOICE_OPTIONS, values) == expected


def test_choices_refuse_exactly_what_ansibles_own_validation_refuses():
    """For every option with choices of every role, and values of several kinds, role_variables refuses a value
    (by its type, or then by its choices) whenever Ansible's role argument validation would have, and its choices
    refuse only what Ansible's would: the check Ansible no longer makes is not lost."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    values = [None, "", "auto", "none", "static", "Systemd", "null", "yes", 30, True, ["docker"], ["docker", "x"], {}]
    compared = []
    for role, names in CHOICES.items():
        for name in names:
            option = {name: _options(ROOT / "roles" / role)[name]}
            for value in values:
                ansible = ArgumentSpecValidator(option).validate({name: value}, validate_role_argument_spec=True)
                typed = role_variables.type_problems(option, {name: value})
                chosen = [] if typed else role_variables.choice_problems(option, {name: value})
                assert bool(typed or chosen) >= bool(ansible.error_messages), (name, value, ansible.error_messages)
                assert bool(chosen) <= bool(ansible.error_messages), (name, value, chosen)
                compared.append(name)
    assert len(set(compared)) >= 10


def _render(variables: dict):
    """A stand-in for Ansible's templar: "{{ name }}" is the variable, "{{ not name }}" its negation."""

    def render(template, item=None):
        if not isinstance(template, str) or not template.startswith("{{"):
            return template
        expression = template.strip("{} ")
        scope = dict(variables, item=item)
        if expression.startswith("not "):
            return not scope[expression[4:]]
        return scope[expression]

    return render


def test_rule_problems_reports_every_rule_that_does_not_hold_in_order():
    rules = {
        "first": {"ok": "{{ a }}", "msg": "a is wrong: set a"},
        "second": {"ok": "{{ b }}", "msg": ["b is wrong: set b", "  ", "b also: unset c "]},
        "third": {"ok": "{{ not a }}", "msg": "never said"},
    }
    render = _render({"a": False, "b": False})
    assert role_variables.rule_problems(rules, render) == ["a is wrong: set a", "b is wrong: set b", "b also: unset c"]
    assert role_variables.rule_problems(rules, _render({"a": True, "b": True})) == ["never said"]


def test_rule_problems_reads_a_rendered_false_as_false():
    """ok rendered as text (a template that produced "False") is false, as assert's `that` would take it."""
    rules = {
        name: {"ok": value, "msg": name} for name, value in [("t", "True"), ("f", "False"), ("e", ""), ("no", "no")]
    }
    assert role_variables.rule_problems(rules, _render({})) == ["f", "e", "no"]


def test_rule_problems_loops_over_the_items_of_a_rule():
    """A rule with loop is checked per item (`item`), as an assert loop was: each bad item says its own message."""
    render = _render({"names": ["x", "", "y"]})
    rules = {"names": {"loop": "{{ names }}", "ok": "{{ not item }}", "msg": "{{ item }}"}}
    assert role_variables.rule_problems(rules, render, render) == ["x", "y"]


@pytest.mark.parametrize("rules", [["not a rule"], {"r": {"ok": True}}, 5])
def test_rule_problems_refuses_rules_without_ok_and_msg(rules):
    with pytest.raises(role_variables.AnsibleActionFail):
        role_variables.rule_problems(rules, _render({}))


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
        - name: The role went on {case}
          ansible.builtin.debug:
            msg: went on
      rescue:
        - name: Keep what refused it {case}
          ansible.builtin.debug:
            msg: "{{{{ {{'task': ansible_failed_task.name, 'msg': ansible_failed_result.msg}} }}}}"
"""


# Values of the right type that break a role's rules: (role, variable, YAML value, what each message says).
RULE_CASES = {
    "fuse": ("fuse_device_mode", "666", ['fuse_device_mode must be a quoted octal mode such as "0666" (got 666)']),
    "runtime_config": (
        "runtime_config_name",
        '"no good"\n            runtime_config_backup: false',  # a second variable of the play
        ["runtime_config_backup is false: a runtime", 'runtime_config_name="no good" is not a valid runtime name'],
    ),
}


def _outside_choices(role: str, name: str) -> str:
    """A value of the option's type (JSON) that is not one of its choices."""
    return json.dumps(
        ["no-such-choice"] if _options(ROOT / "roles" / role)[name]["type"] == "list" else "no-such-choice"
    )


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    """One ansible-playbook run of every case: a string for each list and dict variable of each role (one that
    Ansible's own validation would let through: one of the choices where the option has some), a value outside
    the choices for every option with choices of a role (all at once, one case per role), and RULE_CASES. The
    roles run against this machine in check mode, so that a role that went on past a bad variable (the failure
    these tests look for) still changes nothing here. What each run stopped at, by case."""
    out = tmp_path_factory.mktemp("refused")
    cases = [
        (role, name, json.dumps((_options(ROOT / "roles" / role)[name].get("choices") or ["fuse.*, a"])[0]))
        for role, name in LISTS
    ]
    cases += [(role, name, json.dumps("a=1")) for role, name in DICTS]
    # every option with choices of the role in the play's vars (the first one is the template's {name})
    outside = {role: [(name, _outside_choices(role, name)) for name in names] for role, names in CHOICES.items()}
    cases += [
        (role, f"choices-{names[0][0]}", "\n            ".join(f"{n}: {v}" for n, v in names).split(": ", 1)[1])
        for role, names in outside.items()
    ]
    cases += [(role, f"rule-{name}", value) for role, (name, value, _) in RULE_CASES.items()]
    # nvidia_mig checks its variables where the node names a layout (a node without one has nothing to change)
    cases = [
        (role, name, value + "\n            nvidia_mig_config: a-layout" if role == "nvidia_mig" else value)
        for role, name, value in cases
    ]
    plays = "".join(
        PLAY.format(
            role=role,
            name=name.removeprefix("rule-").removeprefix("choices-"),
            value=value,
            case=f"{role}/{name}",
        )
        for role, name, value in cases
    )
    (out / "playbook.yml").write_text(plays)
    # what stopped each case comes back in the run's JSON output (debug tasks on the controller: a copy task here ran
    # two modules per case, most of the run's time)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ANSIBLE_STDOUT_CALLBACK", "ansible.builtin.json")
        run = run_local_playbook(out / "playbook.yml", "--check")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    kept = {
        task["task"]["name"].rsplit(" ", 1)[1]: task["hosts"]["localhost"]["msg"]
        for play in json.loads(run.stdout)["plays"]
        for task in play["tasks"]
        if task["task"]["name"].startswith(("The role went on ", "Keep what refused it "))
    }
    said = {}
    for role, name, _value in cases:
        text = kept[f"{role}/{name}"]
        said[role, name] = {"task": "went on"} if text == "went on" else text
    return said


def test_each_role_refuses_a_string_for_each_list_and_dict_variable_before_anything_else(refused):
    problems = []
    for (role, name), said in refused.items():
        if name.startswith(("rule-", "choices-")):
            continue
        if said.get("task") != check_task_name(role):
            problems.append(f"{role}/{name}: stopped at {said.get('task')!r}: {said.get('msg')}")
            continue
        kind = "a mapping" if (role, name) in DICTS else "a list"
        if not any(f"{name} must be {kind}" in line for line in said["msg"]):
            problems.append(f"{role}/{name}: {said['msg']}")
    assert problems == []


@pytest.mark.parametrize("role", list(CHOICES))
def test_each_role_refuses_a_value_outside_the_choices_of_each_option_at_its_one_check(refused, role):
    """Not Ansible's validation (a task of its own before the role's), but the role's one check, which says for
    every option at once what it got and which values it takes."""
    names = CHOICES[role]
    said = refused[role, f"choices-{names[0]}"]
    assert said["task"] == check_task_name(role), said
    for name in names:
        option = _options(ROOT / "roles" / role)[name]
        allowed = ", ".join("null" if choice is None else str(choice) for choice in option["choices"])
        expected = (
            f"{name} may list only {allowed}, but item 0 is 'no-such-choice'"
            if option["type"] == "list"
            else f"{name} must be one of {allowed} (got 'no-such-choice')"
        )
        assert expected in said["msg"], said["msg"]
    assert len(said["msg"]) == len(names), said["msg"]


@pytest.mark.parametrize("role", list(RULE_CASES))
def test_rules_that_do_not_hold_fail_the_one_task_with_all_their_messages(refused, role):
    """The role stops at its one check, which names each variable and the fix (two rules of runtime_config at
    once), before any other task of the role."""
    name, _value, expected = RULE_CASES[role]
    said = refused[role, f"rule-{name}"]
    assert said["task"] == check_task_name(role), said
    assert len(said["msg"]) == len(expected), said["msg"]
    assert all(part in line for part, line in zip(expected, said["msg"], strict=True)), said["msg"]


DEFAULTS_PLAY = """
- name: The defaults of {role} as the role sees them
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files: [{shared}, {defaults}]
  tasks:
    - name: Check the types of the defaults of {role}
      role_variables:
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
    assert run.stdout.count("ok: [localhost]") == plays.count("role_variables:")


def test_the_action_checks_its_own_arguments(tmp_path):
    """Issue 51: role_variables' own task refuses an argument it does not take, naming it, before any check."""
    spec = ROOT / "roles" / "fuse" / "meta" / "argument_specs.yml"
    (tmp_path / "playbook.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        f"    - gpunode.provisioning.role_variables:\n        spec: {spec}\n        chekcs: __fuse_variable_checks\n"
    )
    run = run_local_playbook(tmp_path / "playbook.yml")
    assert run.returncode != 0
    assert "chekcs" in run.stdout and "Unsupported parameters" in run.stdout, run.stdout[-2000:]


def test_the_check_shows_its_report_once_the_variables_hold_and_not_before(tmp_path):
    """Issue 47: the driver role's check says that it leaves a node without a GPU alone (no debug task of its own):
    the report is shown as a debug task's message; where a variable fails, the problem is said and the report not."""
    spec = ROOT / "roles" / "fuse" / "meta" / "argument_specs.yml"
    task = f"    - gpunode.provisioning.role_variables:\n        spec: {spec}\n        report: THE NODE IS LEFT ALONE\n"
    (tmp_path / "playbook.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        + task
        + "    - gpunode.provisioning.role_variables:\n"
        + f"        spec: {spec}\n"
        + "        report: ''\n"
        + task
        + '      vars: {fuse_install_packages: "yes"}\n'
    )
    run = run_local_playbook(tmp_path / "playbook.yml")
    assert run.returncode != 0  # the third task's variable is refused
    assert run.stdout.count("THE NODE IS LEFT ALONE") == 1, run.stdout
    assert "fuse_install_packages" in run.stdout
    assert "checked" not in run.stdout.split("THE NODE IS LEFT ALONE")[0].rsplit("TASK [", 1)[-1]
