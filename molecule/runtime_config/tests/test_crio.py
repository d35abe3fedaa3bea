"""runtime_config and the doctor on a real CRI-O (issue 24): CRI-O 1.35.6 from GPUNODE_UPSTREAM_DIR on rc-crio
(Debian 13, conmon, runc and the CNI plugins from Debian; molecule/resources/tasks/crio_node.yml), with NVIDIA's
real runtime 1.20 registered by the nvidia_container_toolkit role (which runs runtime_config).

What the other runtimes prove, proven on CRI-O: the drop-in copies the default runtime's entry from the real
`crio config`; CRI-O restarts and its CRI serves the nvidia handler and the default one (pods through
tests/cri/client.py, the kubelet's path); --check --diff writes nothing; a drop-in CRI-O refuses is rolled back byte
for byte; one that CRI-O would read otherwise than meant (a later drop-in overrides it) is refused before writing;
a restart left pending is finished by the next run; mode and owner kept; no backup or temp file in crio.conf.d.
The tests run in this order.
"""

from __future__ import annotations

import sys
import tomllib
import uuid
from pathlib import Path

import pytest

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
sys.path.insert(0, str(SCENARIO.parents[1]))
from playbook_runner import folded, run_playbook

from tests.cri.client import CriClient, crio_client
from tests.cri.doors import STARTED, log_since, log_size

testinfra_hosts = ["ansible://rc-crio"]
DIR = "/etc/crio/crio.conf.d"
DROPIN = f"{DIR}/99-nvidia.conf"
RUNTIME = "/usr/bin/nvidia-container-runtime"  # NVIDIA's, from the stand-in packages
IMAGE = "docker.io/gpunode-test/busybox:latest"
# PID 1 of its own PID namespace: a plain `sleep` ignores SIGTERM, and CRI-O would wait out the stop timeout
RUN = ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
STATE = "/var/lib/gpu-node-provisioning"


def _running_config(host) -> dict:
    """The running daemon's configuration (`crio status config` asks it over its socket)."""
    return tomllib.loads(host.check_output("crio status config 2>/dev/null"))


def _started(host) -> str:
    return host.check_output("systemctl show crio -p ExecMainStartTimestampMonotonic --value")


def _cri(host) -> CriClient:
    """A CRI client as the kubelet of this node (cgroup parent after CRI-O's cgroup manager)."""
    manager = _running_config(host)["crio"]["runtime"].get("cgroup_manager", "systemd")
    return crio_client(host.backend.get_hostname(), manager)


def _pod(host, handler: str) -> tuple[str | None, str | None, bool]:
    """(sandbox, error, whether NVIDIA's runtime created a container meanwhile: its debug log)."""
    offset = log_size(host)
    with _cri(host) as cri:
        sandbox, error = cri.try_pod(f"pod-{handler or 'default'}", handler, IMAGE, RUN)
    return sandbox, error, STARTED in log_since(host, offset)


def _converge(host, extra_vars: dict | None = None, *args: str):
    """runtime_config on rc-crio as the toolkit role calls it (crio_runtime.yml: the role alone, its claims here)."""
    return run_playbook(host, SCENARIO / "crio_runtime.yml", extra_vars, *args)


def test_the_dropin_is_the_default_runtimes_entry_from_the_real_crio_config_with_only_the_binary_replaced(host):
    runtime = _running_config(host)["crio"]["runtime"]
    assert runtime["default_runtime"] == "runc"
    runc, nvidia = runtime["runtimes"]["runc"], runtime["runtimes"]["nvidia"]
    assert nvidia["runtime_path"] == RUNTIME
    assert nvidia["monitor_path"] == "/usr/bin/conmon"  # copied: the default crun entry has none
    assert {**nvidia, "runtime_path": ""} == {**runc, "runtime_path": ""}
    dropin = host.file(DROPIN)
    assert (dropin.user, dropin.group, dropin.mode) == ("root", "root", 0o644)


