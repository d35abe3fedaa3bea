"""Tags select only their part of site.yml, and tags reach the tasks that roles include.

`ansible-playbook -i inventories/example site.yml --list-tasks --tags <tag>` lists the
tasks a tagged run would consider. Besides the tasks of the tag's own role(s) it may
only list what runs always: the play's preflight assert and the gpu_node_facts role.
Ansible adds no argument validation task to the roles (their argument specs have no
`main` entry point): each role's role_variables task is its one check of its variables.

--list-tasks does not expand dynamic includes (include_tasks, include_role), so the
second half of this file checks statically that every include which carries tags
also applies them to what it includes (`apply: tags`); without that, a tagged run
would run the include and silently skip every task in the included file.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
# the task Ansible prepends to a role whose meta/argument_specs.yml has a `main` entry point
ARG_SPEC_TASK = "Validating arguments against arg spec"
ALWAYS_ROLES = {"gpu_node_facts"}
# the roles of site.yml's play in order; the doctor (gpu_validate) is the play's last task, an include_role that
# --list-tasks shows as one task of the play (DOCTOR_TASK), not its role's tasks (playbooks/validate.yml lists them)
DOCTOR_TASK = "Validate the nodes, batch by batch with batches"
ROLE_ORDER = [
    "gpu_node_facts",
    "nvidia_driver",
    "gpu_settings",
    "nvidia_container_toolkit",
    "nvidia_mig",
    "fuse",
    "security_profiles",
    "kubelet",
    "gpu_validate",
]

# tag -> the roles whose own tasks it may select
EXPECTED_ROLES = {
    "driver": {"nvidia_driver"},
    "gpu_settings": {"gpu_settings"},
    "toolkit": {"nvidia_container_toolkit"},
    # the toolkit role's runtime registration, which includes roles/runtime_config
    "runtime": {"nvidia_container_toolkit"},
    "mig": {"nvidia_mig"},
    "fuse": {"fuse"},
    "security": {"security_profiles"},
    "apparmor": {"security_profiles"},
    "seccomp": {"security_profiles"},
    "kubelet": {"kubelet"},
    "validate": {"gpu_validate"},
    # the facts role runs always, so its own tag adds nothing to it
    "facts": set(),
}
# what --list-tasks of site.yml can show of a role's tasks: the doctor's are behind its include_role (DOCTOR_TASK)
LISTED_ROLES = {**EXPECTED_ROLES, "validate": set()}

_TASK_LINE = re.compile(r"^\s{6}(?:(?P<role>[A-Za-z0-9_]+) : )?(?P<name>.+?)\tTAGS: \[(?P<tags>[^\]]*)\]\s*$")


@functools.cache
def _list_tasks(
    args: tuple[str, ...], playbook: str = "site.yml"
) -> tuple[tuple[str | None, str, frozenset[str]], ...]:
    result = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", "inventories/example", playbook, "--list-tasks", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"--list-tasks {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    tasks = []
    for line in result.stdout.splitlines():
        match = _TASK_LINE.match(line)
        if match:
            tags = frozenset(t.strip() for t in match["tags"].split(",") if t.strip())
            tasks.append((match["role"], match["name"], tags))
    assert tasks, f"no task lines found in:\n{result.stdout}"
    return tuple(tasks)


def list_tasks(*args: str, playbook: str = "site.yml") -> list[dict]:
    """The tasks `<playbook> --list-tasks` prints, as dicts with role (None for play tasks), name and tags."""
    return [{"role": role, "name": name, "tags": set(tags)} for role, name, tags in _list_tasks(args, playbook)]


def _own_tasks(tasks: list[dict]) -> list[dict]:
    """Drop what runs whatever the tags: the facts role, the play's preflight."""
    return [t for t in tasks if t["role"] not in ALWAYS_ROLES and t["role"] is not None]


