"""site.yml on containerd 2.3.4 with a config version 2 file (issue 36), on site-ubuntu2404: a node upgraded to
containerd 2.3 (upstream's build, Ubuntu 24.04's runc) that kept its admin's file from containerd 1.6
(tests/fixtures/containerd/v2-debian12-containerd-1.6.toml). containerd 2.3 migrates it to version 4 in memory
(`config dump` says 4), the file on disk stays version 2, and that is what a drop-in may not exceed.

As the kubelet sees it: a pod through the nvidia handler runs NVIDIA's real runtime, one through the default handler
does not; --check --diff writes nothing; a broken config is rolled back byte for byte. Then the drop-in method from
the same original file: config.toml gains the import, the drop-in is version 2, both pods run, a second run changes
nothing. Last, the doctor's drop-in version row: another tool's drop-in of version 4 beside a version 2 root
(what NVIDIA's toolkit up to 1.19.1 wrote from `config dump`'s version, NVIDIA/aicr#1688; containerd 2.3 then refuses
to start) fails it; gone, the row is ok again. The node gets its in-place config back at the end.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
sys.path.insert(0, str(SCENARIO.parents[1]))
from playbook_runner import folded, recap, run_playbook

from tests.cri.containerd import (
    cri_ready,
    effective,
    nvidia_is_runc_with_only_the_binary_replaced,
    pods_run_through_the_right_runtime,
    started_at,
)
from tests.cri.doors import doctor

testinfra_hosts = ["ansible://site-ubuntu2404"]
CONFIG = "/etc/containerd/config.toml"
CONF_D = "/etc/containerd/conf.d"
BEFORE = "/var/tmp/gpunode-test-config.toml.before"  # the admin's version 2 file (containerd23_node.yml)
DROPIN = f"{CONF_D}/99-nvidia.toml"
OTHER_TOOL = f"{CONF_D}/50-gpunode-test-other-tool.toml"
RUNTIME = "/usr/bin/nvidia-container-runtime"
IMAGE = "docker.io/gpunode-test/busybox:latest"
RUNTIME_ONLY = ("--tags", "runtime")  # the toolkit role's runtime registration (runtime_config) alone
DROPIN_METHOD = {"runtime_config_containerd_method": "dropin"}


def _on_disk(path: str, host) -> dict:
    return tomllib.loads(host.file(path).content_string)


def _doctor(host) -> dict[str, dict]:
    """The doctor's containerd rows (gpu_validate_checks, family containerd), without touching site.yml's report."""
    return doctor(host, ["containerd"], families=("containerd",), containerd_test_image=IMAGE)


def _dropin_version_row(checks: dict[str, dict]) -> dict:
    """The doctor's row that compares each drop-in's config version with its root file's (issue 36 item 3)."""
    rows = [row for name, row in checks.items() if name.startswith("containerd:") and "drop-in" in name]
    assert len(rows) == 1, sorted(checks)
    return rows[0]


