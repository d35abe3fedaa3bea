"""Verify gs-debian12 (issue 49): the gpu_settings role on a node with systemd, against the TEST STAND-IN nvidia-smi
(its recorded state: /usr/local/lib/nvidia-smi-standin/state.json) and the stand-in sysfs of prepare.yml."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parents[1]))
sys.path.insert(0, str(SCENARIO.parents[0] / "resources"))
from playbook_runner import run_playbook

from tests.doctor_params import shared_doctor_params

testinfra_hosts = ["ansible://gs-debian12"]

UNIT = "gpu-node-provisioning-gpu-settings.service"
STATE = "/usr/local/lib/nvidia-smi-standin/state.json"


def state(host) -> dict:
    return json.loads(host.file(STATE).content_string)


def driver_reload(host) -> None:
    """What a driver reload does to the stand-in GPUs: power limit, compute mode and clocks back to their defaults."""
    script = (
        "import json, sys; p = sys.argv[1]; s = json.load(open(p))\n"
        "for g in s['gpus']: g.update({'power.limit': '700.00', 'compute_mode': 'Default'}); "
        "g.pop('locked_gpu_clocks', 0)\n"
        "json.dump(s, open(p, 'w'))\n"
    )
    host.check_output(f"python3 -c {shlex.quote(script)} {STATE}")


def doctor(host) -> dict:
    # the gpu_node facts of the stand-in node (prepare.yml's sysfs: two GPUs on PCI, a loaded driver)
    facts = {
        "has_gpu": True,
        "gpu_count": 2,
        "nvidia_smi": "/usr/bin/nvidia-smi",
        "gpus": [{"pci_address": "0000:17:00.0"}, {"pci_address": "0000:2a:00.0"}],
        "driver": {"loaded": True, "version": "580.95.05"},
    }
    args = {"families": ["health"], "node": facts, **shared_doctor_params()}
    out = host.ansible("gpu_validate_checks", json.dumps(args), check=False)
    assert "checks" in out, out
    return {row["check"]: row for row in out["checks"]}


def test_the_settings_are_applied_and_ecc_waits_for_a_reset(host):
    gpus = state(host)["gpus"]
    assert [g["power.limit"] for g in gpus] == ["560.00", "400.00"]
    assert [g["compute_mode"] for g in gpus] == ["Exclusive_Process", "Exclusive_Process"]
    assert [g.get("locked_gpu_clocks") for g in gpus] == ["1200,1800", "1200,1800"]
    assert [g["ecc.mode.pending"] for g in gpus] == ["Disabled", "Disabled"]


def test_the_boot_unit_is_enabled_before_the_kubelet_and_reapplies_after_a_reload(host):
    assert host.check_output(f"systemctl is-enabled {UNIT}") == "enabled"
    before = host.check_output(f"systemctl show -p Before --value {UNIT}")
    assert "kubelet.service" in before.split()
    driver_reload(host)
    try:
        assert doctor(host)["GPU settings"]["status"] == "fail"  # the doctor sees the lost settings
    finally:
        host.check_output(f"systemctl restart {UNIT}")
    gpus = state(host)["gpus"]
    assert [g["power.limit"] for g in gpus] == ["560.00", "400.00"]
    assert [g.get("locked_gpu_clocks") for g in gpus] == ["1200,1800", "1200,1800"]
    rows = doctor(host)
    assert rows["GPU settings"]["status"] == "warn", rows["GPU settings"]  # ECC: pending until a reset
    assert "ecc Disabled" in rows["GPU settings"]["detail"]
    assert rows["GPU health: GPUs on PCI"]["status"] == "ok", rows["GPU health: GPUs on PCI"]


def test_check_diff_shows_the_driver_against_the_declared_and_changes_nothing(host):
    result = run_playbook(host, SCENARIO / "converge.yml", {"gpu_settings_power_limit": "500"}, "--check", "--diff")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "GPU 0 (0000:17:00.0, NVIDIA H100 80GB HBM3): power limit 560 W" in result.stdout
    assert "GPU 0 (0000:17:00.0, NVIDIA H100 80GB HBM3): power limit 500 W (now)" in result.stdout
    assert "changed=1" in result.stdout
    assert state(host)["gpus"][0]["power.limit"] == "560.00"


def test_a_value_out_of_range_is_refused_and_nothing_changes(host):
    result = run_playbook(host, SCENARIO / "converge.yml", {"gpu_settings_power_limit": "1000"})
    assert result.returncode != 0
    assert "power limit 1000 W is outside its range 200-700 W" in result.stdout
    assert state(host)["gpus"][0]["power.limit"] == "560.00"
