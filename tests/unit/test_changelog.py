"""CHANGELOG.md's Unreleased section is what changelogs/fragments renders (scripts/changelog.py), one line a change.

A fragment is changelogs/fragments/<issue>-<slug>.yml: Keep a Changelog sections mapped to one-line entries that
name their issue (docs/testing.md, "Changelog fragments")."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "changelog.py"
FRAGMENTS = sorted((ROOT / "changelogs" / "fragments").glob("*.yml"))
SECTIONS = {"added", "changed", "deprecated", "removed", "fixed", "security"}


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)


def test_the_changelog_is_what_the_fragments_render():
    result = _run("--check")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("path", FRAGMENTS, ids=[p.name for p in FRAGMENTS])
def test_every_fragment_entry_is_one_line_naming_its_issue_in_a_known_section(path):
    assert re.fullmatch(r"\d+-[a-z0-9][a-z0-9-]*\.yml", path.name), path.name
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict) and data, path.name
    assert set(data) <= SECTIONS, set(data) - SECTIONS
    for entries in data.values():
        assert isinstance(entries, list) and entries
        for entry in entries:
            assert isinstance(entry, str) and "\n" not in entry.strip(), entry
            assert re.search(r"\(issues? \d+\b", entry), f"names no issue: {entry}"


def _tree(tmp_path: Path, fragments: dict[str, str]) -> Path:
    (tmp_path / "changelogs" / "fragments").mkdir(parents=True)
    for name, text in fragments.items():
        (tmp_path / "changelogs" / "fragments" / name).write_text(text)
    released = "## [0.1.0] - 2026-11-25\n\n### Added\n- The first version.\n"
    (tmp_path / "CHANGELOG.md").write_text("# Changelog\n\n## [Unreleased]\n\n### Added\n- by hand\n\n" + released)
    return tmp_path


def test_write_renders_the_unreleased_section_only_and_check_then_passes(tmp_path):
    root = _tree(
        tmp_path,
        {
            "7-old.yml": "---\nfixed:\n  - An old fix (issue 7).\n",
            "12-new.yml": "---\nadded:\n  - A new thing (issue 12).\nfixed:\n  - A new fix (issue 12).\n",
        },
    )
    assert _run("--check", "--root", str(root)).returncode == 1
    assert _run("--write", "--root", str(root)).returncode == 0
    text = (root / "CHANGELOG.md").read_text()
    unreleased, released = text.split("## [0.1.0]")
    assert "- by hand" not in unreleased
    # sections in Keep a Changelog's order, the newest issue first within a section
    assert unreleased.index("### Added") < unreleased.index("### Fixed")
    assert unreleased.index("A new fix (issue 12)") < unreleased.index("An old fix (issue 7)")
    assert released == " - 2026-11-25\n\n### Added\n- The first version.\n"
    assert _run("--check", "--root", str(root)).returncode == 0


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("1-a.yml", "---\nadded:\n  - A change without its issue.\n", "names no issue"),
        ("1-a.yml", "---\nadded:\n  - |\n    Two\n    lines (issue 1).\n", "more than one line"),
        ("1-a.yml", "---\nimproved:\n  - Something (issue 1).\n", "unknown section"),
        ("a.yml", "---\nadded:\n  - Something (issue 1).\n", "<issue>-<slug>.yml"),
        ("1-a.yml", "---\nadded: Something (issue 1).\n", "not a list"),
    ],
)
def test_check_refuses_a_fragment_that_breaks_a_rule(tmp_path, name, text, says):
    result = _run("--check", "--root", str(_tree(tmp_path, {name: text})))
    assert result.returncode == 1 and says in result.stderr, result.stderr
