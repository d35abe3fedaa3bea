"""runtime_config on containerd 2.3.4, the long-term-support line, with config version 4 (issue 36), on
rc-containerd23: upstream's build, Ubuntu 24.04's runc, and containerd 2.3's own `config default` as config.toml
(version 4, `imports = ['/etc/containerd/conf.d/*.toml']`; ../shared/upstream/containerd/BUILD.md).

The scenario's converge registered nvidia in place. Here, as the kubelet sees it: a pod through the nvidia handler
runs NVIDIA's real runtime and one through the default handler does not; --check --diff writes nothing; a second
run changes nothing; a CRI plugin that does not load is rolled back byte for byte; the doctor's containerd rows are
ok. Then the same node from its original `config default` with runtime_config_containerd_method: dropin: the
drop-in carries no higher version than config.toml on disk, both pods run, the second run changes nothing. The node
gets its in-place config back at the end.
"""

from __future__ import annotations

import json
import sys
import time
import tomllib
import uuid
from pathlib import Path

import grpc
import pytest

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
sys.path.insert(0, str(SCENARIO.parents[1]))
from playbook_runner import folded, recap, run_playbook

from tests.cri.client import CriClient, node_socket
from tests.cri.doors import log_since, log_size

testinfra_hosts = ["ansible://rc-containerd23"]
CONFIG = "/etc/containerd/config.toml"
BEFORE = "/var/tmp/gpunode-test-config.toml.before"  # 2.3.4's `config default` (containerd23_node.yml)
DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
RUNTIME = "/usr/bin/nvidia-container-runtime"
IMAGE = "docker.io/gpunode-test/busybox:latest"
CRI = "io.containerd.cri.v1.runtime"  # version 4 keeps version 3's table names
REPORT = "/var/lib/gpu-node-provisioning/validate.json"
DROPIN_METHOD = {"runtime_config_containerd_method": "dropin"}


def _effective(host) -> dict:
    dump = tomllib.loads(host.check_output("containerd config dump"))
    assert dump["version"] == 4, dump["version"]
    return dump["plugins"][CRI]["containerd"]


def _started(host) -> str:
    return host.check_output("systemctl show containerd -p ActiveEnterTimestampMonotonic --value")


def _cri_ok(host) -> bool:
    rows = [r.split() for r in host.check_output("ctr plugins ls").splitlines() if ".cri." in r or " cri " in f" {r} "]
    return bool(rows) and all(row[-1] == "ok" for row in rows)


def _cri_ready(host) -> None:
    deadline = time.monotonic() + 600  # a generous limit: the shared machine may be loaded
    while True:
        try:
            with CriClient(node_socket(host.backend.get_hostname())) as cri:
                if cri.runtime_ready():
                    return
        except grpc.RpcError:  # not up yet
            pass
        assert time.monotonic() < deadline, "containerd's CRI did not come back"
        time.sleep(1)


def _pods_run_through_the_right_runtime(host) -> None:
    """The kubelet's path: a pod with handler nvidia goes through NVIDIA's runtime, a pod without one does not."""
    with CriClient(node_socket(host.backend.get_hostname())) as cri:
        before = log_size(host)  # NVIDIA's runtime's debug log (nvidia_runtime_debug.yml)
        sandbox, error = cri.try_pod(f"nvidia-{uuid.uuid4().hex[:8]}", "nvidia", IMAGE, ["sleep", "300"])
        assert error is None, error
        calls = log_since(host, before)
        assert sandbox in calls, f"the nvidia pod did not go through NVIDIA's runtime: {calls[-2000:]}"
        assert calls.count("Create command detected") >= 2, calls[-2000:]  # the sandbox and its container
        before = log_size(host)
        sandbox, error = cri.try_pod(f"runc-{uuid.uuid4().hex[:8]}", "", IMAGE, ["sleep", "300"])
        assert error is None, error
        went = log_since(host, before) if log_size(host) != before else ""
        assert went == "", f"a pod without a handler went through NVIDIA's runtime: {went}"


def _nvidia_is_runc_with_only_the_binary_replaced(host) -> None:
    containerd = _effective(host)
    assert containerd["default_runtime_name"] == "runc"
    runc, nvidia = containerd["runtimes"]["runc"], containerd["runtimes"]["nvidia"]
    assert nvidia["options"]["BinaryName"] == RUNTIME
    assert {**nvidia, "options": {**nvidia["options"], "BinaryName": ""}} == {
        **runc,
        "options": {**runc["options"], "BinaryName": ""},
    }


def _changed_nothing(run) -> None:
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    counts = recap(run.stdout)["rc-containerd23"]
    assert counts["changed"] == 0, run.stdout[-3000:]