def test_site_runs_every_role_in_order():
    tasks = list_tasks()
    roles = []
    for task in tasks:
        if task["role"] and task["role"] not in roles:
            roles.append(task["role"])
    assert roles == ROLE_ORDER[:-1]
    # the doctor last, after every role of the play (and their handlers: a post task), with the validate tag
    assert tasks[-1] == {"role": None, "name": DOCTOR_TASK, "tags": {"validate"}}
    (play,) = yaml.safe_load((ROOT / "playbooks" / "gpu_nodes.yml").read_text())
    (doctor,) = play["post_tasks"]
    assert doctor["ansible.builtin.include_role"] == {"name": ROLE_ORDER[-1], "apply": {"tags": ["validate"]}}
    assert "when" not in doctor  # every run validates, with batches or without
    assert [t["name"] for t in list_tasks("--tags", "validate")][-1] == DOCTOR_TASK


def test_site_yml_holds_only_import_playbook_lines():
    plays = yaml.safe_load((ROOT / "site.yml").read_text())
    assert [p["ansible.builtin.import_playbook"] for p in plays] == ["playbooks/gpu_nodes.yml"]
    for play in plays:
        assert set(play) == {"name", "ansible.builtin.import_playbook"}, play


@pytest.mark.parametrize("tag", sorted(EXPECTED_ROLES))
def test_tag_selects_only_its_roles(tag):
    tasks = list_tasks("--tags", tag)
    own = _own_tasks(tasks)
    roles = {t["role"] for t in own}
    assert roles == LISTED_ROLES[tag], (
        f"--tags {tag} selects tasks of {sorted(roles)}, expected only {sorted(LISTED_ROLES[tag])}: "
        + "; ".join(f"{t['role']} : {t['name']}" for t in own)
    )
    for task in own:
        assert tag in task["tags"], f"{task['role']} : {task['name']} is listed for --tags {tag} without the tag"


@pytest.mark.parametrize("tag", sorted(EXPECTED_ROLES))
def test_facts_always_run(tag):
    facts = [t for t in list_tasks("--tags", tag) if t["role"] == "gpu_node_facts"]
    name = "Check the variables and gather the GPU node facts"
    assert any(t["name"] == name and "always" in t["tags"] for t in facts), facts


@pytest.mark.parametrize("tag", sorted(EXPECTED_ROLES))
def test_no_task_of_another_role_is_listed(tag):
    foreign = [
        t for t in list_tasks("--tags", tag) if t["role"] and t["role"] not in EXPECTED_ROLES[tag] | ALWAYS_ROLES
    ]
    assert foreign == [], f"--tags {tag} lists " + "; ".join(f"{t['role']} : {t['name']}" for t in foreign)


def test_ansible_adds_no_argument_validation_to_any_role():
    """Each role's variables are checked once, by its role_variables task (types, choices, rules); Ansible's own
    validation, a second and looser type check, is not prepended (the argument specs have no `main` entry point)."""
    tasks = list_tasks() + list_tasks(playbook="playbooks/validate.yml")  # the doctor's tasks: behind an include here
    assert [t for t in tasks if t["name"].startswith(ARG_SPEC_TASK)] == []
    checks = {t["role"] for t in tasks if t["name"].startswith(f"Check the {t['role']} variables")}
    # gpu_node_facts (tagged always) checks its one choice too, gpu_node_facts_gpu_allocation (issue 39), in its facts
    # task (its action runs the role_variables check: one task per play)
    checks |= {t["role"] for t in tasks if t["name"] == "Check the variables and gather the GPU node facts"}
    # gpu_settings: one task on the no-op run, whose action runs the role_variables check before its module (issue 49)
    checks |= {t["role"] for t in tasks if t["name"] == "Keep the GPUs at their declared settings"}
    # nvidia_mig: its one task where no layout is named, the include of the files that check first (tasks/check.yml)
    checks |= {t["role"] for t in tasks if t["name"].startswith("Check the variables, apply the MIG layout")}
    # fuse, security_profiles, kubelet, the toolkit: their one task, read ahead by gpu_node_facts' task or else the
    # include of their check and read (tasks/run.yml, tasks/read.yml: test_role_variables, test_read_ahead)
    checks |= {t["role"] for t in tasks if t["name"].startswith("Check, read and ")}
    assert checks == set(ROLE_ORDER)


