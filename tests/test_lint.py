"""Lint stage: ruff, yamllint and ansible-lint (production profile) must report nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.lint


def _run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.mark.parametrize(
    "cmd",
    [
        ("ruff", "check", "."),
        ("ruff", "format", "--check", "."),
        ("yamllint", "--strict", "."),
        ("ansible-lint", "--offline", "--nocolor"),
    ],
    ids=["ruff-check", "ruff-format", "yamllint", "ansible-lint"],
)
def test_linter_is_clean(cmd):
    result = _run(str(BIN / cmd[0]), *cmd[1:])
    assert result.returncode == 0, f"{' '.join(cmd)} found problems:\n{result.stdout}\n{result.stderr}"


def test_every_module_renders_in_ansible_doc():
    modules = sorted(p.stem for p in (ROOT / "library").glob("*.py"))
    assert modules, "library/ holds no modules"
    for name in modules:
        result = _run(str(BIN / "ansible-doc"), "-M", "library", name)
        assert result.returncode == 0, f"ansible-doc {name} failed:\n{result.stderr}"
        assert "[WARNING]" not in result.stderr, result.stderr
        assert "EXAMPLES:" in result.stdout and "RETURN VALUES:" in result.stdout, f"{name}: doc is incomplete"
