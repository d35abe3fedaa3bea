"""runtime_config's restart transaction judged by what the kubelet sees (issue 12), on all four nodes at once.

Each test drives the role against rc-debian12, rc-debian13, rc-forky and rc-ubuntu2204 (containerd 1.6,
1.7, 2.1, and Ubuntu 22.04's 2.2 under systemd 249) and checks every node: --check --diff, a changed setting,
a rollback on one node that lets the others go on, a refused binary path, a change written but not applied, a CRI
plugin that does not load (rolled back byte for byte), nvidia as the default and back, a large config (not rolled
back), and where the backups went. Runs shared by two tests (module fixtures): the changed setting reaches three
nodes in the run where rc-debian12's docker refuses its setting, and rc-debian12 in a run of its own after it; the
run that takes nvidia's default away is the large config's run. The tests run in this order; the one of the
refused binary gives config.toml mode 0600 (as when it holds registry passwords), and the later ones check that
the role keeps it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import tomllib
import uuid
from pathlib import Path

import pytest
import testinfra

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
sys.path.insert(0, str(SCENARIO.parents[1]))
from playbook_runner import folded, run_playbook

from tests.cri.client import CriClient, node_socket

testinfra_hosts = ["ansible://rc-debian12"]
NODES = ("rc-debian12", "rc-debian13", "rc-forky", "rc-ubuntu2204")
LIMIT = "all:!crio_nodes:!containerd23_nodes"  # rc-crio and rc-containerd23 have tests of their own
V3 = ("rc-forky", "rc-ubuntu2204")  # containerd 2.x: config v3
CONFIG = "/etc/containerd/config.toml"
DAEMON_JSON = "/etc/docker/daemon.json"
STATE = "/var/lib/gpu-node-provisioning"
IMAGE = "docker.io/gpunode-test/busybox:latest"
# the CRI table of each node's config.toml: Debian's packaged file is v2, containerd 2.x's is v3
CRI_TABLE = f"('io.containerd.cri.v1.runtime' if inventory_hostname in {list(V3)} else 'io.containerd.grpc.v1.cri')"


@pytest.fixture(scope="module")
def nodes():
    inventory = os.environ["MOLECULE_INVENTORY_FILE"]
    return {name: testinfra.get_host(f"ansible://{name}", ansible_inventory=inventory) for name in NODES}


def _run_all(host, extra_vars: dict | None, *args: str):
    run = run_playbook(host, SCENARIO / "converge.yml", extra_vars, "--limit", LIMIT, *args)
    recap = {line.split()[0]: line for line in run.stdout.splitlines() if line.startswith("rc-")}
    assert set(recap) == set(NODES), run.stdout[-3000:] + run.stderr
    return run, recap


def _json(node) -> dict:
    return json.loads(node.file(DAEMON_JSON).content_string)


def _started(node) -> str:
    return node.check_output("systemctl show containerd -p ActiveEnterTimestampMonotonic --value")


def _effective(node) -> dict:
    config = tomllib.loads(node.check_output("containerd config dump"))
    return config["plugins"]["io.containerd.cri.v1.runtime" if config["version"] >= 3 else "io.containerd.grpc.v1.cri"]


def _cri_ok(node) -> bool:
    rows = [r.split() for r in node.check_output("ctr plugins ls").splitlines() if " cri " in f" {r} " or ".cri." in r]
    return bool(rows) and all(row[-1] == "ok" for row in rows)


def _pod_runs(name: str, handler: str) -> bool:
    """A pod with this runtime handler starts through the node's CRI (the kubelet's path): its container runs.

    rc-forky (harness quirk, see test_cri.py): runc fails at the cgroup step after containerd resolved the
    handler and started its runtime; that counts as served there. An unknown handler is refused earlier."""
    with CriClient(node_socket(name)) as cri:
        _sandbox, error = cri.try_pod(f"pod-{handler or 'default'}", handler, IMAGE, ["sleep", "300"])
    if error and name == "rc-forky" and "cpu.weight: no such file or directory" in error:
        return True
    return error is None


def _labels(token: str) -> dict:
    """A daemon.json change that is new every time (docker labels), and only docker's."""
    return {"runtime_config_docker_settings": {"labels": [f"gpunode.test/run={token}"]}}