def test_runtime_tag_selects_only_the_runtime_registration_of_the_toolkit_role():
    runtime = [t["name"] for t in _own_tasks(list_tasks("--tags", "runtime"))]
    toolkit = [t["name"] for t in _own_tasks(list_tasks("--tags", "toolkit"))]
    # --list-tasks does not expand the include of the changes or reports: it lists the same tasks of tasks/main.yml
    assert set(runtime) <= set(toolkit), "--tags runtime must select a part of the toolkit role"
    # the registration itself (an include_role: --list-tasks shows it without the role's name)
    assert "Register the nvidia runtime in the container runtimes" in [
        t["name"] for t in list_tasks("--tags", "runtime")
    ]
    # neither the repository nor the packages: a play-level `runtime` tag on the role would select them too. The
    # include applies only toolkit; of the tasks it runs, only the report of what the role leaves out adds runtime.
    assert not [name for name in runtime if "package" in name or "repository" in name], runtime
    tasks_dir = ROOT / "roles" / "nvidia_container_toolkit" / "tasks"
    # tasks/main.yml includes tasks/run.yml (applying no tag: its tasks carry theirs), whose read is tagged runtime and
    # whose include of the changes applies only toolkit
    main = yaml.safe_load((tasks_dir / "main.yml").read_text())
    include = next(task for task in main if "ansible.builtin.include_tasks" in task)
    assert include["ansible.builtin.include_tasks"] == "run.yml"
    run = yaml.safe_load((tasks_dir / "run.yml").read_text())
    include = next(task for task in run if "ansible.builtin.include_tasks" in task)
    assert include["ansible.builtin.include_tasks"]["apply"]["tags"] == ["toolkit"]
    tagged = [
        (path.name, task.get("name"))
        for path in sorted(tasks_dir.glob("*.yml"))
        if path.name not in ("main.yml", "run.yml")
        for task in _tasks_in(yaml.safe_load(path.read_text()))
        if "runtime" in _as_set(task.get("tags"))
    ]
    assert tagged == [
        ("apply.yml", "Report what the role leaves out on this node"),
        ("read.yml", "Check the nvidia_container_toolkit variables and read the node"),
    ]


def test_apparmor_and_seccomp_select_their_halves():
    apparmor = {t["name"] for t in _own_tasks(list_tasks("--tags", "apparmor"))}
    seccomp = {t["name"] for t in _own_tasks(list_tasks("--tags", "seccomp"))}
    # the role's tasks/main.yml includes tasks/run.yml (the read, then the include of tasks/apply.yml where it found
    # something to do or report) where the read ahead did not decide it; apply.yml's includes of the two halves carry
    # their own tags (neither include applies any), so each tag runs its half only: --list-tasks shows the one task,
    # which both halves need
    assert "Check, read and change the profiles where the read ahead says so" in apparmor & seccomp
    run = yaml.safe_load((ROOT / "roles/security_profiles/tasks/run.yml").read_text())
    assert set(run[0].get("tags", [])) <= {"security", "apparmor", "seccomp"}
    assert isinstance(run[1]["ansible.builtin.include_tasks"], str) and set(run[1]["tags"]) == {
        "security",
        "apparmor",
        "seccomp",
    }
    read = yaml.safe_load((ROOT / "roles/security_profiles/tasks/read.yml").read_text())
    assert set(read[0]["tags"]) == {"security", "apparmor", "seccomp"}
    tasks = yaml.safe_load((ROOT / "roles" / "security_profiles" / "tasks" / "apply.yml").read_text())
    tags = {task["name"]: set(task["tags"]) for task in tasks}
    assert tags["Install and load the AppArmor profiles"] == {"security", "apparmor"}
    assert tags["Install the seccomp profiles"] == {"security", "seccomp"}
    main = yaml.safe_load((ROOT / "roles/security_profiles/tasks/main.yml").read_text())
    include = next(task for task in main if "when" in task)
    assert isinstance(include["ansible.builtin.include_tasks"], str)  # a file name: no tags applied


