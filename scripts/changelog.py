#!/usr/bin/env python3
"""Render CHANGELOG.md's "## [Unreleased]" section from changelogs/fragments/*.yml.

A fragment is changelogs/fragments/<issue>-<slug>.yml: a YAML mapping of Keep a Changelog sections
(added, changed, deprecated, removed, fixed, security) to lists of one-line entries, each naming its issue
("(issue 47)"), the form antsibull-changelog reads, written by hand. The rendered section lists the sections in
Keep a Changelog's order, the fragments newest issue first (then by name), each fragment's entries in its order.

    python3 scripts/changelog.py --check   # exit 1 when a fragment breaks a rule or CHANGELOG.md differs
    python3 scripts/changelog.py --write   # rewrite the Unreleased section (released sections untouched)

Needs PyYAML (requirements.txt pins it). docs/testing.md, "Changelog fragments", says how to add one.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
FRAGMENTS = Path("changelogs/fragments")
CHANGELOG = Path("CHANGELOG.md")
# Keep a Changelog 1.1.0's section names, in its order
SECTIONS = {
    "added": "Added",
    "changed": "Changed",
    "deprecated": "Deprecated",
    "removed": "Removed",
    "fixed": "Fixed",
    "security": "Security",
}
FRAGMENT_NAME = re.compile(r"(?P<issue>\d+)-[a-z0-9][a-z0-9-]*\.yml")
NAMES_ISSUE = re.compile(r"\(issues? \d+\b")
HEADING = "## [Unreleased]"
NOTE = "<!-- Rendered from changelogs/fragments by scripts/changelog.py --write: edit the fragments. -->"


def fragment_files(root: Path) -> list[Path]:
    """The fragments, newest issue first, then by name."""
    paths = [p for p in (root / FRAGMENTS).glob("*") if p.name != ".keep"]

    def key(path: Path) -> tuple[int, str]:
        match = FRAGMENT_NAME.fullmatch(path.name)
        return (-int(match["issue"]) if match else 0, path.name)

    return sorted(paths, key=key)


def load(root: Path) -> tuple[dict[str, list[str]], list[str]]:
    """Section -> entries of every fragment, and the problems found (a file, then what is wrong)."""
    entries: dict[str, list[str]] = {section: [] for section in SECTIONS}
    problems = []
    for path in fragment_files(root):
        name = f"{FRAGMENTS / path.name}"
        if not FRAGMENT_NAME.fullmatch(path.name):
            problems.append(f"{name}: the name is not <issue>-<slug>.yml (lower case, digits and dashes)")
            continue
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as error:
            problems.append(f"{name}: not YAML: {error}")
            continue
        if not isinstance(data, dict) or not data:
            problems.append(f"{name}: not a mapping of sections to lists of entries")
            continue
        for section, items in data.items():
            if section not in SECTIONS:
                problems.append(f"{name}: unknown section {section!r} (known: {', '.join(SECTIONS)})")
                continue
            if not isinstance(items, list) or not items:
                problems.append(f"{name}: {section} is not a list of entries")
                continue
            for item in items:
                if not isinstance(item, str) or not item.strip():
                    problems.append(f"{name}: {section}: an entry is not text: {item!r}")
                elif "\n" in item.strip():
                    problems.append(f"{name}: {section}: an entry is more than one line: {item[:60]!r}...")
                elif not NAMES_ISSUE.search(item):
                    problems.append(f"{name}: {section}: an entry names no issue ('(issue N)'): {item[:60]!r}...")
                else:
                    entries[section].append(item.strip())
    return entries, problems


def render(entries: dict[str, list[str]]) -> str:
    """The Unreleased section, from its heading to the blank line before the next release."""
    lines = [HEADING, "", NOTE]
    for section, title in SECTIONS.items():
        if entries[section]:
            lines += ["", f"### {title}"] + [f"- {entry}" for entry in entries[section]]
    return "\n".join(lines) + "\n\n"


def split(text: str) -> tuple[str, str, str]:
    """CHANGELOG.md as what comes before the Unreleased section, the section, and the released sections."""
    start = text.find(HEADING + "\n")
    if start < 0:
        raise SystemExit(f"{CHANGELOG}: no '{HEADING}' heading")
    end = text.find("\n## [", start + len(HEADING))
    end = len(text) if end < 0 else end + 1
    return text[:start], text[start:end], text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 when a fragment breaks a rule or the file differs")
    mode.add_argument("--write", action="store_true", help="rewrite the Unreleased section of CHANGELOG.md")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this script's)")
    args = parser.parse_args(argv)

    entries, problems = load(args.root)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    path = args.root / CHANGELOG
    before, section, after = split(path.read_text())
    wanted = render(entries)
    if args.write:
        if section != wanted:
            path.write_text(before + wanted + after)
            print(f"{CHANGELOG}: Unreleased rewritten from {len(fragment_files(args.root))} fragments")
        return 0
    if section != wanted:
        diff = difflib.unified_diff(
            section.splitlines(), wanted.splitlines(), "CHANGELOG.md", "fragments", lineterm="", n=1
        )
        print("\n".join(diff), file=sys.stderr)
        print(
            f"{CHANGELOG}'s Unreleased section is not what {FRAGMENTS} renders: put the change in a fragment,"
            " then run python3 scripts/changelog.py --write",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
