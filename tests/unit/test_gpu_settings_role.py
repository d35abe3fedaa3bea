"""The gpu_settings role as site.yml runs it (one task: the action checks the variables, then the node-side module),
through ansible-playbook on this machine against the TEST STAND-IN nvidia-smi (tests/fixtures/nvidia-smi-standin,
first on PATH) and a stand-in sysfs with two NVIDIA GPUs for the gpu_node facts. The role's files go to a temporary
tree; systemctl and the initramfs tool are recorders. Proves: nothing declared costs one task and reads no GPU; a
declared power limit is applied, then changed=0; --check --diff shows the change and changes nothing; a bad value is
refused by the variable check before the module runs."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import load_module, run_local_playbook

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "tests" / "fixtures" / "nvidia-smi-standin"
PLAYBOOK = """
- name: Run the gpu_settings role as site.yml does
  hosts: localhost
  connection: local
  gather_facts: false
  module_defaults:
    gpunode.provisioning.gpu_node_facts:
      root: "{{ standin_root }}"
      gather_runtimes: false
    gpunode.provisioning.gpu_settings:
      systemctl: "{{ standin_bin }}/systemctl"
      proc_root: "{{ standin_root }}"
  roles:
    - role: gpu_settings
"""


@pytest.fixture
def node(tmp_path, monkeypatch):
    root = tmp_path / "root"
    for address in ("0000:17:00.0", "0000:2a:00.0"):
        device = root / "sys" / "bus" / "pci" / "devices" / address
        device.mkdir(parents=True)
        for name, value in (("vendor", "0x10de"), ("device", "0x2330"), ("class", "0x030200"), ("numa_node", "0")):
            (device / name).write_text(value + "\n")
    (root / "proc" / "driver" / "nvidia").mkdir(parents=True)
    (root / "proc" / "driver" / "nvidia" / "version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (stand-in)\n"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").symlink_to(STANDIN / "nvidia-smi")
    (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "systemctl $*" >> {tmp_path}/calls.log\n')
    (bin_dir / "initramfs").write_text(f'#!/bin/sh\necho "initramfs $*" >> {tmp_path}/calls.log\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    shutil.copy(STANDIN / "state.json", tmp_path / "state.json")
    (tmp_path / "playbook.yml").write_text(PLAYBOOK)
    monkeypatch.setenv("NVIDIA_SMI_STANDIN_STATE", str(tmp_path / "state.json"))
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return tmp_path


def converge(node: Path, *extra: str, **variables):
    extra_vars = {
        "standin_root": str(node / "root"),
        "standin_bin": str(node / "bin"),
        "__gpu_settings_nvidia_smi": str(node / "bin" / "nvidia-smi"),
        "__gpu_node_facts_gpu_settings_unit": str(node / "etc" / "gpu-settings.service"),
        "__gpu_node_facts_gpu_settings_modprobe": str(node / "etc" / "modprobe.d" / "gpu-node-nvidia.conf"),
        "__gpu_node_facts_gpu_settings_record": str(node / "var" / "gpu-settings.json"),
        "__gpu_settings_initramfs_argv": [str(node / "bin" / "initramfs")],
        **variables,
    }
    return run_local_playbook(node / "playbook.yml", "-e", json.dumps(extra_vars), "-e", "ansible_become=false", *extra)


def recap(result) -> str:
    return result.stdout.split("PLAY RECAP", 1)[-1]


def power(node: Path) -> list:
    return [g["power.limit"] for g in json.loads((node / "state.json").read_text())["gpus"]]


def test_the_role_applies_then_changes_nothing_and_checks_with_a_diff(node):
    # nothing declared: the facts role's two tasks and this role's one, no GPU read (no log in the stand-in's state)
    idle = converge(node)
    assert idle.returncode == 0, idle.stdout + idle.stderr
    assert idle.stdout.count("TASK [gpu_settings") == 1, idle.stdout  # the role's one task (gpu_node_facts: its own)
    assert "ok=3 " in recap(idle) and "changed=0" in recap(idle), recap(idle)
    assert "log" not in json.loads((node / "state.json").read_text())
    # a power limit: applied, the boot unit written and enabled
    first = converge(node, gpu_settings_power_limit="80%")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "changed=1" in recap(first), recap(first)
    assert power(node) == ["560.00", "560.00"]
    assert "systemctl enable gpu-settings.service" in (node / "calls.log").read_text()
    # the same again: changed=0
    second = converge(node, gpu_settings_power_limit="80%")
    assert "changed=0" in recap(second) and "failed=0" in recap(second), recap(second)
    # --check --diff of another value: the driver's value against the declared one, nothing changed
    check = converge(
        node, "--check", "--diff", gpu_settings_power_limit="500", gpu_settings_compute_mode="EXCLUSIVE_PROCESS"
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "GPU 0 (0000:17:00.0, NVIDIA H100 80GB HBM3): power limit 560 W" in check.stdout
    assert "GPU 0 (0000:17:00.0, NVIDIA H100 80GB HBM3): compute mode Exclusive_Process (now)" in check.stdout
    assert power(node) == ["560.00", "560.00"]


def test_a_bad_value_is_refused_before_the_module_runs(node):
    result = converge(node, gpu_settings_power_limit="lots", gpu_settings_module_params={"EnableGpuFirmware": 0})
    assert result.returncode != 0
    assert "gpu_settings_power_limit is lots" in result.stdout
    assert "gpu_settings_module_params names EnableGpuFirmware" in result.stdout
    assert "log" not in json.loads((node / "state.json").read_text())
    assert not (node / "etc").exists()
    # out of range: refused by the module, naming the GPU, the value and its range
    refused = converge(node, gpu_settings_power_limit="1000")
    assert refused.returncode != 0
    assert "power limit 1000 W is outside its range 200-700 W" in refused.stdout


# --- nothing declared and none of the role's files on the node: no module run (issue 47) ---------------------------

NOTHING = {
    "persistence": None,
    "power_limit": "",
    "gpu_clocks": "",
    "memory_clocks": "",
    "application_clocks": "",
    "compute_mode": "",
    "ecc": None,
    "cc_mode": "",
    "ppcie_mode": "",
    "per_gpu": {},
    "module_params": {},
}
FILES = {
    "unit_path": "/etc/systemd/system/gpu-node-provisioning-gpu-settings.service",
    "record_path": "/var/lib/gpu-node-provisioning/gpu-settings.json",
    "modprobe_path": "/etc/modprobe.d/gpu-node-provisioning-nvidia.conf",
}
NONE_THERE = {"gpu_node": {"has_gpu": True, "path_exists": dict.fromkeys(FILES.values(), False)}}


def facts_with(path: str, exists: bool) -> dict:
    return {"gpu_node": {"path_exists": {**NONE_THERE["gpu_node"]["path_exists"], path: exists}}}


def run_settings_action(args: dict, facts: dict | None, diff: bool = False):
    """plugins/action/gpu_settings.py's run with the module runs recorded: (result, the modules it ran)."""
    from unittest import mock

    plugin = load_module("gpu_settings", subdir="plugins/action")
    task = mock.MagicMock()
    task.args = args
    task.check_mode = False
    task.diff = diff
    task.async_val = 0
    ran = []

    def execute_module(name, module_args=None, task_vars=None, **kwargs):
        ran.append(name)
        return {"changed": True, "changes": [], "pending": [], "reboot_required": False}

    action = plugin.ActionModule(task, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), None)
    task_vars = {} if facts is None else {"ansible_facts": facts}
    with mock.patch.object(action, "_execute_module", side_effect=execute_module):
        return action.run(task_vars=task_vars), ran


