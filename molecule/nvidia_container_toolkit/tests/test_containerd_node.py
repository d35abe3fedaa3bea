"""Verify the containerd-only node (tk-debian13): nvidia registered in containerd with CDI, not the default,
a container runs through the registered runtime; CDI spec generated (driver SIMULATED, see
molecule/resources/tasks/standin_facts.yml).

/usr/bin/nvidia-container-runtime is NVIDIA's real runtime (toolkit 1.20.0) from the stand-in package; nvidia-ctk
is NVIDIA's too, behind a TEST STAND-IN wrapper that answers `cdi generate` for the simulated driver
(tests/fixtures/nvidia-container-toolkit-standin/files/nvidia-ctk-simulated-gpu). There is no crictl in Debian, so the
container is started with ctr using exactly the shim and binary of the runtime entry containerd loaded.
"""

from __future__ import annotations

import tomllib

import pytest
import yaml

testinfra_hosts = ["ansible://tk-debian13"]

IMAGE = "docker.io/gpunode-test/busybox:latest"
RUNTIME_LOG = "/var/log/nvidia-container-runtime.log"  # NVIDIA's runtime, debug file set in prepare
CRI = "io.containerd.grpc.v1.cri"


@pytest.fixture(scope="module")
def effective_config(host):
    """containerd's effective configuration, as containerd itself parsed it."""
    return tomllib.loads(host.check_output("containerd config dump"))


def test_containerd_registers_nvidia_with_cdi_and_keeps_runc_default(effective_config):
    cri = effective_config["plugins"][CRI]
    nvidia = cri["containerd"]["runtimes"]["nvidia"]
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert cri["containerd"]["default_runtime_name"] == "runc"
    assert cri["enable_cdi"] is True  # containerd 1.7 supports CDI
    assert "/var/run/cdi" in cri["cdi_spec_dirs"]


def test_a_container_runs_through_the_registered_nvidia_runtime(host, effective_config):
    nvidia = effective_config["plugins"][CRI]["containerd"]["runtimes"]["nvidia"]
    systemd_cgroup = " --runc-systemd-cgroup" if nvidia["options"].get("SystemdCgroup") else ""
    before = host.run(f"cat {RUNTIME_LOG} 2>/dev/null").stdout
    run = host.run(
        f"timeout 120 ctr run --rm --runtime {nvidia['runtime_type']} --runc-binary {nvidia['options']['BinaryName']}"
        f"{systemd_cgroup} {IMAGE} tk-verify-nvidia sh -c 'echo nested-ok'"
    )
    assert run.rc == 0, run.stderr
    assert run.stdout.strip() == "nested-ok"
    new_calls = host.run(f"cat {RUNTIME_LOG}").stdout[len(before) :]
    assert "Create command detected" in new_calls and "tk-verify-nvidia" in new_calls, new_calls


def test_the_cdi_spec_was_generated_by_the_installed_toolkit(host):
    spec_file = host.file("/var/run/cdi/nvidia.yaml")
    assert spec_file.mode == 0o644
    spec = yaml.safe_load(spec_file.content_string)
    assert spec["kind"] == "nvidia.com/gpu"
    assert [device["name"] for device in spec["devices"]] == ["0", "all"]
    # regenerated after the pin moved to 1.18.0
    assert spec["containerEdits"]["env"] == ["NVIDIA_STANDIN_CDI=1.18.0"]
    listed = host.check_output("nvidia-ctk cdi list 2>/dev/null").splitlines()
    assert "nvidia.com/gpu=all" in listed


def test_the_cdi_refresh_units_of_toolkit_1_18_are_enabled(host):
    assert host.check_output("systemctl is-enabled nvidia-cdi-refresh.path") == "enabled"
    assert host.check_output("systemctl is-enabled nvidia-cdi-refresh.service") == "enabled"
    assert host.check_output("systemctl is-active nvidia-cdi-refresh.path") == "active"


def test_docker_is_not_installed_here(host):
    facts = host.ansible("gpu_node_facts", check=False)["ansible_facts"]["gpu_node"]
    assert facts["runtimes_installed"] == ["containerd"]
    assert not host.file("/etc/docker/daemon.json").exists
