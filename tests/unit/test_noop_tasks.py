"""The no-op re-run's task budget, counted (never timed): a change that adds a task to a role's no-op path fails here.

A re-run of site.yml over a fleet that needs nothing costs what its tasks cost: each task is a worker process on the
controller, a connection to every node and a result through the callbacks (bench/README.md, "What a task costs").
Ansible starts every task of a play that is not inside an include that does not run: a skipped task is a task
started, and the benchmark's callback (bench/callback_plugins/bench_count.py) counts it as one. So the no-op path of
a role is what this test counts from its files alone:

- every task of ``tasks/main.yml``, blocks opened and ``import_tasks`` followed (imports are static: all their tasks
  start);
- an ``include_tasks`` with ``when`` is one task: the design rule of every role is that one read decides, and an
  include on the main path runs only where that read found something to change (the molecule scenarios and the
  benchmark show that the no-op re-run changes nothing, so none of them ran); one with a ``loop`` is one task too (its
  list is empty on a no-op run); one with neither runs on every run, so its file's tasks are counted as well (a file
  name with a template: the Debian/Ubuntu file, the benchmark's and the scenarios' platform);
- a ``meta: end_role`` ends the count of its role where the benchmark's node takes it (a node without a GPU: the
  driver role ends early there); on a GPU node the driver's path is counted whole (its own budget below), with the
  includes its defaults take there on every run (GPU_NODE_INCLUDES: the package sources);
- an ``include_role`` that the no-op path enters (the toolkit includes runtime_config on every node it registers the
  runtime on): one task plus that role's own count;
- per play: fact gathering (one task, where the play gathers), the pre_tasks and post_tasks, gpu_node_facts once
  (every role's dependency: Ansible runs it once per play), and the roles.

The budgets are what the roles cost now: a change that adds a task fails here; a change that saves one lowers its
budget. The doctor's share is issue 47's three tasks (its own gpu_node_facts instance reads the node again after the
roles changed it: counted with the play).
The benchmark measures the same count on a node container (bench/callback_plugins/bench_count.py): what the roles
report there on every run (a container has no udev, AppArmor, kubelet or GPU driver: fuse, security_profiles, kubelet
and the toolkit's CDI part each say so) is shown by their read, which gpu_node_facts' task runs ahead
(plugins/plugin_utils/read_ahead.py): a role read ahead is its one include here, skipped on the no-op run (molecule
default's AWX slices and drift tests show that no such role reads for itself there).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "roles"
SITE = ROOT / "site.yml"
# The whole no-op re-run of site.yml on a node (one play, the doctor its last task), and the doctor's share of it.
SITE_BUDGET = 20
DOCTOR_BUDGET = 3
# Each role's no-op path (gpu_node_facts: once per play). A role with a platform file loads it first (an include_vars,
# one task); its variable check is part of its read (plugins/action/role_read.py). Lower a number when a role gets
# cheaper; never raise one to make room for a task: fold the task into the role's read or its include.
ROLE_BUDGETS = {
    "gpu_node_facts": 2,  # the facts (variables, distribution) and the platform data of every role on this path
    "nvidia_driver": 2,  # a node without a GPU: the check (it reports), the end of the role (GPU node: below)
    "gpu_settings": 1,  # one action checks, reads and applies (nothing declared: it reads nothing on the node)
    # its include (read ahead by gpu_node_facts' task: variables, apt packages, config.toml probe, CDI) and the
    # include_role
    "nvidia_container_toolkit": 2,
    "runtime_config": 3,  # the read, containerd's merge (its own read), one include (daemon.json's merge is in it)
    "nvidia_mig": 1,  # the include where a layout is named (its check comes first in the included file)
    # one include each: gpu_node_facts' task read them ahead (plugins/plugin_utils/read_ahead.py; tasks/read.yml)
    "fuse": 1,
    "security_profiles": 1,
    "kubelet": 1,
    "gpu_validate": 3,  # the checks, the facts later plays read, the reports written where they differ and the table
}
# The include_role tasks the no-op path runs into (their role's tasks start too): the toolkit's runtime_config, and
# the doctor at the end of site.yml's play (playbooks/gpu_nodes.yml), with its own gpu_node_facts instance (a
# dependency with a parameter: it reads the node again, after the roles changed it).
NOOP_ROLE_INCLUDES = {"runtime_config", "gpu_validate"}
# The templated include file names on the benchmark's platform (Debian 12, apt).
TEMPLATED_INCLUDES = {
    "repository_{{ __nvidia_driver_plan.family }}.yml": "repository_debian.yml",
    "packages_{{ __nvidia_driver_plan.pkg_mgr }}.yml": "packages_apt.yml",
}
# The driver role on a GPU node (nothing ends it early): not yet decided by one read (bench/README.md says so); this
# budget only keeps it from growing. Its includes with a ``when`` that a GPU node on Debian 12 with the role's
# defaults takes on every run are counted whole there (nvidia_driver_manage_repo is true by default: the package
# sources' tasks run on every re-run; the CUDA repository's key chain only where its read finds the repository not
# trusted as the role leaves it: 71 before that read, 63 after, 62 since the check reports a node without a GPU, 42
# since what only some nodes need is included where they need it, not skipped task by task: the NVLink fabric's
# packages, checks and services, nvidia-peermem, the module builds for kernels that lack it).
DRIVER_ON_A_GPU_NODE_BUDGET = 42
GPU_NODE_INCLUDES = {"repository_{{ __nvidia_driver_plan.family }}.yml"}
IMPORTS = ("import_tasks", "ansible.builtin.import_tasks")
INCLUDES = ("include_tasks", "ansible.builtin.include_tasks")
INCLUDE_ROLES = ("include_role", "ansible.builtin.include_role")


def _load(path: Path) -> list:
    return yaml.safe_load(path.read_text()) or []


class EndRole(Exception):
    """A meta: end_role the benchmark's node takes: the role's count ends there."""

    def __init__(self, names: list[str]):
        super().__init__()
        self.names = names


def task_headers(tasks: list, tasks_dir: Path, role: str, end_role: bool = True) -> list[str]:
    """The names of the tasks that start on the no-op path, in order (role: prefix as the callback shows them)."""
    names = []
    for task in tasks:
        try:
            for key in ("block", "always"):  # rescue runs only after a failure
                if key in task:
                    names += task_headers(task[key], tasks_dir, role, end_role)
        except EndRole as ended:
            raise EndRole(names + ended.names) from None
        if "block" in task:
            continue
        imported = next((task[key] for key in IMPORTS if key in task), None)
        if imported is not None:
            try:
                names += task_headers(_load(tasks_dir / imported), tasks_dir, role, end_role)
            except EndRole as ended:
                raise EndRole(names + ended.names) from None
            continue
        names.append(f"{role} : {task.get('name', '?')}" if role else task.get("name", "?"))
        included = next((task[key] for key in INCLUDE_ROLES if key in task), None)
        if included is not None and included["name"] in NOOP_ROLE_INCLUDES:
            # a dependency with parameters is an instance of its own: it runs again (gpu_validate's gpu_node_facts)
            for dependency in _dependencies_with_parameters(included["name"]):
                names += role_headers(dependency)
            names += role_headers(included["name"])
        include = next((task[key] for key in INCLUDES if key in task), None)
        file = None if include is None else include["file"] if isinstance(include, dict) else include
        every_run = "when" not in task and "loop" not in task
        if file is not None and (every_run or (not end_role and file in GPU_NODE_INCLUDES)):
            file = TEMPLATED_INCLUDES.get(file, file)
            # an include that runs on every run must name its file (or TEMPLATED_INCLUDES must): else its tasks
            # could not be counted
            assert "{{" not in file, f"{role}: {task.get('name')} includes {file} on every run, uncounted"
            try:
                names += task_headers(_load(tasks_dir / file), tasks_dir, role, end_role)
            except EndRole as ended:
                raise EndRole(names + ended.names) from None
        if end_role and task.get("ansible.builtin.meta", task.get("meta")) == "end_role":
            raise EndRole(names)
    return names


def role_headers(role: str, end_role: bool = True) -> list[str]:
    try:
        return task_headers(_load(ROLES / role / "tasks" / "main.yml"), ROLES / role / "tasks", role, end_role)
    except EndRole as ended:
        return ended.names


def _dependencies(role: str) -> list[str]:
    meta = _load(ROLES / role / "meta" / "main.yml") or {}
    return [dep if isinstance(dep, str) else dep["role"] for dep in meta.get("dependencies") or []]


def _dependencies_with_parameters(role: str) -> list[str]:
    meta = _load(ROLES / role / "meta" / "main.yml") or {}
    return [dep["role"] for dep in meta.get("dependencies") or [] if isinstance(dep, dict) and set(dep) - {"role"}]


def play_headers(play: dict) -> list[str]:
    """The tasks one play starts on a node: fact gathering, pre_tasks, the roles (each dependency once), post_tasks."""
    gather = play.get("gather_facts", True)
    if isinstance(gather, str):  # site.yml's: a template, true only with -e gpu_nodes_gather_facts=true
        gather = False
    names = ["Gathering Facts"] if gather else []
    names += task_headers(play.get("pre_tasks") or [], ROOT / "playbooks", "")
    done: set[str] = set()
    for entry in play.get("roles") or []:
        role = entry if isinstance(entry, str) else entry["role"]
        for name in [*_dependencies(role), role]:
            if name not in done:
                done.add(name)
                names += role_headers(name)
    names += task_headers(play.get("post_tasks") or [], ROOT / "playbooks", "")
    return names


def site_headers() -> list[str]:
    names = []
    for entry in _load(SITE):
        for play in _load(ROOT / entry["ansible.builtin.import_playbook"]):
            names += play_headers(play)
    return names


@pytest.mark.parametrize("role", sorted(ROLE_BUDGETS))
def test_each_roles_noop_path_stays_within_its_budget(role):
    headers = role_headers(role)
    if role == "nvidia_container_toolkit":  # runtime_config is budgeted on its own
        headers = [name for name in headers if not name.startswith("runtime_config : ")]
    assert len(headers) <= ROLE_BUDGETS[role], "\n".join(headers)


def test_the_driver_on_a_gpu_node_does_not_grow():
    assert len(role_headers("nvidia_driver", end_role=False)) <= DRIVER_ON_A_GPU_NODE_BUDGET


def test_every_role_has_a_budget():
    roles = {path.name for path in ROLES.iterdir() if (path / "tasks" / "main.yml").is_file()}
    assert roles == set(ROLE_BUDGETS)


def test_the_site_noop_rerun_stays_within_its_budget():
    headers = site_headers()
    assert len(headers) <= SITE_BUDGET, f"{len(headers)} tasks:\n" + "\n".join(headers)


def test_the_doctors_share_stays_within_its_budget():
    assert len(role_headers("gpu_validate")) <= DOCTOR_BUDGET <= ROLE_BUDGETS["gpu_validate"]


def test_the_counter_counts_what_a_change_would_add(tmp_path):
    """A task added to a role's main path, to a file it imports or to a block is counted; one inside a file the
    role includes is not (it runs only where the read found a difference)."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "imported.yml").write_text(yaml.safe_dump([{"name": "i1"}, {"name": "i2"}]))
    (tasks / "included.yml").write_text(yaml.safe_dump([{"name": "never"}]))
    main = [
        {"name": "read", "role_read": {}},
        {"name": "imp", "ansible.builtin.import_tasks": "imported.yml"},
        {"name": "blk", "block": [{"name": "b1"}], "always": [{"name": "a1"}], "rescue": [{"name": "r1"}]},
        {"name": "inc", "ansible.builtin.include_tasks": {"file": "included.yml"}, "when": "differs"},
    ]
    assert task_headers(main, tasks, "") == ["read", "i1", "i2", "b1", "a1", "inc"]
    # an include without when runs on every run: its tasks count; a meta end_role the node takes ends the count
    main[3] = {"name": "inc", "ansible.builtin.include_tasks": "included.yml"}
    main.append({"name": "end", "ansible.builtin.meta": "end_role", "when": "skip"})
    main.append({"name": "after"})
    assert task_headers(main, tasks, "", end_role=False)[-4:] == ["inc", "never", "end", "after"]
    with pytest.raises(EndRole) as ended:
        task_headers(main, tasks, "")
    assert ended.value.names[-3:] == ["inc", "never", "end"]
    # the driver's includes that a GPU node takes on every run count whole there, and as one task elsewhere
    (tasks / "repository_debian.yml").write_text(yaml.safe_dump([{"name": "c1"}, {"name": "c2"}]))
    repo = [
        {
            "name": "repo",
            "ansible.builtin.include_tasks": "repository_{{ __nvidia_driver_plan.family }}.yml",
            "when": "x",
        }
    ]
    assert task_headers(repo, tasks, "", end_role=False) == ["repo", "c1", "c2"]
    assert task_headers(repo, tasks, "") == ["repo"]
