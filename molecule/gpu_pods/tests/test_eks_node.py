"""gp-eks: containerd's config names only an nvidia runtime, the default, with SystemdCgroup = true, and docker's
daemon.json makes nvidia the default (issue 25). Converged with nvidia_container_toolkit_keep_gpu_pod_access:
today's semantics kept and the doctor warns; without it the run is refused and changes nothing; after the plugin
moved to cdi-cri the default moves to runc and the effective runc and nvidia tables keep SystemdCgroup."""

from __future__ import annotations

import json

from helpers import containerd_runtimes, digest, migrate, recap, rows, said, set_strategy, site

testinfra_hosts = ["ansible://gp-eks"]


def test_keep_semantics_keeps_nvidia_the_default_and_the_doctor_warns(host):
    runtimes, default = containerd_runtimes(host)
    assert default == "nvidia"
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert json.loads(host.file("/etc/docker/daemon.json").content_string)["default-runtime"] == "nvidia"
    toolkit = host.file("/etc/nvidia-container-runtime/config.toml").content_string
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged = true" in toolkit
    row = rows(host)["device plugin vs node"]
    assert row["status"] == "warn", row
    assert row["detail"].startswith("pods without a GPU request can see GPUs")


def test_without_keep_semantics_the_run_is_refused_and_changes_nothing(host):
    before = digest(host)
    result = site(host, {"nvidia_container_toolkit_keep_gpu_pod_access": False})
    out = said(result)
    assert result.returncode != 0, out[-4000:]
    assert "Refusing to change gp-eks" in out
    assert "docker's default runtime nvidia -> runc" in out and "containerd's default runtime nvidia -> runc" in out
    assert recap(result.stdout)["gp-eks"]["failed"] == 1
    assert digest(host) == before


def test_the_migration_refuses_to_isolate_while_the_plugin_is_on_envvar(host):
    before = digest(host)
    result = migrate(host, "isolate")
    assert result.returncode != 0
    assert "gp-eks: the device plugin still runs with device-list-strategy envvar" in result.stdout, result.stdout[
        -4000:
    ]
    assert digest(host) == before


def test_the_migration_after_the_plugin_moved_isolates_and_keeps_systemd_cgroup(host):
    set_strategy(host, "cdi-cri")
    result = migrate(host, "isolate")
    assert result.returncode == 0, result.stdout[-6000:]
    assert "is not drained" in result.stdout  # no kube_control_plane group in the scenario
    runtimes, default = containerd_runtimes(host)
    assert default == "runc"
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert runtimes["runc"]["options"].get("BinaryName", "") == ""
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert "default-runtime" not in json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert rows(host)["device plugin vs node"]["status"] == "ok"
