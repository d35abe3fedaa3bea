"""scripts/lib.sh: without root and without a Docker engine the test and demo
commands stop with a message that says what is missing and how to fix it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from tests.lanes import scenario_images

ROOT = Path(__file__).resolve().parents[2]


def _as_unprivileged(script: str, path: str) -> subprocess.CompletedProcess:
    """Run bash SCRIPT after sourcing scripts/lib.sh, as an unprivileged user."""
    cmd = ["/bin/bash", "-c", f". {ROOT}/scripts/lib.sh; {script}"]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.fail("setpriv (util-linux) is needed to run this test as root")
        cmd = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    env = {"PATH": path, "HOME": "/tmp", "LANG": "C.UTF-8"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, cwd="/")


@pytest.fixture
def failing_docker(tmp_path):
    """A PATH whose `docker` client answers nothing, as without a running engine."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    docker = bindir / "docker"
    docker.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    docker.chmod(0o755)
    tmp_path.chmod(0o755)
    return f"{bindir}:/usr/bin:/bin"


def test_not_root_and_no_engine_stops_with_a_clear_message(failing_docker):
    run = _as_unprivileged("ensure_docker", failing_docker)
    assert run.returncode == 1
    assert "ERROR: no Docker engine answers" in run.stderr
    assert "is not root" in run.stderr
    assert "Fix:" in run.stderr
    assert "Traceback" not in run.stderr + run.stdout


@pytest.fixture
def bare_path():
    """A PATH with the basic tools lib.sh and the image build script use and nothing else
    (no docker, no debootstrap), in a directory the unprivileged user can reach."""
    bindir = Path(tempfile.mkdtemp(prefix="gpunode-bare-path-", dir="/tmp"))
    bindir.chmod(0o755)
    for tool in ("bash", "id", "dirname", "cut", "sha256sum", "cat", "seq", "sleep", "tail", "mkdir", "mktemp", "rm"):
        (bindir / tool).symlink_to(shutil.which(tool))
    yield str(bindir)
    shutil.rmtree(bindir)


def test_not_root_and_no_docker_at_all_stops_with_a_clear_message(bare_path):
    run = _as_unprivileged("command -v docker >/dev/null && exit 99; ensure_docker", bare_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "ERROR: no Docker engine is installed" in run.stderr
    assert "apt-get install docker.io" in run.stderr


def test_not_root_without_debootstrap_says_how_to_get_it(bare_path):
    run = _as_unprivileged("command -v debootstrap >/dev/null && exit 99; ensure_images debian12", bare_path)
    assert run.returncode == 1
    assert "debootstrap is missing" in run.stderr
    assert "apt-get install debootstrap" in run.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="ensure_docker starts an engine only as root")
def test_the_engine_it_starts_outlives_the_command_that_started_it(tmp_path):
    """The engine ensure_docker starts runs in a session of its own: a Ctrl-C of the tests, or killing a test run's
    process group, leaves it (and every node container on it) running. TEST STAND-INs for docker, dockerd and
    systemctl: the engine is a sleep that records its session."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    ready, sid = tmp_path / "ready", tmp_path / "sid"
    stubs = {
        "docker": f'#!/bin/sh\n[ "$1" = info ] && [ -e {ready} ]\n',
        "dockerd": f"#!/bin/sh\nps -o sid= -p $$ > {sid}\ntouch {ready}\nexec sleep 60\n",
        "systemctl": "#!/bin/sh\nexit 1\n",
    }
    for name, text in stubs.items():
        (bindir / name).write_text(text)
        (bindir / name).chmod(0o755)
    env = {
        "PATH": f"{bindir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "GPUNODE_DOCKERD_LOG": str(tmp_path / "dockerd.log"),
    }
    script = f". {ROOT}/scripts/lib.sh; ensure_docker; ps -o sid= -p $$; sleep 60"
    run = subprocess.Popen(
        ["/bin/bash", "-c", script], stdout=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        own = next(line.strip() for line in run.stdout if not line.startswith("==>"))
        assert own and sid.exists(), "ensure_docker did not start the stand-in engine"
        engine = sid.read_text().strip()
        assert engine != own, f"the engine runs in the command's session {own}"
        os.killpg(run.pid, 9)
        run.wait()
        alive = subprocess.run(["pgrep", "-s", engine, "sleep"], capture_output=True, text=True, check=False)
        assert alive.returncode == 0, "the engine died with the command's process group"
    finally:
        if run.poll() is None:
            os.killpg(run.pid, 9)
        if sid.exists():
            subprocess.run(["pkill", "-s", sid.read_text().strip()], check=False)


@pytest.fixture
def stand_in_builder(tmp_path):
    """TEST STAND-IN for tests/fixtures/images/build-node-image.sh (GPUNODE_IMAGE_BUILDER): notes when each build
    starts and ends, takes NAME's seconds (node-2: 2 s), and fails, saying so, for a node named bad-*."""
    trace = tmp_path / "trace"
    builder = tmp_path / "build.sh"
    builder.write_text(
        "#!/bin/bash\n"
        f'[ ! -e {tmp_path}/built-$1 ] || {{ echo "node image $1 is up to date"; exit 0; }}\n'
        f'echo "start $1" >> {trace}\n'
        'case $1 in bad-*) echo "no archive for $1" >&2; exit 3 ;; esac\n'
        'sleep "${1#*-}"\n'
        'echo "built node image $1"\n'
        f"touch {tmp_path}/built-$1\n"
        f'echo "end $1" >> {trace}\n'
    )
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "debootstrap").write_text("#!/bin/sh\nexit 0\n")  # present: ensure_images installs nothing
    (bindir / "debootstrap").chmod(0o755)
    env = {
        "PATH": f"{bindir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "TMPDIR": str(tmp_path),
        "GPUNODE_IMAGE_BUILDER": str(builder),
    }
    return env, trace


