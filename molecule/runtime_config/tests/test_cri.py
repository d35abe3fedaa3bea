"""The kubelet's view of containerd after runtime_config: the CRI API, through a CRI client generated at
test time from the CRI proto (tests/cri/client.py), on containerd 1.6, 1.7 and 2.1 (Debian) and 2.2 (Ubuntu 22.04's
containerd, which docker.io pulls in).

rc-debian12 and rc-debian13 started from Debian's packaged config.toml (no runtimes table): before
issue 12, registering nvidia there dropped containerd's built-in runc and the CRI plugin did not load.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import grpc
import pytest

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parents[1]))
from tests.cri.client import CriClient, node_socket
from tests.cri.doors import log_since, log_size

# the docker and containerd nodes (rc-crio has tests of its own: test_crio.py, test_crio_doors.py)
testinfra_hosts = [f"ansible://{name}" for name in ("rc-debian12", "rc-debian13", "rc-forky", "rc-ubuntu2204")]
IMAGE = "docker.io/gpunode-test/busybox:latest"
PACKAGED = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "containerd" / "debian-packaged-config.toml"


@pytest.fixture
def cri(host):
    with CriClient(node_socket(host.backend.get_hostname())) as client:
        yield client


def _cri_table(config: dict) -> dict:
    return config["plugins"][
        "io.containerd.cri.v1.runtime" if config.get("version", 1) >= 3 else "io.containerd.grpc.v1.cri"
    ]


def test_the_cri_plugin_is_loaded(host):
    plugins = host.check_output("ctr plugins ls")
    rows = [line.split() for line in plugins.splitlines() if " cri " in f" {line} " or "io.containerd.cri." in line]
    assert rows, plugins
    assert all(row[-1] == "ok" for row in rows), plugins


def test_cri_status_reports_runtime_ready(cri):
    assert cri.runtime_ready(), cri.status()


# Harness quirk: on a cgroup v1 (hybrid) host the forky node gets the host's unified cgroup tree, which has
# no cpu controller, and containerd gives every pod sandbox CPU shares, so runc fails at the cgroup step
# ("cpu.weight: no such file or directory") AFTER containerd resolved the handler and called its runtime
# binary. There the test checks which binary was called; on rc-debian12/13 the pod runs. Real cgroup v2
# nodes do not have this.
CGROUP_QUIRK = "cpu.weight: no such file or directory"


def _pod(host, cri, name: str, handler: str) -> tuple[str, list[str]]:
    """Start a pod through the CRI; return its sandbox id and NVIDIA's runtime's debug log lines meanwhile."""
    before = log_size(host)  # NVIDIA's runtime's debug log (prepare.yml)
    sandbox, error = cri.try_pod(name, handler, IMAGE, ["sleep", "300"])
    if host.backend.get_hostname() == "rc-forky" and error and CGROUP_QUIRK in error:
        error = None
    assert error is None, error
    assert sandbox
    return sandbox, log_since(host, before).splitlines() if log_size(host) else []


def test_a_pod_with_runtime_handler_nvidia_runs_through_the_nvidia_runtime(host, cri):
    sandbox, calls = _pod(host, cri, "nvidia-pod", "nvidia")
    # each call logs its bundle directory, which ends in the sandbox's (or container's) id
    assert any(sandbox in call for call in calls), f"the sandbox did not go through NVIDIA's runtime: {calls}"
    if host.backend.get_hostname() != "rc-forky":  # the container itself (the sandbox could not start there)
        assert sum(1 for call in calls if "Create command detected" in call) >= 2, calls


def test_a_pod_without_runtime_handler_runs_through_runc(host, cri):
    _sandbox, calls = _pod(host, cri, "runc-pod", "")
    assert calls == [], f"a pod without a handler went through the nvidia runtime: {calls}"


def test_an_unknown_runtime_handler_is_refused(cri):
    with pytest.raises(grpc.RpcError) as err:
        cri.run_pod_sandbox("unknown-pod", "gpunode-unknown")
    assert "gpunode-unknown" in err.value.details()


def test_the_nvidia_entry_is_a_copy_of_the_default_runtime_with_only_the_binary_replaced(host):
    cri = _cri_table(tomllib.loads(host.check_output("containerd config dump")))
    runtimes = cri["containerd"]["runtimes"]
    assert cri["containerd"]["default_runtime_name"] == "runc"
    runc, nvidia = runtimes["runc"], runtimes["nvidia"]
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert {**nvidia, "options": {**nvidia["options"], "BinaryName": ""}} == {
        **runc,
        "options": {**runc["options"], "BinaryName": ""},
    }


def test_the_config_file_only_gained_what_was_asked(host):
    """rc-debian12/13 start from the file exactly as Debian's package ships it (the regression of issue 12),
    rc-forky from an admin's `containerd config default` (config v3); everything in it stays. Ubuntu's package
    ships none (rc-ubuntu2204): the role wrote `containerd config default` with only what was asked added."""
    if host.backend.get_hostname() == "rc-ubuntu2204":
        assert "/etc/containerd/config.toml" not in host.check_output("dpkg -L containerd").splitlines()
        assert not host.file("/var/tmp/gpunode-test-config.toml.before").exists
        default = tomllib.loads(host.check_output("containerd config default"))
        after = tomllib.loads(host.file("/etc/containerd/config.toml").content_string)
        assert after["version"] == default["version"] == 3
        assert set(after["plugins"]) == set(default["plugins"])
        assert set(_cri_table(after)["containerd"]["runtimes"]) == {"runc", "nvidia"}
        runc = _cri_table(default)["containerd"]["runtimes"]["runc"]
        assert _cri_table(after)["containerd"]["runtimes"]["runc"] == runc
        return
    before = host.file("/var/tmp/gpunode-test-config.toml.before").content_string
    if host.backend.get_hostname() == "rc-forky":
        assert before.startswith("# Admin note: managed by hand since 2024, keep this comment.\n")
    else:
        assert before == PACKAGED.read_text()
    after = host.file("/etc/containerd/config.toml").content_string
    # the converge sets restrict_oom_score_adj (the node containers are unprivileged): that line may change
    kept = iter(line for line in before.splitlines() if "restrict_oom_score_adj" not in line)
    after_lines = iter(after.splitlines())
    missing = [line for line in kept if not any(line == candidate for candidate in after_lines)]
    assert missing == [], f"lines of the original file lost or moved: {missing[:5]}"
    assert set(_cri_table(tomllib.loads(after))["containerd"]["runtimes"]) == {"runc", "nvidia"}
