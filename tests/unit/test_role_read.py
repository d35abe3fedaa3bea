"""role_read (plugins/action/role_read.py): a role's variable check and its reads of the node in one task.

Checked for real (ansible-playbook on localhost): reads with items register as a loop would, a missing file is no
failure where the read says so, a probe runs its module in check mode (the file it would remove stays), a skipped
read does not run, and a variable that fails its check stops the task before any read (the read that would fail
never runs), and the plan variable is rendered once, after the reads, with their results. The pure helpers without
Ansible.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml
from conftest import ROOT, load_module, local_play, local_playbook_command, run_local_playbook

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
            ],
            "plan": "demo_plan",
        },
        "vars": {
            # rendered once, after the reads, with their results (a role's plan filter would take them)
            "demo_plan": "{{ {'reads': role_read_reads | length, 'first': role_read_reads[0].results[0].item} }}"
        },
        "register": "read",
        "check_mode": False,
    }
    refused = {
        "name": "REFUSED",
        "role_read": {
            "spec": str(spec),
            "reads": [{"module": "ansible.legacy.command", "args": {"argv": ["touch", str(tmp_path / "touched")]}}],
            "plan": "undefined_plan",
        },
        "vars": {"demo_list": "not a list"},
        "ignore_errors": True,
        "register": "refused",
    }
    failed_read = {
        "name": "A READ FAILS",
        "role_read": {
            "reads": [
                {"module": "ansible.legacy.stat", "args": {"path": str(present)}},
                {"module": "ansible.legacy.command", "args": {"argv": ["false"]}},
            ],
            # rendering it would fail on the undefined variable: it must not be rendered after a failed read
            "plan": "undefined_plan",
        },
        "vars": {"undefined_plan": "{{ no_such_variable }}"},
        "ignore_errors": True,
        "register": "failed_read",
    }
    out = tmp_path / "out.json"
    show = {
        "ansible.builtin.copy": {
            "content": "{{ {'read': read, 'refused': refused, 'failed_read': failed_read} | to_json }}",
            "dest": str(out),
        }
    }
    run = _run_local_tasks(tmp_path, [read_task, refused, failed_read, show])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    shown = json.loads(out.read_text())
    slurped, probe, skipped = shown["read"]["reads"]
    assert [r.get("content") is not None for r in slurped["results"]] == [True, False]
    assert not slurped.get("failed")
    assert probe["changed"] and present.is_file()  # a probe: it would remove the file, and did not
    assert skipped == {"skipped": True, "changed": False}
    assert not shown["read"]["changed"]
    assert shown["read"]["plan"] == {"reads": 3, "first": str(present)}
    assert "plan" not in shown["refused"]  # refused: no read, no plan
    assert shown["refused"]["failed"] and "demo_list must be a list" in " ".join(shown["refused"]["problems"])
    assert not (tmp_path / "touched").exists()  # the variables failed: no read ran
    # a read failed: the task fails with that read's result, and no plan is rendered
    assert shown["failed_read"]["failed"] and "plan" not in shown["failed_read"], shown["failed_read"]
    assert "no_such_variable" not in json.dumps(shown["failed_read"])


def test_stat_and_slurp_reads_run_as_one_node_files_run_with_their_modules_results(tmp_path):
    """The stat and slurp reads of a task are one node_files run, and each read gets what its own module registers
    (the same task's reads, run by ansible.builtin.stat and slurp themselves, are the oracle)."""
    present = tmp_path / "present"
    present.write_text("hello\n")
    present.chmod(0o640)
    link = tmp_path / "link"
    link.symlink_to(present)
    (tmp_path / "dir").mkdir()
    paths = [str(present), str(link), str(tmp_path / "missing"), str(tmp_path / "dir")]
    reads = [
        {
            "module": "ansible.legacy.stat",
            "args": {"follow": True, "get_checksum": False},
            "items": paths,
            "item_arg": "path",
        },
        {
            "module": "ansible.builtin.stat",
            "args": {"get_mime": False, "get_attributes": False},
            "items": paths,
            "item_arg": "path",
        },
        {"module": "stat", "args": {"path": str(link), "checksum_algorithm": "sha256"}},
        {
            "module": "ansible.legacy.slurp",
            "items": [str(present), str(link), str(tmp_path / "missing")],
            "item_arg": "src",
            "missing_ok": True,
        },
    ]
    oracle = [
        {
            "ansible.builtin.stat": {"path": "{{ item }}", "follow": True, "get_checksum": False},
            "loop": paths,
            "register": "o0",
        },
        {"ansible.builtin.stat": {"path": "{{ item }}"}, "loop": paths, "register": "o1"},
        {"ansible.builtin.stat": {"path": str(link), "checksum_algorithm": "sha256"}, "register": "o2"},
        {"ansible.builtin.slurp": {"src": "{{ item }}"}, "loop": [str(present), str(link)], "register": "o3"},
    ]
    out = tmp_path / "out.json"
    show = {
        "ansible.builtin.copy": {"content": "{{ {'read': read, 'o': [o0, o1, o2, o3]} | to_json }}", "dest": str(out)}
    }
    playbook = local_play(
        tmp_path / "play.yml",
        tasks=[*oracle, {"role_read": {"reads": reads}, "register": "read", "check_mode": False}, show],
    )
    run = run_local_playbook(playbook, "-vvv")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    read_task = run.stdout.split("TASK [role_read]", 1)[1].split("TASK [", 1)[0]
    assert read_task.count("Using module file") == 1 and "node_files.py" in read_task, read_task[-2000:]
    shown = json.loads(out.read_text())
    got = shown["read"]["reads"]
    # stat's get_mime/get_attributes parts: node_files has none
    extra = {"mimetype", "charset", "attributes", "attr_flags", "version"}
    for mine, theirs in [
        (got[0]["results"], shown["o"][0]["results"]),
        (got[1]["results"], shown["o"][1]["results"]),
        ([got[2]], [shown["o"][2]]),
    ]:
        for one, oracle_one in zip(mine, theirs, strict=True):
            assert set(oracle_one["stat"]) - set(one["stat"]) <= extra, (one, oracle_one)
            for key in set(one["stat"]) - {"atime"}:
                assert one["stat"][key] == oracle_one["stat"][key], (key, one["stat"], oracle_one["stat"])
    slurped = got[3]["results"]
    for one, oracle_one in zip(slurped[:2], shown["o"][3]["results"], strict=True):
        assert (one["content"], one["encoding"]) == (oracle_one["content"], oracle_one["encoding"])
    assert not slurped[2]["failed"] and "file not found" in slurped[2]["msg"] and not got[3].get("failed")
    assert got[2]["stat"]["islnk"] and got[2]["stat"]["lnk_target"] == str(present)


@pytest.mark.parametrize(
    ("read", "kind"),
    [
        ({"module": "ansible.legacy.stat", "args": {"path": "/", "follow": True}}, "stat"),
        ({"module": "slurp", "items": ["/a"], "item_arg": "src"}, "slurp"),
        ({"module": "ansible.legacy.stat", "args": {"path": "/", "get_selinux_context": True}}, None),
        ({"module": "ansible.legacy.stat", "args": {"path": "/"}, "check_mode": True}, None),
        ({"module": "ansible.legacy.stat", "args": {"path": "/"}, "skip": True}, None),
        ({"module": "community.general.stat", "args": {"path": "/"}}, None),
        ({"module": "ansible.legacy.file", "args": {"path": "/"}}, None),
    ],
)
def test_which_reads_node_files_does(read, kind):
    assert role_read.batched_kind(read) == kind


def test_a_command_read_runs_through_the_connection_and_registers_what_the_command_module_would(tmp_path):
    """No module payload and no Python on the node for a shell read (issue 47), the same registered result."""
    script = 'input=$(cat; echo .); input=${input%.}; printf "%s|%s\\n\\n" "$input" "$1"; echo err >&2; exit "$2"'
    argv = ["/bin/sh", "-c", script, "read", "ARG", "0"]
    cases = {
        "stdin": {"argv": argv, "stdin": "in put"},
        "no_newline": {"argv": argv, "stdin": "in", "stdin_add_newline": False, "strip_empty_ends": False},
        "no_stdin": {"argv": argv},
        "empty_stdin": {"argv": argv, "stdin": ""},
        "reads_what_it_gets": {"argv": ["/bin/sh", "-c", "cat; echo done"]},
        "fails": {"argv": [*argv[:-1], "3"]},
    }

    def run(with_module: bool, env: dict | None = None) -> dict:
        tasks = []
        for name, args in cases.items():
            read = {"role_read": {"reads": [{"module": "ansible.legacy.command", "args": args}]}}
            tasks.append({**read, "register": name, "check_mode": False, "ignore_errors": True})
            if with_module:
                tasks.append({"ansible.builtin.command": args, "register": f"module_{name}", "ignore_errors": True})
        names = [*cases, *(f"module_{name}" for name in cases if with_module)]
        out = tmp_path / "out.json"
        shown = {name: f"{{{{ {name} }}}}" for name in names}
        tasks.append(
            {"ansible.builtin.copy": {"content": "{{ shown | to_json }}", "dest": str(out)}, "vars": {"shown": shown}}
        )
        done = subprocess.run(
            local_playbook_command(local_play(tmp_path / "play.yml", tasks=tasks)),
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        return json.loads(out.read_text())

    shown = run(with_module=True)
    keys = ("rc", "stdout", "stderr", "stdout_lines", "stderr_lines", "cmd", "msg")
    for name in cases:
        direct, module = shown[name], shown[f"module_{name}"]
        assert {key: direct[key] for key in keys} == {key: module[key] for key in keys}, name
        assert bool(direct.get("failed")) == bool(module.get("failed")) == (name == "fails"), name
    assert shown["stdin"]["stdout"] == "in put\n|ARG"
    assert shown["no_newline"]["stdout"] == "in|ARG\n\n"
    # ansible.legacy.command is this library's module first: a read that ran a module would say so
    library = tmp_path / "library"
    library.mkdir()
    (library / "command.py").write_text(
        "#!/usr/bin/python\nimport json\nprint(json.dumps({'failed': True, 'msg': 'the command MODULE ran'}))\n"
    )
    again = run(with_module=False, env={"ANSIBLE_LIBRARY": f"{library}:{ROOT / 'library'}"})
    assert {name: again[name]["rc"] for name in cases} == {name: shown[name]["rc"] for name in cases}, again
    assert shown["reads_what_it_gets"]["stdout"] == "done"
    # without pipelining the command module runs (a connection would give a command without input a terminal)
    unpiped = run(
        with_module=False, env={"ANSIBLE_LIBRARY": f"{library}:{ROOT / 'library'}", "ANSIBLE_PIPELINING": "False"}
    )
    assert all("MODULE ran" in unpiped[name]["msg"] for name in cases), unpiped


def test_probes_are_answered_from_the_files_read_as_their_modules_answer_them(tmp_path):
    """The kubelet's probes (issue 47): no module run where the read has the file, the module's answer all the same."""
    import grp
    import pwd

    owner, group = pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name

    def written(name: str, text: str, mode: int):
        path = tmp_path / name
        path.write_text(text)
        path.chmod(mode)
        return path

    same = written("same.conf", "a = 1\n", 0o644)
    other = written("other.conf", "a = 2\n", 0o644)
    loose = written("loose.conf", "a = 1\n", 0o600)
    env = written("kubelet.env", "KUBELET_EXTRA_ARGS='--max-pods=110'\n", 0o644)
    link = tmp_path / "dangling.conf"
    link.symlink_to(tmp_path / "nowhere")
    attributes = {"owner": owner, "group": group, "mode": "0644"}
    writes = [
        {"dest": str(path), "content": "a = 1\n", "create_dirs": True, "backup": False, "show_diff": True, **attributes}
        for path in (same, other, loose, tmp_path / "missing.conf")
    ]
    flags = [
        {"path": str(env), "flags": flags, "flags_absent": [], "backup": False, **attributes}
        for flags in ({"max-pods": "110"}, {"max-pods": "200"})
    ]
    absent = [str(same), str(link), str(tmp_path / "missing.conf")]
    probes = [
        {"module": "gpunode.provisioning.config_file_write", "items": writes},
        {"module": "ansible.legacy.file", "args": {"state": "absent"}, "items": absent, "item_arg": "path"},
        {"module": "gpunode.provisioning.kubelet_flags", "items": flags},
        # not read by the task: its module runs
        {"module": "ansible.legacy.file", "args": {"state": "absent"}, "items": [str(tmp_path)], "item_arg": "path"},
    ]
    files = [str(path) for path in (same, other, loose, env, tmp_path / "missing.conf")]
    answered = {
        "role_read": {
            "reads": [
                {"module": "ansible.legacy.slurp", "items": files, "item_arg": "src", "missing_ok": True},
                {"module": "ansible.legacy.stat", "args": {"follow": True}, "items": files, "item_arg": "path"},
                {"module": "ansible.legacy.stat", "args": {"follow": False}, "items": absent, "item_arg": "path"},
            ],
            "probes": "demo_probes",
        },
        "vars": {"demo_probes": probes},
        "register": "answered",
        "check_mode": False,
    }
    # the same probes as reads in check mode: each runs its module on the node
    modules = {
        "role_read": {"reads": [{**probe, "check_mode": True} for probe in probes]},
        "register": "modules",
        "check_mode": False,
    }
    out = tmp_path / "out.json"
    show = {
        "ansible.builtin.copy": {
            "content": "{{ {'answered': answered, 'modules': modules} | to_json }}",
            "dest": str(out),
        }
    }
    run = run_local_playbook(local_play(tmp_path / "play.yml", tasks=[answered, modules, show]))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    shown = json.loads(out.read_text())

    def changed(results):
        return [[one.get("changed") for one in probe["results"]] for probe in results]

    assert changed(shown["answered"]["probes"]) == changed(shown["modules"]["reads"])
    assert changed(shown["modules"]["reads"]) == [[False, True, True, True], [True, True, False], [False, True], [True]]
    on_controller = [
        [bool(one.get("answered_on_controller")) for one in probe["results"]] for probe in shown["answered"]["probes"]
    ]
    assert on_controller == [[True] * 4, [True] * 3, [True] * 2, [False]]
    assert same.read_text() == "a = 1\n" and link.is_symlink() and tmp_path.is_dir()  # probes change nothing


def test_the_report_renders_last_and_shows_as_warnings_only_where_it_says_something(tmp_path):
    """``report`` renders after the plan with the read registered so far: a role shows what it leaves out where
    nothing changes (its include skipped), and nothing where its apply path reports itself."""
    present = tmp_path / "present"
    present.write_text("hello\n")

    def task(name: str, changes: bool) -> dict:
        return {
            "name": name,
            "role_read": {
                "reads": [{"module": "ansible.legacy.stat", "args": {"path": str(present)}}],
                "plan": "demo_plan",
                "report": "demo_report",
            },
            "vars": {
                "demo_plan": "{{ {'changes': "
                + str(changes)
                + ", 'reports': ['size ' ~ role_read_reads[0].stat.size]} }}",
                "demo_report": "{{ [] if " + name + ".plan.changes else " + name + ".plan.reports }}",
            },
            "register": name,
            "check_mode": False,
        }

    out = tmp_path / "out.json"
    show = {"ansible.builtin.copy": {"content": "{{ {'quiet': quiet, 'says': says} | to_json }}", "dest": str(out)}}
    run = _run_local_tasks(tmp_path, [task("says", False), task("quiet", True), show])
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    shown = json.loads(out.read_text())
    assert shown["says"]["warnings"] == ["size 6"]
    assert not shown["quiet"].get("warnings")
    assert (run.stdout + run.stderr).count("[WARNING]: size 6") == 1


def _run_local_tasks(tmp_path, tasks: list):
    """One play of ``tasks`` against localhost (local connection, no facts); the CompletedProcess."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False, "tasks": tasks}])
    )
    return run_local_playbook(playbook)