def _ensure_images(env: dict, *nodes: str, jobs: str | None = None) -> subprocess.CompletedProcess:
    if jobs is not None:
        env = {**env, "GPUNODE_IMAGE_JOBS": jobs}
    script = f"set -euo pipefail; . {ROOT}/scripts/lib.sh; ensure_images {' '.join(nodes)}"
    return subprocess.run(["/bin/bash", "-c", script], capture_output=True, text=True, env=env, check=False, timeout=60)


def _most_at_once(trace: Path) -> int:
    running = most = 0
    for line in trace.read_text().splitlines():
        running += 1 if line.startswith("start ") else -1
        most = max(most, running)
    return most


def test_node_images_build_three_at_a_time_each_output_whole(stand_in_builder):
    env, trace = stand_in_builder
    run = _ensure_images(env, "a-2", "b-2", "c-2", "d-1", "e-1")
    assert run.returncode == 0, run.stdout + run.stderr
    assert sorted(run.stdout.splitlines()) == [f"built node image {n}" for n in ("a-2", "b-2", "c-2", "d-1", "e-1")]
    assert _most_at_once(trace) == 3
    one = _ensure_images(env, "f-1", "g-1", jobs="1")
    assert one.returncode == 0, one.stdout + one.stderr
    trace.write_text("")
    _ensure_images(env, "h-1", "i-1", jobs="1")
    assert _most_at_once(trace) == 1


def test_node_images_return_while_the_caller_runs_a_daemon(stand_in_builder):
    """demo.sh starts dockerd in the background (ensure_docker) before ensure_images, in the same shell: the builds are
    waited for, never the daemon (a bare `wait` hung CI's run of 556c086 until its 90-minute limit)."""
    env, _ = stand_in_builder
    daemon = "sleep 300 >/dev/null 2>&1 & daemon=$!; trap 'kill $daemon 2>/dev/null' EXIT"
    script = f"set -euo pipefail; . {ROOT}/scripts/lib.sh; {daemon}; ensure_images a-1 b-1; echo returned"
    run = subprocess.run(["/bin/bash", "-c", script], capture_output=True, text=True, env=env, check=False, timeout=30)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[-1] == "returned"


def test_a_failed_node_image_stops_the_command_naming_it(stand_in_builder):
    env, trace = stand_in_builder
    run = _ensure_images(env, "a-2", "bad-x", "c-1", "d-1", "e-1", jobs="2")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "no archive for bad-x" in run.stderr
    assert "ERROR: building node image bad-x failed" in run.stderr
    assert "built node image a-2" in run.stdout  # the build already started ends, and says so
    started = [line.split()[1] for line in trace.read_text().splitlines() if line.startswith("start ")]
    assert "e-1" not in started, "a build started after one had failed"


def test_a_bad_number_of_image_jobs_is_refused_by_name(stand_in_builder):
    env, _ = stand_in_builder
    run = _ensure_images(env, "a-1", jobs="three")
    assert run.returncode == 1
    assert "GPUNODE_IMAGE_JOBS must be a number of 1 or more, got 'three'" in run.stderr


def test_the_setup_builds_no_node_image_each_test_that_runs_nodes_builds_its_own():
    """scripts/test.sh's setup builds no node image (on a new machine the builds overlap the other workers' tests):
    each molecule scenario builds the images its platforms name when it runs (tests/lanes.py scenario_images), the demo
    its own (scripts/demo.sh) and the unit test on Debian 11's Python its own, each through ensure_images, which builds
    one image at a time (its lock); the setup installs only what the builds need, Ubuntu's archive key included."""
    test_sh = (ROOT / "scripts" / "test.sh").read_text()
    assert not re.findall(r"^\s*ensure_images\b", test_sh, re.M)
    assert re.findall(r"^ensure_image_tools ubuntu$", test_sh, re.M)
    scenarios = (ROOT / "tests" / "molecule" / "test_scenarios.py").read_text()
    assert "images = scenario_images(scenario)" in scenarios and "ensure_images {' '.join(images)}" in scenarios
    assert re.findall(r"^ensure_images debian12$", (ROOT / "scripts" / "demo.sh").read_text(), re.M)
    assert "ensure_images {image}" in (ROOT / "tests" / "unit" / "test_node_python.py").read_text()
    for molecule in sorted((ROOT / "molecule").glob("*/molecule.yml")):
        scenario = molecule.parent.name
        for platform in yaml.safe_load(molecule.read_text())["platforms"]:
            assert platform["image"].removeprefix("gpunode:") in scenario_images(scenario), (scenario, platform)


def test_two_ensure_images_at_once_build_an_image_once(stand_in_builder):
    """Two callers at once (two workers' scenarios, the demo beside one): one builds, the other waits for its lock and
    finds the image built, so an image is never built twice at the same moment."""
    env, trace = stand_in_builder
    script = f". {ROOT}/scripts/lib.sh; ensure_images a-2"
    both = [subprocess.Popen(["/bin/bash", "-c", script], stdout=subprocess.PIPE, text=True, env=env) for _ in "ab"]
    outputs = [run.communicate(timeout=60)[0] for run in both]
    assert [run.returncode for run in both] == [0, 0], outputs
    assert trace.read_text().splitlines() == ["start a-2", "end a-2"]
    assert sorted(outputs) == ["built node image a-2\n", "node image a-2 is up to date\n"], outputs
