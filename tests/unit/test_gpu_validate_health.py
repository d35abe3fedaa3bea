"""The doctor's health family (plugins/module_utils/gpu_validate/health.py, issue 49): each row ok, warn and fail.

TEST STAND-IN outputs: the kernel logs under tests/fixtures/kernel_log hold Xid lines in the driver's form
(`NVRM: Xid (PCI:0000:2a:00): 79, pid=..., ...`; a MIG GPU's `(PCI:... GPU-I:05)`), the GPUs' values come from the
stand-in nvidia-smi's recorded state (tests/fixtures/nvidia-smi-standin/state.json) printed as nvidia-smi's
`--format=csv,noheader,nounits`. Each failing case is a mutation of the healthy node."""

from __future__ import annotations

import json

import pytest
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import health
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.settings import READ_FIELDS
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.smi import query_argv
from conftest import ROOT, FakeNode, node, params

SMI = "/usr/bin/nvidia-smi"
LOGS = ROOT / "tests" / "fixtures" / "kernel_log"
STATE = json.loads((ROOT / "tests" / "fixtures" / "nvidia-smi-standin" / "state.json").read_text())
JOURNAL = tuple(health.KERNEL_LOG_COMMANDS[0])
FACTS = node(gpus=[{"pci_address": "0000:17:00.0"}, {"pci_address": "0000:2a:00.0"}])


def csv(gpus, fields):
    return "\n".join(", ".join(str(g[f]) for f in fields) for g in gpus)


def fake(log="clean.txt", gpus=None, nvlink=None, record=None, dcgm=None):
    gpus = gpus or [dict(g) for g in STATE["gpus"]]
    remapped = [dict(g["remapped_rows"], gpu_bus_id=g["pci.bus_id"]) for g in gpus]
    links = "".join(
        f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})\n"
        + "".join(f"\t Link {n}: {s}\n" for n, s in enumerate(g["nvlink"] if nvlink is None else nvlink))
        for g in gpus
    )
    commands = {
        JOURNAL: (0, (LOGS / log).read_text(), ""),
        tuple(query_argv(SMI, health.HEALTH_FIELDS)): (0, csv(gpus, health.HEALTH_FIELDS), ""),
        tuple(query_argv(SMI, health.REMAP_FIELDS, kind="remapped-rows")): (0, csv(remapped, health.REMAP_FIELDS), ""),
        (SMI, "nvlink", "-s"): (0, links, ""),
        tuple(query_argv(SMI, READ_FIELDS)): (0, csv(gpus, READ_FIELDS), ""),
    }
    if dcgm is not None:
        commands[("dcgmi", "diag", "-r", "1")] = dcgm
    return FakeNode(commands=commands, files={"/record.json": record} if record else {})


def rows(host, **overrides):
    found = health.check_health(params(settings_record="/record.json", **overrides), FACTS, host)
    return {row["check"]: row for row in found}


def test_a_healthy_node_is_ok_in_every_row():
    found = rows(fake())
    assert {name: row["status"] for name, row in found.items()} == {
        health.XID: "ok",
        health.REMAP: "ok",
        health.ECC: "ok",
        health.PCIE: "ok",
        health.MISSING: "ok",
        health.SLOWDOWN: "ok",
        health.NVLINK: "ok",
        health.SETTINGS: "skipped",
    }
    assert found[health.XID]["detail"] == "no Xid since boot (journalctl --dmesg)"


def test_xid_79_fails_and_an_application_xid_warns():
    row = rows(fake("xid_79.txt"))[health.XID]
    assert row["status"] == "fail", row
    assert "Xid 79 on 0000:2a:00" in row["detail"] and "fallen off the bus" in row["detail"]
    warn = rows(fake("xid_13.txt"), xid_fail=[79])[health.XID]
    assert warn["status"] == "warn" and "Xid 13 on 0000:17:00" in warn["detail"]
    # the MIG form of the line is read too: Xid 94 (contained ECC) fails with the default list
    assert rows(fake("xid_13.txt"))[health.XID]["status"] == "fail"