def test_nvidia_is_registered_in_place_and_the_file_stays_version_4(host):
    assert "v2.3.4" in host.check_output("containerd --version")
    assert _cri_ok(host), host.check_output("ctr plugins ls")
    _nvidia_is_runc_with_only_the_binary_replaced(host)
    before, after = host.file(BEFORE).content_string, host.file(CONFIG).content_string
    assert tomllib.loads(after)["version"] == 4
    assert tomllib.loads(after)["imports"] == tomllib.loads(before)["imports"]
    # every line of 2.3's `config default` is still there, in its order (restrict_oom_score_adj was asked)
    kept = iter(line for line in before.splitlines() if "restrict_oom_score_adj" not in line)
    after_lines = iter(after.splitlines())
    missing = [line for line in kept if not any(line == candidate for candidate in after_lines)]
    assert missing == [], f"lines of 2.3's config default lost or moved: {missing[:5]}"
    assert not host.file(DROPIN).exists


def test_a_pod_through_nvidia_runs_nvidias_runtime_and_a_default_pod_does_not(host):
    _pods_run_through_the_right_runtime(host)


def test_check_diff_shows_the_change_and_writes_nothing_then_a_second_run_changes_nothing(host):
    config, started = host.file(CONFIG).sha256sum, _started(host)
    changed = {
        "runtime_config_containerd_settings": {
            "plugins": {CRI: {"restrict_oom_score_adj": True, "max_container_log_line_size": 12345}}
        }
    }
    run = run_playbook(host, SCENARIO / "converge.yml", changed, "--check", "--diff")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    assert any(line.startswith("+") and "12345" in line for line in run.stdout.splitlines()), run.stdout[-3000:]
    assert recap(run.stdout)["rc-containerd23"]["changed"] >= 1
    assert host.file(CONFIG).sha256sum == config
    assert _started(host) == started, "check mode restarted containerd"
    _changed_nothing(run_playbook(host, SCENARIO / "converge.yml"))
    assert host.file(CONFIG).sha256sum == config and _started(host) == started


def test_a_cri_plugin_that_does_not_load_is_rolled_back_byte_for_byte(host):
    before = host.file(CONFIG).content_string
    bad = {
        "runtime_config_containerd_settings": {
            "plugins": {
                CRI: {"restrict_oom_score_adj": True, "containerd": {"default_runtime_name": "gpunode-missing"}}
            }
        },
        "runtime_config_health_retries": 3,
    }
    run = run_playbook(host, SCENARIO / "converge.yml", bad)
    assert run.returncode != 0, run.stdout[-3000:]
    said = folded(run)
    assert "containerd did not come back after its config changed" in said, said[-3000:]
    assert "CRI plugin did not load" in said, said[-3000:]
    assert f"Rolled back: restored {CONFIG} from /var/backups/gpu-node-provisioning{CONFIG}." in said
    assert " rescued=1 " in run.stdout
    assert host.file(CONFIG).content_string == before, "not restored byte for byte"
    _cri_ready(host)
    assert _cri_ok(host)
    _pods_run_through_the_right_runtime(host)


def test_the_doctor_reads_containerd_2_3(host):
    run = run_playbook(host, SCENARIO / "doctor.yml")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    checks = {c["check"]: c for c in json.loads(host.file(REPORT).content_string)["checks"]}
    rows = {name: row for name, row in checks.items() if name.startswith("containerd")}
    assert rows["containerd: CRI plugin"]["status"] == "ok", rows["containerd: CRI plugin"]
    assert rows["containerd: running config"]["status"] == "ok", rows["containerd: running config"]
    assert [row for row in rows.values() if row["status"] == "fail"] == [], json.dumps(rows, indent=1)


@pytest.fixture
def original_config_default(host):
    """The node back on 2.3's `config default` (what the converge started from), and its in-place config after."""
    saved = host.check_output(f"base64 -w0 {CONFIG}")
    host.check_output(f"cat {BEFORE} > {CONFIG} && rm -f {DROPIN} && systemctl restart containerd")
    _cri_ready(host)
    yield
    host.check_output(f"rm -f {DROPIN} && echo {saved} | base64 -d > {CONFIG} && systemctl restart containerd")
    _cri_ready(host)
    assert _effective(host)["runtimes"]["nvidia"]["options"]["BinaryName"] == RUNTIME


@pytest.mark.usefixtures("original_config_default")
def test_the_dropin_method_on_2_3s_config_default(host):
    config = host.file(CONFIG).sha256sum
    assert "nvidia" not in _effective(host)["runtimes"]
    run = run_playbook(host, SCENARIO / "converge.yml", DROPIN_METHOD, "--check", "--diff")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    assert not host.file(DROPIN).exists, "check mode wrote the drop-in"
    run = run_playbook(host, SCENARIO / "converge.yml", DROPIN_METHOD)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    # 2.3's config default imports conf.d/*.toml already: config.toml is left as it was
    assert host.file(CONFIG).sha256sum == config
    dropin = tomllib.loads(host.file(DROPIN).content_string)
    # a drop-in never carries a higher version than the root file on disk (containerd 2.3 refuses to start)
    assert dropin.get("version", 1) <= tomllib.loads(host.file(CONFIG).content_string)["version"], dropin
    _nvidia_is_runc_with_only_the_binary_replaced(host)
    assert _cri_ok(host)
    _pods_run_through_the_right_runtime(host)
    _changed_nothing(run_playbook(host, SCENARIO / "converge.yml", DROPIN_METHOD))
