"""Verify the fleet operations of issue 27 on three small nodes: batches with a canary, and the fleet report.

converge.yml ran site.yml with a canary of one node, then the other two; every node passed its doctor and
the fleet report (gpu-fleet-report.{json,html} beside the molecule inventory: the default path) holds the
three. The page is rendered in headless Chromium (the distribution's package) and its DOM read back after
its script ran; the screenshots go to .ci-logs/. The last test reruns site.yml with a new node label and a
doctor check that fails on the canary only: the rollout stops after the canary, the other nodes are
untouched, and the report shows the failing canary first.
"""

from __future__ import annotations

import html.parser
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
PROJECT = SCENARIO.parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
from playbook_runner import recap

LOGS = PROJECT / ".ci-logs"
NODES = ["fl-canary-1", "fl-canary-2", "fl-canary-3"]
CANARY = NODES[0]  # the first host of the inventory: serial takes them in inventory order
ENV_FILE = "/etc/default/kubelet"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _report(ext: str) -> Path:
    return Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent / f"gpu-fleet-report.{ext}"


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "headless Chromium is needed: apt-get install chromium (scripts/lib.sh ensure_chromium does it)"
    return exe


def _browse(page: Path, fragment: str = "", screenshot: str = "") -> str:
    """The page's DOM after its script ran, from headless Chromium with a new empty profile; optionally a
    screenshot in .ci-logs/."""
    url = page.as_uri() + fragment
    with tempfile.TemporaryDirectory() as profile:
        args = [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
        dom = subprocess.run([*args, "--dump-dom", url], capture_output=True, text=True, timeout=180, check=True).stdout
        if screenshot:
            LOGS.mkdir(exist_ok=True)
            shot = LOGS / screenshot
            shot.unlink(missing_ok=True)
            subprocess.run(
                [*args, f"--screenshot={shot}", "--window-size=1600,1000", "--hide-scrollbars", url],
                capture_output=True,
                timeout=180,
                check=True,
            )
            assert shot.stat().st_size > 10_000, f"{shot}: no real screenshot"
    return dom


class Dom(html.parser.HTMLParser):
    """What the assertions read from the rendered DOM: the node rows in order, the summary lines, the
    shown-count the script writes, the columns and rows the filter hid."""

    def __init__(self, text: str):
        super().__init__()
        self.rows, self.summary, self.shown, self.ready = [], {}, {}, False
        self.hidden_columns, self.columns = 0, 0
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "body":
            self.ready = attrs.get("data-ready") == "true"
        elif tag == "tr" and "data-host" in attrs:
            self.rows.append(
                {"host": attrs["data-host"], "status": attrs["data-status"], "hidden": "hidden" in classes, "cells": []}
            )
        elif tag == "td" and self.rows and "data-family" in attrs:
            self.rows[-1]["cells"].append((attrs["data-family"], attrs["data-status"], attrs.get("title", "")))
        elif tag == "th" and "data-family" in attrs:
            self.columns += 1
            self.hidden_columns += "hidden" in classes
        elif tag == "p" and "data-count" in attrs:
            self.summary[attrs["data-status"]] = int(attrs["data-count"])
        elif tag == "span" and attrs.get("id") == "shown":
            self.shown = {"rows": int(attrs.get("data-rows", -1)), "columns": int(attrs.get("data-columns", -1))}


def _docker_cat(node: str, path: str) -> str:
    return subprocess.run(["docker", "exec", node, "cat", path], capture_output=True, text=True, check=True).stdout


def test_the_fleet_report_of_the_converge_holds_every_node_and_renders_in_chromium():
    fleet = json.loads(_report("json").read_text())
    assert sorted(node["host"] for node in fleet["nodes"]) == NODES
    assert fleet["summary"]["nodes"]["none"] == 0 and fleet["summary"]["nodes"]["fail"] == 0, fleet["summary"]
    checks = len(fleet["checks"])
    assert checks >= 5 and all(len(node["cells"]) == checks for node in fleet["nodes"])

    dom = Dom(_browse(_report("html"), screenshot="fleet-report-converge.png"))
    assert dom.ready, "the page's script did not run"
    assert [row["host"] for row in dom.rows] == [node["host"] for node in fleet["nodes"]]
    assert dom.summary == {status: fleet["summary"]["nodes"][status] for status in ("fail", "warn", "ok", "none")}
    assert dom.shown == {"rows": 3, "columns": checks}
    assert all(len(row["cells"]) == checks for row in dom.rows)

    # the family filter from the page's address: only the fuse columns, only the nodes with a problem
    fuse = sum(1 for check in fleet["checks"] if check["family"] == "fuse")
    problems = sum(1 for node in fleet["nodes"] if node["status"] in ("fail", "warn"))
    filtered = Dom(_browse(_report("html"), "#families=fuse&problems"))
    assert fuse > 0 and filtered.shown == {"rows": problems, "columns": fuse}
    assert filtered.hidden_columns == checks - fuse
    assert sum(not row["hidden"] for row in filtered.rows) == problems


def test_a_canary_whose_doctor_fails_stops_the_rollout_and_leaves_the_other_nodes_untouched():
    before = {node: _docker_cat(node, ENV_FILE) for node in NODES}
    env = {k: v for k, v in os.environ.items() if k not in ("ANSIBLE_CONFIG", "ANSIBLE_FORCE_COLOR", "PY_COLORS")}
    env["ANSIBLE_NOCOLOR"] = "1"
    extra = {"fleet_break_doctor_on": [CANARY], "kubelet_node_labels": {"example.com/rollout": "two"}}
    run = subprocess.run(
        [
            "ansible-playbook",
            "-i",
            os.environ["MOLECULE_INVENTORY_FILE"],
            "-e",
            json.dumps(extra),
            str(SCENARIO / "converge.yml"),
        ],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    (LOGS / "fleet-canary-run.log").write_text(run.stdout + run.stderr)
    assert run.returncode != 0, run.stdout
    counters = recap(run.stdout)
    assert set(counters) == {CANARY}, f"nodes after the canary ran: {counters}"
    assert counters[CANARY]["failed"] == 1, counters
    assert f"fatal: [{CANARY}]" in run.stdout and "seccomp profile no-such-profile" in run.stdout, run.stdout[-3000:]
    # the canary got the change (and failed its doctor after it); the others were not touched
    assert "example.com/rollout=two" in _docker_cat(CANARY, ENV_FILE)
    for node in NODES[1:]:
        assert _docker_cat(node, ENV_FILE) == before[node], node

    fleet = json.loads(_report("json").read_text())
    assert [(node["host"], node["status"]) for node in fleet["nodes"]] == [
        (CANARY, "fail"),
        (NODES[1], "none"),
        (NODES[2], "none"),
    ]
    assert fleet["checks"][0]["check"] == "seccomp profile no-such-profile" and fleet["checks"][0]["fail"] == 1
    dom = Dom(_browse(_report("html"), screenshot="fleet-report-canary.png"))
    assert dom.ready
    assert [(row["host"], row["status"]) for row in dom.rows] == [
        (CANARY, "fail"),
        (NODES[1], "none"),
        (NODES[2], "none"),
    ]
    assert dom.summary == {"fail": 1, "warn": 0, "ok": 0, "none": 2}
    family, status, title = dom.rows[0]["cells"][0]
    assert (family, status) == ("security", "fail") and "Fix:" in title, dom.rows[0]["cells"][0]


# ---- issue 48: the rollout mechanism on the fleet's nodes ----------------------------------------------------------

KUBECTL = PROJECT / "tests" / "fixtures" / "kubectl-standin" / "kubectl"  # TEST STAND-IN: no cluster here


def _rollout(tmp: Path, *args: str, **extra) -> tuple[subprocess.CompletedProcess, dict]:
    """playbooks/upgrade_kernel.yml over the three nodes as they are, the control plane being this controller with
    the stand-in kubectl (its state: every node Ready with a GPU allocatable)."""
    state = tmp / "cluster.json"
    node = {"status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"nvidia.com/gpu": "1"}}}
    state.write_text(
        json.dumps(
            {
                "nodes": {n: {"unschedulable": False, "steps": [{"node": node}], "served": 0} for n in NODES},
                "calls": [],
            }
        )
    )
    plane = tmp / "control-plane.ini"
    plane.write_text(
        f"[kube_control_plane]\nlocalhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    )
    settings = {
        "rollout_kubectl": str(KUBECTL),
        "rollout_kubeconfig": str(state),
        "rollout_node_name": "{{ inventory_hostname }}",
        "rollout_validate": False,
        "gpu_validate_fleet_report": str(tmp / "gpu-fleet-report"),
        **extra,
    }
    env = {k: v for k, v in os.environ.items() if k not in ("ANSIBLE_CONFIG", "ANSIBLE_FORCE_COLOR", "PY_COLORS")}
    env["ANSIBLE_NOCOLOR"] = "1"
    run = subprocess.run(
        [
            "ansible-playbook",
            "-i",
            os.environ["MOLECULE_INVENTORY_FILE"],
            "-i",
            str(plane),
            *args,
            "-e",
            json.dumps(settings),
            str(PROJECT / "playbooks" / "upgrade_kernel.yml"),
        ],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return run, json.loads(state.read_text())


def test_a_kernel_update_refuses_the_canary_whose_modules_no_source_has_before_its_drain(tmp_path):
    # a kernel no package source of the nodes has: the canary is refused by its own apt-cache, never drained
    release = "6.1.0-999-amd64"
    run, state = _rollout(tmp_path, upgrade_kernel_release=release)
    (LOGS / "fleet-kernel-refused.log").write_text(run.stdout + run.stderr)
    assert run.returncode == 2, run.stdout[-3000:]
    out = " ".join(run.stdout.split())
    assert (
        f"{CANARY} cannot have kernel {release} with its NVIDIA modules: not in its package sources: "
        f"linux-image-{release}, linux-headers-{release}" in out
    )
    assert [c["args"][:3] for c in state["calls"]] == [["get", "node", CANARY], ["annotate", "node", CANARY]]
    stop = json.loads(state["nodes"][CANARY]["annotations"]["gpu-node-provisioning/rollout"])
    assert stop["rollout"] == "upgrade_kernel" and stop["cordoned"] is False
    assert all(not node["unschedulable"] for node in state["nodes"].values())
    fleet = json.loads((tmp_path / "gpu-fleet-report.json").read_text())
    assert fleet["nodes"][0]["host"] == CANARY and fleet["nodes"][0]["status"] == "fail"


def test_check_mode_prints_the_kernel_plan_of_every_batch_and_changes_nothing(tmp_path):
    # the kernel the containers run (their host's): nothing to change anywhere; --check reads and prints only
    kernel = subprocess.run(["uname", "-r"], capture_output=True, text=True, check=True).stdout.strip()
    run, state = _rollout(tmp_path, "--check", upgrade_kernel_release=kernel)
    assert run.returncode == 0, run.stdout[-3000:]
    out = " ".join(run.stdout.split())
    for name in NODES:
        assert f"PLAN (check mode: nothing changes): {name} (node {name}), batch {name}: nothing to change" in out
    assert [c["args"][0] for c in state["calls"]] == ["get"] * 3
    assert all(not node["unschedulable"] and not node.get("annotations") for node in state["nodes"].values())
