"""The GPU settings module (modules/gpu_settings.py, module_utils/nvidia/settings.py, issue 49), run for real
against the TEST STAND-IN nvidia-smi (tests/fixtures/nvidia-smi-standin: NVIDIA's query CSV from a recorded state,
set commands change that state). Each setting: applied, already right (changed=0), refused out of range, pending
until a reset or reboot; --check changes nothing; a reset-bound change is refused while a process holds a GPU
unless the rollout says the node is drained."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, load_module, run_module

STANDIN = ROOT / "tests" / "fixtures" / "nvidia-smi-standin"
gpu_settings = load_module("gpu_settings")


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A node: the stand-in's state in tmp_path, the module's files under tmp_path, systemctl a recorder."""
    state = tmp_path / "state.json"
    shutil.copy(STANDIN / "state.json", state)
    monkeypatch.setenv("NVIDIA_SMI_STANDIN_STATE", str(state))
    log = tmp_path / "systemctl.log"
    systemctl = tmp_path / "systemctl"
    systemctl.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    systemctl.chmod(0o755)
    (tmp_path / "proc").mkdir()
    return tmp_path


def args(node: Path, **settings) -> dict:
    return {
        "settings": settings,
        "has_gpu": True,
        "nvidia_smi": str(STANDIN / "nvidia-smi"),
        "unit_path": str(node / "etc/systemd/system/gpu-node-provisioning-gpu-settings.service"),
        "record_path": str(node / "var/lib/gpu-node-provisioning/gpu-settings.json"),
        "modprobe_path": str(node / "etc/modprobe.d/gpu-node-provisioning-nvidia.conf"),
        "proc_params": str(node / "params"),
        "systemctl": str(node / "systemctl"),
        "proc_root": str(node),
        "initramfs_argv": ["true"],
    }


def state(node: Path) -> dict:
    return json.loads((node / "state.json").read_text())


def test_a_power_limit_share_is_applied_then_already_right(node):
    first = run_module(gpu_settings, args(node, power_limit="80%"), diff=True)
    assert not first.failed, first.result
    assert first.result["changed"] is True
    assert [c["wanted"] for c in first.result["changes"]] == ["560 W", "560 W"]
    assert [g["power.limit"] for g in state(node)["gpus"]] == ["560.00", "560.00"]
    unit = (node / "etc/systemd/system/gpu-node-provisioning-gpu-settings.service").read_text()
    assert "ExecStart=" + str(STANDIN / "nvidia-smi") + " -i 0000:17:00.0 -pl 560" in unit
    assert "Before=kubelet.service" in unit
    assert "enable gpu-node-provisioning-gpu-settings.service" in (node / "systemctl.log").read_text()
    assert first.result["diff"][0]["before"].startswith(
        "GPU 0 (0000:17:00.0, NVIDIA H100 80GB HBM3): power limit 700 W"
    )
    second = run_module(gpu_settings, args(node, power_limit="80%"))
    assert second.result["changed"] is False, second.result
    assert second.result["changes"] == []


def test_check_mode_shows_the_change_and_changes_nothing(node):
    result = run_module(
        gpu_settings, args(node, power_limit="300", compute_mode="EXCLUSIVE_PROCESS"), check_mode=True, diff=True
    )
    assert result.result["changed"] is True
    assert {(c["setting"], c["current"], c["wanted"]) for c in result.result["changes"]} == {
        ("power limit", "700 W", "300 W"),
        ("compute mode", "Default", "Exclusive_Process"),
    }
    assert state(node)["gpus"][0]["power.limit"] == "700.00"
    assert not (node / "etc").exists()
    assert not (node / "systemctl.log").exists()


def test_a_value_out_of_range_is_refused_naming_gpu_value_and_range(node):
    result = run_module(gpu_settings, args(node, power_limit="900"))
    assert result.failed
    assert (
        "GPU 0 (0000:17:00.0, NVIDIA H100 80GB HBM3): power limit 900 W is outside its range 200-700 W"
        in result.result["msg"]
    )
    assert state(node)["gpus"][0]["power.limit"] == "700.00"  # nothing changed
    assert not (node / "etc").exists()
    clocks = run_module(gpu_settings, args(node, application_clocks="2619,2100"))
    assert clocks.failed and "exceed its range 2619,1980 MHz" in clocks.result["msg"]


def test_per_gpu_values_override_the_nodes(node):
    result = run_module(gpu_settings, args(node, power_limit="600", per_gpu={"1": {"power_limit": "400"}}))
    assert not result.failed, result.result
    assert [g["power.limit"] for g in state(node)["gpus"]] == ["600.00", "400.00"]


def test_clocks_and_compute_mode_are_applied_and_kept(node):
    wanted = {"gpu_clocks": "1200,1800", "application_clocks": "2619,1980", "compute_mode": "EXCLUSIVE_PROCESS"}
    result = run_module(gpu_settings, args(node, **wanted))
    assert not result.failed, result.result
    gpu = state(node)["gpus"][0]
    assert (gpu["locked_gpu_clocks"], gpu["clocks.applications.graphics"], gpu["compute_mode"]) == (
        "1200,1800",
        "1980",
        "Exclusive_Process",
    )
    assert run_module(gpu_settings, args(node, **wanted)).result["changed"] is False


