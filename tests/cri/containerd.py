"""What the containerd tests of several scenarios ask of a node, in one place (issue 36): when containerd started,
whether its CRI answers again, how the running binary reads the config (`containerd config dump`), and whether a pod
through the nvidia handler goes through NVIDIA's real runtime while a pod without a handler does not.

Used by molecule/default/tests/test_containerd23_v{2,4}.py and molecule/runtime_config/tests/test_containerd23.py and
test_containerd_dropin.py. The pods are CRI pods (tests/cri/client.py), the kubelet's path; NVIDIA's runtime's debug
log (tests/cri/doors.py LOG) says which containers it saw: the scenarios set its `debug` and `log-level`.
"""

from __future__ import annotations

import time
import tomllib
import uuid

import grpc

from tests.cri.client import CriClient, node_socket
from tests.cri.doors import CRI_IMAGE, STARTED, log_since, log_size

CRI_RUNTIME = "io.containerd.cri.v1.runtime"  # the CRI runtime table of config versions 3 and 4 (what 2.x dumps)
NVIDIA_RUNTIME = "/usr/bin/nvidia-container-runtime"


def started_at(host) -> str:
    """containerd's start time (monotonic, microseconds): unchanged means not restarted."""
    return host.check_output("systemctl show containerd -p ActiveEnterTimestampMonotonic --value")


def cri_plugin_ok(host) -> bool:
    """`ctr plugins ls` lists the CRI plugins, each `ok` (containerd runs and ctr works while they failed to load)."""
    rows = [r.split() for r in host.check_output("ctr plugins ls").splitlines() if ".cri." in r or " cri " in f" {r} "]
    return bool(rows) and all(row[-1] == "ok" for row in rows)


def cri_ready(host) -> None:
    """Wait until containerd's CRI says its runtime is ready (after a restart)."""
    deadline = time.monotonic() + 600  # a generous limit: the shared machine may be loaded
    while True:
        try:
            with CriClient(node_socket(host.backend.get_hostname())) as cri:
                if cri.runtime_ready():
                    return
        except grpc.RpcError:  # not up yet
            pass
        assert time.monotonic() < deadline, "containerd's CRI did not come back"
        time.sleep(1)


def effective(host, version: int | None = None) -> dict:
    """The CRI `containerd` table of `containerd config dump` (the running binary's reading of the files); with
    ``version``, the dump must say that version (containerd 2.3 migrates every file to 4 in memory)."""
    dump = tomllib.loads(host.check_output("containerd config dump"))
    if version is not None:
        assert dump["version"] == version, dump["version"]
    return dump["plugins"][CRI_RUNTIME]["containerd"]


def nvidia_is_runc_with_only_the_binary_replaced(host, version: int | None = None) -> None:
    """In the effective config, runc is the default and nvidia is runc's whole entry with NVIDIA's binary."""
    containerd = effective(host, version)
    assert containerd["default_runtime_name"] == "runc"
    runc, nvidia = containerd["runtimes"]["runc"], containerd["runtimes"]["nvidia"]
    assert nvidia["options"]["BinaryName"] == NVIDIA_RUNTIME
    assert {**nvidia, "options": {**nvidia["options"], "BinaryName": ""}} == {
        **runc,
        "options": {**runc["options"], "BinaryName": ""},
    }


def pods_run_through_the_right_runtime(host, image: str = CRI_IMAGE) -> None:
    """The kubelet's path: a pod with handler nvidia goes through NVIDIA's runtime, a pod without one does not."""
    with CriClient(node_socket(host.backend.get_hostname())) as cri:
        before = log_size(host)
        sandbox, error = cri.try_pod(f"nvidia-{uuid.uuid4().hex[:8]}", "nvidia", image, ["sleep", "300"])
        assert error is None, error
        calls = log_since(host, before)
        assert sandbox in calls, f"the nvidia pod did not go through NVIDIA's runtime: {calls[-2000:]}"
        assert calls.count(STARTED) >= 2, calls[-2000:]  # the sandbox and its container
        before = log_size(host)
        sandbox, error = cri.try_pod(f"runc-{uuid.uuid4().hex[:8]}", "", image, ["sleep", "300"])
        assert error is None, error
        went = log_since(host, before) if log_size(host) != before else ""
        assert went == "", f"a pod without a handler went through NVIDIA's runtime: {went}"
