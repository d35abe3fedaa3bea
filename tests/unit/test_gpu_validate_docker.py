"""The doctor's docker rows and docker's isolation row (plugins/module_utils/gpu_validate/docker.py).

Each check is a function of its inputs (parameters, node facts, command results, files); the tables give each
row a passing case and the failing cases. FakeNode (conftest.py) answers the commands and file reads."""

from __future__ import annotations

import pytest
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.containers import SYS_ADMIN_NOTE
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.docker import (
    DOCKER_INFO_FORMAT,
    check_docker,
    check_docker_isolation,
    docker_info,
    docker_rows,
    docker_sys_admin_row,
)
from conftest import GPU_NODE, NO_GPU, FakeNode, load_module, node, params, row

checks = load_module("gpu_validate_checks")


# ---- docker -----------------------------------------------------------------------------------------------

INFO_OK = (
    '{"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}, "runc": {"path": "runc"}},'
    ' "default": "runc"}'
)
DOCKER = {
    "ok": True,
    "error": "",
    "runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}, "runc": {}},
    "default": "runc",
}
ZERO = (0, "0", "")
IMG = {"test_image": "busybox:latest"}
ISOLATED = {"nvidia": ZERO, "default": ZERO}
D_RUNTIME, D_DEFAULT, D_RUN = "docker: nvidia runtime", "docker: default runtime", "docker: container via nvidia"
D_ISO_N, D_ISO_D = "docker: GPU isolation (nvidia)", "docker: GPU isolation (default)"
DOCKER_OK = [
    row(D_RUNTIME, "ok", "nvidia -> /usr/bin/nvidia-container-runtime"),
    row(D_DEFAULT, "ok", "runc (nvidia is not the default)"),
    row(D_RUN, "ok", "docker run --runtime nvidia busybox:latest true"),
    row(D_ISO_N, "ok", "NVIDIA_VISIBLE_DEVICES=all, no GPU requested: no /dev/nvidia* device"),
    row(D_ISO_D, "ok", "NVIDIA_VISIBLE_DEVICES=all, no GPU requested: no /dev/nvidia* device"),
]


def _with(rows, **replace):
    """DOCKER_OK with some rows replaced (by check name)."""
    return [replace.get(r["check"], r) for r in rows]


