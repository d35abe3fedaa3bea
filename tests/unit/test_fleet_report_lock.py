"""plugins/action/fleet_report_write.py: the fleet report's read-merge-write is one critical section on the controller.

Two runs that write one report at once (two AWX slices of one job on one controller) both read the report without
the other's rows, and the last write won: one slice's rows were lost. The test below is the other slice: it holds the
lock the role takes, lets the role's run reach it, writes its own rows meanwhile, and releases it. Nothing is timed:
the run says when it waits for the lock (fleet_report_write.WAITING), and the test reads its output up to that line
(or to its end, where the run took no lock).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleActionFail
from conftest import ROOT, load_module, local_playbook_command

fleet = load_module("fleet_report", subdir="plugins/filter")
writer = load_module("fleet_report_write", subdir="plugins/action")

# This run's node (the play's one host) and the other slice's.
OURS = [{"check": "NVIDIA driver", "status": "ok", "detail": "580.95.05 loaded", "fix": "", "family": "driver"}]
THEIRS = [{**OURS[0], "status": "fail", "detail": "no driver loaded", "fix": "Run site.yml"}]
PLAY = [
    {
        "name": "Write the fleet report of one slice",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "tasks": [
            {"name": "Give the node its doctor's rows", "ansible.builtin.set_fact": {"gpu_validate_results": OURS}},
            # as a stopped rollout writes it (playbooks/tasks/rollout_failed.yml); the doctor's last task
            # (plugins/action/gpu_validate_outcome.py) writes it through the same action
            {
                "name": "Write the fleet report",
                "ansible.builtin.include_role": {"name": "gpu_validate", "tasks_from": "fleet_report.yml"},
            },
        ],
    }
]


@contextmanager
def held(lock: Path):
    """The lock the role takes, held by this process for the block."""
    fd = os.open(lock, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)


def free(lock: Path) -> bool:
    fd = os.open(lock, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_a_run_that_writes_the_report_while_another_does_keeps_both_slices_rows(tmp_path):
    report = tmp_path / "reports" / "gpu-fleet-report"
    report.parent.mkdir()
    lock = Path(f"{report}.lock")
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(PLAY, sort_keys=False))
    command = local_playbook_command(playbook, "-e", json.dumps({"gpu_validate_fleet_report": str(report)}))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ANSIBLE_NOCOLOR": "1"}  # each line as it is printed
    waiting = writer.WAITING.format(lock=lock)
    with held(lock):
        # the other slice has read the report (none yet) and holds the lock while it writes
        run = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # a safety net, no synchronisation: a run stuck before its output ends is killed, so the loop below ends
        watchdog = threading.Timer(600, run.kill)
        watchdog.start()
        seen = []
        for line in run.stdout:
            seen.append(line)
            if waiting in line:
                break
        # the run waits for the lock (or, without one, has ended): the other slice writes its rows and lets go
        theirs = fleet.gpu_fleet_report(fleet.gpu_fleet_with_others([THEIRS], ["node-b"], ""))
        Path(f"{report}.json").write_text(json.dumps(theirs, indent=2) + "\n")
    try:
        rest, _ = run.communicate(timeout=600)
    finally:
        watchdog.cancel()
    output = "".join(seen) + rest
    assert run.returncode == 0, output[-4000:]
    written = json.loads(Path(f"{report}.json").read_text())
    assert sorted(node["host"] for node in written["nodes"]) == ["localhost", "node-b"], (
        f"a slice's rows were lost: the report holds {[n['host'] for n in written['nodes']]}"
    )
    page = Path(f"{report}.html").read_text()
    assert "localhost" in page and "node-b" in page and "no driver loaded" in page
    assert waiting in output  # it waited for the other slice, then merged what that slice wrote
    assert f"Fleet report of 2 node(s) (1 fail, 0 warn, 1 ok, 0 without a doctor result): file://{report}.html" in (
        " ".join(output.split())
    )
    assert free(lock)


def test_a_lock_held_too_long_is_refused_naming_the_lock_and_the_fix(tmp_path):
    lock = tmp_path / "gpu-fleet-report.lock"
    waits = []
    with (
        held(lock),
        pytest.raises(AnsibleActionFail) as refused,
        writer.report_lock(str(lock), timeout=0, on_wait=lambda: waits.append(1)),
    ):
        raise AssertionError("the lock was taken while another process held it")
    assert waits == [1]
    message = str(refused.value)
    assert f"another run has held the lock {lock} of the fleet report for 0 s" in message
    assert f"`fuser -v {lock}`" in message and "do not remove the file" in message


def test_the_lock_is_released_after_a_failed_write_which_leaves_no_temporary_file(tmp_path):
    lock = tmp_path / "gpu-fleet-report.lock"
    report = tmp_path / "gpu-fleet-report.json"
    report.write_text("before\n")
    (tmp_path / "gpu-fleet-report.html").mkdir()  # a file cannot replace a directory
    with pytest.raises(OSError), writer.report_lock(str(lock)):
        assert not free(lock)
        writer.write_atomically(str(report), "after\n")
        writer.write_atomically(str(tmp_path / "gpu-fleet-report.html"), "<html>\n")
    assert free(lock)
    assert report.read_text() == "after\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "gpu-fleet-report.html",
        "gpu-fleet-report.json",
        "gpu-fleet-report.lock",
    ]  # no temporary file left


def test_a_write_follows_a_symlink_and_sets_the_mode(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old\n")
    link = tmp_path / "gpu-fleet-report.json"
    link.symlink_to(target)
    writer.write_atomically(str(link), "new\r\n", 0o640)
    assert link.is_symlink() and target.read_bytes() == b"new\r\n"
    assert target.stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize(
    ("files", "problem"),
    [
        ("x", "must be a list"),
        ([{"path": "/a"}], "with path and content"),
        ([{"path": "relative", "content": ""}], "is not absolute"),
    ],
)
def test_files_that_are_not_a_list_of_absolute_paths_are_refused(files, problem):
    assert problem in writer.files_problem(files)
    assert writer.files_problem([{"path": "/a/b.json", "content": "{}"}]) is None
