"""Issue 51, item 6: one restart transaction (roles/gpu_node_facts/tasks/restart_transaction.yml), shared by
runtime_config (the runtimes, the RKE2/k3s agent) and the kubelet (its handler, the agent).

The layout tests fail when a second transaction appears: a task that restarts a unit, puts a file back from its
backup or reads a unit's journal, anywhere in a role's tasks or handlers or a playbook but the shared file. The
filters are plugins/filter/restart_transaction.py and runtime_rollback_files; the transaction's runs are the
molecule scenarios' rollback tests (kubelet, runtime_config, installers)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, load_module

SHARED = ROOT / "roles" / "gpu_node_facts" / "tasks" / "restart_transaction.yml"
ROLLBACK = SHARED.with_name("restart_rollback.yml")  # included by SHARED where the unit did not come back
INCLUDE = "{{ role_path }}/../gpu_node_facts/tasks/restart_transaction.yml"
REQUIRED = {
    "__restart_unit",
    "__restart_name",
    "__restart_what",
    "__restart_files",
    "__restart_check",
    "__restart_came_back",
    "__restart_reason",
}
OPTIONAL = {
    "__restart_daemon_reload",
    "__restart_stop_first",
    "__restart_discard",
    "__restart_within",
    "__restart_journal_lines",
    "__restart_journal_shown",
    "__restart_marker",
}
# the callers: file -> the number of includes of the shared transaction it holds
CALLERS = {
    "roles/runtime_config/tasks/transaction.yml": 1,
    "roles/kubelet/handlers/main.yml": 1,
    "roles/kubelet/tasks/installer.yml": 1,
}
RESTART_MODULES = {
    "ansible.builtin.systemd_service",
    "ansible.builtin.systemd",
    "ansible.builtin.service",
    "systemd_service",
    "systemd",
    "service",
}
RESTART_COMMAND = re.compile(r"systemctl\s+(--\S+\s+)*(try-)?(restart|reload-or-restart)\b")

transaction = load_module("restart_transaction", subdir="plugins/filter")
rollback = load_module("runtime_rollback", subdir="plugins/filter")


def _task_files() -> list[Path]:
    return sorted(
        {
            *ROOT.glob("roles/*/tasks/*.yml"),
            *ROOT.glob("roles/*/handlers/*.yml"),
            *ROOT.glob("playbooks/*.yml"),
            *ROOT.glob("playbooks/tasks/*.yml"),
        }
    )


def _tasks(node, in_rescue=False):
    """(task, whether it is in a rescue) of a task file or playbook, blocks and plays included."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item, in_rescue)
    elif isinstance(node, dict):
        if not any(key in node for key in ("block", "tasks", "handlers", "pre_tasks", "post_tasks", "hosts")):
            yield node, in_rescue
        for key in ("block", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
            yield from _tasks(node.get(key), in_rescue)
        yield from _tasks(node.get("rescue"), True)


def _restarts(task: dict) -> bool:
    for module in RESTART_MODULES:
        args = task.get(module)
        if isinstance(args, dict) and str(args.get("state", "")) in {"restarted", "reloaded"}:
            return True
    command = task.get("ansible.builtin.command", task.get("ansible.builtin.shell", ""))
    command = command.get("cmd", command.get("argv", "")) if isinstance(command, dict) else command
    return bool(RESTART_COMMAND.search(" ".join(command) if isinstance(command, list) else str(command)))


def _restores(task: dict) -> bool:
    """A file put back from its backup on the node."""
    args = next((task[module] for module in ("ansible.builtin.copy", "copy") if isinstance(task.get(module), dict)), {})
    return bool(args.get("remote_src")) and "backup" in str(args.get("src", ""))


def _reads_the_journal(task: dict) -> bool:
    """A unit's journal read for why it did not come back."""
    command = task.get("ansible.builtin.command", task.get("ansible.builtin.shell", ""))
    return bool(re.search(r"journalctl\s+(.*\s)?-u\b", str(command)))


def transaction_sequences(files: list[Path], root: Path = ROOT) -> list[str]:
    """Every task of ``files`` that is part of a restart transaction: a restart, a restore, a rescue."""
    found = []
    for path in files:
        for task, in_rescue in _tasks(yaml.safe_load(path.read_text())):
            where = f"{path.relative_to(root)}: {task.get('name', '(unnamed)')!r}"
            if _restarts(task):
                found.append(f"{where} restarts a unit")
            if _restores(task):
                found.append(f"{where} puts a file back")
            if _reads_the_journal(task):
                found.append(f"{where} reads why a unit failed")
            if in_rescue and (_restarts(task) or _restores(task)):
                found.append(f"{where} rolls back in a rescue")
    return found


def test_only_the_shared_file_restarts_a_unit_or_puts_its_files_back():
    others = transaction_sequences([path for path in _task_files() if path not in (SHARED, ROLLBACK)])
    assert others == [], (
        "a second restart transaction: restart and roll back through "
        "roles/gpu_node_facts/tasks/restart_transaction.yml instead\n" + "\n".join(others)
    )


def test_the_guard_sees_the_shared_transaction():
    """The guard above is not blind: in the shared file it finds both restarts, the restore from a backup and the
    journal read."""
    found = transaction_sequences([SHARED, ROLLBACK])
    assert sum("restarts a unit" in line for line in found) == 2, found
    assert sum("puts a file back" in line for line in found) == 1, found
    assert sum("reads why a unit failed" in line for line in found) == 1, found


def test_the_guard_finds_a_transaction_in_a_rescue(tmp_path):
    """A role that restarts in a block and restores its backup in the rescue, as runtime_config did, is found."""
    old = tmp_path / "roles" / "example" / "tasks" / "transaction.yml"
    old.parent.mkdir(parents=True)
    old.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Restart and check",
                    "block": [
                        {"name": "Restart", "ansible.builtin.systemd_service": {"name": "x", "state": "restarted"}}
                    ],
                    "rescue": [
                        {
                            "name": "Restore",
                            "ansible.builtin.copy": {"src": "{{ undo.backup_file }}", "dest": "/x", "remote_src": True},
                        },
                        {"name": "Restart again", "ansible.builtin.command": "systemctl restart x"},
                    ],
                }
            ]
        )
    )
    found = transaction_sequences([old], tmp_path)
    assert any("rolls back in a rescue" in line for line in found), found
    assert sum("restarts a unit" in line for line in found) == 2, found


