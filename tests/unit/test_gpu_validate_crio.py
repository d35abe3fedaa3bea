"""The doctor's CRI-O rows and CRI-O's isolation row (plugins/module_utils/gpu_validate/crio.py).

Each check is a function of its inputs (parameters, node facts, command results, files); the tables give each
row a passing case and the failing cases. FakeNode (conftest.py) answers the commands and file reads."""

from __future__ import annotations

import pytest
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.containers import SYS_ADMIN_NOTE
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.crio import (
    CRIO_ENDPOINT,
    crio_container_rows,
    crio_rows,
    crio_state,
    crio_sys_admin_row,
)
from conftest import GPU_NODE, NO_GPU, FakeNode, load_module, node, params, row
from test_gpu_validate_driver import CTK

checks = load_module("gpu_validate_checks")


# ---- crio -------------------------------------------------------------------------------------------------

CRIO_DUMP = (
    '[crio.runtime]\ndefault_runtime = "{default}"\n[crio.runtime.runtimes.runc]\nruntime_path = ""\n'
    '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\n'
)
CRIO_NO_NVIDIA = '[crio.runtime]\ndefault_runtime = "crun"\n[crio.runtime.runtimes.crun]\nruntime_path = ""\n'
DEFAULT_DETAIL = (
    "default_runtime is nvidia (/usr/bin/nvidia-container-runtime): every pod whose image sets NVIDIA_VISIBLE_DEVICES"
    " (all CUDA images do) can get GPUs, also pods that request none"
)


@pytest.mark.parametrize(
    ("p", "facts", "dump", "toolkit", "expected"),
    [
        (
            {},
            GPU_NODE,
            (0, CRIO_DUMP.format(default="runc"), 'time="now" level=info msg="Starting CRI-O"'),
            True,
            [
                row("crio: nvidia runtime", "ok", "crio.runtime.runtimes.nvidia in the effective configuration"),
                row("crio: default runtime", "ok", "runc (nvidia is not the default)"),
            ],
        ),
        (
            {},
            GPU_NODE,
            (0, CRIO_DUMP.format(default="nvidia"), ""),
            True,
            [
                row("crio: nvidia runtime", "ok", "crio.runtime.runtimes.nvidia in the effective configuration"),
                row(
                    "crio: default runtime",
                    "fail",
                    DEFAULT_DETAIL,
                    "Set nvidia_container_toolkit_set_as_default: false and run site.yml --tags runtime",
                ),
            ],
        ),
        (
            {"nvidia_default_allowed": True},
            GPU_NODE,
            (0, CRIO_DUMP.format(default="nvidia"), ""),
            True,
            [
                row("crio: nvidia runtime", "ok", "crio.runtime.runtimes.nvidia in the effective configuration"),
                row(
                    "crio: default runtime",
                    "warn",
                    DEFAULT_DETAIL,
                    "Intended (nvidia_container_toolkit_set_as_default): give GPU pods devices through CDI",
                ),
            ],
        ),
        (
            {},
            NO_GPU,
            (0, CRIO_NO_NVIDIA, ""),
            True,  # the toolkit is installed: the runtime must be registered even without a GPU
            [
                row(
                    "crio: nvidia runtime",
                    "fail",
                    "no crio.runtime.runtimes.nvidia (runtimes: crun)",
                    "Run site.yml --tags runtime",
                ),
                row("crio: default runtime", "ok", "crun (nvidia is not the default)"),
            ],
        ),
        (
            {},
            NO_GPU,
            (0, CRIO_NO_NVIDIA, ""),
            False,
            [
                row("crio: nvidia runtime", "skipped", "no GPU (and no toolkit installed)"),
                row("crio: default runtime", "ok", "crun (nvidia is not the default)"),
            ],
        ),
        (
            {},
            GPU_NODE,
            (1, "", 'level=fatal msg="validating runtime config: invalid runtime_path"\n'),
            True,
            [
                row(
                    "crio: nvidia runtime",
                    "fail",
                    'crio config failed: level=fatal msg="validating runtime config: invalid runtime_path"',
                    "Fix the CRI-O configuration (crio config names the problem)",
                ),
                row("crio: default runtime", "skipped", "crio config failed"),
            ],
        ),
    ],
)
def test_crio(p, facts, dump, toolkit, expected):
    assert crio_rows(params(**p), facts, dump, toolkit) == expected


