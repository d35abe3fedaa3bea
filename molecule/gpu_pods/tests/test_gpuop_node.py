"""gp-gpuop: a node whose containerd the GPU Operator configured with CDI (issues 37 and 46): nvidia, nvidia-cdi (the
default) and nvidia-legacy run /usr/local/nvidia/toolkit/nvidia-container-runtime{,.cdi,.legacy}, shell wrappers as
the Operator's installer writes them, which run NVIDIA's real runtime (<name>.real) with NVIDIA_CTK_CONFIG_FILE_PATH
naming the Operator's own config, which accepts NVIDIA_VISIBLE_DEVICES from unprivileged containers (prepare.yml;
the .cdi and .legacy .real are NVIDIA's runtime too, in the mode the config names, and the wrappers leave out the
installer's kernel module check, which this kernel cannot pass: TEST STAND-INs).

- Before site.yml the door is open: an unprivileged container with NVIDIA_VISIBLE_DEVICES=all through nvidia-cdi makes
  NVIDIA's runtime go for every GPU (what the run must close; without the fix it stays so).
- site.yml refuses while the device plugin runs with envvar, naming nvidia-cdi and its binary, and changes nothing;
  after the plugin moved to cdi-cri it still refuses while an unprivileged container has GPUs by the envvar (a TEST
  STAND-IN), naming it.
- Then it converges: the default moves to runc, nvidia-cdi and nvidia-legacy are kept and their config gets the
  isolation keys (the run says so, with the ClusterPolicy setting that makes it last); an unprivileged container
  with NVIDIA_VISIBLE_DEVICES=all through each kept NVIDIA runtime gets nothing (the runtime's log says why); the
  doctor has a door row per entry, all ok, and no failure; a second run changes nothing.
- Mutations: the envvar accepted again by hand in the Operator's config (the Operator's toolkit pod would do that at
  its next start) fails the doctor's door rows naming the entry, the file and the key; nvidia-legacy made the default
  fails the "containerd: default runtime" row; the Operator's entries in its 1.18+ drop-in (conf.d/99-nvidia.toml) are
  refused naming every one of them.
"""

from __future__ import annotations

import pytest
from helpers import (
    ENTRIES,
    ENVVAR_KEY,
    IGNORED_ENVVAR,
    OPERATOR_CONFIG,
    STARTED,
    TOOLKIT,
    containerd_runtimes,
    digest,
    failure_of,
    name,
    rows,
    said,
    said_to,
    set_strategy,
    site,
    through,
)

testinfra_hosts = ["ansible://gp-gpuop"]
CONFIG = "/etc/containerd/config.toml"
DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"


@pytest.mark.stage(0)
def test_before_site_an_unprivileged_container_through_nvidia_cdi_goes_for_every_gpu(host):
    """The door as the Operator leaves it (the fix taken out): NVIDIA's runtime, reading the Operator's config, takes
    the variable from an unprivileged container and goes for the GPUs (no driver here: the container fails where a
    GPU node would hand it every GPU)."""
    run, log = through(host, ENTRIES["nvidia-cdi"], "before")
    assert STARTED in log, log  # the .real runtime ran, on the Operator's config (its log)
    assert IGNORED_ENVVAR not in log, log
    assert run.rc != 0, run.stdout


@pytest.mark.stage(0)
def test_site_refuses_while_the_plugin_is_on_envvar_naming_nvidia_cdi_and_changes_nothing(host, refused):
    assert refused.plugin_running[name(host)]
    out = said_to(refused.stdout, name(host))  # the run is shared with the other nodes (conftest.py)
    assert refused.returncode != 0, out[-4000:]
    assert "Refusing to change gp-gpuop: it runs NVIDIA's device plugin (standalone" in out, out[-4000:]
    assert f"containerd's default runtime nvidia-cdi ({TOOLKIT}.cdi) -> runc" in out, out[-4000:]
    assert refused.recap["gp-gpuop"]["failed"] == 1
    assert digest(host) == refused.before[name(host)]
    assert not host.package("nvidia-container-toolkit").is_installed


@pytest.mark.stage(0)
def test_a_container_with_gpus_by_the_envvar_is_refused_first_naming_it(host):
    set_strategy(host, "cdi-cri")
    assert host.run("systemctl start gp-standin-envvar-workload").rc == 0
    try:
        pid = host.check_output("systemctl show -p MainPID --value gp-standin-envvar-workload")
        before = digest(host)
        result = site(host, None, "--tags", "toolkit")
        out = said(result)
        assert result.returncode != 0, out[-4000:]
        assert f"{ENVVAR_KEY} true -> false in {OPERATOR_CONFIG}, read by containerd nvidia ({TOOLKIT})" in out, out
        assert "unprivileged containers that have GPUs by NVIDIA_VISIBLE_DEVICES now: sleep (pid" in out, out[-4000:]
        assert pid.strip() and "NVIDIA_VISIBLE_DEVICES=all)" in out
        assert digest(host) == before
    finally:
        host.run("systemctl stop gp-standin-envvar-workload")


