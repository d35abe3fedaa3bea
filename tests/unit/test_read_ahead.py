"""The read ahead (plugins/plugin_utils/read_ahead.py): gpu_node_facts' task reads the play's later roles that have a
tasks/read.yml, so that each costs one task where it has nothing to change (issue 47), and a role reads for itself
wherever the read ahead cannot decide it.

The playbook tests run ansible-playbook against localhost with a TEST ROLE of their own (``probe``, written to a
temporary directory next to the playbook): its read is a ``cat`` of a file of the test's temporary directory, it
"changes" that file back to the text it wants, and its tasks are laid out as fuse, security_profiles and kubelet lay
out theirs (one include in tasks/main.yml, tasks/run.yml, tasks/read.yml, tasks/apply.yml). gpu_node_facts, the real
role, only reads the machine.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml
from ansible_collections.gpunode.provisioning.plugins.plugin_utils import read_ahead
from conftest import ROOT, local_playbook_command

# the roles of the project laid out for the read ahead
ROLES = ("nvidia_container_toolkit", "fuse", "security_profiles", "kubelet")
PENDING = "__gpu_node_facts_node | default({}) | gpunode.provisioning.read_ahead_pending(role_uuid, inventory_hostname)"


# --- whether a role reads for itself -----------------------------------------------------------------------------


@pytest.fixture
def counting(monkeypatch):
    monkeypatch.setattr(read_ahead, "_changes", {})
    monkeypatch.setattr(read_ahead, "_refreshes", {})
    monkeypatch.setattr(read_ahead, "_tracking", True)


def _node(uuid: str, changes: bool, seen: int) -> dict:
    return {"read_ahead": {uuid: {"role": "probe", "changes": changes, "seen": seen}}}


def test_a_role_reads_for_itself_unless_a_fresh_read_ahead_found_nothing_to_change(counting):
    assert read_ahead.pending(_node("u1", False, 0), "u1", "n1") is False
    # nothing read ahead: no result, another role instance, a result of another shape
    assert read_ahead.pending({}, "u1", "n1") is True
    assert read_ahead.pending(None, "u1", "n1") is True
    assert read_ahead.pending(_node("u2", False, 0), "u1", "n1") is True
    assert read_ahead.pending({"read_ahead": {"u1": "no"}}, "u1", "n1") is True
    assert read_ahead.pending({"read_ahead": {"u1": {"changes": None, "seen": 0}}}, "u1", "n1") is True
    # the read ahead found something to change
    assert read_ahead.pending(_node("u1", True, 0), "u1", "n1") is True
    # the host reported a change since: what was read may be stale; another host's change does not count
    read_ahead.note_result("n2", {"changed": True})
    assert read_ahead.pending(_node("u1", False, 0), "u1", "n1") is False
    read_ahead.note_result("n1", {"changed": False})
    assert read_ahead.pending(_node("u1", False, 0), "u1", "n1") is False
    read_ahead.note_result("n1", {"changed": True})
    assert read_ahead.changes_seen("n1") == 1
    assert read_ahead.pending(_node("u1", False, 0), "u1", "n1") is True
    assert read_ahead.pending(_node("u1", False, 1), "u1", "n1") is False


def test_a_read_of_the_package_index_is_stale_once_the_index_was_refreshed(counting):
    """fuse's read asks the index for crun where no runtime of the node runs user-namespaced pods: a refresh of the
    index before fuse runs (the driver's and the toolkit's apt refreshes say changed=false) makes it read again."""
    node = {"read_ahead": {"u1": {"role": "fuse", "changes": False, "seen": 0, "index": 0}}}
    assert read_ahead.pending(node, "u1", "n1") is False
    read_ahead.note_result("n1", {"changed": False, "cache_updated": True})
    assert read_ahead.refreshes_seen("n1") == 1 and read_ahead.changes_seen("n1") == 0
    assert read_ahead.pending(node, "u1", "n1") is True
    # a read that did not ask the index stands
    assert read_ahead.pending(_node("u1", False, 0), "u1", "n1") is False


def test_nothing_counting_the_changes_means_every_role_reads_for_itself(monkeypatch):
    monkeypatch.setattr(read_ahead, "_changes", {})
    monkeypatch.setattr(read_ahead, "_refreshes", {})
    monkeypatch.setattr(read_ahead, "_tracking", False)
    assert read_ahead.changes_seen("n1") is None
    assert read_ahead.pending(_node("u1", False, 0), "u1", "n1") is True


# --- the roles' layout ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ROLES)
def test_each_role_read_ahead_has_one_read_and_one_task(role):
    from ansible.parsing.dataloader import DataLoader

    tasks = ROOT / "roles" / role / "tasks"
    args, register = read_ahead.read_task(DataLoader(), str(ROOT / "roles" / role))
    assert register and args["spec"] == "{{ role_path }}/meta/argument_specs.yml"
    # the toolkit: then the runtime registration (an include_role)
    main, *rest = yaml.safe_load((tasks / "main.yml").read_text())
    assert [next(key for key in task if key.startswith("ansible.builtin.")) for task in rest] == (
        ["ansible.builtin.include_role"] if role == ROLES[0] else []
    )
    include = main["ansible.builtin.include_tasks"]
    assert (include if isinstance(include, str) else include["file"]) == "run.yml"
    assert main["when"] == PENDING
    read, apply = yaml.safe_load((tasks / "run.yml").read_text())
    assert read["ansible.builtin.import_tasks"] == "read.yml"
    assert apply["when"] == f"__{role}_changes | bool"
    assert f"__{role}_changes" in yaml.safe_load((ROOT / "roles" / role / "vars" / "main.yml").read_text())


def test_a_read_file_with_anything_but_one_registered_read_is_refused(tmp_path):
    from ansible.parsing.dataloader import DataLoader

    (tmp_path / "tasks").mkdir()
    read = {"name": "Read", "gpunode.provisioning.role_read": {"reads": []}, "register": "__x_node"}
    for bad in ([read, read], [{**read, "when": "x"}], [{k: v for k, v in read.items() if k != "register"}]):
        (tmp_path / "tasks" / "read.yml").write_text(yaml.safe_dump(bad))
        with pytest.raises(ValueError, match=r"read\.yml"):
            read_ahead.read_task(DataLoader(), str(tmp_path))
    (tmp_path / "tasks" / "read.yml").unlink()
    assert read_ahead.read_task(DataLoader(), str(tmp_path)) is None


def test_the_callback_counts_each_hosts_changed_results(counting):
    from types import SimpleNamespace

    from ansible_collections.gpunode.provisioning.plugins.callback import plugin_warmup

    callback = plugin_warmup.CallbackModule()
    host = SimpleNamespace(get_name=lambda: "n1")
    callback.v2_runner_on_ok(SimpleNamespace(host=host, is_changed=lambda: True, result={}))
    callback.v2_runner_on_ok(SimpleNamespace(host=host, is_changed=lambda: False, result={"cache_updated": True}))
    callback.v2_runner_on_failed(SimpleNamespace(host=host, is_changed=lambda: True, result={}), ignore_errors=True)
    assert read_ahead.changes_seen("n1") == 2
    assert read_ahead.refreshes_seen("n1") == 1


# --- ansible-playbook with the TEST ROLE ---------------------------------------------------------------------------

PROBE_TASKS = {
    "main.yml": [
        {
            "name": "Read and change the probe file where the read ahead says so",
            "ansible.builtin.include_tasks": {"file": "run.yml", "apply": {"tags": ["probe"]}},
            "when": PENDING,
            "tags": ["probe"],
        }
    ],
    "run.yml": [
        {"name": "Check the probe variables and read the file", "ansible.builtin.import_tasks": "read.yml"},
        {
            "name": "Change the probe file",
            "ansible.builtin.include_tasks": "apply.yml",
            "when": "__probe_changes | bool",
        },
    ],
    "read.yml": [
        {
            "name": "PROBE-READ",
            "gpunode.provisioning.role_read": {
                "spec": "{{ role_path }}/meta/argument_specs.yml",
                "reads": [{"module": "ansible.legacy.command", "args": {"argv": ["cat", "{{ probe_file }}"]}}],
                "plan": "__probe_plan_after_read",
                "report": "__probe_report_after_read",
            },
            "register": "__probe_node",
            "check_mode": False,
        }
    ],
    "apply.yml": [
        {
            "name": "PROBE-WRITE",
            "ansible.builtin.copy": {"dest": "{{ probe_file }}", "content": "{{ probe_wanted }}", "mode": "0644"},
        }
    ],
}
PROBE_VARS = {
    # from the role's own search path (role_path, its templates): the read ahead renders them as the role would
    "probe_wanted": "{{ lookup('gpunode.provisioning.role_template', 'wanted.j2') | trim }}",
    # probe_suffix: a variable the role reads and does not define (another role's vars must not reach it)
    "__probe_plan_after_read": "{{ {'changes': __probe_node.stdout != probe_wanted ~ (probe_suffix | default(''))} }}",
    "__probe_changes": "{{ __probe_node.plan.changes }}",
    # the platform data tasks/set_vars.yml loads after gpu_node_facts' task: the read ahead has it already
    "__probe_report_after_read": (
        "{{ [] if __probe_changes | bool else ['PROBE-REPORT ' ~ role_name ~ ' ' ~ __gpu_node_facts_apparmor_os] }}"
    ),
}
PROBE_SPEC = {
    "argument_specs": {
        "variables": {
            "short_description": "TEST ROLE",
            "options": {"probe_file": {"type": "str"}, "probe_size": {"type": "int", "default": 1}},
        }
    }
}


@pytest.fixture
def probe(tmp_path):
    """A playbook directory with the TEST ROLE probe; returns a function that runs a play of it."""
    role = tmp_path / "roles" / "probe"
    for directory, files in {
        "tasks": {name: yaml.safe_dump(tasks) for name, tasks in PROBE_TASKS.items()},
        "vars": {"main.yml": yaml.safe_dump(PROBE_VARS)},
        "defaults": {"main.yml": yaml.safe_dump({"probe_size": 1})},
        "meta": {
            "main.yml": yaml.safe_dump({"dependencies": ["gpu_node_facts"]}),
            "argument_specs.yml": yaml.safe_dump(PROBE_SPEC),
        },
        "templates": {"wanted.j2": "wanted by {{ role_name }}\n"},
    }.items():
        (role / directory).mkdir(parents=True)
        for name, text in files.items():
            (role / directory / name).write_text(text)
    changer = tmp_path / "roles" / "changer" / "tasks"
    changer.mkdir(parents=True)
    (changer.parent / "meta").mkdir()
    (changer.parent / "meta" / "main.yml").write_text(yaml.safe_dump({"dependencies": ["gpu_node_facts"]}))
    changer.joinpath("main.yml").write_text(
        yaml.safe_dump(
            [{"name": "CHANGER", "ansible.builtin.command": "true", "changed_when": "changer_changes | bool"}]
        )
    )
    target = tmp_path / "probe.txt"

    def run(text: str | None, roles: list, *args: str, env: dict | None = None, tasks: list | None = None):
        if text is not None:
            target.write_text(text)
        play = {
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": {"probe_file": str(target), "changer_changes": False},
            "roles": roles,
            "tasks": tasks or [],
        }
        playbook = tmp_path / "play.yml"
        playbook.write_text(yaml.safe_dump([play]))
        done = subprocess.run(
            local_playbook_command(playbook, "-v", *args),
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "ANSIBLE_NOCOLOR": "1", "JUNIT_OUTPUT_DIR": str(tmp_path / "junit"), **(env or {})},
        )
        done.text = target.read_text()
        done.own_read = "TASK [probe : PROBE-READ]" in done.stdout
        done.wrote = "TASK [probe : PROBE-WRITE]" in done.stdout
        return done

    return run


WANTED = "wanted by probe"
ROLES_IN_PLAY = ["gpu_node_facts", "probe"]


def test_a_role_with_nothing_to_change_is_read_ahead_and_runs_one_task(probe):
    run = probe(WANTED, ROLES_IN_PLAY)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    # no own read, no write: the include alone, skipped; what the read says is shown by the read ahead
    assert not run.own_read and not run.wrote, run.stdout[-3000:]
    assert "TASK [probe : Read and change the probe file where the read ahead says so]" in run.stdout
    assert "PROBE-REPORT probe True" in run.stderr  # Debian's platform data (the build machine's)
    assert "changed=0" in run.stdout


def test_the_read_ahead_has_the_roles_own_parameters(probe):
    """A role's vars given where the play names it are that role's alone: the read ahead renders the role with them."""
    run = probe("given", ["gpu_node_facts", {"role": "probe", "vars": {"probe_wanted": "given"}}])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert not run.own_read and not run.wrote, run.stdout[-3000:]


def test_another_roles_vars_do_not_reach_the_read_ahead(probe):
    """gpu_node_facts run as the first role's dependency gets that role's vars; the read ahead of a later role renders
    that role's variables only: the probe does not see probe_suffix, so the file differs and is written."""
    run = probe(WANTED + "-leak", [{"role": "changer", "vars": {"probe_suffix": "-leak"}}, "probe"])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "TASK [changer : CHANGER]" in run.stdout
    assert run.own_read and run.wrote and run.text == WANTED, run.stdout[-3000:]


