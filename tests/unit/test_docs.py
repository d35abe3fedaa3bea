"""The documents point where they say: relative links and anchors resolve, and every TEST STAND-IN is listed.

The README is the users' document; docs/testing.md the contributors' (the harness, each stand-in in detail). The
project's rule: every stand-in is listed in the README (a line each, what it replaces) and in docs/testing.md."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [
    ROOT / "README.md",
    ROOT / "CHANGELOG.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "bench" / "README.md",
    *sorted(ROOT.glob("roles/*/README.md")),
]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but '-' and '_' dropped, spaces as '-'."""
    anchors = set()
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("document", DOCUMENTS, ids=[str(d.relative_to(ROOT)) for d in DOCUMENTS])
def test_every_relative_link_and_anchor_resolves(document):
    for target in LINK.findall(document.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (document.parent / path).resolve() if path else document
        assert resolved.exists(), f"{document.relative_to(ROOT)}: {target} does not exist"
        if anchor and resolved.suffix == ".md":
            assert anchor in _anchors(resolved), f"{document.relative_to(ROOT)}: no heading for #{anchor} in {path}"


def _standins() -> set[Path]:
    """Each stand-in: the outermost tracked path whose name says stand-in (a file, or the folder holding one)."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    found = set()
    for name in files:
        parts = Path(name).parts
        for i, part in enumerate(parts):
            if "standin" in part.lower():
                found.add(Path(*parts[: i + 1]))
                break
    return found


def test_every_stand_in_is_listed_in_the_readme_and_in_detail_in_docs_testing():
    readme = (ROOT / "README.md").read_text()
    testing = (ROOT / "docs" / "testing.md").read_text()
    standins = _standins()
    assert len(standins) >= 15, standins

    def named(path: Path, text: str) -> bool:
        # the stand-in's own name, or the molecule folder that holds it
        return path.name in text or (path.parts[0] == "molecule" and f"{path.parent}" in text)

    unlisted = [f"{path}" for path in sorted(standins) if not named(path, readme)]
    assert not unlisted, f"README.md does not list these TEST STAND-INs: {unlisted}"
    undescribed = [f"{path}" for path in sorted(standins) if not named(path, testing)]
    assert not undescribed, f"docs/testing.md does not describe these TEST STAND-INs: {undescribed}"
