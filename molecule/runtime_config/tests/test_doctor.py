"""The doctor (gpu_validate) reads the containerd that runtime_config just configured, on rc-ubuntu2204.

Its "containerd: running config" row compares when containerd started with when its config files were written.
It asked `systemctl show --timestamp=unix`, which systemd 247 (Debian 11) and 249 (Ubuntu 22.04, rc-ubuntu2204)
refuse ("Invalid value: unix."): the whole containerd check failed there (systemd 252+ is covered by the default
scenario's doctor). It also shares its report directory with runtime_config's pending-restart markers: one mode
for both (0755; the reports are read by operators).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
from playbook_runner import run_playbook

testinfra_hosts = ["ansible://rc-ubuntu2204"]
REPORT_DIR = "/var/lib/gpu-node-provisioning"
CONFIG = "/etc/containerd/config.toml"


def _doctor(host) -> dict[str, dict]:
    run = run_playbook(host, SCENARIO / "doctor.yml")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    report = json.loads(host.file(f"{REPORT_DIR}/validate.json").content_string)
    return {c["check"]: c for c in report["checks"]}


def test_the_doctor_sees_the_running_containerd_run_its_config(host):
    checks = _doctor(host)
    assert checks["containerd: CRI plugin"]["status"] == "ok", checks["containerd: CRI plugin"]
    live = checks["containerd: running config"]
    assert live["status"] == "ok", live
    assert live["detail"] == "containerd started after its config files were last written", live
    assert host.file(REPORT_DIR).mode == 0o755
    assert host.file(f"{REPORT_DIR}/validate.json").mode == 0o644


def test_the_doctor_warns_of_a_config_written_after_containerd_started(host):
    mtime = host.check_output(f"stat -c %y {CONFIG}")
    try:
        host.check_output(f"touch {CONFIG}")  # as a run that wrote it and did not restart containerd
        live = _doctor(host)["containerd: running config"]
        assert live["status"] == "warn", live
        assert f"{CONFIG} was written after containerd started" in live["detail"], live
    finally:
        host.check_output(f"touch -d '{mtime}' {CONFIG}")
