"""scripts/lib.sh: without root and without a Docker engine the test and demo
commands stop with a message that says what is missing and how to fix it."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

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
