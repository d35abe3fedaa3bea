"""NVIDIA's REAL runtime (toolkit 1.20.0 from GPUNODE_UPSTREAM_DIR, in the stand-in packages) with the config.toml the
toolkit role leaves, on docker and through the CRI of containerd 1.7 (nv-debian13) and 2.2 (nv-ubuntu2204; and
nv-ubuntu2604, Ubuntu 26.04's own docker.io 29.1.3, containerd 2.2.2 and runc 1.4.0, whose CRI pods need a cgroup v2
host), and the doctor that converge.yml runs after the toolkit.

Issue 24 item 4: the hardened config as NVIDIA's runtime reads it (its debug log shows each decision).
Issue 24 item 5: no GPU through a CDI annotation or a volume mount for a pod that requests none (the fake GPU and
the helpers: tests/cri/doors.py, shared with molecule/runtime_config's CRI-O node).

Each door is opened once (a mutation) to show that the test and the doctor's row see it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parents[1]))
from tests.cri.client import CriClient, node_socket
from tests.cri.doors import (
    CDI_ANNOTATION,
    CONFIG,
    ENVVAR_CLOSED,
    FORWARDED,
    IGNORED_ENVVAR,
    INJECTED,
    JIT_CDI,
    LOG,
    NO_DEVICES,
    NO_DRIVER,
    PREFIXES_CLOSED,
    PREFIXES_OPEN,
    PROBE,
    REQUESTS,
    STARTED,
    VOLUMES_CLOSED,
    doctor,
    log_since,
    log_size,
    pod,
    set_in_config,
)

testinfra_hosts = ["ansible://nv-debian13", "ansible://nv-ubuntu2204", "ansible://nv-ubuntu2604"]

DOCKER_IMAGE = "gpunode-test/busybox:latest"
RUNTIMES = ["docker", "containerd"]
REPORT = "/var/lib/gpu-node-provisioning/validate.json"
ISOLATION_ROWS = [
    "docker: GPU isolation (default)",
    "docker: GPU isolation (nvidia)",
    "docker: GPU isolation (default, CAP_SYS_ADMIN)",
    "containerd: GPU isolation (nvidia)",
    "containerd: GPU isolation (default, CAP_SYS_ADMIN)",
]


def _name(host) -> str:
    return host.backend.get_hostname()


# Harness quirk (molecule.yml): a node with its own cgroup2 tree on a cgroup v1 (hybrid) host (nv-ubuntu2604) has no
# cpu controller, and containerd gives every pod sandbox CPU shares, so runc fails writing cpu.weight. Real nodes
# (and nodes on a cgroup v2 host) have it.
CGROUP_QUIRK = "cpu.weight: no such file or directory"
# the nodes whose image mounts a cgroup2 tree of its own (label gpunode.requires_cgroup2=own): only they may skip; any
# other node without the cpu controller fails its CRI tests, so a host that does not delegate it cannot hide them
OWN_CGROUP2_NODES = {"nv-ubuntu2604"}


@pytest.fixture
def cri(host):
    if host.run("stat -fc %T /sys/fs/cgroup").stdout.strip() == "cgroup2fs":
        controllers = host.file("/sys/fs/cgroup/cgroup.controllers").content_string.split()
        if "cpu" not in controllers and _name(host) in OWN_CGROUP2_NODES:
            pytest.skip(f"harness: no cpu controller in the node's cgroup2 tree (a cgroup v1 host): {CGROUP_QUIRK}")
    with CriClient(node_socket(_name(host))) as client:
        yield client


@pytest.fixture(scope="module")
def doors_config(host):
    """config.toml and containerd's config restored after each mutation (restart included)."""
    saved = {path: host.check_output(f"base64 -w0 {path}") for path in (CONFIG, "/etc/containerd/config.toml")}
    yield saved
    for path, content in saved.items():
        host.check_output(f"echo {content} | base64 -d > {path}")


# ---------------------------------------------------------------------------------------------- the doctor


