"""plugins/filter/fleet_report.py and roles/gpu_validate/templates/fleet_report.html.j2: the doctor's fleet report."""

from __future__ import annotations

import html.parser
import json

import jinja2
import pytest
from ansible.errors import AnsibleFilterError
from conftest import ROOT, load_module

fleet = load_module("fleet_report", subdir="plugins/filter")
TEMPLATE = ROOT / "roles" / "gpu_validate" / "templates" / "fleet_report.html.j2"


def _row(check, status, detail="", fix=""):
    return {"check": check, "status": status, "detail": detail, "fix": fix}


GOOD = [
    _row("NVIDIA driver", "ok", "580.95.05 loaded"),
    _row("docker: nvidia runtime", "ok", "nvidia -> /usr/bin/nvidia-container-runtime"),
    _row("/dev/fuse", "ok", "character device 10:229"),
    _row("kubelet configuration", "ok", "drop-in present"),
]
WARNING = [*GOOD[:3], _row("kubelet configuration", "warn", "kubelet not running", "Start it")]
FAILING = [
    _row("NVIDIA driver", "fail", "no driver loaded", "Run site.yml --tags driver"),
    GOOD[1],
    _row("/dev/fuse", "fail", "missing <dev>", "modprobe fuse & retry"),
    GOOD[3],
]


@pytest.mark.parametrize(
    ("check", "family"),
    [
        ("NVIDIA driver", "driver"),
        ("nvidia-smi", "driver"),
        ("driver after next reboot", "driver"),
        ("nvidia-peermem", "driver"),
        ("container toolkit", "toolkit"),
        ("container runtime", "runtime"),
        ("docker: GPU isolation (default)", "docker"),
        ("docker: GPU isolation (default, CAP_SYS_ADMIN)", "isolation"),
        ("device plugin vs node", "isolation"),
        ("toolkit: GPU by volume mount", "doors"),
        ("containerd: CRI plugin", "containerd"),
        ("crio: nvidia runtime", "crio"),
        ("CDI spec", "cdi"),
        ("GPU settings", "health"),
        ("/dev/fuse", "fuse"),
        ("FUSE confinement", "confinement"),
        ("AppArmor profile fuse", "security"),
        ("seccomp profile fuse", "security"),
        ("kubelet configuration", "kubelet"),
        ("rollout: upgrade_driver", "rollout"),
        ("something new", "other"),
    ],
)
def test_a_row_without_a_family_gets_one_from_its_name(check, family):
    """Only rows of a node report from a version before rows carried their family (issue 51) go by name."""
    assert fleet.gpu_fleet_family(check) == family


def test_failing_nodes_and_failing_checks_come_first_and_missing_nodes_last():
    report = fleet.gpu_fleet_report([GOOD, None, FAILING, WARNING], ["a-ok", "b-none", "c-fail", "d-warn"])
    assert [n["host"] for n in report["nodes"]] == ["c-fail", "d-warn", "a-ok", "b-none"]
    assert [n["status"] for n in report["nodes"]] == ["fail", "warn", "ok", "none"]
    # failing on one node each: the doctor's order between them; then the warning check; then the rest
    assert [c["check"] for c in report["checks"]] == [
        "NVIDIA driver",
        "/dev/fuse",
        "kubelet configuration",
        "docker: nvidia runtime",
    ]
    assert report["checks"][0] == {"check": "NVIDIA driver", "family": "driver", "fail": 1, "warn": 0}
    assert report["summary"] == {
        "nodes": {"fail": 1, "warn": 1, "ok": 1, "none": 1, "total": 4},
        "drain": [],
        "cells": {"ok": 9, "warn": 1, "fail": 2, "skipped": 0, "total": 12},
    }
    assert report["families"] == ["driver", "docker", "fuse", "kubelet"]
    failing = report["nodes"][0]
    assert failing["summary"] == {"ok": 2, "warn": 0, "fail": 2, "skipped": 0, "total": 4, "status": "fail"}
    assert failing["cells"]["/dev/fuse"] == {
        "status": "fail",
        "detail": "missing <dev>",
        "fix": "modprobe fuse & retry",
    }
    assert report["nodes"][3] == {
        "host": "b-none",
        "status": "none",
        "health": "none",
        "drain": False,
        "drain_reasons": [],
        "summary": None,
        "cells": {},
    }


