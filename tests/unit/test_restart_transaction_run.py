"""The shared restart transaction (roles/gpu_node_facts/tasks/restart_transaction.yml and restart_rollback.yml) run
on this machine, as a task and as a handler, with a TEST STAND-IN `systemctl` (each restart takes the next outcome
of a plan: the unit comes up, stays down, or the restart itself fails) and `journalctl`. It puts back a file from
its backup and one from the text read before, removes one it created, and says so; the molecule scenarios run it
against real units (runtime_config, kubelet, installers)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ROOT, run_local_playbook

# TEST STAND-IN for systemctl: `show` says the unit is loaded and active; `restart` takes the next line of plan:
# up / down (the unit's state file says so) or fail (the restart fails); every call is logged.
SYSTEMCTL = """#!/bin/sh
T={tmp}
echo "$*" >> $T/calls
case "$1" in
  show) printf 'LoadState=loaded\\nActiveState=active\\nSubState=running\\n' ;;
  restart)
    outcome=$(head -n 1 $T/plan); sed -i 1d $T/plan
    [ "$outcome" = fail ] && {{ echo "Job for unit.service failed" >&2; exit 1; }}
    echo "$outcome" > $T/state ;;
esac
exit 0
"""
JOURNALCTL = """#!/bin/sh
echo "Started unit."
echo "unit.service: Main process exited"
echo "level=fatal msg=\\"failed to load config: unknown key nvidia_x\\""
"""
CHECK = """
- name: TEST ONLY - look at the unit
  ansible.builtin.command: cat {tmp}/state
  register: test_unit_state
  changed_when: false
  failed_when: false
"""
PLAY = """
- name: The restart transaction
  hosts: localhost
  connection: local
  gather_facts: false
  environment:
    PATH: "{tmp}/bin:/usr/bin:/bin"
  vars:
    role_path: {role}
    test_vars: &transaction
      __restart_unit: unit
      __restart_name: the unit
      __restart_what: config
      __restart_files:
        - {{path: {tmp}/backed-up, existed: true, backup_file: {tmp}/backed-up.1~, owner: "", group: "", mode: ""}}
        - {{path: {tmp}/read, existed: true, content: "as read\\n", owner: root, group: root, mode: "0640"}}
        - {{path: {tmp}/created, existed: false}}
      __restart_check: {tmp}/check.yml
      __restart_came_back: "{{{{ test_unit_state.stdout == 'up' }}}}"
      __restart_reason: >-
        {{{{ __restart_restarted.msg if __restart_restarted is failed else 'the unit is ' ~ test_unit_state.stdout }}}}
      __restart_within: 15
      __restart_journal_shown: 2
      __restart_marker: {tmp}/pending
  tasks:
    - name: TEST ONLY - change
      ansible.builtin.command: "true"
      changed_when: true
      notify: [restart the unit]
      when: {as_handler}
    - name: Restart as a task
      ansible.builtin.include_tasks: {shared}
      vars: *transaction
      when: not {as_handler}
  handlers:
    - name: Restart as a handler
      ansible.builtin.include_tasks: {shared}
      vars: *transaction
      listen: restart the unit
"""


def _run(tmp_path: Path, plan: list[str], as_handler: bool):
    (tmp_path / "bin").mkdir()
    for name, text in {"systemctl": SYSTEMCTL.format(tmp=tmp_path), "journalctl": JOURNALCTL}.items():
        (tmp_path / "bin" / name).write_text(text)
        (tmp_path / "bin" / name).chmod(0o755)
    (tmp_path / "plan").write_text("".join(f"{outcome}\n" for outcome in plan))
    (tmp_path / "state").write_text("up\n")
    (tmp_path / "check.yml").write_text(CHECK.format(tmp=tmp_path))
    (tmp_path / "pending").write_text("{}\n")
    for name, text in {"backed-up": "new\n", "backed-up.1~": "old\n", "read": "new\n", "created": "new\n"}.items():
        (tmp_path / name).write_text(text)
    play = PLAY.format(
        tmp=tmp_path,
        role=ROOT / "roles" / "kubelet",
        shared=ROOT / "roles" / "gpu_node_facts" / "tasks" / "restart_transaction.yml",
        as_handler=json.dumps(as_handler),
    )
    (tmp_path / "play.yml").write_text(play)
    run = run_local_playbook(tmp_path / "play.yml")
    return run, " ".join(run.stdout.split())


def _restarts(tmp_path: Path) -> int:
    return sum(line.startswith("restart") for line in (tmp_path / "calls").read_text().splitlines())


def test_a_unit_that_comes_back_keeps_its_new_files_and_its_pending_marker_goes(tmp_path):
    run, said = _run(tmp_path, ["up"], as_handler=False)
    assert run.returncode == 0, said[-3000:]
    assert _restarts(tmp_path) == 1
    assert (tmp_path / "backed-up").read_text() == (tmp_path / "read").read_text() == "new\n"
    assert (tmp_path / "created").exists() and not (tmp_path / "pending").exists()
    assert "Read why it failed" not in said


def test_a_unit_that_does_not_come_back_gets_its_files_back_and_the_host_fails_saying_so(tmp_path):
    """From a handler, as the kubelet's: a handler runs no rescue, and the transaction needs none."""
    run, said = _run(tmp_path, ["down", "up"], as_handler=True)
    assert run.returncode != 0, said[-3000:]
    assert _restarts(tmp_path) == 2
    assert (tmp_path / "backed-up").read_text() == "old\n"
    assert (tmp_path / "read").read_text() == "as read\n" and oct((tmp_path / "read").stat().st_mode)[-3:] == "640"
    assert not (tmp_path / "created").exists()
    assert not (tmp_path / "pending").exists(), "the unit runs its previous config: nothing is pending"
    assert "Fail the node with why it did not come back: the unit" in said
    assert "The unit did not come back within 15s after its config changed (the unit is down)." in said, said[-3000:]
    assert (
        f"Rolled back: restored {tmp_path}/backed-up from {tmp_path}/backed-up.1~, restored {tmp_path}/read, "
        f"removed {tmp_path}/created, which did not exist before; the unit is running again with its previous config."
    ) in said, said[-3000:]
    # the unit's own lines, without systemd's
    assert 'Its last journal lines before the rollback: ["level=fatal msg=\\"failed to load config' in said, said
    assert "Fix: see `journalctl -u unit` for why the new config was refused" in said


def test_a_failed_restart_is_rolled_back_without_waiting_and_a_unit_still_down_is_said(tmp_path):
    run, said = _run(tmp_path, ["fail", "down"], as_handler=False)
    assert run.returncode != 0, said[-3000:]
    assert _restarts(tmp_path) == 2
    assert "(Unable to restart service unit: Job for unit.service failed)" in said, said[-3000:]
    assert "the unit is STILL NOT RUNNING with its previous config: check it by hand." in said
    assert (tmp_path / "pending").exists(), "a unit that runs nothing known keeps its pending restart"
    assert (tmp_path / "backed-up").read_text() == "old\n"