def test_cri_o_serves_the_nvidia_handler_through_the_nvidia_runtime(host):
    with _cri(host) as cri:
        assert cri.runtime_ready(), cri.status()
    _sandbox, error, through_nvidia = _pod(host, "nvidia")
    assert error is None, error
    assert through_nvidia, "the container did not go through NVIDIA's runtime (no create in its log)"


def test_cri_o_serves_the_default_handler_through_runc(host):
    _sandbox, error, through_nvidia = _pod(host, "")
    assert error is None, error
    assert not through_nvidia, "a pod without a handler went through NVIDIA's runtime"


def test_an_unknown_handler_is_refused(host):
    _sandbox, error, _through_nvidia = _pod(host, "gpunode-unknown")
    assert error is not None and "gpunode-unknown" in error, error


def test_check_diff_shows_the_change_and_writes_nothing(host):
    before, started = host.file(DROPIN).sha256sum, _started(host)
    token = uuid.uuid4().hex
    settings = {"crio": {"runtime": {"runtimes": {"nvidia": {"monitor_env": [f"GPUNODE_TEST={token}"]}}}}}
    run = _converge(host, {"runtime_config_crio_settings": settings}, "--check", "--diff")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    assert any(line.startswith("+") and token in line for line in run.stdout.splitlines()), run.stdout[-3000:]
    recap = [line for line in run.stdout.splitlines() if line.startswith(host.backend.get_hostname() + " ")]
    assert recap and " changed=1 " in recap[-1], run.stdout[-500:]
    assert host.file(DROPIN).sha256sum == before
    assert _started(host) == started


def test_a_dropin_crio_refuses_is_rolled_back_byte_for_byte(host):
    """Mutation: a monitor_cgroup that `crio config` accepts but the daemon refuses at start (neither 'pod' nor a
    systemd slice): CRI-O does not come back, the drop-in gets back its bytes, mode and owner, CRI-O runs again."""
    before = host.file(DROPIN).content_string
    host.check_output(f"chmod 0640 {DROPIN}")
    try:
        settings = {"crio": {"runtime": {"runtimes": {"nvidia": {"monitor_cgroup": "gpunode-not-a-slice"}}}}}
        run = _converge(host, {"runtime_config_crio_settings": settings, "runtime_config_health_retries": 3})
        assert run.returncode != 0
        said = folded(run)
        assert "crio did not come back after its config changed" in said, said[-3000:]
        assert "conmon cgroup should be 'pod'" in said  # CRI-O's own reason, from its journal
        assert f"Rolled back: restored {DROPIN} from /var/backups/gpu-node-provisioning{DROPIN}." in said
        assert "is running again with its previous config" in said
        # CRI-O refused to start: the shared restart transaction takes the failed restart as its answer (ignored,
        # then rolled back); a failed wait would be its check's (rescued=1, as containerd's in test_containerd23.py)
        assert " ignored=1 " in run.stdout
        assert host.file(DROPIN).content_string == before
        assert host.file(DROPIN).mode == 0o640
        assert host.service("crio").is_running
        assert _pod(host, "nvidia")[1] is None
    finally:
        host.check_output(f"chmod 0644 {DROPIN}")


def test_a_dropin_crio_would_read_otherwise_is_refused_before_anything_is_written(host):
    """Item 6 on CRI-O: a later drop-in of the directory gives nvidia another binary. `crio config` with the
    candidate in a copy of crio.conf.d says so; the role refuses, naming the table, and writes nothing."""
    admin = f"{DIR}/99-zz-admin.conf"
    before, started = host.file(DROPIN).sha256sum, _started(host)
    host.check_output(f"printf '[crio.runtime.runtimes.nvidia]\\nruntime_path = \"/usr/sbin/runc\"\\n' > {admin}")
    try:
        run = _converge(host, {"runtime_config_crio_settings": {"crio": {"runtime": {"runtimes": {"nvidia": {}}}}}})
        assert run.returncode != 0
        said = folded(run)
        assert f"CRI-O reads the new {DROPIN} otherwise than meant" in said, said[-3000:]
        assert f"crio.runtime.runtimes.nvidia.runtime_path is '/usr/sbin/runc', not '{RUNTIME}'" in said
        assert f"{DROPIN} was left as it was" in said
        assert host.file(DROPIN).sha256sum == before
        assert _started(host) == started
    finally:
        host.check_output(f"rm -f {admin}")