def test_the_file_stays_version_2_and_containerd_2_3_runs_nvidia_from_it(host):
    assert "v2.3.4" in host.check_output("containerd --version")
    on_disk = _on_disk(CONFIG, host)
    assert on_disk["version"] == 2
    nvidia = on_disk["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]
    assert nvidia["options"]["BinaryName"] == RUNTIME
    assert "io.containerd.cri.v1.runtime" not in on_disk["plugins"], "a version 4 table in a version 2 file"
    nvidia_is_runc_with_only_the_binary_replaced(host, 4)
    before = host.file(BEFORE).content_string
    assert host.file(CONFIG).content_string.startswith(before.splitlines()[0] + "\n")  # the admin's comment


def test_a_pod_through_nvidia_runs_nvidias_runtime_and_a_default_pod_does_not(host):
    pods_run_through_the_right_runtime(host)


def test_check_diff_shows_the_change_and_writes_nothing(host):
    config, started = host.file(CONFIG).sha256sum, started_at(host)
    changed = {
        "runtime_config_containerd_settings": {
            "plugins": {
                "io.containerd.grpc.v1.cri": {"restrict_oom_score_adj": True, "max_container_log_line_size": 12345}
            }
        }
    }
    run = run_playbook(host, SCENARIO / "converge.yml", changed, *RUNTIME_ONLY, "--check", "--diff")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    assert any(line.startswith("+") and "12345" in line for line in run.stdout.splitlines()), run.stdout[-3000:]
    assert host.file(CONFIG).sha256sum == config and started_at(host) == started


def test_a_cri_plugin_that_does_not_load_is_rolled_back_byte_for_byte(host):
    before = host.file(CONFIG).content_string
    bad = {
        "runtime_config_containerd_settings": {
            "plugins": {
                "io.containerd.grpc.v1.cri": {
                    "restrict_oom_score_adj": True,
                    "containerd": {"default_runtime_name": "gpunode-missing"},
                }
            }
        },
        "runtime_config_health_retries": 3,
    }
    run = run_playbook(host, SCENARIO / "converge.yml", bad, *RUNTIME_ONLY)
    assert run.returncode != 0, run.stdout[-3000:]
    said = folded(run)
    assert "CRI plugin did not load" in said, said[-3000:]
    assert f"Rolled back: restored {CONFIG} from /var/backups/gpu-node-provisioning{CONFIG}." in said, said[-3000:]
    assert host.file(CONFIG).content_string == before, "not restored byte for byte"
    cri_ready(host)
    pods_run_through_the_right_runtime(host)


@pytest.fixture
def original_version_2_file(host):
    """The node back on the admin's version 2 file (what site.yml started from), and its in-place config after."""
    saved = host.check_output(f"base64 -w0 {CONFIG}")
    host.check_output(f"cat {BEFORE} > {CONFIG} && rm -rf {CONF_D} && systemctl restart containerd")
    cri_ready(host)
    yield
    host.check_output(f"rm -rf {CONF_D} && echo {saved} | base64 -d > {CONFIG} && systemctl restart containerd")
    cri_ready(host)
    assert effective(host, 4)["runtimes"]["nvidia"]["options"]["BinaryName"] == RUNTIME


@pytest.mark.usefixtures("original_version_2_file")
def test_the_dropin_method_on_a_version_2_file_and_the_doctors_dropin_version_row(host):
    run = run_playbook(host, SCENARIO / "converge.yml", DROPIN_METHOD, *RUNTIME_ONLY)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    root = _on_disk(CONFIG, host)
    assert root["version"] == 2 and f"{CONF_D}/*.toml" in root["imports"], root.get("imports")
    # never a higher version than the root file on disk: containerd 2.3 would refuse to start
    assert _on_disk(DROPIN, host).get("version", 1) <= 2, host.file(DROPIN).content_string
    nvidia_is_runc_with_only_the_binary_replaced(host, 4)
    pods_run_through_the_right_runtime(host)
    again = run_playbook(host, SCENARIO / "converge.yml", DROPIN_METHOD, *RUNTIME_ONLY)
    assert again.returncode == 0 and recap(again.stdout)["site-ubuntu2404"]["changed"] == 0, again.stdout[-3000:]

    assert _dropin_version_row(_doctor(host))["status"] == "ok"
    # the mutation: another tool's drop-in, of the version `config dump` reports, in the imported directory
    host.check_output(
        f"printf '%s\\n' 'version = 4' '[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.other]'"
        f" '  runtime_type = \"io.containerd.runc.v2\"' > {OTHER_TOOL}"
    )
    try:
        row = _dropin_version_row(_doctor(host))
        assert row["status"] == "fail", row
        assert OTHER_TOOL in row["detail"], row
    finally:
        host.check_output(f"rm -f {OTHER_TOOL}")
    assert _dropin_version_row(_doctor(host))["status"] == "ok"
