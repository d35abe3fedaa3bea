"""Verify runtime_config on real docker and containerd inside the nodes.

The last tests drive the role again through ansible-playbook (check mode, a
changed setting, configs the runtimes refuse) against one node at a time.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
from playbook_runner import run_playbook

DAEMON_JSON = "/etc/docker/daemon.json"
CONTAINERD_TOML = "/etc/containerd/config.toml"
IMAGE = "gpunode-test/busybox:latest"
STANDIN_LOG = "/var/log/nvidia-container-runtime-standin.log"


def _playbook(host, extra_vars: dict | None = None, *args: str):
    return run_playbook(host, SCENARIO / "converge.yml", extra_vars, *args)


def _daemon_json(host) -> dict:
    return json.loads(host.file(DAEMON_JSON).content_string)


def _containerd_toml(host) -> dict:
    return tomllib.loads(host.file(CONTAINERD_TOML).content_string)


def _docker_version(host) -> tuple[int, ...]:
    out = host.check_output("docker version --format '{{.Server.Version}}'")
    return tuple(int(p) for p in out.split("+")[0].split(".")[:2])


def _started(host, unit: str) -> str:
    return host.check_output(f"systemctl show {unit} -p ActiveEnterTimestampMonotonic")


def _network(host) -> str:
    # docker >= 26 cannot set up a bridge inside the node (IPv6 sysctl)
    return "bridge" if _docker_version(host) < (26, 0) else "none"


def test_docker_lists_the_nvidia_runtime(host):
    runtimes = json.loads(host.check_output("docker info --format '{{json .Runtimes}}'"))
    assert runtimes["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"


def test_a_container_runs_through_the_nvidia_runtime(host):
    before = host.run(f"wc -l < {STANDIN_LOG}").stdout.strip() or "0"
    out = host.run(f"docker run --rm --runtime nvidia --network {_network(host)} {IMAGE} echo through-nvidia")
    assert out.rc == 0, out.stderr
    assert out.stdout.strip() == "through-nvidia"
    after = host.check_output(f"wc -l < {STANDIN_LOG}")
    assert int(after) > int(before), "the stand-in nvidia runtime was not called"


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
    assert nvidia["options"]["SystemdCgroup"] is True
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is True


def test_containerd_config_keeps_the_admins_comment(host):
    text = host.file(CONTAINERD_TOML).content_string
    assert text.startswith("# Admin note: managed by hand since 2024, keep this comment.\n")


def _new_log_level(host) -> str:
    """A log-level different from the current one, so each run is a real change."""
    return "error" if _daemon_json(host).get("log-level") == "warn" else "warn"


def test_check_diff_shows_the_change_and_writes_nothing(host):
    before = {p: host.file(p).sha256sum for p in (DAEMON_JSON, CONTAINERD_TOML)}
    started = _started(host, "docker")
    level = _new_log_level(host)
    run = _playbook(host, {"runtime_config_docker_settings": {"log-level": level}}, "--check", "--diff")
    assert run.returncode == 0, run.stdout + run.stderr
    assert f'+  "log-level": "{level}"' in run.stdout, run.stdout
    assert "changed=1" in run.stdout, run.stdout
    assert {p: host.file(p).sha256sum for p in before} == before
    assert _started(host, "docker") == started, "check mode restarted docker"


def test_a_changed_setting_changes_only_that_key(host):
    before_json, before_toml = _daemon_json(host), _containerd_toml(host)
    started = _started(host, "docker")
    level = _new_log_level(host)
    run = _playbook(host, {"runtime_config_docker_settings": {"log-level": level}})
    assert run.returncode == 0, run.stdout + run.stderr
    after = _daemon_json(host)
    assert after == {**before_json, "log-level": level}
    assert list(after)[: len(before_json)] == list(before_json), "existing key order changed"
    assert _containerd_toml(host) == before_toml, "containerd's config changed too"
    assert _started(host, "docker") != started, "docker was not restarted"
    assert host.service("docker").is_running


def test_docker_refusing_its_config_is_rolled_back(host):
    before = host.file(DAEMON_JSON).content_string
    # dockerd refuses a key that is also a flag of its unit (-H fd://)
    bad = {
        "runtime_config_docker_settings": {"hosts": ["unix:///run/gpunode-test.sock"]},
        "runtime_config_health_retries": 3,
    }
    run = _playbook(host, bad)
    assert run.returncode != 0
    assert "docker did not come back after its config changed" in run.stdout, run.stdout
    assert f"Rolled back: restored {DAEMON_JSON} from {DAEMON_JSON}." in run.stdout, run.stdout
    assert "is running again with its previous config" in run.stdout, run.stdout
    assert host.file(DAEMON_JSON).content_string == before
    assert host.service("docker").is_running
    assert host.run("docker info").rc == 0


def test_containerd_refusing_its_config_is_rolled_back(host):
    before = host.file(CONTAINERD_TOML).content_string
    # parses fine (config dump accepts it) but containerd cannot start with it
    bad = {"runtime_config_containerd_settings": {"root": "/proc/gpunode-refused"}, "runtime_config_health_retries": 3}
    run = _playbook(host, bad)
    assert run.returncode != 0
    assert "containerd did not come back after its config changed" in run.stdout, run.stdout
    assert f"Rolled back: restored {CONTAINERD_TOML} from {CONTAINERD_TOML}." in run.stdout, run.stdout
    assert "is running again with its previous config" in run.stdout, run.stdout
    assert host.file(CONTAINERD_TOML).content_string == before
    assert host.service("containerd").is_running
    assert host.run("ctr version").rc == 0
