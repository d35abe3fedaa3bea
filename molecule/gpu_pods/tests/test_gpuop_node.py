"""gp-gpuop: a node whose containerd the GPU Operator configured with CDI (issue 37): nvidia, nvidia-cdi (the default)
and nvidia-legacy run /usr/local/nvidia/toolkit/nvidia-container-runtime{,.cdi,.legacy}.

site.yml with defaults refuses while the device plugin runs with envvar, naming nvidia-cdi and its binary, and changes
nothing; after the plugin moved to cdi-cri it converges with the default moved to runc and nvidia-cdi and
nvidia-legacy kept, the doctor has no failure, and a second run changes nothing; nvidia-legacy made the default (a
mutation) fails the doctor's "containerd: default runtime" row."""

from __future__ import annotations

from helpers import containerd_runtimes, digest, name, recap, rows, said, set_strategy, site

testinfra_hosts = ["ansible://gp-gpuop"]
TOOLKIT = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
CONFIG = "/etc/containerd/config.toml"


def test_site_refuses_while_the_plugin_is_on_envvar_naming_nvidia_cdi_and_changes_nothing(host):
    assert host.service("gp-standin-device-plugin").is_running
    before = digest(host)
    result = site(host)
    out = said(result)
    assert result.returncode != 0, out[-4000:]
    assert "Refusing to change gp-gpuop: it runs NVIDIA's device plugin (standalone" in out, out[-4000:]
    assert f"containerd's default runtime nvidia-cdi ({TOOLKIT}.cdi) -> runc" in out, out[-4000:]
    assert recap(result.stdout)["gp-gpuop"]["failed"] == 1
    assert digest(host) == before
    assert not host.package("nvidia-container-toolkit").is_installed


def test_after_the_plugin_moved_to_cdi_cri_the_default_moves_and_the_operators_entries_stay(host):
    set_strategy(host, "cdi-cri")
    result = site(host)
    assert result.returncode == 0, result.stdout[-6000:]
    out = said(result)  # said to the user: what the file holds and what was kept
    assert f"NVIDIA's runtime is also registered as nvidia-cdi ({TOOLKIT}.cdi), nvidia-legacy" in out, out[-6000:]
    assert f"the default runtime was NVIDIA's runtime nvidia-cdi ({TOOLKIT}.cdi): it is no longer" in out
    runtimes, default = containerd_runtimes(host)
    assert default == "runc"
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    for mode in ("cdi", "legacy"):
        assert runtimes[f"nvidia-{mode}"]["options"]["BinaryName"] == f"{TOOLKIT}.{mode}"
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    checks = rows(host)
    assert checks["device plugin vs node"]["status"] == "ok", checks["device plugin vs node"]
    assert checks["containerd: default runtime"]["status"] == "ok", checks["containerd: default runtime"]
    failed = {check: r for check, r in checks.items() if r["status"] == "fail"}
    assert failed == {}, failed


def test_a_second_run_changes_nothing(host):
    result = site(host)
    assert result.returncode == 0, result.stdout[-4000:]
    assert recap(result.stdout)[name(host)]["changed"] == 0, result.stdout[-8000:]


def test_mutation_nvidia_legacy_the_default_fails_the_doctors_default_runtime_row(host):
    original = host.file(CONFIG).content_string
    section = '[plugins."io.containerd.grpc.v1.cri".containerd]'
    assert section in original
    mutated = original.replace(section, section + '\n  default_runtime_name = "nvidia-legacy"', 1)
    try:
        assert host.run(f"cat > {CONFIG} <<'EOF'\n{mutated}EOF\nsystemctl restart containerd").rc == 0
        result = site(host, None, "--tags", "validate")
        assert result.returncode == 0, result.stdout[-4000:]
        row = rows(host)["containerd: default runtime"]
        assert row["status"] == "fail", row
        assert row["detail"].startswith(f"default_runtime_name is nvidia-legacy ({TOOLKIT}.legacy)"), row
    finally:
        host.run(f"cat > {CONFIG} <<'EOF'\n{original}EOF\nsystemctl restart containerd")
    assert host.file(CONFIG).content_string == original
