"""The one line a failed stage of the test command ends with (tests/failure_reason.py): scenario, node, step, reason.

The ansible outputs are real ansible-core 2.19 output (tests/fixtures/logs, one playbook with an ignored failure,
an ignored loop failure and a failing shell task, in the yaml and the json result format)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.failure_reason import ansible_failure, molecule_failure

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
STEP = "WARNING  An error occurred during the test sequence action: '{}'. Cleaning up.\n"
REASON = "no linux-modules-nvidia package can be fetched; tried: x y"


@pytest.mark.parametrize("form", ["yaml", "json"])
def test_a_failed_task_names_the_node_the_task_and_the_last_stderr_line(form):
    output = (LOGS / f"ansible-failed-{form}.log").read_text()
    assert ansible_failure(output) == ("drv-ubuntu2404-signed", "Find the newest thing", REASON)
    line = molecule_failure("nvidia_driver", output + STEP.format("prepare"))
    assert (
        line
        == f"molecule nvidia_driver: prepare failed on drv-ubuntu2404-signed, task 'Find the newest thing': {REASON}"
    )


def test_ignored_failures_are_not_the_reason():
    output = (LOGS / "ansible-failed-yaml.log").read_text()
    ok_run = output.replace("failed=1", "failed=0").split("TASK [Find the newest thing]")[0]
    assert ansible_failure(ok_run + "PLAY RECAP ***\nnode : ok=3 changed=2 unreachable=0 failed=0\n") is None


def test_a_rescued_failure_gives_way_to_the_nodes_last_one_and_the_failed_run_is_the_last():
    rescued = (
        "PLAY [x] ***\n\nTASK [Restart containerd] ***\nfatal: [rc-debian12]: FAILED! => \n    msg: restart failed\n\n"
        "TASK [Roll back] ***\nok: [rc-debian12]\n\nTASK [Fail the node] ***\n"
        "fatal: [rc-debian12]: FAILED! => \n    changed: false\n    msg: containerd refused the config; rolled back\n\n"
        "PLAY RECAP ***\nrc-debian12 : ok=5 changed=1 unreachable=0 failed=1 skipped=0 rescued=1 ignored=0\n"
        "rc-forky : ok=5 changed=1 unreachable=0 failed=0 skipped=0 rescued=0 ignored=0\n\n"
    )
    cleanup = (
        "PLAY [destroy] ***\n\nTASK [Remove] ***\nok: [localhost]\n\nPLAY RECAP ***\nlocalhost : ok=1 failed=0\n\n"
    )
    output = rescued + STEP.format("converge") + cleanup
    assert ansible_failure(output) == ("rc-debian12", "Fail the node", "containerd refused the config; rolled back")
    assert molecule_failure("runtime_config", output).startswith(
        "molecule runtime_config: converge failed on rc-debian12, task 'Fail the node': containerd refused"
    )


def test_idempotence_names_the_tasks_that_changed():
    output = (
        "PLAY RECAP ***\nkl-debian12 : ok=9 changed=1 failed=0\n\n"
        "CRITICAL Idempotence test failed because of the following tasks:\n"
        "* [kl-debian12] => kubelet : Write the kubelet drop-in\n"
        "* [kl-debian13] => kubelet : Restart the kubelet\n" + STEP.format("idempotence")
    )
    assert molecule_failure("kubelet", output) == (
        "molecule kubelet: idempotence failed: tasks changed on the second converge: "
        "kl-debian12: kubelet : Write the kubelet drop-in; kl-debian13: kubelet : Restart the kubelet"
    )


def test_verify_names_the_first_failed_test_and_its_node():
    output = (
        "FAILED molecule/kubelet/tests/test_kubelet.py::test_a_fuse_pod[ansible://kl-debian13] - "
        "AssertionError: ['sh: can't create /proc/sys/kernel/threads-max: Permission denied', 'hello-through-fuse']\n"
        "FAILED molecule/kubelet/tests/test_kubelet.py::test_other[ansible://kl-debian12] - assert 1 == 2\n"
        "==== 2 failed, 56 passed in 80.1s ====\n" + STEP.format("verify")
    )
    assert molecule_failure("kubelet", output) == (
        "molecule kubelet: verify failed on kl-debian13, test_a_fuse_pod: AssertionError: "
        "['sh: can't create /proc/sys/kernel/threads-max: Permission denied', 'hello-through-fuse']"
        " (and 1 more failed tests)"
    )


def test_without_anything_known_the_last_line_is_the_reason_and_long_reasons_are_cut():
    assert molecule_failure("harness", "Traceback ...\nOSError: no space left on device\n") == (
        "molecule harness: an unknown step failed: OSError: no space left on device"
    )
    line = molecule_failure("harness", "x" * 1000 + "\n" + STEP.format("create"))
    assert len(line) <= 400 and line.endswith("...")


def test_without_the_error_line_the_step_molecule_began_last_and_did_not_finish_is_named():
    output = (
        "INFO     [kubelet > prepare] Executing\nINFO     [kubelet > prepare] Executed: Successful\n"
        "INFO     [kubelet > converge] Executing\n" + (LOGS / "ansible-failed-yaml.log").read_text()
    )
    assert molecule_failure("kubelet", output).startswith(
        "molecule kubelet: converge failed on drv-ubuntu2404-signed, task 'Find the newest thing': "
    )
