"""The doctor on the k3s- and RKE2-style nodes (issue 26): the containerd rows ask the installer's containerd
(its binary with the generated config, ctr on its socket, the agent unit's start), and the kubelet row reads the
agent config where the installer keeps it. Each row passes on the converged node and fails (or warns) under a
mutation, which the test undoes."""

from __future__ import annotations

import sys
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
sys.path.insert(0, str(SCENARIO / "tests"))
from doctor import doctor_rows
from test_installers import NODES, _etc

testinfra_hosts = ["ansible://in-k3s", "ansible://in-rke2"]
CRI, RUNTIME, LIVE, KUBELET = (
    "containerd: CRI plugin",
    "containerd: nvidia runtime",
    "containerd: running config",
    "kubelet configuration",
)
CTR = "ctr --address /run/k3s/containerd/containerd.sock"


def _restart(host, node) -> None:
    """Restart the agent and wait (generously, on the condition) until its containerd answers."""
    host.check_output(f"systemctl restart {node['unit']}")
    host.check_output(f"for _ in $(seq 120); do {node['bin']}/{CTR} version >/dev/null 2>&1 && break; sleep 1; done")


def test_the_doctor_rows_pass_on_the_converged_node(host):
    rows = doctor_rows(host)
    for check in (CRI, RUNTIME, LIVE, KUBELET):
        assert rows[check]["status"] == "ok", rows[check]
    assert rows[LIVE]["detail"].endswith("started after its config files were last written")
    assert rows[KUBELET]["detail"].startswith(f"drop-in /etc/rancher/{NODES[host.backend.get_hostname()]['name']}/")


def test_k3s_without_our_template_fails_the_runtime_row_and_a_newer_template_the_running_config(host):
    node = NODES[host.backend.get_hostname()]
    if node["name"] != "k3s":
        return  # in-rke2's agent registers nvidia by itself: no template of ours to take away
    template = f"{_etc(node)}/config.toml.tmpl"
    host.check_output(f"mv {template} /root/gpunode-template.saved")
    try:
        _restart(host, node)
        row = doctor_rows(host, families=["containerd"])[RUNTIME]
        assert row["status"] == "fail" and "(k3s node)" in row["detail"], row
        assert row["fix"].startswith("Run site.yml --tags runtime: it writes"), row
    finally:
        host.check_output(f"mv /root/gpunode-template.saved {template}")
        _restart(host, node)
    assert doctor_rows(host, families=["containerd"])[RUNTIME]["status"] == "ok"
    host.check_output(f"touch {template}")  # a template written after the agent started: not what runs
    row = doctor_rows(host, families=["containerd"])[LIVE]
    assert row["status"] == "warn" and row["detail"].startswith(f"{template} was written after k3s.service"), row
    _restart(host, node)
    assert doctor_rows(host, families=["containerd"])[LIVE]["status"] == "ok"


def test_rke2_with_a_default_runtime_containerd_lacks_fails_the_cri_row_and_without_the_drop_in_the_kubelet_row(host):
    node = NODES[host.backend.get_hostname()]
    if node["name"] != "rke2":
        return
    mutation = "/etc/rancher/rke2/config.yaml.d/95-gpunode-test-mutation.yaml"
    host.check_output(f"printf 'default-runtime: nosuch\\n' > {mutation}")
    try:
        _restart(host, node)
        row = doctor_rows(host, families=["containerd"])[CRI]
        assert row["status"] == "fail" and "CRI plugin did not load" in row["detail"], row
        assert row["fix"].startswith("journalctl -u rke2-agent.service"), row
    finally:
        host.check_output(f"rm -f {mutation}")
        _restart(host, node)
    assert doctor_rows(host, families=["containerd"])[CRI]["status"] == "ok"
    dropin = "/etc/rancher/rke2/config.yaml.d/90-gpu-node-kubelet.yaml"
    host.check_output(f"mv {dropin} /root/gpunode-kubelet-dropin.saved")
    try:
        row = doctor_rows(host, families=["kubelet"])[KUBELET]
        assert row["status"] == "fail" and row["detail"].startswith(f"no drop-in {dropin} on a rke2 node"), row
    finally:
        host.check_output(f"mv /root/gpunode-kubelet-dropin.saved {dropin}")
    assert doctor_rows(host, families=["kubelet"])[KUBELET]["status"] == "ok"


def test_a_kubelet_setting_the_agent_refuses_is_rolled_back_and_the_agent_runs_again(host, request):
    node = NODES[host.backend.get_hostname()]
    if node["name"] != "rke2":
        return
    # the run and the node's state right after it: conftest.py (one run with test_rollback.py's k3s refusal);
    # asked for here, after the in-rke2 tests above, as the run of this test was
    runs = request.getfixturevalue("refused_runs")
    run, output, after = runs["run"], runs["output"]["in-rke2"], runs["after"]["in-rke2"]
    assert run.returncode != 0 and runs["failed"]["in-rke2"] > 0, run.stdout[-3000:]
    assert "did not come back within 15s after its settings changed" in output, output[-3000:]
    assert "unrecognized feature gate: UnknownGpunodeGate" in output, output[-3000:]
    assert after["file"] == runs["before"]["in-rke2"]
    assert after["running"]
    assert after["kubelet_row"]["status"] == "ok"
