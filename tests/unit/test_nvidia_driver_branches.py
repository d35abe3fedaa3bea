"""The driver branches the project supports (one list, roles/nvidia_driver/vars/main.yml __nvidia_driver_branches) and
the warning the role's preflight report gives for a node whose branch is past its end of life or not listed."""

from __future__ import annotations

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.template import trust_as_template
from conftest import load_module
from test_nvidia_driver_render import ROLE, Role

branches = load_module("nvidia_driver_branches", subdir="plugins/filter")
LIST = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__nvidia_driver_branches"]


def test_the_list_says_what_nvidia_says():
    """NVIDIA Data Center Drivers, "Supported Drivers and CUDA Toolkit Versions" (615 and 620 editions)."""
    assert {branch: data["end_of_life"] for branch, data in LIST.items()} == {
        "535": "2026-06",
        "580": "2028-06",
        "595": "2027-03",
        "610": "2026-08",
        "620": "2029-09",
    }


@pytest.mark.parametrize(
    ("month", "supported"),
    [
        ("2026-06", ["535", "580", "595", "610", "620"]),  # 535's last month
        ("2026-07", ["580", "595", "610", "620"]),
        ("2026-11", ["580", "595", "620"]),
        ("2027-04", ["580", "620"]),
        ("2028-07", ["620"]),
    ],
)
def test_supported_branches_by_month(month, supported):
    assert branches.nvidia_driver_supported_branches(LIST, month) == supported


@pytest.mark.parametrize(
    ("branch", "month", "says"),
    [
        ("580", "2026-11", ""),
        ("", "2026-11", ""),
        ("535", "2026-06", ""),
        ("535", "2026-07", "branch 535 reached its end of life in 2026-06 (long-term support branch)"),
        ("610", "2026-11", "branch 610 reached its end of life in 2026-08 (new feature branch)"),
        ("570", "2026-11", "branch 570 is not a branch this project supports"),
        (550, "2026-11", "branch 550 is not a branch this project supports"),
    ],
)
def test_the_warning(branch, month, says):
    warning = branches.nvidia_driver_branch_warning(branch, LIST, month)
    if says:
        assert warning.startswith("WARNING: NVIDIA driver branch ")
        assert says in warning
        assert "pin one of " + ", ".join(branches.nvidia_driver_supported_branches(LIST, month)) in warning
    else:
        assert warning == ""


def test_a_bad_month_is_refused():
    with pytest.raises(AnsibleFilterError, match="YYYY-MM"):
        branches.nvidia_driver_supported_branches(LIST, "June 2026")
    with pytest.raises(AnsibleFilterError, match="end of life of branch 1"):
        branches.nvidia_driver_supported_branches({"1": {"end_of_life": "2026"}}, "2026-01")


@pytest.mark.parametrize(
    ("platform", "variables", "says"),
    [
        ("debian12", {"nvidia_driver_debian_cuda_repo": False}, "branch 535 reached its end of life in 2026-06"),
        ("debian13", {"nvidia_driver_debian_cuda_repo": False}, "branch 550 is not a branch this project supports"),
        ("debian12", {}, ""),
        ("ubuntu2404", {}, ""),
        ("ubuntu2404", {"nvidia_driver_version": "535.274.02"}, "branch 535 reached its end of life"),
        ("rocky9", {"nvidia_driver_branch": "595"}, ""),
        ("forky", {}, ""),
    ],
)
def test_the_role_reports_its_nodes_branch(platform, variables, says):
    """The warning rides on the preflight's existing report (no task of its own on the no-op path)."""
    role = Role(platform, __nvidia_driver_this_month="2026-11", **variables)
    warning = role["__nvidia_driver_branch_warning"]
    assert (says in warning) if says else warning == ""
    task = next(
        t for t in yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text()) if "ansible.builtin.assert" in t
    )
    report = " ".join(role.templar.template(trust_as_template(task["ansible.builtin.assert"]["success_msg"])).split())
    assert report.endswith(" ".join(warning.split()) if warning else ").")


def test_the_month_is_this_month():
    import datetime

    assert Role("debian12")["__nvidia_driver_this_month"] == datetime.datetime.now(datetime.UTC).strftime("%Y-%m")
