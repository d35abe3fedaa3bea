"""A kubespray-style node (issues 26 and 36): containerd 2.3.4 (upstream's build) with the config version 4 kubespray
renders for containerd >= 2.3, the toolkit role from the stand-in repository (NVIDIA's real 1.20 runtime), and a
TEST STAND-IN of kubespray's containerd step that re-renders config.toml over the node as a kubespray run does.
The doctor fails after that re-render, naming kubespray's inventory variable, and passes after a rerun of the
play; the containerd_additional_runtimes entry the role prints, given to kubespray, keeps the runtime across
kubespray's runs (the doctor and a pod find it). (kubespray v2.24-v2.27's version 2 render, with runc's
lower-case binaryName, is held by the unit tests: tests/unit/test_installer_filters.py.)"""

from __future__ import annotations

import json
import shlex
import sys
import tomllib
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
sys.path.insert(0, str(SCENARIO / "tests"))
sys.path.insert(0, str(SCENARIO.parents[1]))
from doctor import doctor_rows
from playbook_runner import recap, run_playbook

from tests.cri.client import CriClient, node_socket

testinfra_hosts = ["ansible://in-kubespray"]
SOCKET = "/run/containerd/containerd.sock"
IMAGE = "docker.io/gpunode-test/busybox:latest"
LOG = "/var/log/nvidia-container-runtime.log"
RUNTIME = "containerd: nvidia runtime"
NVIDIA_BINARY = "/usr/bin/nvidia-container-runtime"


CRI = "io.containerd.cri.v1.runtime"  # config version 4 keeps version 3's table names
INVENTORY = "/etc/gpunode-standin/kubespray-inventory.json"
CONFIG = "/etc/containerd/config.toml"


def _runtimes(host) -> dict:
    config = tomllib.loads(host.file("/etc/containerd/config.toml").content_string)
    assert config["version"] == 4, config["version"]  # kubespray's render for containerd >= 2.3
    return config["plugins"][CRI]["containerd"]["runtimes"]


def _nvidia_options(host) -> dict:
    return _runtimes(host)["nvidia"]["options"]


def _pod_through_nvidia(host) -> None:
    before = int(host.check_output(f"stat -c %s {LOG} 2>/dev/null || echo 0"))
    with CriClient(node_socket(host.backend.get_hostname(), SOCKET)) as cri:
        assert cri.runtime_ready(), cri.status()
        sandbox, error = cri.try_pod("kubespray-nvidia-pod", "nvidia", IMAGE, ["sleep", "300"])
        assert error is None, error
        log = host.check_output(f"tail -c +{before + 1} {LOG}")
    assert sandbox in log, log[-2000:]
    assert "Forwarding command to runtime" in log, log[-2000:]


def test_the_facts_name_kubespray(host):
    installer = host.ansible("gpu_node_facts", check=False)["ansible_facts"]["gpu_node"]["installer"]
    assert installer["name"] == "kubespray"
    assert installer["containerd"]["config_regenerated"] == "kubespray run"


def test_the_nvidia_table_is_kubesprays_runc_table_with_only_the_binary_replaced(host):
    assert "v2.3.4" in host.check_output("containerd --version")
    runc = _runtimes(host)["runc"]
    assert runc["options"] == {"Root": "", "SystemdCgroup": True, "BinaryName": "/usr/local/bin/runc"}  # kubespray's
    assert _nvidia_options(host)["BinaryName"] == NVIDIA_BINARY
    # the effective config of the running containerd (2.3 dumps version 4): runc's whole entry, only the binary other
    dump = tomllib.loads(host.check_output("containerd config dump"))
    containerd = dump["plugins"][CRI]["containerd"]
    assert containerd["default_runtime_name"] == "runc"
    runc, nvidia = containerd["runtimes"]["runc"], containerd["runtimes"]["nvidia"]
    assert nvidia["options"]["BinaryName"] == NVIDIA_BINARY
    assert {**nvidia, "options": {**nvidia["options"], "BinaryName": ""}} == {
        **runc,
        "options": {**runc["options"], "BinaryName": ""},
    }
    assert nvidia["base_runtime_spec"] == "/etc/containerd/cri-base.json"


def test_a_cri_pod_through_nvidia_runs_nvidias_real_runtime_and_a_default_pod_does_not(host):
    assert "NVIDIA Container Runtime version 1.20.0" in host.check_output("nvidia-container-runtime --version")
    _pod_through_nvidia(host)
    before = int(host.check_output(f"stat -c %s {LOG} 2>/dev/null || echo 0"))
    with CriClient(node_socket(host.backend.get_hostname(), SOCKET)) as cri:
        _sandbox, error = cri.try_pod("kubespray-runc-pod", "", IMAGE, ["sleep", "300"])
    assert error is None, error
    assert int(host.check_output(f"stat -c %s {LOG}")) == before, "a pod without a handler ran NVIDIA's runtime"


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
    assert _nvidia_options(host)["BinaryName"] == "/usr/bin/nvidia-container-runtime"


def test_the_printed_entry_given_to_kubespray_keeps_the_runtime_across_its_runs(host):
    """The containerd_additional_runtimes entry the role prints (plugins/filter/installer.py kubespray_runtime, the
    same function on the same file) and enable_cdi, put into kubespray's inventory: kubespray's next run renders
    nvidia itself, config version 4, and the doctor and a pod find it without a run of the role. Then the pair is at
    a fixed point (issue 36): kubespray renders nvidia without the values containerd 2.3's `config dump` fills in,
    which containerd reads as the role's entry, so a run of the play changes nothing (it rewrote the table at each
    run before, and kubespray's next run took it back) and kubespray's next run renders the same file."""
    sys.path.insert(0, str(SCENARIO.parents[1] / "collections"))  # the collection, as ansible.cfg resolves it
    from ansible_collections.gpunode.provisioning.plugins.filter.installer import kubespray_runtime

    entry = kubespray_runtime(host.file("/etc/containerd/config.toml").content_string, "nvidia", NVIDIA_BINARY)
    saved = host.file(INVENTORY).content_string
    inventory = {
        **json.loads(saved),
        "containerd_additional_runtimes": [entry],
        "enable_cdi": True,
        # TEST HARNESS, as the scenario's runtime_config_containerd_settings: the node container is not privileged
        "containerd_extra_runtime_args": {"restrict_oom_score_adj": True},
    }
    try:
        host.check_output(f"echo {shlex.quote(json.dumps(inventory))} > {INVENTORY}")
        host.check_output("/usr/local/bin/kubespray-rerender-standin")
        assert _nvidia_options(host)["BinaryName"] == NVIDIA_BINARY
        assert doctor_rows(host)[RUNTIME]["status"] == "ok"
        _pod_through_nvidia(host)
        rendered = host.file(CONFIG).sha256sum
        run = run_playbook(host, SCENARIO / "converge.yml")
        assert run.returncode == 0, run.stdout[-3000:]
        assert recap(run.stdout)["in-kubespray"]["changed"] == 0, run.stdout[-3000:]
        assert host.file(CONFIG).sha256sum == rendered
        assert host.check_output("/usr/local/bin/kubespray-rerender-standin") == "ok: config.toml unchanged"
    finally:
        host.check_output(f"echo {shlex.quote(saved.strip())} > {INVENTORY}")
