"""Verify site.yml end to end: the doctor's results per node, nvidia never the
default runtime, and check mode both after converge (changed=0) and on a node
that was never converged (completes without errors)."""

from __future__ import annotations

import json
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
from playbook_runner import run_playbook

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_run import check_run_on_every_node

testinfra_hosts = [
    "ansible://site-debian13",
    "ansible://site-forky",
    "ansible://site-debian11",
    "ansible://site-ubuntu2404",
    "ansible://site-crio",
]

REPORT = "/var/lib/gpu-node-provisioning/validate.json"
RUNTIMES = {
    "site-debian13": ["containerd"],
    "site-forky": ["docker", "containerd"],
    "site-debian11": ["docker"],  # Python 3.9 on the node
    "site-ubuntu2404": ["containerd"],  # containerd 2.3.4 (upstream's build) on a config version 2 file
    "site-crio": ["crio"],  # CRI-O 1.35.6, upstream's build
}


def _name(host) -> str:
    return host.backend.get_hostname()


def _checks(host) -> dict[str, dict]:
    report = json.loads(host.file(REPORT).content_string)
    assert report["host"] == _name(host)
    return {c["check"]: c for c in report["checks"]}


def test_the_doctor_found_no_failure(host):
    report = json.loads(host.file(REPORT).content_string)
    assert report["summary"]["fail"] == 0, json.dumps(report, indent=1)
    assert report["summary"]["total"] >= 10


@pytest.mark.parametrize(
    "check",
    ["nvidia runtime", "default runtime", "container via nvidia"],
)
def test_each_runtime_of_the_node_passes_the_doctor(host, check):
    checks = _checks(host)
    for runtime in RUNTIMES[_name(host)]:
        assert checks[f"{runtime}: {check}"]["status"] == "ok", checks[f"{runtime}: {check}"]


def test_runtimes_the_node_does_not_have_are_not_checked(host):
    checks = _checks(host)
    for runtime in {"docker", "containerd", "crio"} - set(RUNTIMES[_name(host)]):
        assert f"{runtime}: nvidia runtime" not in checks


def test_gpu_checks_are_skipped_without_a_gpu(host):
    checks = _checks(host)
    isolation = [f"{runtime}: GPU isolation (nvidia)" for runtime in RUNTIMES[_name(host)]]
    for name in ("NVIDIA driver", "nvidia-smi", *isolation):
        assert checks[name]["status"] == "skipped", checks[name]
        assert checks[name]["detail"].startswith("no GPU"), checks[name]


def test_the_driver_role_leaves_a_node_without_gpu_alone(host):
    """site.yml on a GPU-less node that never had nvidia_driver_force: the role skips it (molecule/nvidia_driver's
    drv-debian12-cuda shows the message on a node forced before): no driver package, no nouveau blacklist."""
    listed = host.run(
        "dpkg-query -W -f='${db:Status-Abbrev} ${Package}\\n' 'nvidia-*' 'libnvidia-*' 2>/dev/null"
    ).stdout
    installed = [line.split()[-1] for line in listed.splitlines() if line.startswith("ii")]
    # the toolkit's packages (forced in this scenario) are the only NVIDIA packages there
    assert all(name.startswith(("nvidia-container", "libnvidia-container")) for name in installed), installed
    assert not host.file("/etc/modprobe.d/blacklist-nouveau.conf").exists


def test_fuse_and_profiles_pass_the_doctor(host):
    checks = _checks(host)
    assert checks["/dev/fuse"]["status"] == "ok", checks["/dev/fuse"]
    assert checks["seccomp profile fuse"]["status"] == "ok", checks["seccomp profile fuse"]
    # the node's kernel has no AppArmor: installed, not loaded
    assert checks["AppArmor profile fuse"]["status"] in ("ok", "warn"), checks["AppArmor profile fuse"]


def test_nvidia_is_registered_but_never_the_default(host):
    if "docker" in RUNTIMES[_name(host)]:
        assert host.check_output("docker info --format '{{.DefaultRuntime}}'") == "runc"
        assert "nvidia" in host.check_output("docker info --format '{{json .Runtimes}}'")
    if "containerd" in RUNTIMES[_name(host)]:
        dump = host.check_output("containerd config dump")
        assert "runtimes.nvidia" in dump
        assert "default_runtime_name = 'runc'" in dump or 'default_runtime_name = "runc"' in dump
    if "crio" in RUNTIMES[_name(host)]:
        runtime = tomllib.loads(host.check_output("crio status config 2>/dev/null"))["crio"]["runtime"]
        assert "nvidia" in runtime["runtimes"] and runtime["default_runtime"] == "runc", runtime