def test_after_the_plugin_moved_to_cdi_cri_the_default_moves_and_the_operators_entries_stay(host, converged):
    assert not failure_of(converged, host), failure_of(converged, host)
    out = converged.said  # said to the user: what the file holds and what was kept (gp-gpuop's paths only)
    assert f"NVIDIA's runtime is also registered as nvidia-cdi ({TOOLKIT}.cdi), nvidia-legacy" in out, out[-6000:]
    assert f"the default runtime was NVIDIA's runtime nvidia-cdi ({TOOLKIT}.cdi): it is no longer" in out
    # the Operator's config got the isolation keys, and the run said so with the setting that makes it last
    assert f"{OPERATOR_CONFIG}: the isolation keys, as NVIDIA's runtime reads this file for" in out, out[-6000:]
    assert "ClusterPolicy spec.toolkit.env [{name: ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED" in out
    assert f"{ENVVAR_KEY} = false" in host.file(OPERATOR_CONFIG).content_string
    runtimes, default = containerd_runtimes(host)
    assert default == "runc"
    assert runtimes["runc"]["options"]["SystemdCgroup"] is True
    for mode in ("cdi", "legacy"):
        assert runtimes[f"nvidia-{mode}"]["options"]["BinaryName"] == f"{TOOLKIT}.{mode}"
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    checks = converged.rows[name(host)]
    assert checks["device plugin vs node"]["status"] == "ok", checks["device plugin vs node"]
    assert checks["containerd: default runtime"]["status"] == "ok", checks["containerd: default runtime"]
    for entry in ("nvidia", "nvidia-cdi", "nvidia-legacy"):
        assert checks[f"door: containerd runtime {entry}"]["status"] == "ok", checks[
            f"door: containerd runtime {entry}"
        ]
    assert (
        f"reads {OPERATOR_CONFIG} (wrapper {TOOLKIT}.cdi sets"
        in checks["door: containerd runtime nvidia-cdi"]["detail"]
    )
    failed = {check: r for check, r in checks.items() if r["status"] == "fail"}
    assert failed == {}, failed


def test_no_runtime_left_registered_injects_into_an_unprivileged_container(host):
    runtimes, _default = containerd_runtimes(host)
    nvidia = {n: r["options"]["BinaryName"] for n, r in runtimes.items() if "nvidia-container-runtime" in str(r)}
    assert set(nvidia) == {"nvidia", "nvidia-cdi", "nvidia-legacy"}, nvidia
    for entry, binary in sorted(nvidia.items()):
        run, log = through(host, binary, entry)
        assert run.rc == 0, (entry, run.rc, run.stderr, log)
        if binary.startswith(TOOLKIT):  # the Operator's: its config names the log
            assert STARTED in log and IGNORED_ENVVAR in log, (entry, log)
            assert "Injecting devices" not in log, (entry, log)


@pytest.mark.stage(2)
def test_a_second_run_changes_nothing(host, second_run):
    assert not failure_of(second_run, host), failure_of(second_run, host)
    assert second_run.recap[name(host)]["changed"] == 0, second_run.stdout[-8000:]


@pytest.mark.stage(3)
def test_mutation_the_operators_config_accepting_the_envvar_again_fails_the_door_rows(host, door_mutations):
    """ENVVAR_KEY = true by hand in the Operator's config, put back after the run (conftest.py)."""
    run, log = door_mutations.reopened
    assert run.rc != 0 and IGNORED_ENVVAR not in log, (run.rc, log)  # the door is open again
    assert not failure_of(door_mutations.run, host), failure_of(door_mutations.run, host)
    checks = door_mutations.run.rows[name(host)]
    for entry, binary in ENTRIES.items():
        row = checks[f"door: containerd runtime {entry}"]
        assert row["status"] == "fail", row
        assert row["detail"].startswith(f"containerd runtime {entry} ({binary}) reads {OPERATOR_CONFIG}"), row
        assert f"{ENVVAR_KEY} = true" in row["detail"], row
        assert "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED" in row["fix"], row
    assert checks["door: containerd runtime nvidia"]["status"] == "ok"  # the project's, on /etc's config
    assert door_mutations.operator_config_restored


@pytest.mark.stage(3)
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


@pytest.mark.stage(3)
def test_the_operators_handlers_in_its_dropin_are_refused_naming_every_entry(host):
    """Toolkit 1.18+ writes the handlers into /etc/containerd/conf.d/99-nvidia.toml, a copy of the whole CRI table,
    imported by config.toml (containerd 1.7 here: the imported table replaces the root's)."""
    original = host.file(CONFIG).content_string
    section = '[plugins."io.containerd.grpc.v1.cri"]'
    assert original.count(section) == 1
    start = original.index(section)
    root = original[:start].replace("version = 2", 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]', 1)
    dropin = "version = 2\n\n" + original[start:]
    # the Operator's entries as it writes them: nvidia on its own wrapper, not the project's binary
    dropin = dropin.replace('BinaryName = "/usr/bin/nvidia-container-runtime"', f'BinaryName = "{TOOLKIT}"')
    assert f'BinaryName = "{TOOLKIT}"' in dropin and root != original
    try:
        script = (
            f"mkdir -p /etc/containerd/conf.d && cat > {DROPIN} <<'EOF'\n{dropin}EOF\ncat > {CONFIG} <<'EOF'\n{root}EOF"
        )
        assert host.run(script + "\nsystemctl restart containerd").rc == 0
        result = site(host, None, "--tags", "runtime")
        out = said(result)
        assert result.returncode != 0, out[-4000:]
        assert f"runs the 'nvidia' runtime as BinaryName = '{TOOLKIT}'" in out, out[-4000:]
        assert f"also registers NVIDIA's runtime as nvidia-cdi ({TOOLKIT}.cdi), nvidia-legacy ({TOOLKIT}.legacy)" in out
        assert "Nothing was changed" in out
    finally:
        host.run(f"rm -f {DROPIN}; cat > {CONFIG} <<'EOF'\n{original}EOF\nsystemctl restart containerd")
    assert host.file(CONFIG).content_string == original
