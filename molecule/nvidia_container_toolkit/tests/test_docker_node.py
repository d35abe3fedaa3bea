"""Verify the docker-only node (tk-debian12): nvidia registered in docker, not the default, containers run through it.

/usr/bin/nvidia-container-runtime is NVIDIA's real runtime (toolkit 1.20.0, GPUNODE_UPSTREAM_DIR) from the stand-in
package; its debug log (config.toml's [nvidia-container-runtime] debug, set in prepare) shows each call.
"""

from __future__ import annotations

import json

testinfra_hosts = ["ansible://tk-debian12"]

IMAGE = "gpunode-test/busybox:latest"
RUNTIME_LOG = "/var/log/nvidia-container-runtime.log"  # NVIDIA's runtime, debug file set in prepare


def runtime_log(host) -> str:
    return host.run(f"cat {RUNTIME_LOG} 2>/dev/null").stdout


def test_daemon_json_registers_nvidia_without_making_it_the_default(host):
    daemon = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert daemon["runtimes"]["nvidia"] == {"path": "/usr/bin/nvidia-container-runtime", "args": []}
    assert "default-runtime" not in daemon
    # docker 20.10 has no CDI: the role must not write the feature docker would reject
    assert "cdi" not in daemon.get("features", {})


def test_docker_lists_nvidia_and_keeps_runc_as_default(host):
    info = host.check_output("docker info --format '{{json .Runtimes}} {{.DefaultRuntime}}'")
    runtimes, default = info.rsplit(" ", 1)
    assert json.loads(runtimes)["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"
    assert default == "runc"


def test_a_container_runs_through_the_nvidia_runtime(host):
    before = runtime_log(host)
    container = host.check_output(f"docker create --runtime nvidia {IMAGE} sh -c 'echo nested-ok'")
    try:
        run = host.run(f"docker start --attach {container}")
        assert run.rc == 0, run.stderr
        assert run.stdout.strip() == "nested-ok"
    finally:
        host.run(f"docker rm --force {container}")
    new_calls = runtime_log(host)[len(before) :]
    assert "Create command detected" in new_calls and container in new_calls, new_calls


def test_a_container_without_runtime_flag_does_not_use_nvidia(host):
    before = runtime_log(host)
    run = host.run(f"docker run --rm {IMAGE} sh -c 'echo plain-ok'")
    assert run.rc == 0, run.stderr
    assert run.stdout.strip() == "plain-ok"
    assert runtime_log(host) == before


def test_only_docker_was_configured_on_this_node(host):
    # docker.io brings containerd along; nvidia_container_toolkit_runtimes: [docker] keeps it out of containerd
    facts = host.ansible("gpu_node_facts", check=False)["ansible_facts"]["gpu_node"]
    assert sorted(facts["runtimes_installed"]) == ["containerd", "docker"]
    config = host.file("/etc/containerd/config.toml")
    assert not config.exists or "nvidia" not in config.content_string


def test_no_cdi_spec_without_a_driver_but_the_refresh_units_write_it_at_boot(host):
    # No driver is loaded here (a fresh install loads it only at the driver role's reboot handler, after this role):
    # no spec in this run, but NVIDIA's refresh units (toolkit 1.18.0 since side_effect; the stand-in package does
    # not enable them itself) are enabled, so nvidia-cdi-refresh.service writes the spec at the next boot.
    assert not host.file("/var/run/cdi/nvidia.yaml").exists
    assert host.run("systemctl is-enabled nvidia-cdi-refresh.service").stdout.strip() == "enabled"
    assert host.run("systemctl is-enabled nvidia-cdi-refresh.path").stdout.strip() == "enabled"
    assert "multi-user.target" in host.check_output("systemctl show --property=WantedBy nvidia-cdi-refresh.service")
