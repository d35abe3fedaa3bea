"""runtime_config_state: the one node read of runtime_config before it writes (binary, files, pending restarts)."""

from __future__ import annotations

import json
import os
import time

import pytest
from conftest import load_module, run_module

MOD = load_module("runtime_config_state")


def _args(tmp_path, binary=None, runtimes=("docker", "containerd")):
    stand_in = tmp_path / "nvidia-container-runtime"
    stand_in.write_text("#!/bin/sh\n")
    stand_in.chmod(0o755)
    return {
        "runtimes": list(runtimes),
        "files": {"docker": str(tmp_path / "daemon.json"), "containerd": str(tmp_path / "config.toml")},
        "binary": binary or str(stand_in),
        "name": "nvidia",
        "state_dir": str(tmp_path),
    }


def _systemd_started(monkeypatch, started_us: int):
    calls = []

    def run_command(self, argv, **_kwargs):
        calls.append(argv)
        return 0, f"{started_us}\n", ""

    monkeypatch.setattr(MOD.AnsibleModule, "run_command", run_command)
    return calls


def test_reads_each_config_files_attributes_and_dockers_default_runtime(tmp_path):
    (tmp_path / "daemon.json").write_text('{"default-runtime": "nvidia", "runtimes": {}}')
    (tmp_path / "daemon.json").chmod(0o600)
    res = run_module(MOD, _args(tmp_path))
    assert not res.failed and not res.result["changed"], res.result
    docker = res.result["files"]["docker"]
    assert docker["exists"] and docker["mode"] == "0600" and docker["owner"] and docker["group"]
    assert res.result["files"]["containerd"] == {"path": str(tmp_path / "config.toml"), "exists": False}
    assert res.result["docker_default_runtime"] == "nvidia"
    assert res.result["binary_found"] is True and res.result["pending"] == {} and res.result["applied"] == []


@pytest.mark.parametrize(
    ("runtimes", "default", "entries", "nvidia"),
    [
        # NVIDIA's runtime under another name (issue 37): recognised by its path, in any directory, any mode suffix
        ({"gpu": {"path": "nvidia-container-runtime"}}, "gpu", {"gpu": "nvidia-container-runtime"}, True),
        (
            {
                "nvidia-cdi": {"path": "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi"},
                "runc": {"path": "runc"},
            },
            "nvidia-cdi",
            {"nvidia-cdi": "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi"},
            True,
        ),
        # the entry is there, the default is another runtime
        (
            {"gpu": {"path": "/usr/bin/nvidia-container-runtime"}},
            "runc",
            {"gpu": "/usr/bin/nvidia-container-runtime"},
            False,
        ),
        # a name is no binary: an entry called nvidia-ish that runs crun is not NVIDIA's runtime
        ({"nvidia-container-runtime": {"path": "/usr/bin/crun"}}, "nvidia-container-runtime", {}, False),
    ],
)
def test_dockers_nvidia_entries_are_known_by_their_path(tmp_path, runtimes, default, entries, nvidia):
    (tmp_path / "daemon.json").write_text(json.dumps({"default-runtime": default, "runtimes": runtimes}))
    result = run_module(MOD, _args(tmp_path)).result
    assert result["docker_default_runtime"] == default
    assert result["docker_nvidia_entries"] == entries
    assert result["docker_default_nvidia"] is nvidia


def test_an_unreadable_daemon_json_is_left_to_the_merge_module(tmp_path):
    (tmp_path / "daemon.json").write_text('{"default-runtime": ')
    assert run_module(MOD, _args(tmp_path)).result["docker_default_runtime"] is None


@pytest.mark.parametrize("binary", ["/nonexistent/runtime", "gpunode-no-such-command"])
def test_a_missing_binary_is_refused_before_anything_changes(tmp_path, monkeypatch, binary):
    marker = tmp_path / "pending-restart-docker.json"
    marker.write_text("{}")
    _systemd_started(monkeypatch, int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6))  # applied since
    res = run_module(MOD, _args(tmp_path, binary=binary))
    assert res.failed
    assert f"runtime_config_binary={binary} does not exist (or is not executable)" in res.result["msg"]
    assert "Nothing was changed." in res.result["msg"]
    assert marker.exists()


def test_a_file_that_is_not_executable_is_not_the_binary(tmp_path):
    plain = tmp_path / "plain"
    plain.write_text("")
    assert run_module(MOD, _args(tmp_path, binary=str(plain))).failed