def test_nothing_declared_and_no_file_there_runs_no_module():
    result, ran = run_settings_action({"settings": NOTHING, "has_gpu": True, **FILES}, NONE_THERE)
    assert ran == []
    assert result["changed"] is False and not result.get("failed")
    assert result["changes"] == [] and result["pending"] == [] and result["reboot_required"] is False
    assert "diff" not in result
    with_diff, _ran = run_settings_action({"settings": NOTHING, "has_gpu": True, **FILES}, NONE_THERE, diff=True)
    assert with_diff["diff"] == []


@pytest.mark.parametrize("path", sorted(FILES.values()))
def test_a_file_an_earlier_declaration_left_runs_the_module(path):
    """The module removes it."""
    _result, ran = run_settings_action({"settings": NOTHING, "has_gpu": True, **FILES}, facts_with(path, True))
    assert ran == ["gpunode.provisioning.gpu_settings"]


@pytest.mark.parametrize(
    "declared",
    [
        {"power_limit": "80%"},
        {"persistence": False},
        {"module_params": {"NVreg_EnableGpuFirmware": 0}},
        {"per_gpu": {"0": {"compute_mode": "DEFAULT"}}},
    ],
    ids=lambda value: next(iter(value)),
)
def test_a_declared_setting_runs_the_module(declared):
    _result, ran = run_settings_action({"settings": {**NOTHING, **declared}, "has_gpu": True, **FILES}, NONE_THERE)
    assert ran == ["gpunode.provisioning.gpu_settings"]