def test_a_role_whose_read_ahead_found_a_change_takes_that_read_and_changes_it(probe):
    """Nothing changed between the read ahead and the role: its own read task returns what the read ahead read (no
    second read of the node, no second rendering of the plan)."""
    run = probe("drifted", ROLES_IN_PLAY)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert run.own_read and run.wrote and run.text == WANTED, run.stdout[-3000:]
    assert "PROBE-REPORT" not in run.stderr
    read = run.stdout.split("TASK [probe : PROBE-READ]", 1)[1].split("TASK [", 1)[0]
    assert "from_read_ahead: true" in read and "stdout: drifted" in read, read


def test_a_read_ahead_that_went_stale_is_not_taken(probe):
    """A change between the read ahead and the role: the role's own read reads the node."""
    run = probe("drifted", ["gpu_node_facts", "changer", "probe"], "-e", "changer_changes=true")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    read = run.stdout.split("TASK [probe : PROBE-READ]", 1)[1].split("TASK [", 1)[0]
    assert "from_read_ahead" not in read and "stdout: drifted" in read, read
    assert run.wrote and run.text == WANTED


def test_a_change_before_the_role_makes_it_read_for_itself(probe):
    """A role between the read ahead and this one changed the host: what was read ahead may be stale."""
    run = probe(WANTED, ["gpu_node_facts", "changer", "probe"], "-e", "changer_changes=true")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert run.own_read and not run.wrote, run.stdout[-3000:]
    quiet = probe(WANTED, ["gpu_node_facts", "changer", "probe"])
    assert not quiet.own_read, quiet.stdout[-3000:]