def test_the_crio_family_asks_the_crio_binary_of_the_facts_and_knows_the_toolkit_of_the_same_run():
    facts = node(runtimes={"crio": {"installed": True, "binary": "/usr/local/bin/crio"}}, has_gpu=False)
    fake = FakeNode(
        commands={("/usr/local/bin/crio", "config"): (0, CRIO_NO_NVIDIA, ""), ("nvidia-ctk", "--version"): CTK}
    )
    result = checks.run_checks(params(families=["crio", "toolkit"], runtimes=["crio"], node=facts), fake)
    assert [r["status"] for r in result["checks"]] == ["ok", "fail", "ok"]  # toolkit, then crio's two rows
    assert fake.ran[-1] == ["/usr/local/bin/crio", "config"]


# ---- crio on a running CRI-O (issue 24 item 3) --------------------------------------------------------------

CRIO_LIVE = '[crio.runtime]\ncgroup_manager = "cgroupfs"\ndefault_runtime = "{default}"\n' + (
    '[crio.runtime.runtimes.runc]\nruntime_path = "/usr/sbin/runc"\n'
    '[crio.runtime.runtimes.{handler}]\nruntime_path = "/usr/bin/nvidia-container-runtime"\n'
)
CRICTL_READY = (
    '{"status": {"conditions": [{"type": "RuntimeReady", "status": true}, {"type": "NetworkReady", "status": true}]}}'
)
CRICTL_NOT_READY = '{"status": {"conditions": [{"type": "RuntimeReady", "status": false}]}}'
CRICTL_NO_NETWORK = (
    '{"status": {"conditions": [{"type": "RuntimeReady", "status": true}, {"type": "NetworkReady", "status": false,'
    ' "reason": "NetworkPluginNotReady", "message": "No CNI configuration file in /etc/cni/net.d/"}]}}'
)
CRICTL = ["/usr/bin/crictl", "--runtime-endpoint", CRIO_ENDPOINT]


def _crio_node(live, info=(0, CRICTL_READY, ""), image=True):
    return FakeNode(
        commands={
            ("crio", "config"): (0, CRIO_DUMP.format(default="runc"), ""),
            ("crio", "status", "config"): live,
            (*CRICTL, "info"): info,
            ("/usr/bin/crictl", "--image-endpoint", CRIO_ENDPOINT, "inspecti", "busybox"): (
                0 if image else 1,
                "",
                "",
            ),
        },
        which=["crictl"],
    )


def _crio_rows(fake, **p):
    facts = node(runtimes={"crio": {"installed": True, "running": True}}, has_gpu=False)
    c = crio_state(params(crio_test_image="busybox", **p), facts, fake)
    return {r["check"]: r for r in crio_rows(params(**p), facts, c["dump"], True, c)}, c


def test_crio_rows_of_a_running_crio_read_the_daemon_and_its_cri():
    rows, c = _crio_rows(_crio_node((0, CRIO_LIVE.format(default="runc", handler="nvidia"), "")))
    assert c["cgroup_parent"] == "/gpu_validate"  # CRI-O runs cgroupfs: no systemd slice as a pod's parent
    assert rows["crio: CRI"] == row(
        "crio: CRI", "ok", "crictl info: RuntimeReady and NetworkReady (the kubelet can run pods)"
    )
    live = (0, CRIO_LIVE.format(default="runc", handler="nvidia"), "")
    rows, _c = _crio_rows(_crio_node(live, info=(0, CRICTL_NO_NETWORK, "")))
    assert rows["crio: CRI"]["status"] == "fail"
    assert "NetworkReady is false (NetworkPluginNotReady No CNI configuration file" in rows["crio: CRI"]["detail"]
    assert rows["crio: running config"]["status"] == "ok"
    assert rows["crio: default runtime"]["status"] == "ok"