def test_the_node_with_more_failures_comes_first():
    one = [FAILING[0], *GOOD[1:]]
    report = fleet.gpu_fleet_report([{"host": "a", "checks": one}, {"host": "b", "checks": FAILING}])
    assert [n["host"] for n in report["nodes"]] == ["b", "a"]


@pytest.mark.parametrize(
    ("nodes", "hosts", "message"),
    [
        ("text", None, "nodes must be a list"),
        ([{"checks": GOOD}], None, "every node needs a 'host' name"),
        ([{"host": "a", "checks": "x"}], None, "the checks of a must be a list"),
        ([{"host": "a", "checks": [_row("x", "bad")]}], None, "check 'x' of a has status 'bad'"),
        ([{"host": "a", "checks": [{"status": "ok"}]}], None, "check #0 of a is not a mapping with a 'check' name"),
        ([GOOD], ["a", "b"], "hosts must be a list as long as the list of results"),
    ],
)
def test_bad_input_is_refused_with_what_is_wrong(nodes, hosts, message):
    with pytest.raises(AnsibleFilterError, match=message):
        fleet.gpu_fleet_report(nodes, hosts)


class _Page(html.parser.HTMLParser):
    """The rows, cells and summary lines of the rendered page, and whether a script runs anything from outside."""

    def __init__(self):
        super().__init__()
        self.rows, self.summary, self.external, self.scripts = [], {}, [], 0
        self._row = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and "data-host" in attrs:
            self._row = {"host": attrs["data-host"], "status": attrs["data-status"], "cells": []}
            self.rows.append(self._row)
        elif tag == "td" and self._row is not None and "data-status" in attrs:
            self._row["cells"].append((attrs["data-family"], attrs["data-status"], attrs.get("title", "")))
        elif tag == "p" and "data-status" in attrs:
            self.summary[attrs["data-status"]] = int(attrs["data-count"])
        for name in ("src", "href"):
            if name in attrs:
                self.external.append(attrs[name])
        self.scripts += tag == "script"


def _render(report) -> str:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True)
    return env.from_string(TEMPLATE.read_text()).render(__gpu_validate_fleet=report, __gpu_validate_fleet_key="k")


def test_the_page_lists_failing_rows_first_escapes_node_text_and_loads_nothing():
    report = fleet.gpu_fleet_report([GOOD, FAILING, None], ["a-ok", "c-fail", "b-none"])
    text = _render(report)
    page = _Page()
    page.feed(text)
    assert [(r["host"], r["status"]) for r in page.rows] == [("c-fail", "fail"), ("a-ok", "ok"), ("b-none", "none")]
    assert page.summary == {"fail": 1, "warn": 0, "ok": 1, "none": 1}
    assert [status for _, status, _ in page.rows[0]["cells"]] == ["fail", "fail", "ok", "ok"]
    assert page.rows[0]["cells"][1] == ("fuse", "fail", "missing <dev> | Fix: modprobe fuse & retry")
    assert "missing &lt;dev&gt;" in text and "missing <dev>" not in text
    assert page.external == [] and page.scripts == 1


def test_the_results_of_each_host_from_hostvars_and_none_for_a_host_without():
    hostvars = {"a": {"gpu_validate_results": GOOD}, "b": {"other": 1}}
    assert fleet.gpu_fleet_results(["a", "b", "c"], hostvars) == [GOOD, None, None]