def test_a_restart_left_pending_is_finished_by_the_next_run(host):
    pending = {"runtime_config_name": "gpunode-pending"}
    started = _started(host)
    run = _converge(host, {**pending, "runtime_config_restart": False})
    assert run.returncode == 0, run.stdout[-3000:]
    assert _started(host) == started, "crio was restarted"
    assert host.file(f"{STATE}/pending-restart-crio.json").exists
    assert host.file(f"{DIR}/99-gpunode-pending.conf").exists  # in the file...
    assert _pod(host, "gpunode-pending")[1] is not None  # ...not in the running daemon
    run = _converge(host, pending)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "was not restarted since (the run was interrupted or runtime_config_restart was false)" in folded(run)
    assert _started(host) != started
    assert not host.file(f"{STATE}/pending-restart-crio.json").exists
    _sandbox, error, through_nvidia = _pod(host, "gpunode-pending")
    assert error is None, error
    assert through_nvidia


@pytest.mark.parametrize("where", [DIR])
def test_no_backup_or_temp_file_is_left_in_crio_conf_d(host, where):
    """CRI-O reads every file of crio.conf.d: backups go to the backup tree, with the drop-in's mode."""
    names = sorted(host.check_output(f"ls -A {where}").split())
    assert names == ["10-gpunode-test-node.conf", "99-gpunode-pending.conf", "99-nvidia.conf"], names
    backups = host.check_output(f"ls /var/backups/gpu-node-provisioning{DROPIN}.*~").split()
    assert backups, "no backup of the drop-in in the backup tree"
    assert host.file(backups[-1]).mode in (0o644, 0o640)


# ---- the doctor on CRI-O (issue 24 item 3) ---------------------------------------------------------------------

REPORT = "/var/lib/gpu-node-provisioning/validate.json"
PRIVILEGED_STANDIN = SCENARIO.parent / "default" / "files" / "nvidia-container-runtime-privileged-standin"
# a GPU pretended: the isolation rows run (the privileged stand-in adds /dev/null as /dev/nvidia0 and
# /dev/nvidiactl to a container with CAP_SYS_ADMIN and NVIDIA_VISIBLE_DEVICES, as NVIDIA's runtime would)
PRETEND_GPU = {"__gpu_validate_has_gpu": True}
CRIO_ROWS = (
    "crio: CRI",
    "crio: nvidia runtime",
    "crio: running config",
    "crio: default runtime",
    "crio: container via nvidia",
    "crio: GPU isolation (nvidia)",
    "crio: GPU isolation (default, CAP_SYS_ADMIN)",
    "crio: CDI annotations of pods",
)


def _doctor(host) -> dict[str, dict]:
    import json

    run = run_playbook(host, SCENARIO / "doctor.yml", PRETEND_GPU)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    return {c["check"]: c for c in json.loads(host.file(REPORT).content_string)["checks"]}


@pytest.fixture
def privileged_standin(host):
    import base64

    standin = base64.b64encode(PRIVILEGED_STANDIN.read_bytes()).decode()
    host.check_output(f"echo {standin} | base64 -d > /usr/local/sbin/nvidia-privileged-standin")
    host.check_output("chmod 0755 /usr/local/sbin/nvidia-privileged-standin")
    host.check_output(f"mount --bind /usr/local/sbin/nvidia-privileged-standin {RUNTIME}")
    yield
    host.run(f"umount {RUNTIME}; rm -f /usr/local/sbin/nvidia-privileged-standin")