def test_skip_tags_leaves_the_role_out():
    roles = {t["role"] for t in _own_tasks(list_tasks("--skip-tags", "validate"))}
    assert "gpu_validate" not in roles
    assert {"nvidia_driver", "kubelet"} <= roles


# --- tags reach included tasks -------------------------------------------------------------------

_INCLUDES = ("ansible.builtin.include_tasks", "ansible.builtin.include_role", "include_tasks", "include_role")


def _tasks_in(items):
    for item in items or []:
        if not isinstance(item, dict):
            continue
        yield item
        for key in ("block", "rescue", "always"):
            yield from _tasks_in(item.get(key))


def _as_set(value) -> set[str]:
    if value is None:
        return set()
    return {value} if isinstance(value, str) else set(value)


class _TaskLoader(yaml.SafeLoader):
    """SafeLoader that reads Ansible's !unsafe and !vault scalars as plain strings."""


for _tag in ("!unsafe", "!vault"):
    _TaskLoader.add_constructor(_tag, lambda loader, node: loader.construct_scalar(node))


TASK_FILES = sorted((ROOT / "roles").glob("*/tasks/*.yml"))


def test_there_are_task_files():
    assert len(TASK_FILES) > 20


# Includes whose file's tasks carry their own tags, which applying the include's would merge: security_profiles'
# tasks/apply.yml holds the AppArmor half and the seccomp half (--tags apparmor must not run the seccomp half;
# test_apparmor_and_seccomp_select_their_halves).
# The toolkit's include of its changes (tasks/apply.yml) is tagged runtime too and applies
# only toolkit: of its tasks only the report of what the role leaves out carries runtime
# (test_runtime_tag_selects_only_the_runtime_registration_of_the_toolkit_role); its include of tasks/run.yml (the read
# and that include) and security_profiles' apply none: the tasks they include carry their own.
OWN_TAGS = {
    ("security_profiles/tasks/main.yml", "Check, read and change the profiles where the read ahead says so"),
    ("security_profiles/tasks/run.yml", "Report, install and load the profiles where the read says so"),
    ("nvidia_container_toolkit/tasks/main.yml", "Check, read and change the toolkit where the read ahead says so"),
    ("nvidia_container_toolkit/tasks/run.yml", "Install, configure and report the toolkit where the read says so"),
}


@pytest.mark.parametrize("path", TASK_FILES, ids=[str(p.relative_to(ROOT / "roles")) for p in TASK_FILES])
def test_tagged_includes_apply_their_tags(path):
    problems = []
    for task in _tasks_in(yaml.load(path.read_text(), Loader=_TaskLoader)):
        module = next((key for key in _INCLUDES if key in task), None)
        if module is None:
            continue
        tags = _as_set(task.get("tags"))
        args = task[module] if isinstance(task[module], dict) else {}
        applied = _as_set((args.get("apply") or {}).get("tags"))
        if tags - applied and (path.relative_to(ROOT / "roles").as_posix(), task.get("name")) not in OWN_TAGS:
            problems.append(f"'{task.get('name')}' is tagged {sorted(tags)} but applies only {sorted(applied)}")
    assert problems == [], f"{path.relative_to(ROOT)}: " + "; ".join(problems)


def test_the_play_lists_gpu_node_facts_as_the_roles_dependency_does():
    """Tags or vars on the play's entry make it another instance than the roles' `dependencies:
    [gpu_node_facts]`, and Ansible then gathers the facts again before every role."""
    play = yaml.safe_load((ROOT / "playbooks" / "gpu_nodes.yml").read_text())[0]
    assert play["roles"][0] == {"role": "gpu_node_facts"}
    for role in ROLE_ORDER[1:-1]:
        meta = yaml.safe_load((ROOT / "roles" / role / "meta" / "main.yml").read_text())
        assert "gpu_node_facts" in meta["dependencies"], role


def test_skip_tags_facts_keeps_the_facts_the_roles_need():
    facts = [t for t in list_tasks("--skip-tags", "facts") if t["role"] == "gpu_node_facts"]
    assert any(t["name"] == "Check the variables and gather the GPU node facts" for t in facts), facts