@pytest.mark.parametrize(
    "facts",
    [
        None,  # no facts at all
        {"gpu_node": {"has_gpu": True}},  # an older facts shape, without path_exists
        {"gpu_node": {"path_exists": {}}},  # the facts task asked about no path
        # the facts of another root (keyed below it): no answer about the running system's files
        {"gpu_node": {"path_exists": {"/srv/tree" + path: False for path in FILES.values()}}},
        {"gpu_node": {"path_exists": {FILES["unit_path"]: False, FILES["record_path"]: False}}},  # one not asked
    ],
    ids=["no facts", "older facts", "no paths asked", "another root", "one path not asked"],
)
def test_facts_that_do_not_answer_for_each_file_run_the_module(facts):
    _result, ran = run_settings_action({"settings": NOTHING, "has_gpu": True, **FILES}, facts)
    assert ran == ["gpunode.provisioning.gpu_settings"]


PLAYBOOK_LIVE = """
- name: Run the gpu_settings role with the facts of this machine (root /)
  hosts: localhost
  connection: local
  gather_facts: false
  module_defaults:
    gpunode.provisioning.gpu_node_facts:
      gather_runtimes: false
  roles:
    - role: gpu_settings
"""


def test_nothing_declared_costs_no_module_run_until_a_file_is_left(node):
    """site.yml's no-op path with nothing declared: the role's task runs no module (-vvv names each module file it
    uses); a record an earlier declaration left is there: the module runs and removes it, then none runs again."""
    (node / "playbook.yml").write_text(PLAYBOOK_LIVE)

    def modules_run(result) -> list:
        return [line.rsplit("/", 1)[-1] for line in result.stdout.splitlines() if line.startswith("Using module file")]

    idle = converge(node, "-vvv")
    assert idle.returncode == 0, idle.stdout[-3000:] + idle.stderr[-2000:]
    assert "changed=0" in recap(idle) and "failed=0" in recap(idle), recap(idle)
    assert modules_run(idle) == ["gpu_node_facts.py"], modules_run(idle)
    record = node / "var" / "gpu-settings.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"persistence": null, "module_params": {}, "gpus": []}\n')
    left = converge(node, "-vvv")
    assert left.returncode == 0, left.stdout[-3000:] + left.stderr[-2000:]
    assert modules_run(left) == ["gpu_node_facts.py", "gpu_settings.py"], modules_run(left)
    assert "changed=1" in recap(left), recap(left)
    assert not record.exists()
    again = converge(node, "-vvv")
    assert modules_run(again) == ["gpu_node_facts.py"] and "changed=0" in recap(again), recap(again)
