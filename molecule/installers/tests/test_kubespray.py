"""A kubespray-style node (issue 26): Debian's real containerd with the config kubespray v2.24-v2.27 renders
(runc's lower-case binaryName), the toolkit role from the stand-in repository (NVIDIA's real 1.20 runtime), and
a TEST STAND-IN of kubespray's containerd step that re-renders config.toml over the node as a kubespray run does.
The doctor fails after that re-render, naming kubespray's inventory variable, and passes after a rerun of the
play."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
sys.path.insert(0, str(SCENARIO / "tests"))
sys.path.insert(0, str(SCENARIO.parents[1]))
from doctor import doctor_rows
from playbook_runner import run_playbook

from tests.cri.client import CriClient, node_socket

testinfra_hosts = ["ansible://in-kubespray"]
SOCKET = "/run/containerd/containerd.sock"
IMAGE = "docker.io/gpunode-test/busybox:latest"
LOG = "/var/log/nvidia-container-runtime.log"
RUNTIME = "containerd: nvidia runtime"


def _nvidia_options(host) -> dict:
    config = tomllib.loads(host.file("/etc/containerd/config.toml").content_string)
    return config["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]["options"]


def test_the_facts_name_kubespray(host):
    installer = host.ansible("gpu_node_facts", check=False)["ansible_facts"]["gpu_node"]["installer"]
    assert installer["name"] == "kubespray"
    assert installer["containerd"]["config_regenerated"] == "kubespray run"


def test_kubesprays_lower_case_binary_name_ends_as_one_binary_name_in_the_nvidia_table(host):
    options = _nvidia_options(host)
    assert [key for key in options if key.lower() == "binaryname"] == ["BinaryName"], options
    assert options["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert options["systemdCgroup"] is True  # runc's table copied as kubespray spelled it
    # the effective config of the running containerd says the same
    dump = tomllib.loads(host.check_output("containerd config dump"))
    nvidia = dump["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]
    assert [key for key in nvidia["options"] if key.lower() == "binaryname"] == ["BinaryName"]
    assert nvidia["base_runtime_spec"] == "/etc/containerd/cri-base.json"


def test_a_cri_pod_through_nvidia_runs_nvidias_real_runtime(host):
    assert "NVIDIA Container Runtime version 1.20.0" in host.check_output("nvidia-container-runtime --version")
    before = int(host.check_output(f"stat -c %s {LOG} 2>/dev/null || echo 0"))
    with CriClient(node_socket(host.backend.get_hostname(), SOCKET)) as cri:
        assert cri.runtime_ready(), cri.status()
        sandbox, error = cri.try_pod("kubespray-nvidia-pod", "nvidia", IMAGE, ["sleep", "300"])
        assert error is None, error
        log = host.check_output(f"tail -c +{before + 1} {LOG}")
        cri.remove_pod(sandbox)
    assert sandbox in log, log[-2000:]
    assert "Forwarding command to runtime" in log, log[-2000:]


def test_the_doctor_fails_after_a_kubespray_rerender_and_passes_after_a_rerun_of_the_play(host):
    assert doctor_rows(host)[RUNTIME]["status"] == "ok"
    # what a kubespray run does to the node: render config.toml from its inventory, restart containerd
    host.check_output("/usr/local/bin/kubespray-rerender-standin")
    assert "nvidia" not in host.file("/etc/containerd/config.toml").content_string
    row = doctor_rows(host)[RUNTIME]
    assert row["status"] == "fail", row
    assert row["detail"].startswith("no runtimes.nvidia in containerd config dump (kubespray node)"), row
    assert "containerd_additional_runtimes in the kubespray inventory" in row["fix"], row
    run = run_playbook(host, SCENARIO / "converge.yml")
    assert run.returncode == 0, run.stdout[-3000:]
    assert "containerd_additional_runtimes" in run.stdout and "cri-base.json" in run.stdout, run.stdout[-3000:]
    assert doctor_rows(host)[RUNTIME]["status"] == "ok"
    assert [key for key in _nvidia_options(host) if key.lower() == "binaryname"] == ["BinaryName"]