def test_toolkit_hardening_is_in_place(host):
    config = host.file("/etc/nvidia-container-runtime/config.toml").content_string
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged = false" in config
    assert "accept-nvidia-visible-devices-as-volume-mounts = false" in config
    assert "annotation-prefixes = []" in config  # no GPU by a pod's CDI annotation (CRI-O passes them on)


def test_check_mode_after_converge_changes_nothing(host):
    run = check_run_on_every_node(host)  # one run with site-fresh's (check_run.py)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    recap = [line for line in run.stdout.splitlines() if line.startswith(_name(host) + " ")]
    assert recap and " changed=0 " in recap[-1] and " failed=0 " in recap[-1], recap


def test_containerds_cri_plugin_is_ok_and_the_doctor_checks_it(host):
    """site-debian13 runs containerd 1.7 with Debian's packaged config.toml: registering nvidia there must keep
    the CRI plugin loaded (issue 12: it showed `error`, and the doctor said ok)."""
    if "containerd" not in RUNTIMES[_name(host)]:
        assert "containerd: CRI plugin" not in _checks(host)
        return
    rows = [r.split() for r in host.check_output("ctr plugins ls").splitlines() if " cri " in f" {r} " or ".cri." in r]
    assert rows and all(row[-1] == "ok" for row in rows), rows
    checks = _checks(host)
    assert checks["containerd: CRI plugin"]["status"] == "ok", checks["containerd: CRI plugin"]
    assert checks["containerd: running config"]["status"] == "ok", checks["containerd: running config"]
    sys.path.insert(0, str(SCENARIO.parents[1]))
    from tests.cri.client import CriClient, node_socket

    with CriClient(node_socket(_name(host))) as cri:
        assert cri.runtime_ready()


MUTATED = ("site-debian13", "site-forky")
CONFIG = "/etc/containerd/config.toml"
NVIDIA_BINARY = "/usr/bin/nvidia-container-runtime"
VALIDATE = SCENARIO.parents[1] / "playbooks" / "validate.yml"
NO_FAIL = {"gpu_validate_fail_on_error": False}
REPORT_BASE, EXTS = REPORT.removesuffix(".json"), ("json", "txt")
PRIVILEGED_STANDIN = SCENARIO / "files" / "nvidia-container-runtime-privileged-standin"
# The mutation: default_runtime_name = nvidia in config.toml (v2 or v3), whether or not the file names a default.
MAKE_NVIDIA_CRIS_DEFAULT = r"""
import re, sys
path = sys.argv[1]
text = open(path).read()
table = r"(?m)^[ \t]*\[plugins\.(['\"])io\.containerd\.(?:cri\.v1\.runtime|grpc\.v1\.cri)\1\.containerd\][ \t]*$"
if re.search(r"(?m)^[ \t]*default_runtime_name[ \t]*=", text):
    text = re.sub(r"(?m)^([ \t]*)default_runtime_name[ \t]*=.*$", r"\1default_runtime_name = 'nvidia'", text)
elif re.search(table, text):
    header = re.search(table, text)
    text = text[: header.end()] + "\n  default_runtime_name = 'nvidia'" + text[header.end() :]
else:
    v3 = re.search(r"(?m)^version[ \t]*=[ \t]*3", text)
    plugin = "io.containerd.cri.v1.runtime" if v3 else "io.containerd.grpc.v1.cri"
    text += f"\n[plugins.'{plugin}'.containerd]\n  default_runtime_name = 'nvidia'\n"
open(path, "w").write(text)
"""
SYS_ADMIN_ROW = "containerd: GPU isolation (default, CAP_SYS_ADMIN)"


_MUTATIONS: dict[str, object] = {}


def _node(host, name: str):
    """The testinfra host of another node of this scenario, reached as the test's own."""
    import testinfra

    backend = host.backend  # the options pytest-testinfra made the test's host with (testinfra/plugin.py)
    options = ("ssh_config", "ssh_identity_file", "sudo", "sudo_user", "ansible_inventory", "force_ansible")
    return testinfra.get_host(f"ansible://{name}", **{option: getattr(backend, option) for option in options})


def _break_debian13s_cri_plugin(node) -> None:
    """default_runtime_name naming a runtime that is not configured, containerd restarted on it."""
    node.check_output(
        f"sed -i 's/^\\( *\\)default_runtime_name = .*/\\1default_runtime_name = \"gpunode-missing\"/' {CONFIG}"
    )
    if "gpunode-missing" not in node.file(CONFIG).content_string:
        node.check_output(
            f"printf '%s\\n' '[plugins.\"io.containerd.grpc.v1.cri\".containerd]'"
            f" 'default_runtime_name = \"gpunode-missing\"' >> {CONFIG}"
        )
    node.check_output("systemctl restart containerd")


