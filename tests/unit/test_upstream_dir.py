"""Issue 41: the upstream builds (GPUNODE_UPSTREAM_DIR) from a clone of this repository alone.

The test command (scripts/test.sh) needs NVIDIA's toolkit, CRI-O and containerd built from upstream source. Where
GPUNODE_UPSTREAM_DIR lacks them, scripts/build-upstream.sh builds them from public source when that can be fetched;
otherwise the command stops before anything else, naming the variable, the script and the three components. GitHub is
not reachable from CI, so the script's fetch logic is tested against local bare git repositories."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "build-upstream.sh"
COMPONENTS = ("nvidia-container-toolkit", "cri-o", "containerd")
REPOS = (
    "NVIDIA/nvidia-container-toolkit",
    "cri-o/cri-o",
    "kubernetes-sigs/cri-tools",
    "containerd/containerd",
)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUNODE_")}
    env.update(extra)
    return env


def _git(*argv: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *argv], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def bare_repo(tmp_path) -> tuple[Path, str]:
    """A local bare repository with two commits; returns (path, the first commit)."""
    work = tmp_path / "work"
    work.mkdir()
    _git("init", "-q", cwd=work)
    for n in (1, 2):
        (work / "file").write_text(f"{n}\n")
        _git("add", "file", cwd=work)
        _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"c{n}", cwd=work)
    first = _git("rev-parse", "HEAD~1", cwd=work)
    bare = tmp_path / "bare.git"
    _git("clone", "-q", "--bare", str(work), str(bare))
    return bare, first


def _fetch(url: str, commit: str, dest: Path) -> subprocess.CompletedProcess:
    script = f'. {SCRIPT}; fetch_source "$1" "$2" "$3"'
    return subprocess.run(
        ["bash", "-c", script, "fetch", url, commit, str(dest)], capture_output=True, text=True, env=_env()
    )


def test_fetch_source_checks_out_the_pinned_commit_not_the_newest(bare_repo, tmp_path):
    bare, first = bare_repo
    run = _fetch(str(bare), first, tmp_path / "src")
    assert run.returncode == 0, run.stderr
    assert _git("rev-parse", "HEAD", cwd=tmp_path / "src") == first
    assert (tmp_path / "src" / "file").read_text() == "1\n"


def test_fetch_source_refuses_a_repository_without_the_pinned_commit(bare_repo, tmp_path):
    bare, _ = bare_repo
    missing = "d34b3046758cb1a5db606b2a39519c731bbf9f56"
    run = _fetch(str(bare), missing, tmp_path / "src")
    assert run.returncode != 0
    assert f"commit {missing} is not in {bare}" in run.stderr


def test_check_says_which_sources_cannot_be_reached(tmp_path):
    run = subprocess.run(
        ["bash", str(SCRIPT), "--check"],
        capture_output=True,
        text=True,
        env=_env(GPUNODE_UPSTREAM_GIT=str(tmp_path / "nowhere"), GPUNODE_UPSTREAM_DIR=str(tmp_path / "up")),
    )
    assert run.returncode == 2, run.stderr
    for repo in REPOS:
        assert f"{tmp_path}/nowhere/{repo}.git" in run.stderr
    assert not (tmp_path / "up").exists()


def test_check_passes_against_a_mirror_holding_every_repository(bare_repo, tmp_path):
    bare, _ = bare_repo
    for repo in REPOS:
        dest = tmp_path / "mirror" / f"{repo}.git"
        dest.parent.mkdir(parents=True, exist_ok=True)
        _git("clone", "-q", "--bare", str(bare), str(dest))
    run = subprocess.run(
        ["bash", str(SCRIPT), "--check"],
        capture_output=True,
        text=True,
        env=_env(GPUNODE_UPSTREAM_GIT=str(tmp_path / "mirror"), GPUNODE_UPSTREAM_DIR=str(tmp_path / "up")),
    )
    assert run.returncode == 0, run.stderr


def test_dry_run_prints_each_recipe_pinned(tmp_path):
    run = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run"],
        capture_output=True,
        text=True,
        env=_env(GPUNODE_UPSTREAM_DIR=str(tmp_path / "up")),
        check=True,
    )
    assert "containerd: fetch https://github.com/containerd/containerd at db8809540e1a7a9da5d518876894933ff55692ab" in (
        run.stdout
    )
    assert "golang-1.26-go" in run.stdout and "golang-1.25-go" in run.stdout
    for component in COMPONENTS:
        assert f"into {tmp_path}/up/{component}" in run.stdout
    # the toolkit cross-built for arm64 lands inside the toolkit's directory
    assert "nvidia-container-toolkit-arm64: fetch https://github.com/NVIDIA/nvidia-container-toolkit at" in run.stdout
    assert f"into {tmp_path}/up/nvidia-container-toolkit/bin-arm64" in run.stdout
    assert not (tmp_path / "up").exists()


def test_the_test_command_stops_before_anything_else_without_the_builds(tmp_path):
    """A lone clone without ../shared and without GitHub: scripts/test.sh stops at once, names the variable, the
    script and the three components, and set up nothing (no venv, no docker, no images)."""
    env = _env(
        GPUNODE_UPSTREAM_DIR=str(tmp_path / "up"),
        GPUNODE_UPSTREAM_GIT=str(tmp_path / "nowhere"),
        GPUNODE_CACHE=str(tmp_path / "cache"),
        PATH="/usr/bin:/bin",
    )
    run = subprocess.run(["bash", str(ROOT / "scripts" / "test.sh")], capture_output=True, text=True, env=env)
    assert run.returncode == 1
    said = run.stdout + run.stderr
    for word in ("GPUNODE_UPSTREAM_DIR", "scripts/build-upstream.sh", *COMPONENTS):
        assert word in said, said
    assert "timing: setup" not in said and "creating the Python environment" not in said, said
    assert not (tmp_path / "up").exists()


def test_the_test_command_names_only_the_missing_component(tmp_path):
    up = tmp_path / "up"
    for path in ("nvidia-container-toolkit/nvidia-container-runtime", "cri-o/bin/crio"):
        (up / path).parent.mkdir(parents=True, exist_ok=True)
        (up / path).write_text("#!/bin/sh\n")
        (up / path).chmod(0o755)
    script = f". {ROOT}/scripts/lib.sh; upstream_missing"
    run = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=_env(GPUNODE_UPSTREAM_DIR=str(up)), check=True
    )
    assert run.stdout.split() == ["containerd"]
    # the arm64 toolkit build is required only with GPUNODE_TEST_ARM64=1 (without it molecule/arm64 packages script
    # stand-ins where the build is missing)
    run = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        env=_env(GPUNODE_UPSTREAM_DIR=str(up), GPUNODE_TEST_ARM64="1"),
        check=True,
    )
    assert run.stdout.split() == ["nvidia-container-toolkit-arm64", "containerd"]


def test_the_test_command_needs_no_arm64_build_unless_asked(tmp_path):
    """CI's machine has the amd64 builds only: the upstream check passes without the arm64 build and without GitHub;
    with GPUNODE_TEST_ARM64=1 it stops, naming the arm64 build and the variable."""
    up = tmp_path / "up"
    for path in ("nvidia-container-toolkit/nvidia-container-runtime", "cri-o/bin/crio", "containerd/bin/containerd"):
        (up / path).parent.mkdir(parents=True, exist_ok=True)
        (up / path).write_text("#!/bin/sh\n")
        (up / path).chmod(0o755)
    script = f". {ROOT}/scripts/lib.sh; ensure_upstream && echo upstream-ok"
    env = _env(GPUNODE_UPSTREAM_DIR=str(up), GPUNODE_UPSTREAM_GIT=str(tmp_path / "nowhere"))
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)
    assert run.returncode == 0 and run.stdout.strip() == "upstream-ok", run.stdout + run.stderr
    env["GPUNODE_TEST_ARM64"] = "1"
    run = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "nvidia-container-toolkit-arm64" in run.stderr and "GPUNODE_TEST_ARM64=1" in run.stderr, run.stderr


def test_every_reader_of_the_variable_has_the_same_default():
    """GPUNODE_UPSTREAM_DIR unset: the shell (scripts/lib.sh), molecule's base config, the unit tests' fixture
    (tests/unit/conftest.py upstream_path) and the GPU acceptance check all look in ../shared/upstream next to the
    project (lib.sh where that exists)."""
    expected = ROOT.parent / "shared" / "upstream"
    config = (ROOT / ".config" / "molecule" / "config.yml").read_text()
    assert (
        "gpunode_upstream_dir: \"{{ lookup('ansible.builtin.env', 'GPUNODE_UPSTREAM_DIR') or gpunode_project_dir"
        " ~ '/../shared/upstream' }}\"" in config
    )
    run = subprocess.run(
        ["bash", "-c", f". {ROOT}/scripts/lib.sh; resolve_upstream_dir; echo $GPUNODE_UPSTREAM_DIR"],
        capture_output=True,
        text=True,
        env=_env(GPUNODE_CACHE="/nonexistent-cache"),
        check=True,
    )
    got = Path(run.stdout.strip())
    assert got == (expected.resolve() if expected.is_dir() else Path("/nonexistent-cache/upstream")), got
    acceptance = subprocess.run(
        [__import__("sys").executable, "-c", "import tests.gpu_acceptance as g; print(g.UPSTREAM_DIR)"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=_env(),
        check=True,
    )
    assert Path(acceptance.stdout.strip()) == expected
    if expected.is_dir():
        from tests.unit.conftest import upstream_path

        assert upstream_path(environ={}) == expected
