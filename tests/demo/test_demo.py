"""The README's first command, as a newcomer runs it: `bash scripts/demo.sh` in a fresh
clone of this checkout placed where no ../shared exists (issue 41: a lone clone), twice,
then from the collection built and installed from that clone (issue 51), then once more for the toolkit
alone from a mirror.

The first run creates the local node container gpunode-local and provisions it with
site.yml; it must end with the doctor's table, no failed check, and containerd's CRI
plugin up (what a kubelet needs), checked both by the doctor and straight from the
running containerd. The second run must change nothing and print the table again.

The demo's sources of NVIDIA's toolkit: both runs have no upstream builds
(GPUNODE_UPSTREAM_DIR names an empty folder) and no NVIDIA repository, so the labelled
script stand-ins stand in (the second run must not take the stand-in repository the first
one wrote into the local inventory for NVIDIA's). The third call, `--tags toolkit`, points
the role's repository URL at the signed stand-in repository the node serves, as an
air-gapped user with a mirror runs it (-e ..._repo_base_url): the demo takes the
repository branch and the role installs from there. Packages carrying NVIDIA's binaries
from the upstream builds are what every molecule scenario with the toolkit installs.

The clone gets its own temporary directory. To stay inside CI's time budget it reuses
what the run already set up: the node image, the apt cache and, when the clone's
requirements files are the same, the virtual environment (the test command itself proves
that a fresh checkout builds its venv). An existing gpunode-local container is removed
first and the node is removed at the end. Output goes to .ci-logs/demo-<n>.log.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / ".ci-logs"
NODE = "gpunode-local"
REPORT = "/var/lib/gpu-node-provisioning/validate.json"
RUN_TIMEOUT = 25 * 60
MIRROR = "http://127.0.0.1:8765/stable"
MIRROR_KEY = "http://127.0.0.1:8765/gpgkey"
SCRIPTS = "TEST STAND-IN packages with labelled script stand-ins for NVIDIA's tools"

pytestmark = pytest.mark.demo


def _remove_node() -> None:
    subprocess.run(["docker", "rm", "-f", "-v", NODE], capture_output=True, check=False)


def _node(*argv: str) -> str:
    return subprocess.run(["docker", "exec", NODE, *argv], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    dest = tmp_path_factory.mktemp("demo") / "gpu-node-provisioning"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(dest)], check=True)
    venv = ROOT / ".venv"
    same = all(
        (dest / f).read_bytes() == (ROOT / f).read_bytes() for f in ("requirements.txt", "requirements-test.txt")
    )
    if same and venv.is_dir():
        (dest / ".venv").symlink_to(venv)
    assert not (dest.parent.parent / "shared").exists() and not (dest.parent / "shared").exists()
    _remove_node()
    yield dest
    _remove_node()


def _demo(clone: Path, n: int, *args: str) -> tuple[int, str]:
    LOGS.mkdir(exist_ok=True)
    log = LOGS / f"demo-{n}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "ANSIBLE_", "MOLECULE_"))}
    env.update(ANSIBLE_FORCE_COLOR="0", PY_COLORS="0", ANSIBLE_NOCOLOR="1")
    # no upstream builds: an empty folder (the cache folder the default falls back to may hold a build)
    env["GPUNODE_UPSTREAM_DIR"] = str(clone.parent / "no-upstream-builds")
    with log.open("w") as out:
        result = subprocess.run(
            ["bash", "scripts/demo.sh", *args],
            cwd=clone,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=RUN_TIMEOUT,
            check=False,
        )
    return result.returncode, log.read_text(errors="replace")


def _tail(output: str, lines: int = 60) -> str:
    return "\n".join(output.splitlines()[-lines:])


def _site_recap(output: str) -> dict[str, int]:
    """The counters of gpunode-local in the last PLAY RECAP (site.yml's)."""
    recap = output.rsplit("PLAY RECAP", 1)[-1]
    match = re.search(rf"^{re.escape(NODE)}\s*:\s*(.*)$", recap, re.MULTILINE)
    assert match, f"no PLAY RECAP line for {NODE}:\n{_tail(output)}"
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", match.group(1))}


def _headline_counts(output: str) -> dict[str, int]:
    """The counts of the doctor's table headline in the demo's closing summary."""
    summary = output.rsplit("=" * 80, 1)[-1]
    match = re.search(rf"^{re.escape(NODE)}: (OK|WARN|FAIL) - \d+ checks \(([^)]*)\)$", summary, re.MULTILINE)
    assert match, f"the closing summary has no doctor's table headline:\n{_tail(output)}"
    return {status: int(count) for count, status in re.findall(r"(\d+) (\w+)", match.group(2))}


@pytest.fixture(scope="module")
def first_run(clone):
    return _demo(clone, 1)


@pytest.fixture(scope="module")
def second_run(clone, first_run):
    return _demo(clone, 2)


@pytest.fixture(scope="module")
def installed_run(clone, second_run, tmp_path_factory):
    """The collection as a user outside a checkout has it (issue 51): `ansible-galaxy collection build` from the
    clone, installed into an empty folder, and the demo's site.yml run from the installed collection in a folder
    with no ansible.cfg, over the demo's inventory. The node is the second run's: nothing changes."""
    work = tmp_path_factory.mktemp("installed")
    bin_dir = ROOT / ".venv" / "bin"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "ANSIBLE_", "MOLECULE_"))}
    env.update(ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", ANSIBLE_COLLECTIONS_PATH=str(work / "collections"))
    elsewhere = work / "elsewhere"
    elsewhere.mkdir()
    log = LOGS / "demo-installed.log"
    with log.open("w") as out:

        def run(*argv):
            subprocess.run(
                [str(a) for a in argv], cwd=elsewhere, env=env, stdout=out, stderr=subprocess.STDOUT, check=True
            )

        run(bin_dir / "ansible-galaxy", "collection", "build", "--output-path", work / "dist", clone)
        (artifact,) = (work / "dist").glob("gpunode-provisioning-*.tar.gz")
        run(
            bin_dir / "ansible-galaxy",
            "collection",
            "install",
            "--offline",
            "--no-deps",
            "-p",
            work / "collections",
            artifact,
        )
        installed = work / "collections/ansible_collections/gpunode/provisioning"
        result = subprocess.run(
            [
                str(bin_dir / "ansible-playbook"),
                "-vv",
                "-i",
                str(clone / "inventories/local/hosts.yml"),
                str(installed / "site.yml"),
            ],
            cwd=elsewhere,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=RUN_TIMEOUT,
            check=False,
        )
    return result.returncode, log.read_text(errors="replace"), installed


@pytest.fixture(scope="module")
def mirror_run(clone, installed_run):
    """The repository branch: the role's repository URL at the signed stand-in repository the node serves, as a
    mirror, with its key; the toolkit alone (--tags toolkit). The node's packages are the first run's."""
    generated = (clone / "inventories/local/host_vars" / NODE / "toolkit.yml").read_text()
    fingerprint = re.search(r"^nvidia_container_toolkit_repo_key_fingerprint: (\w+)$", generated, re.MULTILINE)
    assert fingerprint, generated
    mirror = (
        f"-e nvidia_container_toolkit_repo_base_url={MIRROR} -e nvidia_container_toolkit_repo_key_url={MIRROR_KEY}"
    ).split()
    key = f"nvidia_container_toolkit_repo_key_fingerprint={fingerprint[1]}"
    return _demo(clone, 3, *mirror, "-e", key, "--tags", "toolkit")


def test_first_run_succeeds_with_no_failed_check(first_run):
    rc, output = first_run
    assert rc == 0, f"bash scripts/demo.sh failed (rc {rc}) in a fresh clone:\n{_tail(output)}"
    counts = _headline_counts(output)
    assert counts.get("fail") == 0, counts
    assert counts.get("ok", 0) > 0, counts


def test_closing_summary_tells_a_newcomer_where_things_are(first_run):
    _, output = first_run
    summary = output.rsplit("=" * 80, 1)[-1]
    assert "CHECK" in summary and "STATUS" in summary and "FIX" in summary
    assert "/var/lib/gpu-node-provisioning/validate.txt" in summary
    assert f"docker rm -f -v {NODE}" in summary
    assert f"NVIDIA's container toolkit came from: {SCRIPTS}" in summary
    assert "GPUNODE_UPSTREAM_DIR" in summary


def test_the_doctor_reports_the_cri_plugin_ok_and_nothing_failed(first_run):
    report = json.loads(_node("cat", REPORT))
    failed = [c for c in report["checks"] if c["status"] == "fail"]
    assert not failed, failed
    cri = [c for c in report["checks"] if "cri" in c["check"].lower()]
    assert cri, f"the doctor has no CRI check: {[c['check'] for c in report['checks']]}"
    assert all(c["status"] == "ok" for c in cri), cri


def test_containerd_serves_cri_for_a_kubelet(first_run):
    """The oracle, straight from the running containerd: its CRI plugin loaded."""
    rows = [line.split() for line in _node("ctr", "plugins", "ls").splitlines()[1:]]
    cri = [row for row in rows if len(row) >= 4 and row[1] == "cri"]
    assert cri, "containerd lists no cri plugin"
    assert all(row[-1] == "ok" for row in cri), cri


def test_second_run_changes_nothing_and_shows_the_table_again(second_run):
    rc, output = second_run
    assert rc == 0, f"the second bash scripts/demo.sh failed (rc {rc}):\n{_tail(output)}"
    recap = _site_recap(output)
    assert recap.get("changed") == 0 and recap.get("failed") == 0, recap
    assert _headline_counts(output).get("fail") == 0


def test_what_stood_in_is_said_and_causes_no_failure(first_run):
    """Issue 41, a lone clone: the node got the labelled script stand-ins; the doctor names them in its "container
    toolkit" row (a warning, with the fix) and the containers "via nvidia" ran through the stand-in runtime (which
    hands them to runc) with the config.toml the role wrote."""
    assert "(TEST STAND-IN script, not NVIDIA's runtime) version 1.20.0" in _node(
        "nvidia-container-runtime", "--version"
    )
    report = json.loads(_node("cat", REPORT))
    toolkit = [c for c in report["checks"] if c["check"] == "container toolkit"]
    assert len(toolkit) == 1 and toolkit[0]["status"] == "warn", toolkit
    assert (
        "nvidia-container-toolkit 1.20.0-1 (pin 1.20.0-1): TEST STAND-IN package, script stand-ins"
        in (toolkit[0]["detail"])
    )
    via_nvidia = [c for c in report["checks"] if c["check"].endswith(": container via nvidia")]
    assert via_nvidia and all(c["status"] == "ok" for c in via_nvidia), via_nvidia
    config = _node("cat", "/etc/nvidia-container-runtime/config.toml")
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged = false" in config


def test_the_second_run_took_the_stand_ins_again(second_run):
    _, output = second_run
    assert f"NVIDIA's container toolkit: {SCRIPTS}" in output


def test_the_installed_collection_runs_the_demos_site_yml(installed_run, clone):
    """Issue 51: the built artifact, installed into an empty folder, provisions the node from there: its roles and
    plugins are the installed ones, the run changes nothing on the converged node and the doctor finds no failure."""
    rc, output, installed = installed_run
    assert rc == 0, f"site.yml from the installed collection failed (rc {rc}):\n{_tail(output)}"
    recap = _site_recap(output)
    assert recap.get("changed") == 0 and recap.get("failed") == 0, recap
    assert f"task path: {installed}/roles/gpu_node_facts/" in output
    assert f"task path: {installed}/roles/gpu_validate/" in output
    assert f"task path: {clone}/" not in output
    report = json.loads(_node("cat", REPORT))
    assert not [c for c in report["checks"] if c["status"] == "fail"], report["checks"]


def test_a_mirror_takes_the_repository_branch(mirror_run):
    rc, output = mirror_run
    assert rc == 0, f"bash scripts/demo.sh with a mirror failed (rc {rc}):\n{_tail(output)}"
    assert f"NVIDIA's container toolkit: the signed repository {MIRROR}, the role's normal path" in output
    assert "TASK [Wait until the stand-in repository answers]" not in output  # nothing stood in for the mirror
    recap = _site_recap(output)
    assert recap.get("changed") == 0 and recap.get("failed") == 0, recap
    sources = _node("cat", "/etc/apt/sources.list.d/nvidia-container-toolkit.list")
    assert f"{MIRROR}/deb/" in sources, sources
