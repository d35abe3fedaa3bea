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
import tomllib
from pathlib import Path

import pytest

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
sys.path.insert(0, str(SCENARIO.parents[1]))
from playbook_runner import folded, recap, run_playbook

from tests.cri.containerd import (
    cri_plugin_ok,
    cri_ready,
    effective,
    nvidia_is_runc_with_only_the_binary_replaced,
    pods_run_through_the_right_runtime,
    started_at,
)

testinfra_hosts = ["ansible://rc-containerd23"]
CONFIG = "/etc/containerd/config.toml"
BEFORE = "/var/tmp/gpunode-test-config.toml.before"  # 2.3.4's `config default` (containerd23_node.yml)
DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
RUNTIME = "/usr/bin/nvidia-container-runtime"
CRI = "io.containerd.cri.v1.runtime"  # version 4 keeps version 3's table names
REPORT = "/var/lib/gpu-node-provisioning/validate.json"
DROPIN_METHOD = {"runtime_config_containerd_method": "dropin"}
NODES = ("rc-debian12", "rc-debian13", "rc-forky", "rc-ubuntu2204", "rc-crio", "rc-containerd23")


def _changed_tasks(stdout: str) -> list[str]:
    """'<host>: <task>' of each task that changed, as molecule's idempotence step names them."""
    task, changed = "", []
    for line in stdout.splitlines():
        if line.startswith("TASK ["):
            task = line[len("TASK [") :].rsplit("]", 1)[0]
        elif line.startswith("changed: ["):
            changed.append(f"{line[len('changed: [') :].split(']', 1)[0]}: {task}")
    return changed


def _changed_nothing(run) -> None:
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    counts = recap(run.stdout)["rc-containerd23"]
    assert counts["changed"] == 0, run.stdout[-3000:]


def test_nvidia_is_registered_in_place_and_the_file_stays_version_4(host):
    assert "v2.3.4" in host.check_output("containerd --version")
    assert cri_plugin_ok(host), host.check_output("ctr plugins ls")
    nvidia_is_runc_with_only_the_binary_replaced(host, 4)
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
    pods_run_through_the_right_runtime(host)


def test_check_diff_shows_the_change_and_writes_nothing_then_a_second_run_changes_nothing(host):
    config, started = host.file(CONFIG).sha256sum, started_at(host)
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
    assert started_at(host) == started, "check mode restarted containerd"
    # the second run is the scenario's idempotence check too (molecule.yml has no idempotence step): converge.yml
    # again over every node, as converged, changed=0 on each
    run = run_playbook(host, SCENARIO / "converge.yml", None, "--limit", "all")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    counts = recap(run.stdout)
    assert set(counts) == set(NODES), run.stdout[-3000:]
    assert not [name for name in NODES if counts[name]["changed"]], f"not idempotent: {_changed_tasks(run.stdout)}"
    assert host.file(CONFIG).sha256sum == config and started_at(host) == started


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
    cri_ready(host)
    assert cri_plugin_ok(host)
    pods_run_through_the_right_runtime(host)


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
    cri_ready(host)
    yield
    host.check_output(f"rm -f {DROPIN} && echo {saved} | base64 -d > {CONFIG} && systemctl restart containerd")
    cri_ready(host)
    assert effective(host, 4)["runtimes"]["nvidia"]["options"]["BinaryName"] == RUNTIME


@pytest.mark.usefixtures("original_config_default")
def test_the_dropin_method_on_2_3s_config_default(host):
    config = host.file(CONFIG).sha256sum
    assert "nvidia" not in effective(host, 4)["runtimes"]
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
    nvidia_is_runc_with_only_the_binary_replaced(host, 4)
    assert cri_plugin_ok(host)
    pods_run_through_the_right_runtime(host)
    _changed_nothing(run_playbook(host, SCENARIO / "converge.yml", DROPIN_METHOD))