def test_a_missing_binary_is_only_a_warning_in_check_mode(tmp_path, capsys):
    res = run_module(MOD, _args(tmp_path, binary="/nonexistent/runtime"), check_mode=True)
    assert not res.failed and res.result["binary_found"] is False
    assert "a real run refuses to register it" in " ".join(capsys.readouterr().err.split())


def test_a_node_without_runtimes_needs_no_binary(tmp_path):
    assert not run_module(MOD, _args(tmp_path, binary="/nonexistent/runtime", runtimes=())).failed


def test_a_change_not_applied_yet_is_returned_for_the_restart(tmp_path, monkeypatch):
    entry = {"path": "/etc/containerd/config.toml", "existed": True, "backup_file": "/b", "mode": "0600"}
    marker = tmp_path / "pending-restart-containerd.json"
    marker.write_text(json.dumps(entry, indent=4) + "\n")
    calls = _systemd_started(monkeypatch, 1)  # containerd started long before the marker was written
    res = run_module(MOD, _args(tmp_path))
    assert res.result["pending"] == {"containerd": entry}
    assert not res.result["changed"] and marker.exists()
    assert calls == [["systemctl", "show", "containerd", "-p", "ExecMainStartTimestampMonotonic", "--value"]]


def test_a_runtime_never_started_still_has_its_change_pending(tmp_path, monkeypatch):
    (tmp_path / "pending-restart-docker.json").write_text("{}")
    _systemd_started(monkeypatch, 0)
    assert run_module(MOD, _args(tmp_path)).result["pending"] == {"docker": {}}


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_change_the_runtime_applied_since_is_forgotten(tmp_path, monkeypatch, check_mode):
    marker = tmp_path / "pending-restart-docker.json"
    marker.write_text("{}")
    past = time.time() - 600
    os.utime(marker, (past, past))
    _systemd_started(monkeypatch, int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6) - 1_000_000)
    res = run_module(MOD, _args(tmp_path), check_mode=check_mode)
    assert res.result["changed"] and res.result["applied"] == ["docker"] and res.result["pending"] == {}
    assert marker.exists() == check_mode


def test_a_broken_marker_names_the_file_and_the_fix(tmp_path, monkeypatch):
    (tmp_path / "pending-restart-docker.json").write_text("{not json")
    _systemd_started(monkeypatch, 1)
    res = run_module(MOD, _args(tmp_path))
    assert res.failed and "pending-restart-docker.json is not the JSON" in res.result["msg"]
    assert "remove the file" in res.result["msg"]


def test_systemd_that_does_not_answer_fails_the_read(tmp_path, monkeypatch):
    (tmp_path / "pending-restart-docker.json").write_text("{}")
    monkeypatch.setattr(MOD.AnsibleModule, "run_command", lambda self, argv, **kw: (1, "", "Failed to connect to bus"))
    res = run_module(MOD, _args(tmp_path))
    assert res.failed and "Failed to connect to bus" in res.result["msg"]


def test_systemd_that_prints_no_number_fails_the_read_with_its_output(tmp_path, monkeypatch):
    (tmp_path / "pending-restart-docker.json").write_text("{}")
    monkeypatch.setattr(MOD.AnsibleModule, "run_command", lambda self, argv, **kw: (0, "[not set]\n", ""))
    res = run_module(MOD, _args(tmp_path))
    assert res.failed and "cannot ask systemd when docker started: [not set]" in res.result["msg"]


def test_a_change_left_for_the_installer_agents_restart_is_pending_too(tmp_path, monkeypatch):
    """RKE2/k3s: no runtime is among the installed ones; the agent unit's marker is read all the same."""
    entry = {"path": "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl", "existed": False, "backup_file": ""}
    marker = tmp_path / "pending-restart-k3s.service.json"
    marker.write_text(json.dumps(entry) + "\n")
    calls = _systemd_started(monkeypatch, 1)  # the agent started long before the marker was written
    res = run_module(MOD, {**_args(tmp_path, runtimes=()), "agents": ["k3s.service"]})
    assert res.result["pending"] == {"k3s.service": entry} and res.result["files"] == {}
    assert calls == [["systemctl", "show", "k3s.service", "-p", "ExecMainStartTimestampMonotonic", "--value"]]
    # once the agent restarted after it, the marker is done with
    past = time.time() - 600
    os.utime(marker, (past, past))
    _systemd_started(monkeypatch, int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6) - 1_000_000)
    res = run_module(MOD, {**_args(tmp_path, runtimes=()), "agents": ["k3s.service"]})
    assert res.result["applied"] == ["k3s.service"] and not marker.exists()