def _doctor(host, nodes: tuple[str, ...], pretend_gpu_on_forky: bool):
    """playbooks/validate.yml over these nodes; site-forky alone pretends a GPU with an inventory host variable
    (gpu_validate's has_gpu is `__gpu_validate_has_gpu | default(omit)`, which nothing else sets) while the other
    node of the run keeps its own answer."""
    args = ["--limit", ",".join(nodes)]
    if not pretend_gpu_on_forky:
        return run_playbook(host, VALIDATE, NO_FAIL, *args)
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as extra:
        extra.write("all:\n  hosts:\n    site-forky:\n      __gpu_validate_has_gpu: true\n")
    try:
        return run_playbook(host, VALIDATE, NO_FAIL, "-i", extra.name, *args)
    finally:
        Path(extra.name).unlink()


def _doctor_mutations(host) -> dict[str, object]:
    """The doctor's mutation runs of site-debian13 and site-forky, made once by the first test that asks, each
    result kept for the test whose claim it is (two tests used seven runs of the doctor, 268 s in CI; now three):

    1. both nodes side by side: debian13's CRI plugin broken; on forky config.toml touched after containerd started,
       a GPU pretended and the TEST STAND-IN bind-mounted over NVIDIA's binary while runc is CRI's default (the
       touch is read by the `running config` row only, the stand-in and the pretended GPU by the GPU isolation rows);
    2. forky alone, GPU pretended: default_runtime_name = nvidia;
    3. both restored (config.toml byte for byte, containerd restarted, the stand-in unmounted), no GPU pretended:
       the nodes' own reports again; then site.yml's reports put back byte for byte (testinfra runs a module's tests
       host by host: site-forky's other tests come after this, which the first site-debian13 test starts)."""
    if _MUTATIONS:
        return _MUTATIONS
    import base64

    nodes = {name: _node(host, name) for name in MUTATED}
    forky = nodes["site-forky"]
    saved = {name: node.check_output(f"base64 -w0 {CONFIG}") for name, node in nodes.items()}
    # site.yml's reports (validate.json and .txt), put back at the end: the two nodes' other tests read the converge's
    reports = {
        (name, ext): node.check_output(f"base64 -w0 {REPORT_BASE}.{ext}")
        for name, node in nodes.items()
        for ext in EXTS
    }
    standin = base64.b64encode(PRIVILEGED_STANDIN.read_bytes()).decode()
    try:
        _break_debian13s_cri_plugin(nodes["site-debian13"])
        forky.check_output(f"echo {standin} | base64 -d > /usr/local/sbin/nvidia-privileged-standin")
        forky.check_output("chmod 0755 /usr/local/sbin/nvidia-privileged-standin")
        forky.check_output(f"mount --bind /usr/local/sbin/nvidia-privileged-standin {NVIDIA_BINARY}")
        # a modification time after containerd's start whatever the clock's resolution: two seconds ahead of now
        # (containerd started in the past), instead of waiting a second and hoping the mtime moved on
        forky.check_output(f"touch -d @$(( $(date +%s) + 2 )) {CONFIG}")
        _MUTATIONS["run"] = run = _doctor(host, MUTATED, pretend_gpu_on_forky=True)
        if run.returncode == 0:
            _MUTATIONS.update({name: _checks(node) for name, node in nodes.items()})

        mutation = base64.b64encode(MAKE_NVIDIA_CRIS_DEFAULT.encode()).decode()
        forky.check_output(f"echo {mutation} | base64 -d | python3 - {CONFIG}")
        forky.check_output("systemctl restart containerd")
        _MUTATIONS["nvidia default dump"] = forky.check_output("containerd config dump")
        _MUTATIONS["nvidia default run"] = run = _doctor(host, ("site-forky",), pretend_gpu_on_forky=True)
        if run.returncode == 0:
            _MUTATIONS["nvidia default"] = _checks(forky)
    finally:
        forky.run(f"umount {NVIDIA_BINARY} && rm -f /usr/local/sbin/nvidia-privileged-standin")
        for name, node in nodes.items():
            node.check_output(f"echo {saved[name]} | base64 -d > {CONFIG}")
            node.check_output("systemctl restart containerd")
        _doctor(host, MUTATED, pretend_gpu_on_forky=False)
        _MUTATIONS["restored"] = _checks(forky)
        for (name, ext), text in reports.items():
            nodes[name].check_output(f"echo {text} | base64 -d > {REPORT_BASE}.{ext}")
    return _MUTATIONS


