"""Verify the harness on the nodes with a docker engine inside (molecule.yml: harness_docker): the engine runs, and
a nested container runs from a local image imported from a rootfs tarball, with no registry."""

import json

from test_harness import docker_nodes

testinfra_hosts = [f"ansible://{name}" for name in docker_nodes()]
NESTED_IMAGE = "gpunode-test/busybox:latest"


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
