"""Verify the harness: real systemd, this project's facts module on the image's python3, the host's apt cache and the
compile cache of module payloads in every node (the nested containers: test_harness_docker.py)."""

import os

from testinfra.utils.ansible_runner import AnsibleRunner

# the nodes with a docker engine inside: molecule.yml's group harness_docker, read from the scenario's inventory
DOCKER_GROUP = "harness_docker"


def docker_nodes() -> list[str]:
    return AnsibleRunner.get_runner(os.environ["MOLECULE_INVENTORY_FILE"]).get_hosts(DOCKER_GROUP)


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
    assert lines[2].startswith("runtimes_running "), lines
    running = lines[2].removeprefix("runtimes_running ").split(",")
    assert ("docker" in running) == (host.backend.get_hostname() in docker_nodes()), lines


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