def test_docker_info_reads_the_json_of_the_format_and_refuses_anything_else():
    assert docker_info((0, INFO_OK, ""))["runtimes"]["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"
    assert docker_info((1, "", "Cannot connect to the Docker daemon"))["error"] == (
        "Cannot connect to the Docker daemon"
    )
    assert docker_info((0, "{not json", ""))["ok"] is False


@pytest.mark.parametrize(
    ("p", "facts", "docker", "image", "run", "isolation", "expected"),
    [
        (IMG, GPU_NODE, DOCKER, True, ZERO, ISOLATED, DOCKER_OK),
        (
            IMG,
            GPU_NODE,
            {**DOCKER, "default": "nvidia"},
            True,
            ZERO,
            {"nvidia": (0, "4", ""), "default": (0, "4\n", "")},
            _with(
                DOCKER_OK,
                **{
                    D_DEFAULT: row(
                        D_DEFAULT,
                        "fail",
                        "nvidia (/usr/bin/nvidia-container-runtime) is the default runtime: every container that sets"
                        " NVIDIA_VISIBLE_DEVICES (all CUDA"
                        " images do) can get GPUs, also pods that request none",
                        "Set nvidia_container_toolkit_set_as_default: false and run site.yml --tags runtime",
                    ),
                    D_ISO_N: row(
                        D_ISO_N,
                        "fail",
                        "NVIDIA_VISIBLE_DEVICES=all, no GPU requested: 4 /dev/nvidia* devices visible",
                        "Set nvidia_container_toolkit_accept_envvar_when_unprivileged: false,"
                        " run site.yml --tags toolkit",
                    ),
                    D_ISO_D: row(
                        D_ISO_D,
                        "fail",
                        "NVIDIA_VISIBLE_DEVICES=all, no GPU requested: 4 /dev/nvidia* devices visible",
                        "Make runc the default (nvidia_container_toolkit_set_as_default: false),"
                        " run site.yml --tags runtime",
                    ),
                },
            ),
        ),
        (
            {**IMG, "nvidia_default_allowed": True},
            GPU_NODE,
            {**DOCKER, "default": "nvidia"},
            True,
            ZERO,
            ISOLATED,
            _with(
                DOCKER_OK,
                **{
                    D_DEFAULT: row(
                        D_DEFAULT,
                        "warn",
                        "nvidia (/usr/bin/nvidia-container-runtime) is the default runtime: every container that sets"
                        " NVIDIA_VISIBLE_DEVICES (all CUDA"
                        " images do) can get GPUs, also pods that request none",
                        "Intended (nvidia_container_toolkit_set_as_default): give GPU pods devices through CDI and keep"
                        " NVIDIA_VISIBLE_DEVICES hardening on",
                    )
                },
            ),
        ),
        (
            IMG,
            GPU_NODE,
            DOCKER,
            True,
            (124, "", ""),
            {"nvidia": (125, "", "docker: Error response from daemon: OCI runtime create failed"), "default": ZERO},
            _with(
                DOCKER_OK,
                **{
                    D_RUN: row(
                        D_RUN, "fail", "no answer within 120 s", "Look for a hanging runtime hook: journalctl -u docker"
                    ),
                    D_ISO_N: row(
                        D_ISO_N,
                        "fail",
                        "the container did not run: exit code 125 docker: Error response from daemon: OCI runtime"
                        " create failed",
                        "Read the error; the test image needs sh, ls and wc",
                    ),
                },
            ),
        ),
        (
            IMG,
            GPU_NODE,
            DOCKER,
            True,
            (127, "", 'exec: "true": executable file not found'),
            {"nvidia": (0, "sh: ls: not found", ""), "default": ZERO},
            _with(
                DOCKER_OK,
                **{
                    D_RUN: row(
                        D_RUN,
                        "fail",
                        'exit code 127: exec: "true": executable file not found',
                        "Read the error; check /etc/nvidia-container-runtime/config.toml and docker run options"
                        " (gpu_validate_docker_run_options)",
                    ),
                    D_ISO_N: row(
                        D_ISO_N,
                        "fail",
                        "the container did not run: exit code 0",
                        "Read the error; the test image needs sh, ls and wc",
                    ),
                },
            ),
        ),
        (
            IMG,
            GPU_NODE,
            DOCKER,
            False,
            None,
            {},
            _with(
                DOCKER_OK,
                **{
                    D_RUN: row(
                        D_RUN,
                        "warn",
                        "image busybox:latest is not in docker (never pulled)",
                        "Load or pull busybox:latest on the node, or name an image it has",
                    ),
                    D_ISO_N: row(
                        D_ISO_N,
                        "warn",
                        "image busybox:latest is not in docker (never pulled)",
                        "Load or pull busybox:latest on the node (it needs sh, ls and wc)",
                    ),
                    D_ISO_D: row(
                        D_ISO_D,
                        "warn",
                        "image busybox:latest is not in docker (never pulled)",
                        "Load or pull busybox:latest on the node (it needs sh, ls and wc)",
                    ),
                },
            ),
        ),
        (
            {},
            NO_GPU,
            {**DOCKER, "runtimes": {"runc": {}}},
            False,
            None,
            {},
            [
                row(D_RUNTIME, "skipped", "no GPU (and no toolkit installed)"),
                row(D_DEFAULT, "ok", "runc (nvidia is not the default)"),
                row(D_RUN, "skipped", "no test image (gpu_validate_test_image)"),
                row(D_ISO_N, "skipped", "no GPU"),
                row(D_ISO_D, "skipped", "no GPU"),
            ],
        ),
        (
            IMG,
            GPU_NODE,
            {"ok": False, "error": "Cannot connect to the Docker daemon", "runtimes": {}, "default": ""},
            False,
            None,
            {},
            [
                row(
                    D_RUNTIME,
                    "fail",
                    "docker info failed: Cannot connect to the Docker daemon",
                    "Check docker: systemctl status docker; journalctl -u docker",
                ),
                row(D_DEFAULT, "skipped", "docker info failed"),
                row(D_RUN, "skipped", "the nvidia runtime is not registered"),
                row(D_ISO_N, "skipped", "the nvidia runtime is not registered"),
                row(
                    D_ISO_D,
                    "warn",
                    "image busybox:latest is not in docker (never pulled)",
                    "Load or pull busybox:latest on the node (it needs sh, ls and wc)",
                ),
            ],
        ),
    ],
)
def test_docker_rows(p, facts, docker, image, run, isolation, expected):
    assert docker_rows(params(**p), facts, docker, image, run, isolation, toolkit_installed=False) == expected


def test_the_default_runtime_row_shows_the_default_as_docker_info_names_it():
    """Unlike containerd's and CRI-O's rows, docker's does not name runc where the default is empty."""
    rows = docker_rows(params(), GPU_NODE, {**DOCKER, "default": ""}, False, None, {}, toolkit_installed=True)
    assert rows[1] == row(D_DEFAULT, "ok", "(nvidia is not the default)")


def test_docker_without_the_nvidia_runtime_fails_where_the_toolkit_is_installed():
    docker = {**DOCKER, "runtimes": {"runc": {}}}
    rows = docker_rows(params(), NO_GPU, docker, False, None, {}, toolkit_installed=True)
    assert rows[0] == row(
        D_RUNTIME, "fail", "no nvidia runtime in docker info (runtimes: runc)", "Run site.yml --tags runtime"
    )


def test_docker_not_running_is_one_warning():
    facts = node(runtimes={"docker": {"installed": True, "running": False}})
    fake = FakeNode()
    assert check_docker(params(), facts, fake, False) == [
        row(
            D_RUNTIME,
            "warn",
            "docker is installed but not running: nothing checked",
            "Start docker (systemctl start docker), or leave docker out of gpu_validate_runtimes",
        )
    ]
    assert fake.ran == []


def test_the_docker_family_runs_its_containers_with_the_options_under_timeout():
    facts = node(runtimes={"docker": {"installed": True, "running": True}})
    count = ["busybox:latest", "sh", "-c", "ls /dev/nvidia* 2>/dev/null | wc -l"]
    t = ["timeout", "120", "docker", "run", "--rm"]
    opts = ["--network", "none"]
    fake = FakeNode(
        commands={
            ("docker", "info", "--format", DOCKER_INFO_FORMAT): (0, INFO_OK, ""),
            ("docker", "image", "inspect", "busybox:latest"): (0, "[{}]", ""),
            (*t, "--runtime", "nvidia", *opts, "busybox:latest", "true"): (0, "", ""),
            (*t, "--runtime", "nvidia", "--env", "NVIDIA_VISIBLE_DEVICES=all", *opts, *count): ZERO,
            (*t, "--env", "NVIDIA_VISIBLE_DEVICES=all", *opts, *count): ZERO,
            (*t, "--cap-add", "SYS_ADMIN", "--env", "NVIDIA_VISIBLE_DEVICES=all", *opts, *count): (0, "4", ""),
        }
    )
    result = checks.run_checks(params(families=["isolation", "docker"], runtimes=["docker"], node=facts, **IMG), fake)
    assert result["checks"][:5] == [{**row, "family": "docker"} for row in DOCKER_OK]
    assert result["checks"][5]["check"] == "docker: GPU isolation (default, CAP_SYS_ADMIN)"
    assert result["checks"][5]["family"] == "isolation"
    assert result["checks"][5]["detail"] == (
        "a FUSE-like container (CAP_SYS_ADMIN, NVIDIA_VISIBLE_DEVICES=all, no GPU requested) sees 4 /dev/nvidia*"
        " devices: the default runtime hands out GPUs"
    )
    assert len(fake.ran) == 6
    assert [*t, "--env", "NVIDIA_VISIBLE_DEVICES=all", *opts, *count] in fake.ran  # the default runtime: no --runtime

    # without the nvidia runtime registered, the default runtime's container still runs
    fake.commands[("docker", "info", "--format", DOCKER_INFO_FORMAT)] = (0, '{"runtimes": {"runc": {}}}', "")
    fake.ran = []
    rows = check_docker(params(**IMG), facts, fake, False)
    assert [(r["check"], r["status"]) for r in rows[-2:]] == [(D_ISO_N, "skipped"), (D_ISO_D, "ok")]
    assert fake.ran[-1] == [*t, "--env", "NVIDIA_VISIBLE_DEVICES=all", *opts, *count]


@pytest.mark.parametrize(
    ("p", "facts", "result", "expected"),
    [
        (
            IMG,
            GPU_NODE,
            ZERO,
            row(
                "docker: GPU isolation (default, CAP_SYS_ADMIN)",
                "ok",
                "a FUSE-like container (CAP_SYS_ADMIN, NVIDIA_VISIBLE_DEVICES=all, no GPU requested):"
                " no /dev/nvidia* device" + SYS_ADMIN_NOTE,
            ),
        ),
        (
            IMG,
            GPU_NODE,
            (0, "2", ""),
            row(
                "docker: GPU isolation (default, CAP_SYS_ADMIN)",
                "fail",
                "a FUSE-like container (CAP_SYS_ADMIN, NVIDIA_VISIBLE_DEVICES=all, no GPU requested) sees 2"
                " /dev/nvidia* devices: the default runtime hands out GPUs",
                "Make runc the default (nvidia_container_toolkit_set_as_default: false), run site.yml --tags runtime;"
                " FUSE pods must not use RuntimeClass nvidia unless they request GPUs",
            ),
        ),
        (
            IMG,
            GPU_NODE,
            (1, "", "Unable to find image"),
            row(
                "docker: GPU isolation (default, CAP_SYS_ADMIN)",
                "fail",
                "the container did not run: exit code 1 Unable to find image",
                "Read the error; the test image needs sh, ls and wc",
            ),
        ),
        (
            {},
            GPU_NODE,
            None,
            row("docker: GPU isolation (default, CAP_SYS_ADMIN)", "skipped", "no test image (gpu_validate_test_image)"),
        ),
        (IMG, NO_GPU, None, row("docker: GPU isolation (default, CAP_SYS_ADMIN)", "skipped", "no GPU")),
    ],
)
def test_docker_sys_admin_row(p, facts, result, expected):
    assert docker_sys_admin_row(params(**p), facts, result) == expected


def test_docker_isolation_needs_docker_among_the_runtimes_and_running():
    running = node(runtimes={"docker": {"installed": True, "running": True}})
    assert check_docker_isolation(params(runtimes=["containerd"], **IMG), running, FakeNode()) == []
    stopped = node(runtimes={"docker": {"installed": True, "running": False}})
    assert check_docker_isolation(params(runtimes=["docker"], **IMG), stopped, FakeNode()) == []