@pytest.mark.parametrize(
    ("change", "check", "status", "said"),
    [
        (
            {"remapped_rows": {"remapped_rows.pending": "Yes", "remapped_rows.failure": "No"}},
            health.REMAP,
            "fail",
            "a row remap is pending",
        ),
        (
            {"remapped_rows": {"remapped_rows.pending": "No", "remapped_rows.failure": "Yes"}},
            health.REMAP,
            "fail",
            "row remapping failed",
        ),
        ({"ecc.errors.uncorrected.volatile.total": "3"}, health.ECC, "fail", "0000:2a:00.0: 3"),
        ({"pcie.link.width.current": "4"}, health.PCIE, "warn", "x4 of x16"),
        (
            {"pcie.link.gen.current": "3", "clocks_event_reasons.gpu_idle": "Not Active"},
            health.PCIE,
            "warn",
            "gen 3 of 5 while busy",
        ),
        ({"clocks_event_reasons.hw_thermal_slowdown": "Active"}, health.SLOWDOWN, "warn", "HW thermal slowdown"),
    ],
)
def test_each_row_fails_or_warns_on_its_fault(change, check, status, said):
    gpus = [dict(g) for g in STATE["gpus"]]
    gpus[1].update(change)
    row = rows(fake(gpus=gpus))[check]
    assert row["status"] == status, row
    assert said in row["detail"]


def test_an_idle_gpu_may_lower_its_link_generation():
    gpus = [dict(g) for g in STATE["gpus"]]
    gpus[0]["pcie.link.gen.current"] = "1"  # gpu_idle Active in the recorded state
    assert rows(fake(gpus=gpus))[health.PCIE]["status"] == "ok"


def test_a_gpu_on_pci_that_the_driver_does_not_see_fails():
    row = rows(fake(gpus=[dict(STATE["gpus"][0])]))[health.MISSING]
    assert row["status"] == "fail"
    assert row["detail"] == "1 of 2 GPU(s) on PCI not seen by the driver: 0000:2a:00.0"


def test_an_inactive_nvlink_fails():
    row = rows(fake(nvlink=["26.562 GB/s", "<inactive>"]))[health.NVLINK]
    assert row["status"] == "fail" and "GPU 0 link 1" in row["detail"]
    assert rows(fake(nvlink=[]))[health.NVLINK]["status"] == "skipped"


def test_settings_declared_against_current():
    record = {
        "persistence": True,
        "module_params": {},
        "gpus": [{"bus_id": "0000:17:00.0", "index": "0", "power_limit": 700.0, "ecc": True}],
    }
    assert rows(fake(record=json.dumps(record)))[health.SETTINGS]["status"] == "ok"
    record["gpus"][0]["power_limit"] = 500.0
    row = rows(fake(record=json.dumps(record)))[health.SETTINGS]
    assert row["status"] == "fail" and "power limit 500 W (now 700 W)" in row["detail"]
    record["gpus"][0].update(power_limit=700.0, ecc=False)
    gpus = [dict(g) for g in STATE["gpus"]]
    gpus[0]["ecc.mode.pending"] = "Disabled"
    assert rows(fake(gpus=gpus, record=json.dumps(record)))[health.SETTINGS]["status"] == "warn"


def test_dcgm_diag_is_an_opt_in_row():
    assert health.DCGM not in rows(fake())
    assert rows(fake(dcgm=(0, "Successfully ran diagnostic", "")), dcgm_diag=True)[health.DCGM]["status"] == "ok"
    assert rows(fake(dcgm=(226, "Fail - GPU 1: PCIe", "")), dcgm_diag=True)[health.DCGM]["status"] == "fail"
    assert rows(fake(), dcgm_diag=True)[health.DCGM]["status"] == "warn"  # not installed


def test_no_gpu_skips_every_row():
    found = health.check_health(params(), node(has_gpu=False), FakeNode())
    assert {row["status"] for row in found} == {"skipped"}


def test_the_stand_in_answers_in_nvidia_smis_format():
    import subprocess

    smi = ROOT / "tests" / "fixtures" / "nvidia-smi-standin" / "nvidia-smi"
    out = subprocess.run(
        [smi, "--query-gpu=index,power.limit", "--format=csv"], capture_output=True, text=True, check=True
    ).stdout
    assert out.splitlines() == ["index, power.limit [W]", "0, 700.00 W", "1, 700.00 W"]
    bad = subprocess.run(
        [smi, "--query-gpu=index,no.such", "--format=csv"], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2 and 'Field "no.such" is not a valid field to query.' in bad.stdout