def test_check_diff_shows_the_change_and_writes_nothing(host, nodes):
    before = {name: (node.file(DAEMON_JSON).sha256sum, node.file(CONFIG).sha256sum) for name, node in nodes.items()}
    started = {
        name: node.check_output("systemctl show docker -p ActiveEnterTimestampMonotonic")
        for name, node in nodes.items()
    }
    token = uuid.uuid4().hex
    run, recap = _run_all(host, _labels(token), "--check", "--diff")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    added = [line for line in run.stdout.splitlines() if line.startswith("+") and token in line]
    assert len(added) == len(NODES), run.stdout[-3000:]
    for name, node in nodes.items():
        assert " changed=1 " in recap[name], recap[name]
        assert (node.file(DAEMON_JSON).sha256sum, node.file(CONFIG).sha256sum) == before[name]
        assert node.check_output("systemctl show docker -p ActiveEnterTimestampMonotonic") == started[name]


def _docker_started(node) -> str:
    return node.check_output("systemctl show docker -p ActiveEnterTimestampMonotonic")


@pytest.fixture(scope="module")
def docker_setting_runs(host, nodes):
    """test_a_changed_setting_changes_only_that_key's change (a docker label) on every node, in two runs, the first
    shared with test_a_rollback_on_one_host_lets_the_other_hosts_go_on: it gives rc-debian12 a setting dockerd
    refuses (rolled back, that node failed) and the other three nodes the label (they go on); the second run gives
    rc-debian12 the label, from where the first left it. What each test checks is read right after its run."""
    token = uuid.uuid4().hex
    label = f"gpunode.test/run={token}"
    before = {
        name: (_json(node), node.file(CONFIG).content_string, _docker_started(node)) for name, node in nodes.items()
    }
    first = nodes["rc-debian12"]
    original = first.file(DAEMON_JSON).content_string
    settings = (
        "{{ {'hosts': ['unix:///run/gpunode-test.sock']} if inventory_hostname == 'rc-debian12'"
        f" else {{'labels': ['{label}']}} }}}}"
    )
    refused, refused_recap = _run_all(
        host, {"runtime_config_docker_settings": settings, "runtime_config_health_retries": 3}
    )
    rolled_back = {
        "original": original,
        "daemon_json": first.file(DAEMON_JSON).content_string,
        "running": first.service("docker").is_running,
        "info_rc": first.run("docker info").rc,
    }
    after = {
        name: (_json(node), node.file(CONFIG).content_string, _docker_started(node), node.service("docker").is_running)
        for name, node in nodes.items()
        if name != "rc-debian12"
    }
    # rc-debian12 alone (the testinfra host: run_playbook's --limit), from where the refused run left it
    before["rc-debian12"] = (_json(first), first.file(CONFIG).content_string, _docker_started(first))
    changed = run_playbook(host, SCENARIO / "converge.yml", _labels(token))
    after["rc-debian12"] = (
        _json(first),
        first.file(CONFIG).content_string,
        _docker_started(first),
        first.service("docker").is_running,
    )
    return {
        "label": label,
        "before": before,
        "after": after,
        "refused": refused,
        "refused_recap": refused_recap,
        "rolled_back": rolled_back,
        "changed": changed,
    }


def test_a_changed_setting_changes_only_that_key(docker_setting_runs):
    runs = docker_setting_runs
    assert runs["changed"].returncode == 0, runs["changed"].stdout[-3000:] + runs["changed"].stderr
    for other in NODES[1:]:
        assert " failed=0 " in runs["refused_recap"][other], runs["refused_recap"][other]
    for name in NODES:
        before_json, before_toml, started = runs["before"][name]
        after, after_toml, restarted, running = runs["after"][name]
        assert after == {**before_json, "labels": [runs["label"]]}
        assert list(after)[: len(before_json)] == list(before_json), "existing key order changed"
        assert after_toml == before_toml, "containerd's config changed too"
        assert restarted != started
        assert running


def test_a_rollback_on_one_host_lets_the_other_hosts_go_on(docker_setting_runs):
    """A runtime that refuses its config on one node fails that node only: the run goes on for the others."""
    run, recap = docker_setting_runs["refused"], docker_setting_runs["refused_recap"]
    assert run.returncode != 0
    assert " failed=1 " in recap["rc-debian12"], recap
    # dockerd refused to start: the restart transaction takes the failed restart as its answer (ignored, rolled back)
    assert " ignored=1 " in recap["rc-debian12"], recap
    for other in ("rc-debian13", "rc-forky", "rc-ubuntu2204"):
        assert " failed=0 " in recap[other], recap
        assert " changed=0 " not in recap[other], f"{other} did not go on: {recap[other]}"
    # dockerd refused a key that is also a flag of its unit (-H fd://): rolled back byte for byte
    said = folded(run)
    assert "docker did not come back after its config changed" in said
    assert "Rolled back: restored /etc/docker/daemon.json from /var/backups/gpu-node-provisioning/etc/docker/" in said
    assert "is running again with its previous config" in said
    rolled_back = docker_setting_runs["rolled_back"]
    assert rolled_back["daemon_json"] == rolled_back["original"]
    assert rolled_back["running"]
    assert rolled_back["info_rc"] == 0


