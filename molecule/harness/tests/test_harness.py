"""Verify the harness: real systemd and a real nested container in every node."""

import os

NESTED_IMAGE = "gpunode-test/busybox:latest"


def test_systemd_is_pid_1_and_running(host):
    assert host.file("/proc/1/comm").content_string.strip() == "systemd"
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state in ("running", "degraded"), state


def test_converge_wrote_the_marker(host):
    marker = host.file("/etc/gpunode-harness")
    assert marker.exists
    assert marker.mode == 0o644
    assert host.system_info.distribution.lower() in marker.content_string.lower()


def test_docker_engine_runs_inside_the_node(host):
    assert host.service("docker").is_running
    info = host.run("docker info --format '{{.ServerVersion}} {{.Driver}}'")
    assert info.rc == 0, info.stderr
    assert info.stdout.strip(), "docker info printed no server version"


def test_nested_container_runs_from_a_local_image(host):
    network = host.ansible.get_variables().get("harness_nested_network", "bridge")
    cmd = host.run(
        f"docker run --rm --network {network} {NESTED_IMAGE} sh -c 'echo nested-ok; cat /proc/1/cgroup | head -1'"
    )
    assert cmd.rc == 0, cmd.stderr
    assert cmd.stdout.splitlines()[0] == "nested-ok"


def test_nested_image_came_from_a_local_rootfs(host):
    # imported from a tarball: no registry digest, no parent
    digests = host.run(f"docker image inspect --format '{{{{json .RepoDigests}}}}' {NESTED_IMAGE}")
    assert digests.rc == 0, digests.stderr
    assert digests.stdout.strip() == "[]"


def test_apt_cache_is_shared_with_the_host(host):
    mounts = host.file("/proc/self/mountinfo").content_string
    assert " /var/cache/apt/archives " in mounts
    assert os.environ.get("MOLECULE_SCENARIO_NAME") == "harness"