def test_the_doctor_after_converge_finds_the_runtimes_isolated(host):
    """converge.yml's doctor, a GPU pretended: its containers through docker's and CRI's default runtime (runc,
    CAP_SYS_ADMIN) and through nvidia (NVIDIA's real runtime, NVIDIA_VISIBLE_DEVICES=all) see no device, on Debian
    13's docker 26 and containerd 1.7 as on Ubuntu 26.04's docker.io 29.1.3 and containerd 2.2.2. No docker,
    containerd, toolkit or door row fails: only the driver's two do (the pretended GPU has no driver)."""
    report = json.loads(host.file(REPORT).content_string)
    assert report["host"] == _name(host)
    rows = {row["check"]: row for row in report["checks"]}
    for check in ISOLATION_ROWS:
        assert rows.get(check, {}).get("status") == "ok", (check, rows.get(check), sorted(rows))
    runtime_rows = {c: r for c, r in rows.items() if c.split(":")[0] in ("docker", "containerd", "toolkit", "door")}
    assert len(runtime_rows) >= 16, sorted(rows)
    failed = {c: r for c, r in rows.items() if r["status"] == "fail"}
    assert set(failed) <= {"NVIDIA driver", "nvidia-smi"}, json.dumps(failed, indent=1)


# ---------------------------------------------------------------------------------------------- item 1 and 4


def test_nvidia_is_nvidias_real_runtime_reading_the_projects_config(host):
    assert "NVIDIA Container Runtime version 1.20.0" in host.check_output("nvidia-container-runtime --version")
    config = host.file(CONFIG).content_string
    assert ENVVAR_CLOSED in config and VOLUMES_CLOSED in config and PREFIXES_CLOSED in config
    assert f'debug = "{LOG}"' in config


def _docker(host, *options: str, command: str = "true"):
    offset = log_size(host)
    run = host.run(
        f"timeout 120 docker run --rm --network none --runtime nvidia {' '.join(options)} {DOCKER_IMAGE} {command}"
    )
    return run, log_since(host, offset)


def test_docker_a_container_through_nvidia_starts_with_the_projects_config(host):
    run, log = _docker(host, command="echo nested-ok")
    assert run.rc == 0 and run.stdout.strip() == "nested-ok", run.stderr
    # the log file and its level come from config.toml only: the runtime read the project's file
    assert STARTED in log, log
    assert NO_DEVICES in log and FORWARDED in log, log


def test_docker_unprivileged_envvar_all_gets_no_device_and_no_cdi_edit(host):
    run, log = _docker(host, "-e NVIDIA_VISIBLE_DEVICES=all", command=" ".join(PROBE[:2]) + f" '{PROBE[2]}'")
    assert run.rc == 0, (run.rc, run.stderr)
    assert IGNORED_ENVVAR in log and NO_DEVICES in log, log
    assert "Injecting devices using CDI" not in log and JIT_CDI not in log, log


def test_docker_cap_sys_admin_counts_as_privileged_for_nvidias_runtime(host):
    """Upstream semantics (internal/config/image/privileged.go): CAP_SYS_ADMIN in the bounding set is
    'privileged', and then NVIDIA_VISIBLE_DEVICES is honoured whatever config.toml says. Without a driver the
    runtime fails the container where a GPU node would hand it every GPU."""
    run, log = _docker(host, "--cap-add SYS_ADMIN -e NVIDIA_VISIBLE_DEVICES=all")
    assert run.rc != 0, run.stdout
    assert JIT_CDI in log and NO_DRIVER in log, log
    assert IGNORED_ENVVAR not in log, log