def test_nodes_to_drain_come_first_with_their_reasons():
    """A failed "GPU health: ..." row (the GPU needs a reset, a drain or a replacement) puts the node first, in the
    summary's drain list and its health column; a failed row of another family (a config row) does not."""
    sick = [
        *GOOD,
        {"check": "GPU health: Xid events", "status": "fail", "detail": "Xid 79 on 0000:2a:00", "fix": "drain"},
    ]
    warm = [
        *GOOD,
        {"check": "GPU health: clock slowdown", "status": "warn", "detail": "HW thermal slowdown", "fix": "cool"},
    ]
    report = fleet.gpu_fleet_report(
        [
            {"host": "a-config", "checks": FAILING},
            {"host": "z-sick", "checks": sick},
            {"host": "m-warm", "checks": warm},
        ]
    )
    assert [n["host"] for n in report["nodes"]] == ["z-sick", "a-config", "m-warm"]
    assert report["summary"]["drain"] == ["z-sick"]
    assert [(n["health"], n["drain"]) for n in report["nodes"]] == [("fail", True), ("none", False), ("warn", False)]
    assert report["nodes"][0]["drain_reasons"] == ["GPU health: Xid events: Xid 79 on 0000:2a:00"]
    assert "health" in report["families"]


def test_a_slice_replaces_its_own_nodes_and_keeps_the_other_slices():
    """AWX job slicing: each slice is a play over its share of the hosts; the report of one slice keeps the rows
    of the nodes another slice wrote (molecule/default/tests/test_awx_slices.py runs two at once)."""
    ok = [{"check": "driver", "status": "ok", "detail": "570", "fix": ""}]
    failing = [{"check": "driver", "status": "fail", "detail": "none", "fix": "install it"}]
    first = fleet.gpu_fleet_report(fleet.gpu_fleet_with_others([ok, None], ["a", "c"], ""))
    text = json.dumps(first)
    second = fleet.gpu_fleet_report(fleet.gpu_fleet_with_others([failing], ["b"], text))
    assert sorted(node["host"] for node in second["nodes"]) == ["a", "b", "c"]
    cells = {node["host"]: (node["status"], node["cells"]) for node in second["nodes"]}
    assert cells["a"] == ("ok", {"driver": {"status": "ok", "detail": "570", "fix": ""}})
    assert cells["b"][0] == "fail" and cells["c"] == ("none", {})
    # a slice that runs a node again replaces its row; a broken earlier file is written anew
    again = fleet.gpu_fleet_report(fleet.gpu_fleet_with_others([failing], ["a"], json.dumps(second)))
    assert {node["host"]: node["status"] for node in again["nodes"]} == {"a": "fail", "b": "fail", "c": "none"}
    assert [
        n["host"] for n in fleet.gpu_fleet_report(fleet.gpu_fleet_with_others([ok], ["a"], "{broken"))["nodes"]
    ] == ["a"]
    with pytest.raises(AnsibleFilterError):
        fleet.gpu_fleet_with_others([ok], ["a", "b"], "")


# ---- issue 51: each row's own family, from the registry plugins/module_utils/gpu_validate/families.py -------------


def test_rows_are_grouped_by_their_own_family_and_the_families_come_in_the_registrys_order():
    """A row's family is the one it carries (the doctor sets it), not one its name suggests; the families follow the
    registry, then any other (a rollout's row) by name."""
    rows = [
        {**_row("kubelet configuration", "ok"), "family": "kubelet"},
        {**_row("a check named anyhow", "warn", "x"), "family": "fuse"},
        {**_row("docker: GPU isolation (default, CAP_SYS_ADMIN)", "ok"), "family": "isolation"},
        {**_row("rollout: upgrade_driver", "fail", "stopped"), "family": "rollout"},
        {**_row("NVIDIA driver", "ok"), "family": "driver"},
    ]
    report = fleet.gpu_fleet_report([rows], ["a"])
    assert {c["check"]: c["family"] for c in report["checks"]} == {
        "kubelet configuration": "kubelet",
        "a check named anyhow": "fuse",
        "docker: GPU isolation (default, CAP_SYS_ADMIN)": "isolation",
        "rollout: upgrade_driver": "rollout",
        "NVIDIA driver": "driver",
    }
    assert report["families"] == ["driver", "isolation", "fuse", "kubelet", "rollout"]
    # the cells stay as they were: status, detail, fix
    assert report["nodes"][0]["cells"]["a check named anyhow"] == {"status": "warn", "detail": "x", "fix": ""}