def test_the_doctor_fails_a_cri_plugin_that_did_not_load_and_warns_of_a_config_not_applied(host):
    """Mutations of the node the doctor must catch: site-debian13's CRI plugin broken while containerd runs
    (default_runtime_name naming a runtime that is not configured), and site-forky's config.toml written after
    containerd started (run 1 of _doctor_mutations)."""
    if _name(host) not in MUTATED:
        return
    mutated = _doctor_mutations(host)
    run = mutated["run"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    checks = mutated[_name(host)]
    if _name(host) == "site-debian13":
        cri = checks["containerd: CRI plugin"]
        assert cri["status"] == "fail", cri
        assert "CRI plugin did not load" in cri["detail"], cri
    else:
        live = checks["containerd: running config"]
        assert live["status"] == "warn", live
        assert "was written after containerd started" in live["detail"], live


def test_site_yml_ran_on_the_oldest_target_python(host):
    """site-debian11's python3 is 3.9: every node-side module of site.yml ran there (the doctor's report
    above exists and has no failure), so the 3.9 compatibility is proven on a real run, not only by import."""
    if _name(host) != "site-debian11":
        return
    version = host.check_output("python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'")
    assert version == "3.9", version
    assert json.loads(host.file(REPORT).content_string)["summary"]["fail"] == 0


def test_the_doctor_runs_a_sys_admin_container_through_cris_default_runtime_and_fails_when_nvidia_is_it(host):
    """Issue 13 item 5 on containerd 2.1: a FUSE pod (CAP_SYS_ADMIN) without a RuntimeClass gets CRI's default
    runtime. With a GPU pretended and the nvidia binary behaving like NVIDIA's with a privileged container on a
    GPU machine (a TEST STAND-IN bind-mounted over NVIDIA's real binary for this test only: without a driver the
    real runtime fails such a container instead of handing it devices), the doctor's row is ok while runc is CRI's
    default, and fails once default_runtime_name is nvidia (ctr's own default stays runc all along). The runs:
    _doctor_mutations (1: runc CRI's default, 2: nvidia, 3: restored)."""
    if _name(host) != "site-forky":
        return
    mutated = _doctor_mutations(host)
    run = mutated["run"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    row = mutated["site-forky"][SYS_ADMIN_ROW]
    assert row["status"] == "ok", row
    assert "through CRI's default runtime runc (io.containerd.runc.v2, runc): no /dev/nvidia*" in row["detail"]

    dump = mutated["nvidia default dump"]
    assert "default_runtime_name = 'nvidia'" in dump or 'default_runtime_name = "nvidia"' in dump, "no mutation"
    run = mutated["nvidia default run"]
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    checks = mutated["nvidia default"]
    row = checks[SYS_ADMIN_ROW]
    assert row["status"] == "fail", row
    assert f"through CRI's default runtime nvidia (io.containerd.runc.v2, {NVIDIA_BINARY}) sees 2" in row["detail"], row
    assert "RuntimeClass nvidia" in row["fix"], row
    # the unprivileged containers through the nvidia binary still see nothing (hardened config)
    unprivileged = checks["containerd: GPU isolation (nvidia)"]
    assert unprivileged["status"] == "ok", unprivileged
    assert mutated["restored"][SYS_ADMIN_ROW]["status"] == "skipped"  # no GPU: the node's own report again


def test_crio_runs_the_dropin_copied_from_its_own_config_and_serves_both_handlers(host):
    """site-crio (issue 24): site.yml found CRI-O (nothing named it), and the running CRI-O has the nvidia handler
    as a copy of its default runtime's entry (from `crio config`, the admin's runc with conmon) with only the binary
    replaced; through the CRI a pod runs through the nvidia handler (NVIDIA's real runtime logs its create) and one
    through the default handler (runc: NVIDIA's runtime never called)."""
    if _name(host) != "site-crio":
        return
    sys.path.insert(0, str(SCENARIO.parents[1]))
    from tests.cri.client import crio_client
    from tests.cri.doors import STARTED, log_since, log_size

    runtime = tomllib.loads(host.check_output("crio status config 2>/dev/null"))["crio"]["runtime"]
    runc, nvidia = runtime["runtimes"]["runc"], runtime["runtimes"]["nvidia"]
    assert nvidia["runtime_path"] == "/usr/bin/nvidia-container-runtime"
    assert {**nvidia, "runtime_path": ""} == {**runc, "runtime_path": ""}
    run = ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
    for handler, through_nvidia in (("nvidia", True), ("", False)):
        offset = log_size(host)
        with crio_client(_name(host), runtime.get("cgroup_manager", "systemd")) as cri:
            assert cri.runtime_ready(), cri.status()
            _sandbox, error = cri.try_pod(
                f"site-{handler or 'default'}", handler, "docker.io/gpunode-test/busybox:latest", run
            )
        assert error is None, (handler, error)
        assert (STARTED in log_since(host, offset)) is through_nvidia, handler
    checks = _checks(host)
    for row in ("crio: CRI", "crio: running config", "crio: CDI annotations of pods"):
        assert checks[row]["status"] == "ok", checks[row]
