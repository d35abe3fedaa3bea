"""plugins/modules/gpu_validate_checks.py, the doctor's node-side module: the families in the doctor's order, the real
runner, the module itself, and the isolation family's "device plugin vs node" row.

Each check is a function of its inputs (parameters, node facts, command results, files); the tables give each
row a passing case and the failing cases. FakeNode (conftest.py) answers the commands and file reads."""

from __future__ import annotations

import hashlib
import os
import sys

import pytest
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.containers import device_plugin_row
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import Node
from conftest import GPU_NODE, NO_GPU, FakeNode, load_module, params, shared_doctor_params
from test_gpu_validate_driver import REBOOT
from test_gpu_validate_fuse import AA, SECCOMP
from test_gpu_validate_kubelet import DROPIN, ENV, KC, WITH_CONFIG_DIR

checks = load_module("gpu_validate_checks")


# ---- the module --------------------------------------------------------------------------------------------


def test_rows_come_in_the_doctors_order_whatever_the_order_asked():
    fake = FakeNode(devices=["/dev/fuse"], files={DROPIN: "", ENV: WITH_CONFIG_DIR, SECCOMP: "{}"})
    families = ["kubelet", "confinement", "fuse", "cdi", "security", "toolkit", "driver"]
    result = checks.run_checks(params(families=families, node=NO_GPU), fake)
    assert [r["check"] for r in result["checks"]] == [
        "NVIDIA driver",
        "nvidia-smi",
        REBOOT,
        "nvidia-peermem",
        "container toolkit",
        "CDI spec",
        "/dev/fuse",
        AA,
        "seccomp profile fuse",
        "FUSE confinement",
        KC,
    ]
    assert result["toolkit_installed"] is False
    assert checks.run_checks(params(families=["fuse"], node=GPU_NODE), fake)["toolkit_installed"] is None


def test_a_gpu_can_be_pretended_over_the_facts():
    result = checks.run_checks(params(families=["driver"], node=NO_GPU, has_gpu=True), FakeNode())
    assert result["checks"][0]["detail"] == "not loaded on a node with 0 GPU(s)"
    result = checks.run_checks(params(families=["driver"], node=GPU_NODE, has_gpu=False), FakeNode())
    assert result["checks"][0]["status"] == "skipped"


def test_the_real_runner_turns_a_missing_command_and_a_timeout_into_a_result():
    io = Node(timeout=1)
    rc, _out, err = io.run(["/nonexistent/nvidia-smi"])
    assert rc == 2 and "No such file" in err
    rc, _out, err = io.run([sys.executable, "-c", "import time; time.sleep(5)"])
    assert rc == 124 and "did not answer in 1 s" in err
    # a command that answers: a timeout no loaded machine reaches (Python's start alone can take a second there)
    assert Node(timeout=120).run([sys.executable, "-c", "print('a'); import sys; sys.exit(3)"]) == (3, "a", "")


def test_the_module_returns_the_rows_in_check_mode_too(module_runner, tmp_path):
    (tmp_path / "fuse.json").write_text("{}")
    args = {
        "families": ["fuse", "security"],
        "node": GPU_NODE,
        "fuse_device": "/dev/null",
        "apparmor_os": False,
        **shared_doctor_params(),
        "seccomp_root": str(tmp_path / "root"),
    }
    result = module_runner(checks, args, check_mode=True)
    assert not result.failed and result.result["changed"] is False
    assert [r["status"] for r in result.result["checks"]] == ["ok", "skipped", "fail"]


def test_the_module_returns_the_state_of_the_report_files(module_runner, tmp_path):
    """The role rewrites validate.txt/json only when one differs (tasks/report.yml): the module reads them."""
    (tmp_path / "validate.txt").write_text("table\n")
    (tmp_path / "validate.txt").chmod(0o640)
    (tmp_path / "a-directory").mkdir()
    args = {
        "families": [],
        "node": NO_GPU,
        **shared_doctor_params(),
        "report_files": [str(tmp_path / name) for name in ("validate.txt", "validate.json", "a-directory")],
    }
    result = module_runner(checks, args, check_mode=True)
    files = result.result["report_files"]
    assert files[str(tmp_path / "validate.txt")] == {
        "sha1": hashlib.sha1(b"table\n").hexdigest(),
        "mode": "0640",
        "uid": os.getuid(),
        "gid": os.getgid(),
    }
    assert files[str(tmp_path / "validate.json")] is None and files[str(tmp_path / "a-directory")] is None


# ---- device plugin vs node (issue 25) ------------------------------------------------------------------------

DP_ENVVAR = {
    "running": True,
    "present": True,
    "pids": [7],
    "strategies": ["envvar"],
    "source": "env",
    "sockets": ["/var/lib/kubelet/device-plugins/nvidia-gpu.sock"],
    "managed_by": "standalone",
}
TK_UPSTREAM = {"accept_envvar_when_unprivileged_effective": True, "accept_volume_mounts_effective": False}
TK_HARDENED = {"accept_envvar_when_unprivileged_effective": False, "accept_volume_mounts_effective": True}


@pytest.mark.parametrize(
    ("plugin", "defaults", "toolkit", "status"),
    [
        ({"present": False}, {"containerd": {"default": "runc", "cdi": True}}, TK_HARDENED, "skipped"),
        (dict(DP_ENVVAR, strategies=["cdi-cri"]), {"containerd": {"default": "runc", "cdi": True}}, TK_HARDENED, "ok"),
        # mutation: the plugin back on envvar after the node was isolated
        (DP_ENVVAR, {"containerd": {"default": "runc", "cdi": True}}, TK_HARDENED, "fail"),
        # mutation: CDI turned off under a cdi-cri plugin
        (
            dict(DP_ENVVAR, strategies=["cdi-cri"]),
            {"containerd": {"default": "runc", "cdi": False}},
            TK_HARDENED,
            "fail",
        ),
        # kept semantics: works, and leaks GPUs to pods that request none
        (DP_ENVVAR, {"containerd": {"default": "nvidia", "cdi": False}}, TK_UPSTREAM, "warn"),
        # a runtime the doctor was not asked about does not count
        (DP_ENVVAR, {"docker": {"default": "nvidia", "cdi": False}}, TK_UPSTREAM, "fail"),
    ],
)
def test_device_plugin_row(plugin, defaults, toolkit, status):
    node = {"device_plugin": plugin, "runtime_defaults": defaults, "toolkit_config": toolkit, "gpu_workloads": []}
    row = device_plugin_row({"runtimes": ["containerd"], "runtime_name": "nvidia"}, node)
    assert row["check"] == "device plugin vs node"
    assert row["status"] == status, row


def test_device_plugin_row_of_facts_without_the_keys_is_skipped():
    row = device_plugin_row({"runtimes": ["containerd"], "runtime_name": "nvidia"}, {})
    assert row["status"] == "skipped"