def test_the_doctor_passes_every_crio_row_on_the_configured_node(host, privileged_standin):
    checks = _doctor(host)
    for check in CRIO_ROWS:
        assert checks[check]["status"] == "ok", checks[check]
    sys_admin = checks["crio: GPU isolation (default, CAP_SYS_ADMIN)"]["detail"]
    assert "through CRI-O's default runtime runc: no /dev/nvidia* device" in sys_admin
    assert "NVIDIA's runtime would count it as privileged" in sys_admin  # what follows from upstream's semantics


def test_the_doctor_fails_nvidia_as_crio_default_and_the_sys_admin_pod_that_then_sees_gpus(host, privileged_standin):
    admin = f"{DIR}/50-gpunode-admin-default.conf"
    host.check_output(f"printf '[crio.runtime]\\ndefault_runtime = \"nvidia\"\\n' > {admin}")
    try:
        host.check_output("systemctl restart crio")
        checks = _doctor(host)
        assert checks["crio: default runtime"]["status"] == "fail", checks["crio: default runtime"]
        row = checks["crio: GPU isolation (default, CAP_SYS_ADMIN)"]
        assert row["status"] == "fail", row
        assert "through CRI-O's default runtime nvidia sees 2 /dev/nvidia* devices" in row["detail"], row
        assert checks["crio: GPU isolation (nvidia)"]["status"] == "ok"  # unprivileged: still nothing
    finally:
        host.check_output(f"rm -f {admin}; systemctl restart crio")


@pytest.fixture(scope="module")
def broken_crio_doctor(host):
    """Two faults of the running CRI-O at once, one doctor run, one pair of restarts (the rows read apart: the CRI
    row `crictl info`, the running-config row `crio status config`): the running daemon without the nvidia handler
    while the file has it (a restart never made), and no CNI network (CRI-O runs, but its CRI says NetworkReady
    false, and the kubelet would report NotReady). Then both undone (CRI-O restarted) and one more doctor run with
    NVIDIA's binary failing: its `container via nvidia` row, and the CRI row back to ok.
    (the rows of the broken run, the rows of the run after)"""
    conf = "/etc/cni/net.d/10-gpunode-test.conflist"
    aside = f"/root/{conf.rsplit('/', 1)[1]}"
    try:
        host.check_output(
            f"mv {conf} {aside} && mv {DROPIN} /root/99-nvidia.conf && systemctl restart crio"
            f" && mv /root/99-nvidia.conf {DROPIN}"
        )
        broken = _doctor(host)
    finally:
        host.check_output(
            f"{{ test -e {DROPIN} || mv /root/99-nvidia.conf {DROPIN}; }} && {{ test -e {conf} || mv {aside} {conf}; }}"
            " && systemctl restart crio"
        )
    # the nvidia binary fails: the pod through the nvidia handler does not run
    host.check_output(f"mount --bind /bin/false {RUNTIME}")
    try:
        after = _doctor(host)
    finally:
        host.run(f"umount {RUNTIME}")
    return broken, after


def test_the_doctor_fails_a_handler_the_running_crio_lacks_and_a_container_that_does_not_run(broken_crio_doctor):
    broken, after = broken_crio_doctor
    row = broken["crio: running config"]
    assert row["status"] == "fail", row
    assert "the running CRI-O has no nvidia runtime handler" in row["detail"], row
    assert broken["crio: nvidia runtime"]["status"] == "ok"  # the files have it
    row = after["crio: container via nvidia"]
    assert row["status"] == "fail", row


def test_the_doctor_fails_a_cri_that_is_not_ready(broken_crio_doctor):
    """No CNI network: CRI-O runs, but its CRI says NetworkReady false, and the kubelet would report NotReady."""
    broken, after = broken_crio_doctor
    row = broken["crio: CRI"]
    assert row["status"] == "fail", row
    assert "NetworkReady is false" in row["detail"], row
    assert after["crio: CRI"]["status"] == "ok"
