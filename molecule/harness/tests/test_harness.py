"""Verify the harness: real systemd and a real nested container in every node."""

import json
import os

NESTED_IMAGE = "gpunode-test/busybox:latest"


def test_systemd_is_pid_1_and_running(host):
    assert host.file("/proc/1/comm").content_string.strip() == "systemd"
    state = host.run("systemctl is-system-running").stdout.strip()
    assert state in ("running", "degraded"), state


# the python3 each node image brings: node-side code must run on all of them
NODE_PYTHON = {
    "debian11": "3.9",
    "debian12": "3.11",
    "debian13": "3.13",
    "ubuntu2204": "3.10",
    "ubuntu2404": "3.12",
}


def test_converge_wrote_the_marker(host):
    marker = host.file("/etc/gpunode-harness")
    assert marker.exists
    assert marker.mode == 0o644
    assert host.system_info.distribution.lower() in marker.content_string.lower()


def test_gpu_node_facts_ran_on_the_nodes_python3(host):
    # the converge ran this project's gpu_node_facts module with the node's python3
    lines = host.file("/etc/gpunode-harness").content_string.splitlines()
    node = host.backend.get_hostname().removeprefix("harness-")
    python = host.run("python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'").stdout.strip()
    assert lines[1] == f"python {python}", lines
    if node in NODE_PYTHON:
        assert python == NODE_PYTHON[node], f"{node} runs python {python}"
    assert lines[2].startswith("runtimes_running ") and "docker" in lines[2].split()[1].split(","), lines


def test_docker_engine_runs_inside_the_node(host):
    assert host.service("docker").is_running
    info = host.run("docker info --format '{{.ServerVersion}} {{.Driver}}'")
    assert info.rc == 0, info.stderr
    assert info.stdout.strip(), "docker info printed no server version"


def _nested_network(host):
    # From docker 26 on, dockerd cannot set up a bridge inside the node (it fails to
    # set an IPv6 sysctl there), so those nested containers use no network. Older
    # engines (Debian 11/12's 20.10, Ubuntu's 24.0 if present) prove bridge networking.
    version = host.run("docker version --format '{{.Server.Version}}'")
    assert version.rc == 0, version.stderr
    return "bridge" if int(version.stdout.strip().split(".")[0]) < 26 else "none"


def test_nested_container_runs_from_a_local_image(host):
    network = _nested_network(host)
    cmd = host.run(
        f"docker run --rm --network {network} {NESTED_IMAGE} sh -c 'echo nested-ok; cat /proc/1/cgroup | head -1'"
    )
    assert cmd.rc == 0, cmd.stderr
    assert cmd.stdout.splitlines()[0] == "nested-ok"


def test_nested_image_came_from_a_local_rootfs(host):
    # imported from a tarball: one layer whose history says so, and no digest from a
    # registry (docker with the containerd image store, as Ubuntu's, records the
    # digest of the local manifest under the image's own name)
    history = host.run(f"docker image history --format '{{{{.Comment}}}}' {NESTED_IMAGE}")
    assert history.rc == 0, history.stderr
    assert history.stdout.splitlines() == ["Imported from -"], history.stdout
    digests = host.run(f"docker image inspect --format '{{{{json .RepoDigests}}}}' {NESTED_IMAGE}")
    assert digests.rc == 0, digests.stderr
    repo = NESTED_IMAGE.split(":")[0]
    assert all(d.startswith(repo + "@sha256:") for d in json.loads(digests.stdout)), digests.stdout


def test_apt_cache_is_shared_with_the_host(host):
    mounts = host.file("/proc/self/mountinfo").content_string
    assert " /var/cache/apt/archives " in mounts
    assert os.environ.get("MOLECULE_SCENARIO_NAME") == "harness"


def test_the_nodes_python_kept_the_compiled_module_payloads(host):
    """The TEST HARNESS compile cache (molecule/resources/bytecode_cache) is loaded by the node's python3 and
    holds the code it compiled for the converge's module payloads."""
    tag = host.check_output("python3 -c 'import sys; print(sys.implementation.cache_tag)'")
    assert host.check_output("python3 -c 'import zipimport; print(zipimport._compile_source.__module__)'") == (
        "gpunode_bytecode_cache"
    )
    kept = host.check_output(f"find /var/cache/gpunode-bytecode -name '{tag}-*' | wc -l")
    assert int(kept) >= 10, f"{kept} compiled files for {tag}"
