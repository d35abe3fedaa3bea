"""site.yml as AWX and AAP run a job: through ansible-runner (the engine of every AWX/AAP job; from PyPI, pinned in
requirements-test.txt) with a project directory, an inventory, extra vars and artifacts, on this scenario's converged
nodes, in two inventory slices at once as AWX's job slicing runs them. Both slices end with changed=0 (the nodes are
as the converge left them; this file runs first of the verify step), and the fleet report
that both slices write covers every node of both.

What a slice job is, in AWX's source (ansible/awx at e21dd0a0):
- awx/main/tasks/jobs.py, BaseTask.build_inventory: the job's inventory is a script (inventory/hosts in the job's
  private data directory) that prints the inventory as JSON, with the slice number and count of the job;
- awx/main/models/inventory.py, Inventory.get_script_data and get_sliced_hosts: the hosts ordered by name, slice k
  of n gets hosts[k-1::n]; a group lists only the slice's hosts; each host's variables in _meta.hostvars;
- awx/main/models/workflow.py, WorkflowJobNode.get_job_kwargs, and unified_jobs.py, awx_meta_vars: the slices are
  the root nodes of one workflow, started at once (allow_simultaneous); their extra vars are the job template's plus
  AWX's meta variables (awx_job_id, awx_workflow_job_id, ...). No variable names the slice: job_slice_number and
  job_slice_count are fields of the job, not variables, so a play knows its slice only by the hosts it has.
So each slice here gets its own private data directory with such a script, the same extra vars, and the project
directory as its working directory (where ansible.cfg is read), as an AWX job does.
It is also this scenario's idempotence check (molecule.yml has no idempotence step): site.yml's second run over every
converged node, changed=0, a failure naming each task that changed on each node. And it shows that the read ahead
works in AWX's engine too (plugins/plugin_utils/read_ahead.py): no node ran the own read of a role that gpu_node_facts'
task read ahead (the toolkit, fuse, security_profiles, kubelet: one task each on this no-op run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ansible_runner
import yaml

SCENARIO = Path(__file__).resolve().parents[1]
PROJECT = SCENARIO.parents[1]
SLICES = 2
NODES = ["site-crio", "site-debian11", "site-debian13", "site-forky", "site-ubuntu2404"]
STANDIN_FINGERPRINT = "/srv/nvidia-container-toolkit-standin/fingerprint"  # molecule/resources/local_node.yml
testinfra_hosts = [f"ansible://{node}" for node in NODES]


def _inventory() -> dict:
    """The scenario's inventory as AWX holds one: every host with its variables resolved (ansible-inventory)."""
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"}
    listed = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-inventory"), "-i", os.environ["MOLECULE_INVENTORY_FILE"], "--list"],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(listed.stdout)


def awx_slice(inventory: dict, number: int, count: int) -> dict:
    """The script data of slice ``number`` of ``count`` (AWX's get_script_data with get_sliced_hosts): hosts by name,
    every count-th from number-1; groups keep only the slice's hosts; hostvars of the slice's hosts."""
    hostvars = inventory["_meta"]["hostvars"]
    hosts = sorted(hostvars)[number - 1 :: count]
    data = {"_meta": {"hostvars": {host: hostvars[host] for host in hosts}}}
    for group, body in inventory.items():
        if group == "_meta":
            continue
        entry = {key: value for key, value in body.items() if key != "hosts"}
        members = [host for host in body.get("hosts", []) if host in hosts]
        if members:
            entry["hosts"] = members
        data[group] = entry
    return data


def test_awx_slices_are_the_hosts_by_name_every_count_th():
    inventory = {
        "_meta": {"hostvars": {name: {} for name in ["c", "a", "e", "b", "d"]}},
        "all": {"children": ["ungrouped", "gpu_nodes"]},
        "gpu_nodes": {"hosts": ["a", "b", "c", "d"]},
        "ungrouped": {"hosts": ["e"]},
    }
    first, second = awx_slice(inventory, 1, 2), awx_slice(inventory, 2, 2)
    assert sorted(first["_meta"]["hostvars"]) == ["a", "c", "e"] and first["gpu_nodes"]["hosts"] == ["a", "c"]
    assert sorted(second["_meta"]["hostvars"]) == ["b", "d"] and "hosts" not in second["ungrouped"]


def _private_data_dir(root: Path, number: int, script_data: dict, extravars: dict) -> Path:
    """A job's private data directory as AWX writes one: inventory/hosts (a script printing the JSON), env/extravars."""
    private = root / f"slice-{number}"
    (private / "inventory").mkdir(parents=True)
    (private / "env").mkdir()
    script = private / "inventory" / "hosts"
    script.write_text(f"#!{sys.executable}\nprint({json.dumps(json.dumps(script_data))})\n")
    script.chmod(0o700)
    (private / "env" / "extravars").write_text(json.dumps(extravars))
    return private