def test_refused_variables_fail_in_the_roles_own_read(probe):
    run = probe(WANTED, ROLES_IN_PLAY, "-e", json.dumps({"probe_size": "many"}))
    assert run.returncode != 0
    assert run.own_read
    failed = run.stdout.split("TASK [probe : PROBE-READ]", 1)[1]
    assert "probe_size" in failed and "fatal: [localhost]" in failed, run.stdout[-3000:]
    assert "read_ahead_left" in run.stdout and "its read failed" in run.stdout


@pytest.mark.parametrize(
    ("how", "args", "env", "why"),
    [
        ("skip-tags", ["--skip-tags", "probe"], {}, "the tags leave it out"),
        # a user's own configuration without this collection's callback (another one enabled instead)
        ("no callback", [], {"ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.junit"}, "nothing counts the run's changes"),
        ("when", [], {}, "its when is false"),
    ],
)
def test_a_role_the_read_ahead_cannot_decide_is_left_to_itself(probe, how, args, env, why):
    roles = [
        "gpu_node_facts",
        {"role": "probe", "when": "false"} if how == "when" else "probe",
    ]
    run = probe("drifted", roles, *args, env=env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert why in " ".join(run.stdout.split()), run.stdout[-3000:]
    if how == "no callback":
        assert run.own_read and run.text == WANTED, run.stdout[-3000:]
    else:  # the role does not run at all
        assert not run.own_read and run.text == "drifted"


def test_an_included_role_reads_for_itself(probe):
    include = [{"name": "Include the probe", "ansible.builtin.include_role": {"name": "probe"}}]
    run = probe(WANTED, ["gpu_node_facts"], tasks=include)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert run.own_read and not run.wrote, run.stdout[-3000:]
    # its own gpu_node_facts (the play has none before it): Ansible adds an included role to the play's roles, but its
    # tasks run with the include's blocks around them, which the read ahead would not see
    alone = [{"name": "Include the probe", "ansible.builtin.include_role": {"name": "probe"}, "vars": {"x": 1}}]
    run = probe(WANTED, [], tasks=alone)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "TASK [gpu_node_facts : Check the variables and gather the GPU node facts]" in run.stdout
    assert run.own_read and not run.wrote, run.stdout[-3000:]


def test_the_stored_read_is_the_role_read_tasks_own(counting):
    """The read ahead's result goes to the role's read task alone: its role instance, its register, its arguments,
    while fresh."""
    args = {"reads": [{"module": "ansible.legacy.command", "args": {"argv": ["cat", "/x"]}}], "plan": "__p"}
    node = {
        "read_ahead": {
            "u1": {
                "role": "probe",
                "changes": True,
                "seen": 0,
                "result": {"stdout": "x"},
                "register": "__r",
                "args": args,
            }
        }
    }
    task_vars = {"__gpu_node_facts_node": node, "role_uuid": "u1", "inventory_hostname": "n1"}
    assert read_ahead.stored_read(task_vars, "__r", dict(args)) == {"stdout": "x"}
    assert read_ahead.stored_read(task_vars, "__other", args) is None  # another read task of the role
    assert read_ahead.stored_read(task_vars, "__r", {**args, "plan": "__q"}) is None  # other arguments
    assert read_ahead.stored_read({**task_vars, "role_uuid": "u2"}, "__r", args) is None  # another role instance
    read_ahead.note_result("n1", {"changed": True})
    assert read_ahead.stored_read(task_vars, "__r", args) is None  # stale


def test_a_role_run_with_other_settings_reads_for_itself(probe):
    """A role run with other privilege or connection settings than gpu_node_facts' task reads for itself (the read
    ahead would read the node as gpu_node_facts' task does)."""
    run = probe(WANTED, ["gpu_node_facts", {"role": "probe", "become_user": "nobody"}])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert run.own_read, run.stdout[-3000:]
    assert "other settings than this task: become_user" in " ".join(run.stdout.split()), run.stdout[-3000:]
    # a connection variable of the role's own
    run = probe(WANTED, ["gpu_node_facts", {"role": "probe", "vars": {"ansible_become_user": "nobody"}}])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert run.own_read, run.stdout[-3000:]
    assert "other settings than this task: ansible_become_user" in " ".join(run.stdout.split()), run.stdout[-3000:]
    # the same settings, templated where the play sets them: rendered as Ansible renders gpu_node_facts' task
    quiet = probe(WANTED, ["gpu_node_facts", {"role": "probe", "become": "{{ false }}"}])
    assert quiet.returncode == 0 and not quiet.own_read, quiet.stdout[-3000:]


def test_the_callback_is_enabled_in_the_projects_configuration():
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "ansible.cfg")
    assert "gpunode.provisioning.plugin_warmup" in parser.get("defaults", "callbacks_enabled")
