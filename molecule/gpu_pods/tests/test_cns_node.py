"""gp-cns: a node that starts like an NVIDIA Cloud Native Stack node (issue 25, "Done when").

site.yml with defaults refuses while the device plugin runs with envvar and changes nothing; after the plugin
moves to cdi-cri it converges, the doctor's "device plugin vs node" row is ok and a second run changes nothing;
the plugin back on envvar (a mutation) makes that row fail."""

from __future__ import annotations

from helpers import containerd_runtimes, digest, name, recap, rows, said, set_strategy, site

testinfra_hosts = ["ansible://gp-cns"]


def test_site_refuses_while_the_plugin_is_on_envvar_and_changes_nothing(host):
    assert host.service("gp-standin-device-plugin").is_running
    before = digest(host)
    result = site(host)
    out = said(result)
    assert result.returncode != 0, out
    assert "Refusing to change gp-cns: it runs NVIDIA's device plugin (standalone" in out, out
    assert "device-list-strategy envvar (env)" in out
    assert "containerd's default runtime nvidia (/usr/bin/nvidia-container-runtime) -> runc" in out  # entry, binary
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged true -> false" in out
    assert "sleep (pid" in out  # the stand-in GPU workload
    assert "deviceListStrategy=cdi-cri" in out and "spec.cdi.enabled: true" in out
    assert "nvidia_container_toolkit_keep_gpu_pod_access: true" in out
    assert recap(result.stdout)["gp-cns"]["failed"] == 1
    assert digest(host) == before  # byte for byte: /etc, keyrings, state, dpkg database
    assert not host.package("nvidia-container-toolkit").is_installed


def test_after_the_plugin_moved_to_cdi_cri_site_converges_and_the_doctor_is_ok(host):
    set_strategy(host, "cdi-cri")
    result = site(host)
    assert result.returncode == 0, result.stdout[-6000:]
    row = rows(host)["device plugin vs node"]
    assert row["status"] == "ok", row
    assert "GPU pods get GPUs through containerd" in row["detail"]
    failed = {check: r for check, r in rows(host).items() if r["status"] == "fail"}
    assert failed == {}, failed
    runtimes, default = containerd_runtimes(host)
    assert default == "runc"
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"


def test_a_second_run_changes_nothing(host):
    result = site(host)
    assert result.returncode == 0, result.stdout[-4000:]
    assert recap(result.stdout)[name(host)]["changed"] == 0, result.stdout[-8000:]


def test_mutation_the_plugin_back_on_envvar_fails_the_doctor_row(host):
    set_strategy(host, "envvar")
    try:
        result = site(host, None, "--tags", "validate")
        assert result.returncode == 0, result.stdout[-4000:]
        row = rows(host)["device plugin vs node"]
        assert row["status"] == "fail", row
        assert row["detail"].startswith("GPU pods would get no GPU")
    finally:
        set_strategy(host, "cdi-cri")
