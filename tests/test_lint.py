"""Lint stage: ruff, yamllint, ansible-lint (production profile) and ansible-test sanity must report nothing."""

from __future__ import annotations

import os
import re
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
    # one ansible-doc run renders them all, each page starting "> MODULE <name> (<path>)" (one run per module cost
    # about 1.5 CPU s each, most of it ansible-doc's own start)
    result = _run(str(BIN / "ansible-doc"), "-M", "library", *modules)
    assert result.returncode == 0, f"ansible-doc failed:\n{result.stderr}"
    assert "[WARNING]" not in result.stderr, result.stderr
    pages = re.split(r"^> MODULE ", re.sub(r"\x1b\[[0-9;]*m", "", result.stdout), flags=re.MULTILINE)[1:]
    rendered = {page.split(None, 1)[0]: page for page in pages}
    assert sorted(rendered) == modules, sorted(rendered)
    for name, page in rendered.items():
        assert "EXAMPLES:" in page and "RETURN VALUES:" in page, f"{name}: doc is incomplete"


def test_ansible_test_sanity_is_clean():
    """Every default ansible-test sanity test on the collection built from this checkout (scripts/sanity.sh: no
    network but the Python package index; its venvs are cached in ~/.cache/gpunode-sanity). An entry of
    tests/sanity/ignore-2.19.txt carries its reason on the same line."""
    env = dict(os.environ, GPUNODE_VENV=str(BIN.parent))
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "sanity.sh"), str(ROOT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=1800,
    )
    output = result.stdout + result.stderr
    # ansible-test's findings ("ERROR: <path>:<line>:<col>: <test>: <message>"), the stderr of a tool it ran
    # (ansible-doc's warnings) and the summary (FATAL); the output's end when there is none of those
    found = [line for line in output.splitlines() if line.startswith(("ERROR:", "FATAL:", "[WARNING]", "[ERROR]"))]
    problems = "\n".join(found) or output[-4000:]
    assert result.returncode == 0, f"ansible-test sanity found problems:\n{problems}"


def test_every_sanity_ignore_says_why():
    for path in sorted((ROOT / "tests" / "sanity").glob("ignore-*.txt")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            entry, _hash, reason = line.partition("  # ")
            assert not entry.strip() or reason.strip(), f"{path.name}:{number}: give the reason after '  # '"