def test_ecc_is_pending_until_a_reset(node):
    result = run_module(gpu_settings, args(node, ecc=False))
    assert not result.failed, result.result
    assert result.result["reboot_required"] is True
    assert any("ecc Disabled after reset or reboot" in p for p in result.result["pending"])
    assert state(node)["gpus"][0]["ecc.mode.pending"] == "Disabled"
    again = run_module(gpu_settings, args(node, ecc=False))
    assert again.result["changed"] is False  # set already: only pending
    assert again.result["reboot_required"] is True


def test_a_reset_bound_change_is_refused_while_a_process_holds_a_gpu(node):
    holder = node / "proc" / "4242"
    (holder / "fd").mkdir(parents=True)
    (holder / "comm").write_text("python3\n")
    (holder / "environ").write_bytes(b"NVIDIA_VISIBLE_DEVICES=GPU-1\0")
    result = run_module(gpu_settings, args(node, ecc=False))
    assert result.failed
    assert "while processes hold GPUs (python3 (pid 4242))" in result.result["msg"]
    assert "gpu_settings_drained" in result.result["msg"]
    assert state(node)["gpus"][0]["ecc.mode.pending"] == "Enabled"  # nothing changed
    drained = run_module(gpu_settings, {**args(node, ecc=False), "drained": True})
    assert not drained.failed, drained.result
    # a live setting is no reset: it goes ahead while pods run
    assert not run_module(gpu_settings, args(node, power_limit="650")).failed


def test_module_params_go_to_modprobe_and_wait_for_a_reboot(node):
    (node / "params").write_text('EnableGpuFirmware: 18\nRegistryDwords: ""\n')
    result = run_module(gpu_settings, args(node, module_params={"NVreg_EnableGpuFirmware": 0}))
    assert not result.failed, result.result
    text = (node / "etc/modprobe.d/gpu-node-provisioning-nvidia.conf").read_text()
    assert text.endswith("options nvidia NVreg_EnableGpuFirmware=0\n")
    assert result.result["reboot_required"] is True
    assert run_module(gpu_settings, args(node, module_params={"NVreg_EnableGpuFirmware": 0})).result["changed"] is False
    bad = run_module(gpu_settings, args(node, module_params={"EnableGpuFirmware": 0}))
    assert bad.failed and "is not an NVreg_* parameter" in bad.result["msg"]


def test_nothing_declared_reads_no_gpu_and_removes_what_was_declared(node):
    run_module(gpu_settings, args(node, power_limit="600"))
    unit = node / "etc/systemd/system/gpu-node-provisioning-gpu-settings.service"
    assert unit.exists()
    broken = {**args(node), "nvidia_smi": "/nonexistent/nvidia-smi"}  # proves no GPU is asked
    removed = run_module(gpu_settings, broken)
    assert not removed.failed, removed.result
    assert removed.result["changed"] is True and not unit.exists()
    assert "disable gpu-node-provisioning-gpu-settings.service" in (node / "systemctl.log").read_text()
    assert run_module(gpu_settings, broken).result["changed"] is False


def test_persistence_goes_through_nvidia_persistenced(node):
    data = state(node)
    data["gpus"][1]["persistence_mode"] = "Disabled"
    (node / "state.json").write_text(json.dumps(data))
    result = run_module(gpu_settings, args(node, persistence=True))
    assert not result.failed, result.result
    assert "enable --now nvidia-persistenced.service" in (node / "systemctl.log").read_text()
    assert (
        "Wants=nvidia-persistenced.service"
        in (node / "etc/systemd/system/gpu-node-provisioning-gpu-settings.service").read_text()
    )


def test_the_record_is_what_the_doctor_compares(node):
    from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.settings import (
        READ_FIELDS,
        compare_record,
    )
    from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.smi import parse_query

    run_module(gpu_settings, args(node, power_limit="500", ecc=False))
    record = json.loads((node / "var/lib/gpu-node-provisioning/gpu-settings.json").read_text())
    now = state(node)["gpus"]
    gpus = parse_query("\n".join(", ".join(g[f] for f in READ_FIELDS) for g in now), READ_FIELDS)
    differences, pending = compare_record(record, gpus)
    assert differences == []
    assert len(pending) == 2 and "ecc Disabled" in pending[0]
    # Mutation: the power limit came back to its default (a driver reload without the boot unit)
    gpus[0]["power.limit"] = "700.00"
    differences, _ = compare_record(record, gpus)
    assert differences == ["GPU 0 (0000:17:00.0, NVIDIA H100 80GB HBM3) power limit 500 W (now 700 W)"]


def test_a_driver_not_loaded_yet_waits_for_the_reboot(node):
    """First converge: the driver role installed the driver, the reboot that loads it has not happened."""
    result = run_module(
        gpu_settings, {**args(node, power_limit="600"), "driver_loaded": False, "nvidia_smi": "/nonexistent"}
    )
    assert not result.failed, result.result
    assert result.result["changed"] is False
    assert result.result["reboot_required"] is True
    assert "run the role again after the reboot" in result.result["pending"][0]
    assert not (node / "etc").exists()