def test_the_shared_transaction_has_no_rescue_and_fails_only_at_its_end():
    """A handler runs no rescue (the kubelet restarts from one): no step may fail before the report."""
    tasks = [*_tasks(yaml.safe_load(SHARED.read_text())), *_tasks(yaml.safe_load(ROLLBACK.read_text()))]
    assert not any(in_rescue for _, in_rescue in tasks)
    fails = [task["name"] for task, _ in tasks if "ansible.builtin.fail" in task]
    assert fails == [tasks[-1][0]["name"]], fails
    for task, _ in tasks[:-1]:
        if {"ansible.builtin.set_fact", "ansible.builtin.include_tasks"} & set(task):
            continue  # the check is the caller's: it must not fail either
        if task["name"].startswith("Forget the "):
            continue  # a state file removed once the unit runs
        assert task.get("ignore_errors") or task.get("failed_when") is False, f"{task['name']} can fail the host early"


def _includes(path: Path) -> list[dict]:
    return [
        task
        for task, _ in _tasks(yaml.safe_load(path.read_text()))
        if task.get("ansible.builtin.include_tasks") == INCLUDE
    ]


@pytest.mark.parametrize(("caller", "count"), CALLERS.items())
def test_each_caller_includes_the_transaction_with_its_variables(caller, count):
    includes = _includes(ROOT / caller)
    assert len(includes) == count, caller
    for task in includes:
        names = set(task.get("vars", {}))
        assert names >= REQUIRED, f"{caller}: missing {sorted(REQUIRED - names)}"
        assert names <= REQUIRED | OPTIONAL, f"{caller}: unknown {sorted(names - REQUIRED - OPTIONAL)}"
        # never in check mode: the caller's condition says so, or its file runs only outside it
        when = task.get("when")
        conditions = when if isinstance(when, list) else [when]
        assert "not ansible_check_mode" in conditions or caller.endswith("transaction.yml"), caller