def test_a_runtime_binary_that_does_not_exist_is_refused_before_anything_is_written(host, nodes):
    for node in nodes.values():
        node.check_output(f"chmod 0600 {CONFIG}")  # from here on: config.toml holds "registry passwords"
    before = {name: (node.file(CONFIG).sha256sum, node.file(DAEMON_JSON).sha256sum) for name, node in nodes.items()}
    run, recap = _run_all(host, {"runtime_config_binary": "/usr/bin/gpunode-missing-runtime"})
    assert run.returncode != 0
    said = folded(run)
    for name, node in nodes.items():
        assert " failed=1 " in recap[name] and " changed=0 " in recap[name], recap[name]
        assert (node.file(CONFIG).sha256sum, node.file(DAEMON_JSON).sha256sum) == before[name]
    assert "runtime_config_binary=/usr/bin/gpunode-missing-runtime does not exist (or is not executable)" in said
    assert "Nothing was changed." in said


def test_a_change_written_but_not_applied_is_applied_by_the_next_run(host, nodes):
    pending = {"runtime_config_runtimes": ["containerd"], "runtime_config_name": "gpunode-pending"}
    started = {name: _started(node) for name, node in nodes.items()}
    # the first run writes the change but does not restart (as a run interrupted before its restart)
    run, recap = _run_all(host, {**pending, "runtime_config_restart": False})
    assert run.returncode == 0, run.stdout[-3000:]
    for name, node in nodes.items():
        assert _started(node) == started[name], f"{name}: containerd was restarted"
        assert node.file(f"{STATE}/pending-restart-containerd.json").exists
        # the state directory also holds gpu_validate's reports, which operators read; the markers are root's
        assert node.file(STATE).mode == 0o755, f"{name}: {STATE} is {node.file(STATE).mode:o}"
        assert node.file(f"{STATE}/pending-restart-containerd.json").mode == 0o600
        assert "gpunode-pending" in _effective(node)["containerd"]["runtimes"]  # in the file...
        assert not _pod_runs(name, "gpunode-pending")  # ...but not in the running daemon
    # the next run, with nothing left to write, restarts containerd and checks it
    run, recap = _run_all(host, pending)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "was not restarted since (the run was interrupted or runtime_config_restart was false)" in folded(run)
    for name, node in nodes.items():
        assert " changed=0 " not in recap[name], recap[name]
        assert _started(node) != started[name], f"{name}: containerd was not restarted"
        assert not node.file(f"{STATE}/pending-restart-containerd.json").exists
        assert _pod_runs(name, "gpunode-pending")
        assert node.file(CONFIG).mode == 0o600, "config.toml lost its mode 0600"


def test_a_cri_plugin_that_does_not_load_is_rolled_back_byte_for_byte(host, nodes):
    before = {name: node.file(CONFIG).content_string for name, node in nodes.items()}
    owner = {name: (node.file(CONFIG).user, node.file(CONFIG).group) for name, node in nodes.items()}
    # containerd starts and `ctr` works, but its CRI plugin refuses a default runtime that is not configured
    missing = "{{ {'plugins': {" + CRI_TABLE + ": {'containerd': {'default_runtime_name': 'gpunode-missing'}}}} }}"
    bad = {
        "runtime_config_runtimes": ["containerd"],
        "runtime_config_containerd_settings": missing,
        "runtime_config_health_retries": 3,
    }
    run, recap = _run_all(host, bad)
    assert run.returncode != 0
    said = folded(run)
    assert "containerd did not come back after its config changed" in said
    assert "CRI plugin did not load" in said
    assert f"Rolled back: restored {CONFIG} from /var/backups/gpu-node-provisioning{CONFIG}." in said
    assert "is running again with its previous config" in said
    for name, node in nodes.items():
        assert " failed=1 " in recap[name] and " rescued=1 " in recap[name], recap[name]
        assert node.file(CONFIG).content_string == before[name], f"{name}: not restored byte for byte"
        assert node.file(CONFIG).mode == 0o600, f"{name}: the rollback changed config.toml's mode"
        assert (node.file(CONFIG).user, node.file(CONFIG).group) == owner[name]
        assert _cri_ok(node), node.check_output("ctr plugins ls")
        assert _pod_runs(name, "nvidia")


