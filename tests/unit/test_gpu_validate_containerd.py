"""The doctor's containerd rows and containerd's isolation row (plugins/module_utils/gpu_validate/containerd.py).

Each check is a function of its inputs (parameters, node facts, command results, files); the tables give each
row a passing case and the failing cases. FakeNode (conftest.py) answers the commands and file reads."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.containerd import (
    check_containerd,
    check_containerd_isolation,
    containerd_rows,
    containerd_state,
    containerd_sys_admin_row,
    cri_plugins,
    crictl_facts,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.containers import (
    COUNT_DEVICES,
    SYS_ADMIN_NOTE,
)
from conftest import GPU_NODE, NO_GPU, FakeNode, node, params, row
from test_gpu_validate_docker import ZERO, _with

# ---- containerd -------------------------------------------------------------------------------------------

PLUGINS_OK = (
    "TYPE                                  ID                       PLATFORMS      STATUS\n"
    "io.containerd.runtime.v2              task                     linux/amd64    ok\n"
    "io.containerd.grpc.v1                 cri                      linux/amd64    ok\n"
)


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ((0, PLUGINS_OK, ""), {"cri": "ok"}),
        (
            (0, PLUGINS_OK.replace("linux/amd64    ok\n", "linux/amd64    error\n"), ""),
            {"cri": "error", "cri_detail": "io.containerd.grpc.v1/cri=error"},
        ),
        (
            (
                0,
                "TYPE ID PLATFORMS STATUS\nio.containerd.cri.v1 images - skip\nio.containerd.cri.v1 runtime - ok\n",
                "",
            ),
            {"cri": "error", "cri_detail": "io.containerd.cri.v1/images=skip"},
        ),
        (
            (0, "TYPE ID PLATFORMS STATUS\nio.containerd.runtime.v2 task linux/amd64 ok\n", ""),
            {"cri": "error", "cri_detail": "no CRI plugin listed"},
        ),
        (
            (1, "", "ctr: failed to dial\nconnection refused"),
            {"cri": "unreachable", "cri_detail": "connection refused"},
        ),
    ],
)
def test_cri_plugins(result, expected):
    assert cri_plugins(result) == expected


def test_crictl_facts():
    info = json.dumps(
        {
            "status": {"conditions": [{"type": "RuntimeReady", "status": True}]},
            "config": {"containerd": {"runtimes": {"nvidia": {}}}},
        }
    )
    assert crictl_facts((0, info, ""), "nvidia") == {"crictl_ready": "yes", "crictl_handler": "yes"}
    assert crictl_facts((0, "{}", ""), "nvidia") == {"crictl_ready": "no", "crictl_handler": "no"}
    assert crictl_facts((1, "", "connect: no such file"), "nvidia") == {}
    assert crictl_facts((0, "not json", ""), "nvidia") == {}
    assert crictl_facts(None, "nvidia") == {}


CTRD = {
    "ok": True,
    "error": "",
    "runtimes": ["nvidia", "runc"],
    "default": "runc",
    "default_entry": {"runtime_type": "io.containerd.runc.v2", "binary": ""},
    "registered": True,
    "running": True,
    "image": True,
    "cri": {"cri": "ok", "started": "1700000100.000000", "written": "1700000050.000000000", "written_file": ""},
    "id": "gpu-validate-x",
    "versions": {
        "root": "/etc/containerd/config.toml",
        "files": [("/etc/containerd/config.toml", 2)],
        "unreadable": [],
    },
}
CIMG = {"containerd_test_image": "docker.io/library/busybox:latest"}
C_CRI, C_REG, C_LIVE, C_DEF = (
    "containerd: CRI plugin",
    "containerd: nvidia runtime",
    "containerd: running config",
    "containerd: default runtime",
)
C_RUN, C_ISO = "containerd: container via nvidia", "containerd: GPU isolation (nvidia)"
C_VER = "containerd: drop-in versions"
VERSIONS_OK = row(C_VER, "ok", "/etc/containerd/config.toml: version 2, imports no file")
CONTAINERD_OK = [
    row(C_CRI, "ok", "ctr plugins ls: cri ok (the kubelet can run pods)"),
    row(C_REG, "ok", "runtimes.nvidia in the effective configuration"),
    row(C_LIVE, "ok", "containerd started after its config files were last written"),
    row(C_DEF, "ok", "runc (nvidia is not the default)"),
    VERSIONS_OK,
    row(C_RUN, "ok", "ctr run --runc-binary /usr/bin/nvidia-container-runtime docker.io/library/busybox:latest true"),
    row(C_ISO, "ok", "NVIDIA_VISIBLE_DEVICES=all, no GPU requested: no /dev/nvidia* device"),
]
RESTART = (
    "Restart containerd (systemctl restart containerd), or rerun site.yml --tags runtime: it finishes"
    " a restart an interrupted run left pending"
)
NOT_RUNNING = ("containerd is not running", "Start containerd (systemctl start containerd)")


@pytest.mark.parametrize(
    ("p", "facts", "c", "run", "isolation", "expected"),
    [
        (CIMG, GPU_NODE, CTRD, ZERO, ZERO, CONTAINERD_OK),
        (
            CIMG,
            GPU_NODE,
            {**CTRD, "cri": {**CTRD["cri"], "crictl_ready": "yes", "crictl_handler": "yes"}},
            ZERO,
            (0, "4", ""),
            _with(
                CONTAINERD_OK,
                **{
                    C_CRI: row(C_CRI, "ok", "crictl info: RuntimeReady (the kubelet can run pods)"),
                    C_LIVE: row(
                        C_LIVE,
                        "ok",
                        "crictl info lists the nvidia handler; containerd started after its config files were last"
                        " written",
                    ),
                    C_ISO: row(
                        C_ISO,
                        "fail",
                        "NVIDIA_VISIBLE_DEVICES=all, no GPU requested: 4 /dev/nvidia* devices visible",
                        "Set nvidia_container_toolkit_accept_envvar_when_unprivileged: false,"
                        " run site.yml --tags toolkit",
                    ),
                },
            ),
        ),
        (
            CIMG,
            GPU_NODE,
            {
                **CTRD,
                "default": "nvidia",
                "cri": {
                    "cri": "error",
                    "cri_detail": "io.containerd.grpc.v1/cri=error",
                    "started": "1700000100.000000",
                    "written": "1700000200.000000000",
                    "written_file": "/etc/containerd/conf.d/99-nvidia.toml",
                    "crictl_ready": "no",
                },
            },
            (124, "", ""),
            (1, "", "ctr: failed to create shim task"),
            [
                row(C_CRI, "fail", "crictl info: the runtime is not RuntimeReady"),
                row(C_REG, "ok", "runtimes.nvidia in the effective configuration"),
                row(
                    C_LIVE,
                    "warn",
                    "/etc/containerd/conf.d/99-nvidia.toml was written after containerd started: the running daemon"
                    " does not run what the file says",
                    RESTART,
                ),
                row(
                    C_DEF,
                    "fail",
                    "default_runtime_name is nvidia: every pod whose image sets NVIDIA_VISIBLE_DEVICES (all CUDA"
                    " images do) can get GPUs, also pods that request none",
                    "Set nvidia_container_toolkit_set_as_default: false and run site.yml --tags runtime",
                ),
                VERSIONS_OK,
                row(
                    C_RUN, "fail", "no answer within 120 s", "Look for a hanging runtime hook: journalctl -u containerd"
                ),
                row(
                    C_ISO,
                    "fail",
                    "the container did not run: exit code 1 ctr: failed to create shim task",
                    "Read the error; the test image needs sh, ls and wc",
                ),
            ],
        ),
        (
            CIMG,
            GPU_NODE,
            {**CTRD, "cri": {"cri": "error", "cri_detail": "io.containerd.grpc.v1/cri=error", "crictl_handler": "no"}},
            (1, "", "ctr: runc did not terminate successfully"),
            ZERO,
            _with(
                CONTAINERD_OK,
                **{
                    C_CRI: row(
                        C_CRI,
                        "fail",
                        "containerd runs but its CRI plugin did not load, so the kubelet can run no pod:"
                        " io.containerd.grpc.v1/cri=error",
                        "journalctl -u containerd | grep 'failed to load plugin' names the config problem"
                        " (e.g. default_runtime_name naming a runtime that is not configured); fix it and restart"
                        " containerd, or run site.yml --tags runtime",
                    ),
                    C_LIVE: row(
                        C_LIVE, "fail", "crictl info: the running containerd has no nvidia runtime handler", RESTART
                    ),
                    C_RUN: row(
                        C_RUN,
                        "fail",
                        "exit code 1: ctr: runc did not terminate successfully",
                        "Read the error; check /etc/nvidia-container-runtime/config.toml and"
                        " gpu_validate_containerd_run_options",
                    ),
                },
            ),
        ),
        (
            CIMG,
            GPU_NODE,
            {**CTRD, "cri": {"cri": "unreachable", "cri_detail": "connection refused"}, "image": False},
            None,
            None,
            _with(
                CONTAINERD_OK,
                **{
                    C_CRI: row(C_CRI, "fail", "ctr cannot reach containerd: connection refused"),
                    C_LIVE: row(C_LIVE, "warn", "the start time of containerd is unknown"),
                    C_RUN: row(
                        C_RUN,
                        "warn",
                        "image docker.io/library/busybox:latest is not in ctr namespace default (never pulled)",
                        "ctr -n default images pull (or import) docker.io/library/busybox:latest, or name an image the"
                        " node has",
                    ),
                    C_ISO: row(
                        C_ISO,
                        "warn",
                        "image docker.io/library/busybox:latest is not in ctr namespace default",
                        "Pull or import the image into that namespace (it needs sh, ls and wc)",
                    ),
                },
            ),
        ),
        (
            CIMG,
            GPU_NODE,
            {**CTRD, "running": False, "cri": {}, "image": False},
            None,
            None,
            _with(
                CONTAINERD_OK,
                **{
                    C_CRI: row(C_CRI, "warn", *NOT_RUNNING),
                    C_LIVE: row(C_LIVE, "warn", "containerd is not running"),
                    C_RUN: row(C_RUN, "warn", *NOT_RUNNING),
                    C_ISO: row(C_ISO, "warn", *NOT_RUNNING),
                },
            ),
        ),
        (
            {},
            NO_GPU,
            {**CTRD, "ok": False, "error": "failed to load TOML", "runtimes": [], "registered": False, "default": ""},
            None,
            None,
            _with(
                CONTAINERD_OK,
                **{
                    C_REG: row(
                        C_REG,
                        "fail",
                        "containerd config dump failed: failed to load TOML",
                        "Fix /etc/containerd/config.toml (containerd config dump names the problem)",
                    ),
                    C_DEF: row(C_DEF, "skipped", "containerd config dump failed"),
                    C_RUN: row(C_RUN, "skipped", "no test image (gpu_validate_containerd_test_image)"),
                    C_ISO: row(C_ISO, "skipped", "no GPU"),
                },
            ),
        ),
        (
            CIMG,
            NO_GPU,
            {**CTRD, "runtimes": ["runc"], "registered": False},
            None,
            None,
            _with(
                CONTAINERD_OK,
                **{
                    C_REG: row(C_REG, "skipped", "no GPU (and no toolkit installed)"),
                    C_RUN: row(C_RUN, "skipped", "the nvidia runtime is not registered"),
                    C_ISO: row(C_ISO, "skipped", "no GPU"),
                },
            ),
        ),
    ],
)
def test_containerd_rows(p, facts, c, run, isolation, expected):
    assert containerd_rows(params(**p), facts, c, run, isolation, toolkit_installed=False) == expected


def test_containerd_without_the_nvidia_runtime_fails_where_the_toolkit_is_installed():
    c = {**CTRD, "runtimes": ["runc"], "registered": False}
    rows = containerd_rows(params(), NO_GPU, c, None, None, toolkit_installed=True)
    assert rows[1] == row(
        C_REG, "fail", "no runtimes.nvidia in containerd config dump (runtimes: runc)", "Run site.yml --tags runtime"
    )


CONTAINERD_DUMP = (
    "version = 2\n"
    '[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "runc"\n'
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n'
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n  runtime_type = "io.containerd.runc.v2"\n'
    '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
    '    BinaryName = "/usr/bin/nvidia-container-runtime"\n'
)
SYSTEMCTL = ("systemctl", "show", "containerd", "-p", "ExecMainStartTimestampMonotonic", "--value")


def test_the_containerd_family_asks_the_running_daemon_and_compares_its_start_with_the_config_files():
    facts = node(runtimes={"containerd": {"installed": True, "running": True, "binary": "/usr/bin/containerd"}})
    fake = FakeNode(
        commands={
            ("/usr/bin/containerd", "config", "dump"): (0, CONTAINERD_DUMP, ""),
            ("ctr", "plugins", "ls"): (0, PLUGINS_OK, ""),
            SYSTEMCTL: (0, "100000000", ""),  # 100 s after boot: 1_700_000_100
            ("ctr", "--namespace", "default", "images", "ls", "--quiet"): (0, "docker.io/library/busybox:latest", ""),
        },
        mtimes={
            "/etc/containerd/config.toml": 1_700_000_050.0,
            "/etc/containerd/conf.d/99-nvidia.toml": 1_700_000_150.0,
        },
    )
    c = containerd_state(params(**CIMG), facts, fake)
    assert c["cri"] == {
        "cri": "ok",
        "started": "1700000100.000000",
        "written": "1700000150.000000000",
        "written_file": "/etc/containerd/conf.d/99-nvidia.toml",
    }
    assert (c["ok"], c["registered"], c["image"], c["default"]) == (True, True, True, "runc")
    assert c["id"].startswith("gpu-validate-") and len(c["id"]) == len("gpu-validate-") + 12
    rows = containerd_rows(params(**CIMG), facts, c, ZERO, ZERO, False)
    assert rows[2]["status"] == "warn" and rows[2]["detail"].startswith("/etc/containerd/conf.d/99-nvidia.toml was")
    # the newest file counts, whichever comes first
    fake.mtimes["/etc/containerd/config.toml"] = 1_700_000_160.0
    assert containerd_state(params(**CIMG), facts, fake)["cri"]["written_file"] == "/etc/containerd/config.toml"
    # a systemd that cannot say when containerd started: the CRI row says the check failed, the start is unknown
    fake.commands[SYSTEMCTL] = (1, "", "Failed to connect to bus: No such file or directory")
    c = containerd_state(params(**CIMG), facts, fake)
    assert c["cri"] == {"check_error": "Failed to connect to bus: No such file or directory"}
    rows = containerd_rows(params(**CIMG), facts, c, ZERO, ZERO, False)
    assert rows[0] == row(C_CRI, "fail", "the check failed: Failed to connect to bus: No such file or directory")
    assert rows[2] == row(C_LIVE, "warn", "the start time of containerd is unknown")
    fake.commands[SYSTEMCTL] = (0, "n/a", "")
    assert containerd_state(params(**CIMG), facts, fake)["cri"] == {
        "check_error": "systemctl printed 'n/a', not microseconds"
    }


def test_the_containerd_containers_go_through_the_nvidia_binary_and_cris_default_runtime():
    facts = node(runtimes={"containerd": {"installed": True, "running": True}})
    c = {
        **CTRD,
        "default": "nvidia",
        "default_entry": {"runtime_type": "io.containerd.runc.v2", "binary": "/usr/bin/nvidia-container-runtime"},
    }
    fake = FakeNode()
    p = params(
        families=["containerd", "isolation"],
        runtimes=["containerd"],
        containerd_run_options=["--cpu-shares", "0"],
        **CIMG,
    )
    check_containerd(p, facts, fake, False, c)
    check_containerd_isolation(p, facts, fake, c)
    head = ["timeout", "120", "ctr", "--namespace", "default", "run", "--rm", "--runtime", "io.containerd.runc.v2"]
    nvidia = ["--runc-binary", "/usr/bin/nvidia-container-runtime"]
    image = ["--cpu-shares", "0", "docker.io/library/busybox:latest"]
    count = ["sh", "-c", "ls /dev/nvidia* 2>/dev/null | wc -l"]
    assert fake.ran == [
        [*head, *nvidia, *image, "gpu-validate-x-run", "true"],
        [*head, *nvidia, "--env", "NVIDIA_VISIBLE_DEVICES=all", *image, "gpu-validate-x-count", *count],
        [
            *head,
            *nvidia,
            "--cap-add",
            "CAP_SYS_ADMIN",
            "--env",
            "NVIDIA_VISIBLE_DEVICES=all",
            *image,
            "gpu-validate-x-sys-admin",
            *count,
        ],
    ]
    # runc as CRI's default: no --runc-binary (the shim's own runc); a non-runc shim gets none either
    fake = FakeNode()
    check_containerd_isolation(p, facts, fake, CTRD)
    assert "--runc-binary" not in fake.ran[0]
    fake = FakeNode()
    kata = {**CTRD, "default_entry": {"runtime_type": "io.containerd.kata.v2", "binary": "/opt/kata/bin/x"}}
    check_containerd_isolation(p, facts, fake, kata)
    assert fake.ran[0][8:11] == ["io.containerd.kata.v2", "--cap-add", "CAP_SYS_ADMIN"]


CSA = "containerd: GPU isolation (default, CAP_SYS_ADMIN)"
CSA_LIKE = "a FUSE-like container (CAP_SYS_ADMIN, NVIDIA_VISIBLE_DEVICES=all, no GPU requested)"
NVIDIA_DEFAULT = {
    **CTRD,
    "default": "nvidia",
    "default_entry": {"runtime_type": "io.containerd.runc.v2", "binary": "/usr/bin/nvidia-container-runtime"},
}


@pytest.mark.parametrize(
    ("p", "facts", "c", "result", "expected"),
    [
        (
            CIMG,
            GPU_NODE,
            CTRD,
            ZERO,
            row(
                CSA,
                "ok",
                f"{CSA_LIKE} through CRI's default runtime runc (io.containerd.runc.v2, runc): no /dev/nvidia* device"
                + SYS_ADMIN_NOTE,
            ),
        ),
        (
            CIMG,
            GPU_NODE,
            NVIDIA_DEFAULT,
            (0, "4", ""),
            row(
                CSA,
                "fail",
                f"{CSA_LIKE} through CRI's default runtime nvidia (io.containerd.runc.v2,"
                " /usr/bin/nvidia-container-runtime) sees 4 /dev/nvidia* devices: every pod without a RuntimeClass"
                " that has CAP_SYS_ADMIN can get GPUs",
                "Make runc CRI's default (nvidia_container_toolkit_set_as_default: false, or fix default_runtime_name"
                " and runtimes.nvidia in config.toml), run site.yml --tags runtime; FUSE pods must not use"
                " RuntimeClass nvidia unless they request GPUs",
            ),
        ),
        (
            CIMG,
            GPU_NODE,
            CTRD,
            (1, "", "ctr: unknown flag"),
            row(
                CSA,
                "fail",
                "the container did not run through CRI's default runtime runc (io.containerd.runc.v2, runc):"
                " exit code 1 ctr: unknown flag",
                "Read the error; the test image needs sh, ls and wc, and gpu_validate_containerd_run_options apply to"
                " this container too",
            ),
        ),
        (
            CIMG,
            GPU_NODE,
            {**CTRD, "ok": False, "error": "failed to load TOML"},
            None,
            row(
                CSA,
                "fail",
                "containerd config dump failed, so CRI's default runtime is unknown: failed to load TOML",
                "Fix /etc/containerd/config.toml (containerd config dump names the problem)",
            ),
        ),
        (
            CIMG,
            GPU_NODE,
            {**CTRD, "image": False},
            None,
            row(
                CSA,
                "warn",
                "image docker.io/library/busybox:latest is not in ctr namespace default",
                "Pull or import the image into that namespace (it needs sh, ls and wc)",
            ),
        ),
        (CIMG, GPU_NODE, {**CTRD, "running": False}, None, row(CSA, "warn", *NOT_RUNNING)),
        ({}, GPU_NODE, CTRD, None, row(CSA, "skipped", "no test image (gpu_validate_containerd_test_image)")),
        (CIMG, NO_GPU, CTRD, None, row(CSA, "skipped", "no GPU")),
    ],
)
def test_containerd_sys_admin_row(p, facts, c, result, expected):
    assert containerd_sys_admin_row(params(**p), facts, c, result) == expected


class _LosesOutput(FakeNode):
    """A node whose ctr loses the output of its first `times` counting containers (exit code 0, nothing printed)."""

    def __init__(self, times: int):
        super().__init__()
        self.times = times

    def run(self, argv, timeout=None):
        self.ran.append(list(argv))
        if argv[-1] != COUNT_DEVICES:
            return (0, "", "")
        self.times -= 1
        return (0, "", "") if self.times >= 0 else (0, "0\n", "")


def test_a_counting_container_whose_output_ctr_lost_runs_once_more():
    facts = GPU_NODE
    p = params(families=["containerd", "isolation"], runtimes=["containerd"], **CIMG)
    fake = _LosesOutput(times=1)
    rows = {r["check"]: r for r in check_containerd_isolation(p, facts, fake, CTRD)}
    assert rows[CSA]["status"] == "ok", rows[CSA]
    assert [argv[-1] for argv in fake.ran].count(COUNT_DEVICES) == 2
    # output lost every time: the row still says the container did not run
    fake = _LosesOutput(times=2)
    rows = {r["check"]: r for r in check_containerd_isolation(p, facts, fake, CTRD)}
    assert rows[CSA]["status"] == "fail" and "did not run" in rows[CSA]["detail"], rows[CSA]
    assert len(fake.ran) == 2
