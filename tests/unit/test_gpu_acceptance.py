"""What tests/gpu_acceptance.py can have tested without a GPU: its CDI spec checker on a sample of what
nvidia-ctk 1.20 generates, its nvidia-smi parser, its own sysfs reading and its refusal on a machine without a
GPU (the script itself runs only on a GPU machine, never in CI)."""

from __future__ import annotations

import copy
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gpu_acceptance", ROOT / "tests" / "gpu_acceptance.py")
acceptance = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(acceptance)

GPUS = [
    {"index": "0", "uuid": "GPU-1b7d5c4e-0000-0000-0000-000000000000", "pci_bus_id": "00000000:17:00.0"},
    {"index": "1", "uuid": "GPU-2c8e6d5f-0000-0000-0000-000000000000", "pci_bus_id": "00000000:65:00.0"},
]
# The shape of `nvidia-ctk cdi generate` (toolkit 1.20, device-name-strategy index and uuid), shortened.
SPEC = {
    "cdiVersion": "0.5.0",
    "kind": "nvidia.com/gpu",
    "devices": [
        {"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}, {"path": "/dev/dri/card1"}]}},
        {"name": GPUS[0]["uuid"], "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}},
        {"name": "1", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia1"}]}},
        {"name": GPUS[1]["uuid"], "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia1"}]}},
        {"name": "all", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}, {"path": "/dev/nvidia1"}]}},
    ],
    "containerEdits": {
        "deviceNodes": [{"path": "/dev/nvidiactl"}, {"path": "/dev/nvidia-uvm"}],
        "hooks": [{"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook"}],
    },
}


def on_host(path: str) -> bool:
    return path in ("/dev/nvidia0", "/dev/nvidia1")


def test_the_spec_checker_passes_a_good_spec():
    assert acceptance.check_cdi_spec(SPEC, GPUS, on_host) == []


def _broken(edit) -> dict:
    spec = copy.deepcopy(SPEC)
    edit(spec)
    return spec


@pytest.mark.parametrize(
    ("spec", "exists", "problem"),
    [
        (_broken(lambda s: s.update(kind="nvidia.com/mig")), on_host, "kind is 'nvidia.com/mig'"),
        (_broken(lambda s: s["devices"].pop()), on_host, "no device 'all'"),
        (_broken(lambda s: s["devices"].pop(3)), on_host, f"no device {GPUS[1]['uuid']!r}"),
        (
            _broken(lambda s: s["devices"][2]["containerEdits"].update(deviceNodes=[])),
            on_host,
            "does not carry /dev/nvidia1",
        ),
        (_broken(lambda s: s["containerEdits"].update(deviceNodes=[])), on_host, "lack /dev/nvidiactl"),
        (SPEC, lambda path: path == "/dev/nvidia0", "/dev/nvidia1 is not on the host"),
        ([], on_host, "not a mapping"),
    ],
)
def test_the_spec_checker_names_what_is_wrong(spec, exists, problem):
    problems = acceptance.check_cdi_spec(spec, GPUS, exists)
    assert any(problem in p for p in problems), problems


def test_nvidia_smi_csv_is_parsed():
    text = f"0, {GPUS[0]['uuid']}, 00000000:17:00.0\n1, {GPUS[1]['uuid']}, 00000000:65:00.0\n\nNo devices were found\n"
    assert acceptance.smi_gpus(text) == GPUS


def test_sysfs_gpus_reads_nvidia_display_and_3d_functions_only(tmp_path):
    def function(address, vendor, cls, device, vf=False):
        path = tmp_path / address
        path.mkdir()
        (path / "vendor").write_text(vendor + "\n")
        (path / "class").write_text(cls + "\n")
        (path / "device").write_text(device + "\n")
        if vf:
            (path / "physfn").symlink_to(tmp_path)

    function("0000:17:00.0", "0x10de", "0x030200", "0x2330")
    function("0000:03:00.0", "0x10de", "0x030000", "0x1eb8")
    function("0000:54:00.0", "0x10de", "0x068000", "0x22a3")  # NVSwitch (bridge class): no GPU
    function("0000:00:02.0", "0x8086", "0x030000", "0x9bc4")  # Intel graphics
    function("0000:17:00.4", "0x10de", "0x030200", "0x2330", vf=True)  # SR-IOV VF: counted apart by the facts
    assert acceptance.sysfs_gpus(str(tmp_path)) == [
        {"pci_address": "0000:03:00.0", "device_id": "0x1eb8"},
        {"pci_address": "0000:17:00.0", "device_id": "0x2330"},
    ]


def test_refusal_names_everything_missing():
    assert acceptance.refusal(True, True, {"runc": True}) == ""
    why = acceptance.refusal(False, False, {"runc": False, "nvidia-smi": True})
    assert "no NVIDIA GPU on PCI" in why and "driver is not loaded" in why and "runc is missing" in why


def test_the_script_refuses_clearly_on_a_machine_without_a_gpu(tmp_path):
    env = {**os.environ, "GPU_ACCEPTANCE_PCI_ROOT": str(tmp_path)}  # a PCI bus without any function
    run = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "gpu_acceptance.py")], capture_output=True, text=True, env=env
    )
    assert run.returncode == acceptance.REFUSED, run
    assert "REFUSED" in run.stderr and "no NVIDIA GPU on PCI" in run.stderr, run.stderr
    assert run.stdout == ""