def _changed(runner) -> list[str]:
    """'<host>: <task>' of each task result that changed (the job's events, as molecule's idempotence step lists)."""
    return [
        f"{event['event_data'].get('host')}: {event['event_data'].get('task')}"
        for event in runner.events
        if event.get("event") == "runner_on_ok" and (event.get("event_data", {}).get("res") or {}).get("changed")
    ]


# the roles gpu_node_facts' task reads ahead: each one's own read (tasks/read.yml) runs only where it has to
READ_AHEAD_ROLES = ("nvidia_container_toolkit", "fuse", "security_profiles", "kubelet")


def _own_reads(runner) -> list[str]:
    """'<host>: <task>' of each own read of a role read ahead that started (ok or skipped) in the job."""
    names = {
        yaml.safe_load((PROJECT / "roles" / role / "tasks" / "read.yml").read_text())[0]["name"]
        for role in READ_AHEAD_ROLES
    }
    return [
        f"{event['event_data'].get('host')}: {event['event_data'].get('task')}"
        for event in runner.events
        if event.get("event", "").startswith("runner_on_") and event.get("event_data", {}).get("task") in names
    ]


def test_site_yml_through_ansible_runner_in_two_slices_at_once(host, tmp_path_factory, monkeypatch):
    if host.backend.get_hostname() != NODES[0]:
        return  # one run for the whole fleet (testinfra parametrizes every test by host)
    root = tmp_path_factory.mktemp("awx")
    inventory = _inventory()
    for node in NODES:  # the stand-in repository's key of each node (converge.yml trusts it the same way)
        fingerprint = subprocess.run(
            ["docker", "exec", node, "cat", STANDIN_FINGERPRINT], capture_output=True, text=True, check=True
        ).stdout.strip()
        inventory["_meta"]["hostvars"][node]["nvidia_container_toolkit_repo_key_fingerprint"] = fingerprint
    report = root / "fleet" / "gpu-fleet-report"
    extravars = {
        "gpu_validate_fleet_report": str(report),
        "awx_job_template_name": "GPU nodes: site.yml",
        "awx_workflow_job_id": 4711,
        "awx_workflow_job_name": "GPU nodes: site.yml (sliced)",
    }
    for name in ("ANSIBLE_CONFIG", "ANSIBLE_FORCE_COLOR", "PY_COLORS"):
        monkeypatch.delenv(name, raising=False)
    runs = []
    for number in range(1, SLICES + 1):
        script_data = awx_slice(inventory, number, SLICES)
        private = _private_data_dir(root, number, script_data, {**extravars, "awx_job_id": 4711 + number})
        thread, runner = ansible_runner.run_async(
            private_data_dir=str(private),
            project_dir=str(PROJECT),
            playbook="site.yml",
            ident=f"slice-{number}",
            # this venv's ansible-playbook, found on PATH as AWX's execution environment finds it (ansible-runner 2.4
            # appends the playbook only to its own command: with binary= it printed ansible-playbook's usage)
            envvars={"ANSIBLE_NOCOLOR": "1", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
            quiet=True,
        )
        runs.append((thread, runner, sorted(script_data.get("gpu_nodes", {}).get("hosts", []))))
    for thread, _, _ in runs:
        thread.join(timeout=1200)
    slice_nodes = []
    for _, runner, nodes in runs:
        stdout = runner.stdout.read()
        assert runner.status == "successful" and runner.rc == 0, stdout[-6000:]
        artifacts = Path(runner.config.artifact_dir)
        assert (artifacts / "stdout").is_file() and any((artifacts / "job_events").iterdir()), artifacts
        stats = runner.stats
        assert sorted(stats["ok"]) == nodes, (stats, nodes)
        assert not stats["failures"], (stats, stdout[-6000:])
        assert not any(stats["changed"].values()), f"not idempotent: the second run changed {_changed(runner)}"
        assert _own_reads(runner) == [], "the read ahead did not decide these roles"
        slice_nodes += nodes
    assert sorted(slice_nodes) == NODES  # the two slices together are the fleet, none twice
    fleet = json.loads(Path(f"{report}.json").read_text())
    assert sorted(node["host"] for node in fleet["nodes"]) == NODES, fleet["summary"]
    assert all(node["status"] != "none" for node in fleet["nodes"]), fleet["nodes"]
    assert fleet["summary"]["nodes"]["total"] == len(NODES)