def test_crio_rows_fail_a_cri_that_is_not_ready_and_a_handler_the_running_daemon_lacks():
    live = (0, CRIO_LIVE.format(default="runc", handler="crun"), "")
    rows, _c = _crio_rows(_crio_node(live, info=(0, CRICTL_NOT_READY, "")))
    assert rows["crio: CRI"]["status"] == "fail" and "not RuntimeReady" in rows["crio: CRI"]["detail"]
    live_row = rows["crio: running config"]
    assert live_row["status"] == "fail" and "the running CRI-O has no nvidia runtime handler" in live_row["detail"]
    rows, _c = _crio_rows(_crio_node((1, "", "connection refused"), info=(1, "", "connection refused")))
    assert rows["crio: CRI"]["status"] == "fail"
    assert rows["crio: running config"] == row(
        "crio: running config", "fail", "crio status config failed: connection refused", "journalctl -u crio"
    )


def test_crio_default_runtime_row_reads_the_running_daemon():
    rows, _c = _crio_rows(_crio_node((0, CRIO_LIVE.format(default="nvidia", handler="nvidia"), "")))
    assert rows["crio: default runtime"]["status"] == "fail"
    # NVIDIA's runtime under another name, the default of the running daemon only (files say runc): judged by its
    # binary (issue 37)
    rows, _c = _crio_rows(_crio_node((0, CRIO_LIVE.format(default="nvidia-cdi", handler="nvidia-cdi"), "")))
    row = rows["crio: default runtime"]
    assert row["status"] == "fail", row
    assert "nvidia-cdi (/usr/bin/nvidia-container-runtime)" in row["detail"]


def test_crio_sys_admin_row_fails_when_the_default_handler_hands_out_gpus():
    c = {"running": True, "crictl": "/usr/bin/crictl", "image": True, "live": {"default": "nvidia"}, "default": "runc"}
    gpu = node(has_gpu=True)
    p = params(crio_test_image="busybox")
    ok = crio_sys_admin_row(p, gpu, {**c, "live": {"default": "runc"}}, (0, "0", ""))
    assert ok["status"] == "ok" and "through CRI-O's default runtime runc: no /dev/nvidia* device" in ok["detail"]
    assert ok["detail"].endswith(SYS_ADMIN_NOTE), ok  # what NVIDIA's runtime makes of CAP_SYS_ADMIN
    bad = crio_sys_admin_row(p, gpu, c, (0, "2", ""))
    assert bad["status"] == "fail"
    assert "through CRI-O's default runtime nvidia sees 2 /dev/nvidia* devices" in bad["detail"]
    assert crio_sys_admin_row(p, node(has_gpu=False), c, None)["status"] == "skipped"
    assert crio_sys_admin_row(params(), gpu, c, None)["status"] == "skipped"
    assert crio_sys_admin_row(p, gpu, c, (1, "", "boom"))["status"] == "fail"


def test_crio_container_row_fails_a_pod_through_nvidia_that_does_not_run():
    c = {"running": True, "crictl": "/usr/bin/crictl", "image": True, "live": {"runtimes": ["runc", "nvidia"]}}
    p = params(crio_test_image="busybox")
    rows = crio_container_rows(p, node(has_gpu=False), c, (1, "", "runc create failed"), None)
    assert rows[0]["check"] == "crio: container via nvidia" and rows[0]["status"] == "fail", rows
    assert crio_container_rows(p, node(has_gpu=False), c, (0, "", ""), None)[0]["status"] == "ok"
    missing = crio_container_rows(p, node(has_gpu=False), {**c, "image": False}, None, None)[0]
    assert missing["status"] == "warn"
