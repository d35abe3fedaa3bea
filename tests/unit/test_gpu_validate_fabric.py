"""The doctor's fabric family (plugins/module_utils/gpu_validate/fabric.py, issue 39): the rows "IMEX" (the host's
nvidia-imex.service against nvidia_driver_imex) and "NVLink fabric" (each GPU's fabric state and status).

TEST STAND-IN outputs: FakeNode (conftest.py) answers `systemctl show --property=LoadState,UnitFileState,ActiveState
nvidia-imex.service` as systemd prints it (KEY=value lines) and `nvidia-smi --query-gpu=index,fabric.state,
fabric.status --format=csv,noheader` as nvidia-smi prints it (one "index, state, status" line per GPU; "N/A" for a GPU
on no fabric). Each failing case below is a mutation of the ok one: a state that is not "Completed", a status that is
not "Success", an IMEX unit running where it must be masked or stopped where it must run."""

from __future__ import annotations

import pytest
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import fabric
from conftest import NO_GPU, FakeNode, load_module, node, params

SMI = "/usr/bin/nvidia-smi"
SHOW = tuple(fabric.UNIT_PROPERTIES)
QUERY = (SMI, *fabric.SMI_QUERY)
MASKED = "LoadState=masked\nUnitFileState=masked\nActiveState=inactive\n"
RUNNING = "LoadState=loaded\nUnitFileState=enabled\nActiveState=active\n"
COMPLETED = "0, Completed, Success\n1, Completed, Success\n"


def fake(unit=RUNNING, query=COMPLETED, query_rc=0, query_err=""):
    return FakeNode(commands={SHOW: (0, unit, ""), QUERY: (query_rc, query, query_err)})


def rows(host, imex="host", facts=None):
    return fabric.check_fabric(params(imex=imex), facts or node(), host)


def by_name(found):
    return {row["check"]: row for row in found}


def test_a_host_run_imex_on_a_completed_fabric_is_ok():
    found = by_name(rows(fake()))
    assert found["IMEX"]["status"] == "ok", found["IMEX"]
    assert found["IMEX"]["detail"] == "run by the host (nvidia-imex.service: loaded, enabled, active)"
    assert found["NVLink fabric"] == {
        "check": "NVLink fabric",
        "status": "ok",
        "detail": "2 GPU(s) registered: Completed, Success",
        "fix": "",
    }


def test_dra_wants_the_unit_masked():
    assert by_name(rows(fake(unit=MASKED), imex="dra"))["IMEX"]["status"] == "ok"
    # Mutation: the host's IMEX runs on a DRA node (the ComputeDomain daemons would start a second one)
    row = by_name(rows(fake(unit=RUNNING), imex="dra"))["IMEX"]
    assert row["status"] == "fail"
    assert "must be stopped and masked, but nvidia-imex.service: loaded, enabled, active" in row["detail"]
    assert row["fix"] == fabric.IMEX_FIX
    # masked but still running (masked after it started): still a failure
    running_masked = "LoadState=masked\nUnitFileState=masked\nActiveState=active\n"
    assert by_name(rows(fake(unit=running_masked), imex="dra"))["IMEX"]["status"] == "fail"


@pytest.mark.parametrize(
    ("unit", "said"),
    [
        ("LoadState=loaded\nUnitFileState=enabled\nActiveState=failed\n", "not running (failed;"),
        ("LoadState=loaded\nUnitFileState=disabled\nActiveState=active\n", "not enabled (disabled)"),
        (MASKED, "is masked, not running (inactive;"),
        ("LoadState=not-found\nUnitFileState=\nActiveState=inactive\n", "nvidia-imex.service is not installed"),
    ],
)
def test_host_fails_an_imex_unit_that_does_not_run_at_boot_or_now(unit, said):
    row = by_name(rows(fake(unit=unit)))["IMEX"]
    assert row["status"] == "fail" and said in row["detail"], row


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("0, Completed, Success\n1, In Progress, N/A\n", "GPU 1: In Progress, N/A"),
        ("0, Not Started, N/A\n1, Not Started, N/A\n", "GPU 0: Not Started, N/A; GPU 1: Not Started, N/A"),
        ("0, Completed, Success\n1, Completed, Failure\n", "GPU 1: Completed, Failure"),
    ],
)
def test_a_fabric_that_is_not_up_fails_naming_the_gpus(query, said):
    row = by_name(rows(fake(query=query)))["NVLink fabric"]
    assert row["status"] == "fail", row
    assert row["detail"].endswith(said)
    assert "error 802" in row["detail"] and row["fix"] == fabric.FABRIC_FIX


def test_gpus_on_no_fabric_skip_the_fabric_row_and_none_skips_imex():
    found = by_name(rows(fake(query="0, N/A, N/A\n1, N/A, N/A\n"), imex="none"))
    assert found["IMEX"]["status"] == "skipped" and "nvidia_driver_imex is none" in found["IMEX"]["detail"]
    assert found["NVLink fabric"]["status"] == "skipped"
    assert "none of the 2 GPU(s) is on an NVLink fabric" in found["NVLink fabric"]["detail"]


def test_an_old_nvidia_smi_without_the_fields_skips_and_a_broken_one_fails():
    old = fake(query="", query_rc=2, query_err='Field "fabric.state" is not a valid field to query.')
    assert by_name(rows(old))["NVLink fabric"]["status"] == "skipped"
    broken = fake(query="", query_rc=9, query_err="NVIDIA-SMI has failed because it couldn't communicate")
    row = by_name(rows(broken))["NVLink fabric"]
    assert row["status"] == "fail" and "couldn't communicate" in row["detail"]


def test_both_rows_are_skipped_without_a_gpu_and_ask_nothing():
    host = fake()
    assert [(row["check"], row["status"]) for row in rows(host, facts=NO_GPU)] == [
        ("IMEX", "skipped"),
        ("NVLink fabric", "skipped"),
    ]
    assert host.ran == []


def test_the_family_runs_in_the_doctor_s_order_after_mig():
    checks = load_module("gpu_validate_checks")
    assert checks.FAMILIES.index("fabric") == checks.FAMILIES.index("mig") + 1
    found = checks.run_checks(params(families=["fabric"], node=node(), imex="dra"), fake(unit=MASKED))["checks"]
    assert [(row["check"], row["status"]) for row in found] == [("IMEX", "ok"), ("NVLink fabric", "ok")]


def test_the_fleet_report_files_the_rows_under_fabric():
    report = load_module("fleet_report", subdir="plugins/filter")
    assert report.gpu_fleet_family("IMEX") == "fabric"
    assert report.gpu_fleet_family("NVLink fabric") == "fabric"