def test_mutation_accepting_the_envvar_when_unprivileged_injects(host, doors_config):
    set_in_config(host, ENVVAR_CLOSED, ENVVAR_CLOSED.replace("false", "true"))
    try:
        run, log = _docker(host, "-e NVIDIA_VISIBLE_DEVICES=all")
        assert run.rc != 0, run.stdout
        assert JIT_CDI in log and NO_DRIVER in log and IGNORED_ENVVAR not in log, log
    finally:
        host.check_output(f"echo {doors_config[CONFIG]} | base64 -d > {CONFIG}")
    run, log = _docker(host, "-e NVIDIA_VISIBLE_DEVICES=all")
    assert run.rc == 0 and IGNORED_ENVVAR in log, (run.stderr, log)


def test_cri_unprivileged_envvar_all_through_nvidia_gets_no_device(host, cri):
    outcome, log = pod(host, cri, "envvar", "nvidia", envs={"NVIDIA_VISIBLE_DEVICES": "all"})
    assert outcome == "clean", outcome
    assert IGNORED_ENVVAR in log and NO_DEVICES in log, log


def test_cri_cap_sys_admin_through_nvidia_counts_as_privileged(host, cri):
    outcome, log = pod(
        host, cri, "sys-admin", "nvidia", envs={"NVIDIA_VISIBLE_DEVICES": "all"}, add_capabilities=("SYS_ADMIN",)
    )
    assert outcome.startswith("error") and NO_DRIVER in outcome, outcome
    assert JIT_CDI in log, log


def test_the_doctors_cap_sys_admin_row_says_what_follows(host):
    """With a GPU pretended, the FUSE-like container through docker's default runtime (runc) sees nothing, and the
    row says what NVIDIA's runtime would do with it."""
    rows = doctor(host, RUNTIMES, ("isolation",), has_gpu=True, test_image=DOCKER_IMAGE)
    row = rows["docker: GPU isolation (default, CAP_SYS_ADMIN)"]
    assert row["status"] == "ok", row
    assert "NVIDIA's runtime would count it as privileged" in row["detail"], row


def test_the_doctor_explains_the_hardening_and_finds_every_door_shut(host):
    rows = doctor(host, RUNTIMES)
    assert rows["toolkit: GPU by volume mount"]["status"] == "ok", rows
    assert rows["containerd: CDI annotations of pods"]["status"] == "ok", rows


# ---------------------------------------------------------------------------------------------- item 5


@pytest.mark.parametrize("handler", ["", "nvidia"])
@pytest.mark.parametrize("request_name", sorted(REQUESTS))
def test_a_pod_that_requests_no_gpu_sees_neither_the_device_nor_the_variable(host, cri, handler, request_name):
    outcome, log = pod(host, cri, request_name, handler, **REQUESTS[request_name])
    assert outcome == "clean", (request_name, handler or "default", outcome, log)
    if handler == "nvidia":
        assert NO_DEVICES in log, log  # NVIDIA's runtime saw the container and found no request


@pytest.mark.parametrize("handler", ["", "nvidia"])
def test_the_device_plugins_channel_container_annotations_does_inject(host, cri, handler):
    """Control: the fake spec is a working GPU. Container annotations come only from device plugins through the
    kubelet (the cdi-annotations strategy; a pod cannot set them): containerd's own CDI injects them whatever the
    handler."""
    outcome, _log = pod(host, cri, "container-annotation", handler, annotations=CDI_ANNOTATION)
    assert outcome == "gpu", outcome


def _restart_containerd(host, cri) -> None:
    host.check_output("systemctl restart containerd")
    deadline = time.monotonic() + 600  # a generous limit: the shared machine may be loaded
    while not cri.runtime_ready():
        assert time.monotonic() < deadline, "containerd's CRI did not come back"
        time.sleep(1)