def test_no_other_file_includes_the_transaction():
    callers = {str(path.relative_to(ROOT)) for path in _task_files() if _includes(path)}
    assert callers == set(CALLERS)
    rollback_path = INCLUDE.replace("restart_transaction.yml", "restart_rollback.yml")
    includers = {
        path
        for path in _task_files()
        for task, _ in _tasks(yaml.safe_load(path.read_text()))
        if task.get("ansible.builtin.include_tasks") == rollback_path
    }
    assert includers == {SHARED}


def test_runtime_configs_restart_is_skipped_in_check_mode():
    finish = yaml.safe_load((ROOT / "roles/runtime_config/tasks/finish.yml").read_text())
    restart = next(
        task for task in finish if task.get("ansible.builtin.include_tasks", {}).get("file") == "restart.yml"
    )
    assert "not ansible_check_mode" in restart["when"]


# ---- the filters ---------------------------------------------------------------------------------------------------
BACKED_UP = {"path": "/etc/a", "existed": True, "backup_file": "/b/etc/a.1~", "owner": "", "group": "", "mode": ""}
READ = {"path": "/etc/b", "existed": True, "content": "", "owner": "0", "group": "0", "mode": "0644"}
NEW = {"path": "/etc/c", "existed": False, "content": "", "owner": "", "group": "", "mode": ""}
NO_BACKUP = {"path": "/etc/d", "existed": True, "backup_file": ""}


def test_each_existing_file_is_restored_one_way():
    files = [BACKED_UP, READ, NEW, NO_BACKUP]
    assert transaction.restart_files_to_restore(files, "backup_file") == [BACKED_UP]
    # an empty file read before the change is put back empty
    assert transaction.restart_files_to_restore(files, "content") == [READ]
    both = {**READ, "backup_file": "/b/etc/b.1~"}
    assert transaction.restart_files_to_restore([both], "content") == []


def test_the_summary_says_what_the_rollback_did():
    summary = transaction.restart_rollback_summary([BACKED_UP, READ, NEW, NO_BACKUP])
    assert summary == (
        "restored /etc/a from /b/etc/a.1~, restored /etc/b, removed /etc/c, which did not exist before, "
        "NOT restored /etc/d (no backup)"
    )
    assert transaction.restart_rollback_summary([]) == "nothing"


@pytest.mark.parametrize("bad", [None, {"path": "/a"}, [{"existed": True}], ["/a"]])
def test_the_filters_refuse_what_is_not_a_list_of_files(bad):
    with pytest.raises(transaction.AnsibleFilterError):
        transaction.restart_rollback_summary(bad)
    with pytest.raises(transaction.AnsibleFilterError):
        transaction.restart_files_to_restore([BACKED_UP], "somewhere")


def test_a_runtime_plan_entry_is_its_config_file_then_its_drop_in():
    entry = {
        "path": "/etc/containerd/config.toml",
        "existed": True,
        "backup_file": "/b/config.toml~",
        "mode": "0600",
        "owner": "root",
        "group": "root",
        "dropin_path": "/etc/containerd/conf.d/99-nvidia.toml",
        "dropin_backup_file": "",
    }
    files = rollback.runtime_rollback_files(entry)
    assert files == [
        {
            "path": "/etc/containerd/config.toml",
            "existed": True,
            "backup_file": "/b/config.toml~",
            "owner": "root",
            "group": "root",
            "mode": "0600",
        },
        {"path": "/etc/containerd/conf.d/99-nvidia.toml", "existed": False, "backup_file": ""},
    ]
    # the message's first words are what the molecule tests read: "Rolled back: restored <config> from <backup>"
    assert transaction.restart_rollback_summary(files).startswith("restored /etc/containerd/config.toml from /b/")
    # an earlier run's pending marker (same form, no drop-in) and a config the change created
    marker = {"path": "/etc/docker/daemon.json", "existed": False, "backup_file": "", "pending_since_earlier_run": True}
    assert rollback.runtime_rollback_files(marker) == [
        {"path": "/etc/docker/daemon.json", "existed": False, "backup_file": "", "owner": "", "group": "", "mode": ""}
    ]
    with pytest.raises(rollback.AnsibleFilterError):
        rollback.runtime_rollback_files({"existed": True})
