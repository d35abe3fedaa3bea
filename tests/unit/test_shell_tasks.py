"""Shell tasks of the roles fail when a command inside them fails, also inside `$( ... )`.

`set -e` does not reach into a command substitution: bash runs it in a subshell with errexit off, so in
`facts=$( a; b; c )` a failing `a` is ignored and the task goes on with half the facts. Every shell task in
roles/ that collects values with `$( ... )` therefore runs bash with `set -euo pipefail` and
`shopt -s inherit_errexit`. The doctor's containerd check, once such a script, now runs in the node-side
module gpu_validate_checks; the second test keeps what the script guaranteed: when `systemctl show
containerd` fails, the doctor says the check failed, instead of reporting a start time that is merely
"unknown".
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import run_local_playbook

ROOT = Path(__file__).resolve().parents[2]
PREAMBLE = ["set -euo pipefail", "shopt -s inherit_errexit"]


def _shell_tasks():
    for path in sorted((ROOT / "roles").glob("*/tasks/*.yml")):
        for task in yaml.safe_load(path.read_text()) or []:
            for item in [task, *task.get("block", []), *task.get("rescue", []), *task.get("always", [])]:
                script = item.get("ansible.builtin.shell")
                if script is not None:
                    yield f"{path.relative_to(ROOT)}: {item.get('name')}", item, script


SHELL_TASKS = list(_shell_tasks())


def test_the_roles_have_shell_tasks_to_check():
    # runtime_config's health and preflight scripts (and more); the doctor has none since its checks are Python
    assert len(SHELL_TASKS) >= 3, [name for name, _, _ in SHELL_TASKS]


@pytest.mark.parametrize(("name", "task", "script"), SHELL_TASKS, ids=[name for name, _, _ in SHELL_TASKS])
def test_a_shell_task_that_collects_values_fails_on_a_failure_inside_them(name, task, script):
    executable = (task.get("args") or {}).get("executable")
    if isinstance(script, dict):
        executable = script.get("executable", executable)
        script = script.get("cmd", "")
    lines = [line.strip() for line in script.splitlines() if line.strip()]
    assert lines[:1] == PREAMBLE[:1], f"{name}: the script must start with `set -euo pipefail`"
    if "$(" in script:
        assert lines[:2] == PREAMBLE, f"{name}: collects values with $( ... ): add `shopt -s inherit_errexit`"
        assert executable == "/bin/bash", f"{name}: inherit_errexit needs bash"


FAKES = {
    "ctr": '#!/bin/sh\necho "io.containerd.grpc.v1   cri   linux/amd64   ok"\n',
    "containerd": "#!/bin/sh\nprintf 'version = 2\\n'\n",
    # the mutation: systemd cannot be asked for containerd's start time
    "systemctl": "#!/bin/sh\necho 'Failed to connect to bus: No such file or directory' >&2\nexit 1\n",
}

PLAY = """
- name: The doctor's containerd check when a command inside its $( ... ) fails
  hosts: localhost
  connection: local
  gather_facts: false
  environment:
    PATH: "{tmp}/bin:/usr/bin:/bin"
  tasks:
    - name: Give the node facts the role's gpu_node_facts dependency reads, and the runtime to check
      ansible.builtin.set_fact:
        __gpu_validate_runtimes: [containerd]
        __gpu_validate_node:
          runtimes:
            containerd: {{installed: true, running: true, binary: "{tmp}/bin/containerd"}}
    - name: Run containerd's checks
      ansible.builtin.include_role:
        name: gpu_validate
        tasks_from: checks.yml
      vars:
        __gpu_validate_families: [containerd]
        # the Debian platform data (vars/Debian.yml), which tasks/set_vars.yml loads in a run of the role
        __gpu_validate_package_version_argv: [dpkg-query, --show, "--showformat=${{Version}}"]
        __gpu_node_facts_apparmor_os: true
        __gpu_node_facts_kubelet_env_file_default: /etc/default/kubelet
    - name: Write the result
      ansible.builtin.copy:
        content: "{{{{ gpu_validate_results | to_json }}}}"
        dest: "{tmp}/result.json"
        mode: "0644"
"""


def test_a_failure_inside_the_doctors_command_substitution_fails_the_check(tmp_path):
    (tmp_path / "bin").mkdir()
    for name, text in FAKES.items():
        (tmp_path / "bin" / name).write_text(text)
        (tmp_path / "bin" / name).chmod(0o755)
    (tmp_path / "playbook.yml").write_text(PLAY.format(tmp=tmp_path))
    run = run_local_playbook(tmp_path / "playbook.yml")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    checks = {c["check"]: c for c in yaml.safe_load((tmp_path / "result.json").read_text())}
    cri = checks["containerd: CRI plugin"]
    # without inherit_errexit: "ok", and "running config" only warns that the start time is unknown
    assert cri["status"] == "fail", checks
    assert cri["detail"].startswith("the check failed: Failed to connect to bus"), cri
