"""gp-cns: a node that starts like an NVIDIA Cloud Native Stack node (issue 25, "Done when").

site.yml with defaults refuses while the device plugin runs with envvar and changes nothing; after the plugin
moves to cdi-cri it converges, the doctor's "device plugin vs node" row is ok and a second run changes nothing;
the plugin back on envvar (a mutation) makes that row fail. The converging, second and mutation runs are shared with
gp-gpuop (conftest.py)."""

from __future__ import annotations

import pytest
from helpers import containerd_runtimes, digest, failure_of, name, said_to

testinfra_hosts = ["ansible://gp-cns"]


@pytest.mark.stage(0)
def test_site_refuses_while_the_plugin_is_on_envvar_and_changes_nothing(host, refused):
    assert refused.plugin_running[name(host)]
    out = said_to(refused.stdout, name(host))  # the run is shared with the other nodes (conftest.py)
    assert refused.returncode != 0, out
    assert "Refusing to change gp-cns: it runs NVIDIA's device plugin (standalone" in out, out
    assert "device-list-strategy envvar (env)" in out
    assert "containerd's default runtime nvidia (/usr/bin/nvidia-container-runtime) -> runc" in out  # entry, binary
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged true -> false" in out
    assert "sleep (pid" in out  # the stand-in GPU workload
    assert "deviceListStrategy=cdi-cri" in out and "spec.cdi.enabled: true" in out
    assert "nvidia_container_toolkit_keep_gpu_pod_access: true" in out
    assert refused.recap["gp-cns"]["failed"] == 1
    assert digest(host) == refused.before[name(host)]  # byte for byte: /etc, keyrings, state, dpkg database
    assert not host.package("nvidia-container-toolkit").is_installed


def test_after_the_plugin_moved_to_cdi_cri_site_converges_and_the_doctor_is_ok(host, converged):
    assert not failure_of(converged, host), failure_of(converged, host)
    checks = converged.rows[name(host)]
    row = checks["device plugin vs node"]
    assert row["status"] == "ok", row
    assert "GPU pods get GPUs through containerd" in row["detail"]
    failed = {check: r for check, r in checks.items() if r["status"] == "fail"}
    assert failed == {}, failed
    runtimes, default = containerd_runtimes(host)
    assert default == "runc"
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"


@pytest.mark.stage(2)
def test_a_second_run_changes_nothing(host, second_run):
    assert not failure_of(second_run, host), failure_of(second_run, host)
    assert second_run.recap[name(host)]["changed"] == 0, second_run.stdout[-8000:]


@pytest.mark.stage(3)
def test_mutation_the_plugin_back_on_envvar_fails_the_doctor_row(host, door_mutations):
    """The plugin back on envvar, put back on cdi-cri after the run (conftest.py)."""
    run = door_mutations.run
    assert not failure_of(run, host), failure_of(run, host)
    row = run.rows[name(host)]["device plugin vs node"]
    assert row["status"] == "fail", row
    assert row["detail"].startswith("GPU pods would get no GPU")