def test_a_node_of_an_older_version_without_families_joins_the_report_by_its_names():
    """One node runs this version (rows with family), one an older one (none): a check the new node's rows name gets
    their family; a check only the old node has gets the family its name gives."""
    new = [
        {**_row("NVIDIA driver", "ok"), "family": "driver"},
        {**_row("docker: GPU isolation (default, CAP_SYS_ADMIN)", "ok"), "family": "isolation"},
    ]
    old = [_row("docker: GPU isolation (default, CAP_SYS_ADMIN)", "fail", "sees 2"), _row("FUSE confinement", "warn")]
    report = fleet.gpu_fleet_report([old, new], ["old", "new"])
    assert {c["check"]: c["family"] for c in report["checks"]} == {
        "docker: GPU isolation (default, CAP_SYS_ADMIN)": "isolation",
        "FUSE confinement": "confinement",
        "NVIDIA driver": "driver",
    }
    assert report["families"] == ["driver", "isolation", "confinement"]
    # the same report from the old node's rows alone: every family by name
    legacy = fleet.gpu_fleet_report([GOOD], ["old"])
    assert [c["family"] for c in legacy["checks"]] == ["driver", "docker", "fuse", "kubelet"]
    # a row's family wins over what its name says
    renamed = fleet.gpu_fleet_report([[{**_row("/dev/fuse", "ok"), "family": "security"}]], ["n"])
    assert renamed["checks"][0]["family"] == "security" and renamed["families"] == ["security"]


def test_a_slice_keeps_the_families_of_the_other_slices_nodes():
    """The report's cells hold no family: a node another slice wrote gets each check's family from the report's
    list of checks."""
    first = fleet.gpu_fleet_report([[{**_row("a check named anyhow", "ok"), "family": "mig"}]], ["a"])
    nodes = fleet.gpu_fleet_with_others([None], ["b"], json.dumps(first))
    assert nodes[1]["checks"] == [
        {"check": "a check named anyhow", "status": "ok", "detail": "", "fix": "", "family": "mig"}
    ]
    assert fleet.gpu_fleet_report(nodes)["families"] == ["mig"]


def test_a_rollouts_row_carries_its_family():
    rollout = load_module("rollout", subdir="plugins/filter")
    rows = rollout.gpu_rollout_results({"rollout": "upgrade_driver", "step": "drain"}, "gpu-1")
    hostvars = {"a": {"gpu_rollout_results": rows}}
    assert fleet.gpu_fleet_results(["a"], hostvars)[0][0]["family"] == "rollout"


def test_an_inventory_directory_does_not_read_the_fleet_report_beside_it_as_inventory(tmp_path):
    """The report's default path is beside the inventory: in an inventory directory Ansible parsed
    gpu-fleet-report.json and .html as inventory sources on the next run, with warnings, and the JSON's keys as
    groups. ansible.cfg's inventory_ignore_patterns leaves them out."""
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    gpu-1:\n")
    report = {"summary": {"nodes": {"total": 1}}, "families": [], "checks": [], "nodes": [{"host": "gpu-9"}]}
    (tmp_path / "gpu-fleet-report.json").write_text(json.dumps(report))
    (tmp_path / "gpu-fleet-report.html").write_text("<!DOCTYPE html>\n<html></html>\n")
    (tmp_path / "gpu-fleet-report.lock").write_text("")
    inventory = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(tmp_path), "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "WARNING" not in inventory.stderr, inventory.stderr
    groups = json.loads(inventory.stdout)
    assert set(groups) == {"_meta", "all", "ungrouped"}, groups
    assert groups["ungrouped"]["hosts"] == ["gpu-1"]
