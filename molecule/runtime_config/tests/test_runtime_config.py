"""Verify runtime_config on real docker and containerd inside the nodes.

The tests that drive the role again through ansible-playbook (check mode, a
changed setting, configs the runtimes refuse) are in test_transactions.py: each
drives all four nodes in one run.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.cri.doors import log_size

# the docker and containerd nodes (rc-crio has tests of its own: test_crio.py, test_crio_doors.py)
testinfra_hosts = [f"ansible://{name}" for name in ("rc-debian12", "rc-debian13", "rc-forky", "rc-ubuntu2204")]
DAEMON_JSON = "/etc/docker/daemon.json"
CONTAINERD_TOML = "/etc/containerd/config.toml"
IMAGE = "gpunode-test/busybox:latest"


def _daemon_json(host) -> dict:
    return json.loads(host.file(DAEMON_JSON).content_string)


def _docker_version(host) -> tuple[int, ...]:
    out = host.check_output("docker version --format '{{.Server.Version}}'")
    return tuple(int(p) for p in out.split("+")[0].split(".")[:2])


def _network(host) -> str:
    # docker >= 26 cannot set up a bridge inside the node (IPv6 sysctl)
    return "bridge" if _docker_version(host) < (26, 0) else "none"


def test_docker_lists_the_nvidia_runtime(host):
    runtimes = json.loads(host.check_output("docker info --format '{{json .Runtimes}}'"))
    assert runtimes["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"


def test_a_container_runs_through_the_nvidia_runtime(host):
    before = log_size(host)  # NVIDIA's runtime's debug log (prepare.yml)
    out = host.run(f"docker run --rm --runtime nvidia --network {_network(host)} {IMAGE} echo through-nvidia")
    assert out.rc == 0, out.stderr
    assert out.stdout.strip() == "through-nvidia"
    assert log_size(host) > before, "NVIDIA's runtime was not called"


def test_nvidia_is_not_the_default_runtime(host):
    assert host.check_output("docker info --format '{{.DefaultRuntime}}'") == "runc"
    assert "default-runtime" not in _daemon_json(host)
    dump = host.check_output("containerd config dump")
    assert 'default_runtime_name = "runc"' in dump or "default_runtime_name = 'runc'" in dump


def test_daemon_json_keeps_what_the_admin_set(host):
    config = _daemon_json(host)
    assert config["log-driver"] == "json-file"
    assert config["log-opts"] == {"max-size": "10m", "max-file": "3"}
    assert config["features"]["buildkit"] is True
    assert config["registry-mirrors"] == ["https://mirror.gpunode.test"]
    assert config["runtimes"]["crun"] == {"path": "/usr/bin/crun"}
    assert config["runtimes"]["nvidia"] == {"path": "/usr/bin/nvidia-container-runtime", "args": []}


def test_docker_cdi_is_enabled_only_where_docker_supports_it(host):
    features = _daemon_json(host)["features"]
    if _docker_version(host) >= (25, 0):
        assert features["cdi"] is True
    else:
        assert "cdi" not in features


def test_containerd_has_the_runtime_with_systemd_cgroup_copied(host):
    dump = host.check_output("containerd config dump")
    config = tomllib.loads(dump)
    version = config.get("version", 1)
    cri = config["plugins"]["io.containerd.cri.v1.runtime" if version >= 3 else "io.containerd.grpc.v1.cri"]
    nvidia = cri["containerd"]["runtimes"]["nvidia"]
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    runc = cri["containerd"]["runtimes"]["runc"]
    assert nvidia["options"]["SystemdCgroup"] is runc["options"]["SystemdCgroup"]
    # rc-forky's admin set SystemdCgroup; Debian's packaged file (rc-debian12/13) and `containerd config default`
    # (rc-ubuntu2204, whose package ships no file) leave it at false
    assert runc["options"]["SystemdCgroup"] is (host.backend.get_hostname() == "rc-forky")


def test_containerd_config_keeps_the_admins_comment(host):
    text = host.file(CONTAINERD_TOML).content_string
    if host.backend.get_hostname() == "rc-ubuntu2204":  # no file before the role (Ubuntu's package ships none)
        assert not host.file("/var/tmp/gpunode-test-config.toml.before").exists
        assert tomllib.loads(text)["version"] == 3
        return
    before = host.file("/var/tmp/gpunode-test-config.toml.before").content_string
    assert text.startswith(before.splitlines()[0] + "\n")
    if host.backend.get_hostname() == "rc-forky":
        assert text.startswith("# Admin note: managed by hand since 2024, keep this comment.\n")