@pytest.fixture(scope="module")
def large_config_run(host, nodes):
    """The run of test_a_large_config_is_not_rolled_back, made once (when first asked) and shared with
    test_nvidia_made_the_default_and_then_not_is_no_longer_the_default, which asks for it right after its own run
    made nvidia the default: (run, recap, containerd's start before the run on each node)."""
    done = []

    def once():
        if not done:
            done.append(_large_config_run(host, nodes))
        return done[0]

    return once


def _large_config_run(host, nodes):
    mirrors = {
        f"mirror-{n}.registry.example": {"endpoint": [f"https://mirror-{n}.registry.example"]} for n in range(1500)
    }
    headers = {f"X-Gpunode-Test-{n}": [f"value-{n}"] for n in range(1500)}
    # config v3 (rc-forky, rc-ubuntu2204) sets registry.config_path, which containerd refuses together with mirrors
    settings = (
        "{{ {'plugins': {'io.containerd.cri.v1.images': {'registry': {'headers': gpunode_test_headers}}}}"
        f" if inventory_hostname in {list(V3)} else"
        " {'plugins': {'io.containerd.grpc.v1.cri': {'registry': {'mirrors': gpunode_test_mirrors}}}} }}"
    )
    large = {
        "runtime_config_runtimes": ["containerd"],
        "runtime_config_containerd_settings": settings,
        "gpunode_test_mirrors": mirrors,
        "gpunode_test_headers": headers,
    }
    started = {name: _started(node) for name, node in nodes.items()}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as extra:  # too large for one command-line argument
        json.dump(large, extra)
        extra.flush()
        run, _recap = _run_all(host, None, "-e", f"@{extra.name}")
    return run, _recap, started


def test_nvidia_made_the_default_and_then_not_is_no_longer_the_default(host, nodes, large_config_run):
    """nvidia made the default; then a run without runtime_config_set_as_default makes it no longer the default.
    That second run is test_a_large_config_is_not_rolled_back's (one run for both claims: it asks nothing of the
    default, so it must take nvidia's default away, as any run without the variable)."""
    run, recap = _run_all(host, {"runtime_config_set_as_default": True, "runtime_config_runtimes": ["containerd"]})
    assert run.returncode == 0, run.stdout[-3000:]
    for node in nodes.values():
        assert _effective(node)["containerd"]["default_runtime_name"] == "nvidia"
    run, recap, _started_before = large_config_run()
    assert run.returncode == 0, run.stdout[-3000:]
    for name, node in nodes.items():
        assert " changed=0 " not in recap[name], recap[name]
        assert 'default_runtime_name = "nvidia"' not in node.file(CONFIG).content_string
        assert "default_runtime_name = 'nvidia'" not in node.file(CONFIG).content_string
        assert _effective(node)["containerd"]["default_runtime_name"] == "runc"
        assert node.file(CONFIG).mode == 0o600


def test_a_large_config_is_not_rolled_back(host, nodes, large_config_run):
    """About 1,500 registry mirrors: `config dump` is far larger than a pipe, and a check that reads it
    through `| grep -q` gets SIGPIPE (rc 141) under pipefail and rolled back a valid config."""
    run, _recap, started = large_config_run()
    assert run.returncode == 0, run.stdout[-3000:]
    assert "did not come back" not in run.stdout
    for name, node in nodes.items():
        assert _started(node) != started[name]
        dump = node.check_output("containerd config dump")
        assert len(dump) > 64 * 1024, len(dump)  # larger than a pipe's buffer (rc-forky's headers: ~74 KB)
        assert "mirror-1499.registry.example" in dump or "X-Gpunode-Test-1499" in dump
        assert _cri_ok(node)
        assert _pod_runs(name, "nvidia")


def test_backups_live_outside_the_directories_the_daemons_read(nodes):
    """One backup tree, mirroring the original paths; nothing left beside the files (CRI-O, for one, reads every
    file of crio.conf.d, so a backup there would be live config). The backups keep the file's mode."""
    for name, node in nodes.items():
        debris = node.check_output("find /etc/containerd /etc/docker -name '*~' -o -name '*.bak' -o -name '.*.tmp'")
        assert debris == "", f"{name}: {debris}"
        backups = node.check_output(f"find /var/backups/gpu-node-provisioning{CONFIG}* -maxdepth 0 -name '*~'")
        assert backups.splitlines(), f"{name}: no backup of {CONFIG} in the backup tree"
        newest = node.check_output(f"ls -t /var/backups/gpu-node-provisioning{CONFIG}.*~ | head -n 1")
        assert node.file(newest).mode == 0o600, f"{name}: the backup of a 0600 file is readable by others"
