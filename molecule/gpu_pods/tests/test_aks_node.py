"""gp-aks: NVIDIA's runtime under other names (issue 37, on issue 25's node). containerd's only runtime is
nvidia-container-runtime, the default, with SystemdCgroup = true, and docker's daemon.json makes NVIDIA's runtime the
default under the name gpu. Converged with nvidia_container_toolkit_keep_gpu_pod_access: those entries stay the
defaults (no second nvidia default) and the doctor warns; without it the run is refused naming the entries and their
binaries, and changes nothing; after the plugin moved to cdi-cri the defaults move to runc, the effective runc and
nvidia tables keep SystemdCgroup, and the nvidia-container-runtime and gpu entries stay."""

from __future__ import annotations

import json

import pytest
from helpers import containerd_runtimes, digest, migrate, name, rows, said, said_to, set_strategy

testinfra_hosts = ["ansible://gp-aks"]
AKS_ENTRY = "nvidia-container-runtime (/usr/bin/nvidia-container-runtime)"


def daemon_json(host) -> dict:
    return json.loads(host.file("/etc/docker/daemon.json").content_string)


def test_keep_semantics_keeps_nvidias_entries_the_defaults_and_the_doctor_warns(host):
    runtimes, default = containerd_runtimes(host)
    assert default == "nvidia-container-runtime"  # kept under its own name, no second default named nvidia
    assert runtimes["nvidia-container-runtime"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True  # registered beside it, with its settings
    assert daemon_json(host)["default-runtime"] == "gpu"
    toolkit = host.file("/etc/nvidia-container-runtime/config.toml").content_string
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged = true" in toolkit
    checks = rows(host)
    row = checks["device plugin vs node"]
    assert row["status"] == "warn", row
    assert row["detail"].startswith("pods without a GPU request can see GPUs"), row
    assert f"containerd defaults to NVIDIA's runtime {AKS_ENTRY}" in row["detail"], row
    # the default-runtime rows judge the binary: warn (asked for), not ok
    assert checks["containerd: default runtime"]["status"] == "warn", checks["containerd: default runtime"]
    assert AKS_ENTRY in checks["containerd: default runtime"]["detail"]
    assert checks["docker: default runtime"]["status"] == "warn", checks["docker: default runtime"]
    assert "gpu (nvidia-container-runtime)" in checks["docker: default runtime"]["detail"]


@pytest.mark.stage(0)
def test_without_keep_semantics_the_run_is_refused_naming_entries_and_binaries_and_changes_nothing(host, refused):
    out = said_to(refused.stdout, name(host))  # the run is shared with the other nodes (conftest.py)
    assert refused.returncode != 0, out[-4000:]
    assert "Refusing to change gp-aks" in out
    assert "docker's default runtime gpu (nvidia-container-runtime) -> runc" in out, out[-4000:]
    assert f"containerd's default runtime {AKS_ENTRY} -> runc" in out, out[-4000:]
    assert refused.recap["gp-aks"]["failed"] == 1
    assert digest(host) == refused.before[name(host)]


def test_the_migration_refuses_to_isolate_while_the_plugin_is_on_envvar(host):
    before = digest(host)
    result = migrate(host, "isolate")
    out = said(result)
    assert result.returncode != 0
    # refused before any change by the rollout's preflight, and the rollout stops there
    assert "gp-aks: the device plugin still runs with device-list-strategy envvar" in out, out[-4000:]
    assert "The migrate_gpu_isolation rollout stopped on gp-aks" in out, out[-4000:]
    assert digest(host) == before


def test_the_migration_after_the_plugin_moved_isolates_keeps_systemd_cgroup_and_the_entries(host):
    set_strategy(host, "cdi-cri")
    result = migrate(host, "isolate")
    assert result.returncode == 0, result.stdout[-6000:]
    # no cluster (migrate_gpu_isolation_drain=false): changed in place, no cordon, drain or wait, then the doctor
    assert (
        "batch gp-aks: step isolate: runc the default runtime, NVIDIA_VISIBLE_DEVICES "
        "ignored from unprivileged containers (runtime restart), the doctor." in said(result)
    ), result.stdout[-6000:]
    runtimes, default = containerd_runtimes(host)
    assert default == "runc"
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert runtimes["runc"]["options"].get("BinaryName", "") == ""
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    # AKS's own entry stays: RuntimeClasses name it
    assert runtimes["nvidia-container-runtime"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    docker = daemon_json(host)
    assert "default-runtime" not in docker
    assert docker["runtimes"]["gpu"]["path"] == "nvidia-container-runtime"
    checks = rows(host)
    assert checks["device plugin vs node"]["status"] == "ok", checks["device plugin vs node"]
    assert checks["containerd: default runtime"]["status"] == "ok", checks["containerd: default runtime"]
    assert checks["docker: default runtime"]["status"] == "ok", checks["docker: default runtime"]
