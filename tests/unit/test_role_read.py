"""role_read (plugins/action/role_read.py): a role's variable check and its reads of the node in one task.

Checked for real (ansible-playbook on localhost): reads with items register as a loop would, a missing file is no
failure where the read says so, a probe runs its module in check mode (the file it would remove stays), a skipped
read does not run, and a variable that fails its check stops the task before any read (the read that would fail
never runs). The pure helpers without Ansible.
"""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import load_module, run_local_playbook

role_read = load_module("role_read", subdir="plugins/action")


@pytest.mark.parametrize(
    ("read", "problem"),
    [
        ({"module": "stat", "args": {"path": "/"}}, None),
        ({"module": "stat", "items": ["/"], "item_arg": "path"}, None),
        ({"module": "file", "items": [{"path": "/x", "state": "absent"}]}, None),
        ("stat", "each read needs module or action"),
        ({"module": "stat", "action": "toml_merge"}, "names both a module and an action"),
        ({"module": "stat", "args": "path=/"}, "must be a mapping"),
        ({"module": "stat", "items": "/"}, "must be a list"),
        ({"module": "stat", "items": ["/"]}, "no item_arg"),
    ],
)
def test_read_problem(read, problem):
    found = role_read.read_problem(read)
    assert (found is None) if problem is None else (problem in found), found


def test_loop_result_has_the_shape_a_loop_task_registers():
    ok = role_read.loop_result([{"item": 1, "changed": False}, {"item": 2, "changed": True}])
    assert ok["changed"] and not ok.get("failed") and [r["item"] for r in ok["results"]] == [1, 2]
    failed = role_read.loop_result([{"item": 1, "failed": True, "msg": "no"}])
    assert failed["failed"] and failed["msg"] == "no"


def test_reads_items_missing_files_probes_skips_and_the_check_first(tmp_path):
    present = tmp_path / "present"
    present.write_text("hello\n")
    spec = tmp_path / "argument_specs.yml"
    spec.write_text(yaml.safe_dump({"argument_specs": {"variables": {"options": {"demo_list": {"type": "list"}}}}}))
    read_task = {
        "role_read": {
            "reads": [
                {
                    "module": "ansible.legacy.slurp",
                    "items": [str(present), str(tmp_path / "missing")],
                    "item_arg": "src",
                    "missing_ok": True,
                },
                {
                    "module": "ansible.legacy.file",
                    "args": {"state": "absent"},
                    "items": [str(present)],
                    "item_arg": "path",
                    "check_mode": True,
                },
                {"module": "ansible.legacy.command", "args": {"argv": ["false"]}, "skip": True},
            ]
        },
        "register": "read",
        "check_mode": False,
    }
    refused = {
        "name": "REFUSED",
        "role_read": {
            "spec": str(spec),
            "reads": [{"module": "ansible.legacy.command", "args": {"argv": ["touch", str(tmp_path / "touched")]}}],
        },
        "vars": {"demo_list": "not a list"},
        "ignore_errors": True,
        "register": "refused",
    }
    out = tmp_path / "out.json"
    show = {"ansible.builtin.copy": {"content": "{{ {'read': read, 'refused': refused} | to_json }}", "dest": str(out)}}
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        yaml.safe_dump(
            [{"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": [read_task, refused, show]}]
        )
    )
    run = run_local_playbook(playbook)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    shown = json.loads(out.read_text())
    slurped, probe, skipped = shown["read"]["reads"]
    assert [r.get("content") is not None for r in slurped["results"]] == [True, False]
    assert not slurped.get("failed")
    assert probe["changed"] and present.is_file()  # a probe: it would remove the file, and did not
    assert skipped == {"skipped": True, "changed": False}
    assert not shown["read"]["changed"]
    assert shown["refused"]["failed"] and "demo_list must be a list" in " ".join(shown["refused"]["problems"])
    assert not (tmp_path / "touched").exists()  # the variables failed: no read ran
