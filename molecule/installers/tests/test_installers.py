"""k3s- and RKE2-style nodes after runtime_config and kubelet (issue 26), judged as the kubelet sees them: the
CRI through the installer's socket, the config the TEST STAND-IN agent regenerated at its start, and the
agent config it reads. Scenario layout: molecule/installers/molecule.yml."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
sys.path.insert(0, str(SCENARIO.parents[1]))
from tests.cri.client import CriClient, node_socket
from tests.cri.doors import log_since, log_size

testinfra_hosts = ["ansible://in-k3s", "ansible://in-rke2"]  # in-kubespray: test_kubespray.py
SOCKET = "/run/k3s/containerd/containerd.sock"
IMAGE = "docker.io/gpunode-test/busybox:latest"
NODES = {
    "in-k3s": {"name": "k3s", "unit": "k3s.service", "bin": "/var/lib/rancher/k3s/data/current/bin"},
    "in-rke2": {"name": "rke2", "unit": "rke2-agent.service", "bin": "/var/lib/rancher/rke2/bin"},
}


@pytest.fixture
def node(host):
    return NODES[host.backend.get_hostname()]


def _etc(node) -> str:
    return f"/var/lib/rancher/{node['name']}/agent/etc/containerd"


def _generated(host, node) -> dict:
    return tomllib.loads(host.file(f"{_etc(node)}/config.toml").content_string)


def _cri(config: dict) -> dict:
    return config["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]


def test_the_facts_name_the_installer_and_its_containerd(host, node):
    out = host.ansible("gpu_node_facts", check=False)["ansible_facts"]["gpu_node"]["installer"]
    assert out["name"] == node["name"]
    assert out["service"] == node["unit"]
    assert out["containerd"]["socket"] == SOCKET
    assert out["containerd"]["binary"] == f"{node['bin']}/containerd"
    assert out["containerd"]["template"] == f"{_etc(node)}/config.toml.tmpl"  # containerd 1.7: the v2 name


def test_the_generated_config_is_the_agents_and_serves_nvidia(host, node):
    runtimes = _cri(_generated(host, node))["runtimes"]
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    plugins = host.check_output(f"{node['bin']}/ctr --address {SOCKET} plugins ls")
    rows = [line.split() for line in plugins.splitlines() if " cri " in f" {line} "]
    assert rows and all(row[-1] == "ok" for row in rows), plugins


def test_k3s_gets_our_template_and_rke2_detects_nvidia_itself(host, node):
    template = host.file(f"{_etc(node)}/config.toml.tmpl")
    if node["name"] == "k3s":
        assert template.content_string.startswith("# Managed by Ansible (runtime_config)")
        assert template.content_string.count("{{") == 1
        assert _cri(_generated(host, node)).get("default_runtime_name") is None
    else:
        assert not template.exists
        assert _cri(_generated(host, node))["default_runtime_name"] == "nvidia"
        dropin = host.file("/etc/rancher/rke2/config.yaml.d/90-gpu-node-nvidia.yaml").content_string
        assert "default-runtime: nvidia" in dropin


def test_a_pod_through_the_nvidia_handler_runs_via_the_installers_socket(host):
    before = log_size(host)  # NVIDIA's runtime's debug log (rancher_node.yml)
    with CriClient(node_socket(host.backend.get_hostname(), SOCKET)) as cri:
        assert cri.runtime_ready(), cri.status()
        sandbox, error = cri.try_pod("nvidia-pod", "nvidia", IMAGE, ["sleep", "300"])
        assert error is None, error
        calls = log_since(host, before).splitlines()
        # each call logs its bundle directory, which ends in the sandbox's id
        assert any(sandbox in call for call in calls), f"the sandbox did not go through NVIDIA's runtime: {calls}"
        cri.remove_pod(sandbox)


def test_the_kubelet_settings_land_in_the_agent_drop_in_and_config_yaml_is_untouched(host, node):
    config = host.file(f"/etc/rancher/{node['name']}/config.yaml").content_string
    assert config.startswith("# Admin note: written at install time, keep this comment.\n")
    assert "example.com/pool" not in config
    seen = json.loads(host.file(f"/var/lib/rancher/{node['name']}/agent/standin-kubelet.json").content_string)
    assert seen["node-label"] == ["example.com/rack=r7", "example.com/pool=gpu"]
    # k3s 1.27 and RKE2 1.28 run kubelets older than the UserNamespacesSupport gate (1.30): none is set
    assert seen["kubelet-arg"] == ["max-pods=200"]
    assert not host.file("/etc/kubernetes/kubelet.conf.d/50-gpu-node.conf").exists