# containerd 1.7 (v2) and 2.x (v3) alike: the nvidia runtime's table header, then one key under it
OPEN_POD_ANNOTATIONS = r"""
import re, sys
path = sys.argv[1]
text = open(path).read()
header = re.search(r"(?m)^[ \t]*\[plugins\.(['\"])io\.containerd\.(?:cri\.v1\.runtime|grpc\.v1\.cri)\1"
                   r"\.containerd\.runtimes\.(['\"]?)nvidia\2\][ \t]*$", text)
assert header, "no nvidia runtime table"
following = re.search(r"(?m)^[ \t]*\[", text[header.end() :])
end = header.end() + (following.start() if following else len(text) - header.end())
table = text[header.end() : end]
line = '  pod_annotations = ["cdi.k8s.io/*"]'
if re.search(r"(?m)^[ \t]*pod_annotations[ \t]*=", table):  # a dumped config names it already (= [])
    table = re.sub(r"(?m)^[ \t]*pod_annotations[ \t]*=.*$", line, table)
else:
    table = "\n" + line + table
open(path, "w").write(text[: header.end()] + table + text[end:])
"""


def test_mutation_pod_annotations_passed_to_nvidia_inject_and_the_doctor_fails(host, cri, doors_config):
    """Two walls: containerd passes no pod annotation to nvidia (pod_annotations), and NVIDIA's runtime reads none
    (annotation-prefixes = [], the toolkit role's default since CRI-O's door). Opened one after the other."""
    import base64

    script = base64.b64encode(OPEN_POD_ANNOTATIONS.encode()).decode()
    host.check_output(f"echo {script} | base64 -d | python3 - /etc/containerd/config.toml")
    try:
        _restart_containerd(host, cri)
        outcome, log = pod(host, cri, "pod-annotation", "nvidia", pod_annotations=CDI_ANNOTATION)
        assert outcome == "clean" and NO_DEVICES in log, (outcome, log)  # passed on, but read by nobody
        row = doctor(host, RUNTIMES)["containerd: CDI annotations of pods"]
        assert row["status"] == "ok" and "annotation-prefixes = []" in row["detail"], row
        set_in_config(host, PREFIXES_CLOSED, PREFIXES_OPEN)
        outcome, log = pod(host, cri, "pod-annotation", "nvidia", pod_annotations=CDI_ANNOTATION)
        assert outcome == "gpu", (outcome, log)
        assert INJECTED in log, log
        row = doctor(host, RUNTIMES)["containerd: CDI annotations of pods"]
        assert row["status"] == "fail" and "['cdi.k8s.io/*']" in row["detail"], row
        # the default handler (runc) ignores the annotation even when it is passed
        outcome, _log = pod(host, cri, "pod-annotation", "", pod_annotations=CDI_ANNOTATION)
        assert outcome == "clean", outcome
    finally:
        host.check_output(f"echo {doors_config[CONFIG]} | base64 -d > {CONFIG}")
        host.check_output(
            f"echo {doors_config['/etc/containerd/config.toml']} | base64 -d > /etc/containerd/config.toml"
        )
        _restart_containerd(host, cri)
    assert doctor(host, RUNTIMES)["containerd: CDI annotations of pods"]["status"] == "ok"


def test_mutation_volume_mounts_accepted_inject_and_the_doctor_fails(host, cri, doors_config):
    set_in_config(host, VOLUMES_CLOSED, VOLUMES_CLOSED.replace("false", "true"))
    try:
        outcome, log = pod(host, cri, "host-path-dev-null", "nvidia", **REQUESTS["host-path-dev-null"])
        assert outcome == "gpu", (outcome, log)
        assert INJECTED in log, log
        # an emptyDir is no request: NVIDIA's runtime takes only /dev/null mounts (requestsFromMounts)
        outcome, log = pod(host, cri, "empty-dir", "nvidia", **REQUESTS["empty-dir"])
        assert outcome == "clean" and NO_DEVICES in log, (outcome, log)
        row = doctor(host, RUNTIMES)["toolkit: GPU by volume mount"]
        assert row["status"] == "fail" and "hostPath volume of /dev/null" in row["detail"], row
    finally:
        host.check_output(f"echo {doors_config[CONFIG]} | base64 -d > {CONFIG}")
    assert doctor(host, RUNTIMES)["toolkit: GPU by volume mount"]["status"] == "ok"
