"""Tests of plugins/modules/apt_components.py: pure editing functions first, then the module."""

from __future__ import annotations

import os
import stat

import pytest

from tests.unit.conftest import load_module, run_module

ac = load_module("apt_components")

COMPONENTS = ["contrib", "non-free", "non-free-firmware"]
DEBIAN_URIS = [
    "*://deb.debian.org/debian",
    "*://deb.debian.org/debian-security",
    "*://security.debian.org/debian-security",
]
BOOKWORM = ["bookworm", "bookworm-updates", "bookworm-security"]
TRIXIE = ["trixie", "trixie-updates", "trixie-security"]

ONE_LINE = """\
# Debian bookworm, as the installer wrote it
deb http://deb.debian.org/debian bookworm main # primary
deb-src http://deb.debian.org/debian bookworm main

deb http://deb.debian.org/debian bookworm-updates main non-free-firmware
# deb http://deb.debian.org/debian bookworm-backports main
deb [arch=amd64] http://security.debian.org/debian-security bookworm-security main
deb http://deb.debian.org/debian bullseye main
deb [signed-by=/etc/apt/keyrings/docker.asc] https://download.docker.com/linux/debian bookworm stable
"""

ONE_LINE_EXPECTED = """\
# Debian bookworm, as the installer wrote it
deb http://deb.debian.org/debian bookworm main contrib non-free non-free-firmware # primary
deb-src http://deb.debian.org/debian bookworm main

deb http://deb.debian.org/debian bookworm-updates main non-free-firmware contrib non-free
# deb http://deb.debian.org/debian bookworm-backports main
deb [arch=amd64] http://security.debian.org/debian-security bookworm-security main contrib non-free non-free-firmware
deb http://deb.debian.org/debian bullseye main
deb [signed-by=/etc/apt/keyrings/docker.asc] https://download.docker.com/linux/debian bookworm stable
"""

DEB822 = """\
# Debian trixie, as the installer wrote it
Types: deb deb-src
URIs: http://deb.debian.org/debian/
Suites: trixie trixie-updates
Components: main non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb deb-src
URIs: http://security.debian.org/debian-security/
Suites: trixie-security
# the security archive
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Enabled: no
Types: deb
URIs: http://deb.debian.org/debian/
Suites: trixie-backports
Components: main

Types: deb
URIs: https://download.docker.com/linux/debian
Suites: trixie
Components: stable
Signed-By: /etc/apt/keyrings/docker.asc
"""

DEB822_EXPECTED = """\
# Debian trixie, as the installer wrote it
Types: deb deb-src
URIs: http://deb.debian.org/debian/
Suites: trixie trixie-updates
Components: main non-free-firmware contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb deb-src
URIs: http://security.debian.org/debian-security/
Suites: trixie-security
# the security archive
Components: main contrib non-free non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Enabled: no
Types: deb
URIs: http://deb.debian.org/debian/
Suites: trixie-backports
Components: main

Types: deb
URIs: https://download.docker.com/linux/debian
Suites: trixie
Components: stable
Signed-By: /etc/apt/keyrings/docker.asc
"""


# ---- pure functions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "requested", "expected"),
    [
        ("/etc/apt/sources.list", "auto", "one-line"),
        ("/etc/apt/sources.list.d/debian.sources", "auto", "deb822"),
        ("/etc/apt/sources.list.d/debian.list", "auto", "one-line"),
        ("/etc/apt/sources.list.d/odd-name", "deb822", "deb822"),
    ],
)
def test_detect_format(path, requested, expected):
    assert ac.detect_format(path, requested) == expected


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("http://deb.debian.org/debian", True),
        ("https://deb.debian.org/debian/", True),
        ("HTTP://Deb.Debian.org/debian", True),
        ("http://security.debian.org/debian-security/", True),
        ("http://deb.debian.org/debian-ports", False),
        ("http://mirror.example.com/debian", False),
        ("https://download.docker.com/linux/debian", False),
    ],
)
def test_uri_matches(uri, expected):
    assert ac.uri_matches(uri, DEBIAN_URIS) is expected


def test_one_line_adds_components_only_to_debian_entries_and_keeps_everything_else():
    after, edits, matched = ac.edit_one_line(ONE_LINE, COMPONENTS, BOOKWORM, DEBIAN_URIS)
    assert after == ONE_LINE_EXPECTED
    assert edits == [
        {"line": 2, "added": ["contrib", "non-free", "non-free-firmware"]},
        {"line": 5, "added": ["contrib", "non-free"]},
        {"line": 7, "added": ["contrib", "non-free", "non-free-firmware"]},
    ]
    assert matched == 3


def test_one_line_is_idempotent():
    once, _, _ = ac.edit_one_line(ONE_LINE, COMPONENTS, BOOKWORM, DEBIAN_URIS)
    twice, edits, matched = ac.edit_one_line(once, COMPONENTS, BOOKWORM, DEBIAN_URIS)
    assert twice == once
    assert edits == []
    assert matched == 3


def test_one_line_deb_src_only_when_asked():
    after, edits, _ = ac.edit_one_line(ONE_LINE, COMPONENTS, ["bookworm"], DEBIAN_URIS, ["deb", "deb-src"])
    assert "deb-src http://deb.debian.org/debian bookworm main contrib non-free non-free-firmware\n" in after
    assert [edit["line"] for edit in edits] == [2, 3]


def test_one_line_keeps_line_endings_and_trailing_whitespace():
    text = "deb http://deb.debian.org/debian bookworm main  \r\ndeb http://deb.debian.org/debian trixie main"
    after, _, _ = ac.edit_one_line(text, ["contrib"], ["bookworm", "trixie"], DEBIAN_URIS)
    assert after == (
        "deb http://deb.debian.org/debian bookworm main contrib  \r\n"
        "deb http://deb.debian.org/debian trixie main contrib"
    )


def test_one_line_leaves_flat_repositories_alone():
    text = "deb http://deb.debian.org/debian bookworm/ \n"
    after, edits, matched = ac.edit_one_line(text, COMPONENTS, ["bookworm/"], DEBIAN_URIS)
    assert (after, edits, matched) == (text, [], 0)


def test_deb822_adds_components_only_to_enabled_debian_stanzas_and_keeps_everything_else():
    after, edits, matched = ac.edit_deb822(DEB822, COMPONENTS, TRIXIE, DEBIAN_URIS)
    assert after == DEB822_EXPECTED
    assert edits == [
        {"line": 5, "added": ["contrib", "non-free"]},
        {"line": 12, "added": ["contrib", "non-free", "non-free-firmware"]},
    ]
    assert matched == 2


def test_deb822_is_idempotent():
    once, _, _ = ac.edit_deb822(DEB822, COMPONENTS, TRIXIE, DEBIAN_URIS)
    twice, edits, matched = ac.edit_deb822(once, COMPONENTS, TRIXIE, DEBIAN_URIS)
    assert twice == once
    assert (edits, matched) == ([], 2)


def test_deb822_appends_to_the_last_line_of_a_folded_components_field():
    text = (
        "Types: deb\r\n"
        "URIs: http://deb.debian.org/debian\r\n"
        "Suites: trixie\r\n"
        "Components: main\r\n"
        "  non-free-firmware\r\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\r\n"
    )
    after, edits, _ = ac.edit_deb822(text, COMPONENTS, TRIXIE, DEBIAN_URIS)
    assert after == text.replace("  non-free-firmware\r\n", "  non-free-firmware contrib non-free\r\n")
    assert edits == [{"line": 5, "added": ["contrib", "non-free"]}]


def test_deb822_field_names_ignore_case_and_other_suites_are_left_alone():
    text = "types: deb\nuris: http://deb.debian.org/debian\nsuites: bookworm\ncomponents: main\n"
    assert ac.edit_deb822(text, COMPONENTS, TRIXIE, DEBIAN_URIS) == (text, [], 0)
    after, _, _ = ac.edit_deb822(text, COMPONENTS, BOOKWORM, DEBIAN_URIS)
    assert after.endswith("components: main contrib non-free non-free-firmware\n")


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        (
            "deb http://deb.debian.org/debian bookworm main\ndeb http://deb.debian.org/debian\n",
            2,
            "needs at least a URI",
        ),
        ("deb [signed-by=/x.gpg http://deb.debian.org/debian bookworm main\n", 1, "never closed"),
        ("# ok\nthis is not an entry\n", 2, "expected a 'deb' or 'deb-src' entry"),
    ],
)
def test_one_line_rejects_what_apt_rejects(text, line, problem):
    with pytest.raises(ac.SourcesError) as err:
        ac.edit_one_line(text, COMPONENTS, BOOKWORM, DEBIAN_URIS)
    assert err.value.line == line
    assert problem in str(err.value)
    assert str(err.value).startswith(f"line {line}: ")


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("  Types: deb\n", 1, "continuation line"),
        ("Types: deb\nURIs http://deb.debian.org/debian\n", 2, "is not a 'Field: value' line"),
        ("Types: deb\nTypes: deb-src\n", 2, "field 'Types' appears twice"),
        ("Types: deb\nURIs: http://deb.debian.org/debian\nComponents: main\n", 1, "has no 'Suites' field"),
        (
            "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie\n",
            1,
            "has no 'Components' field",
        ),
    ],
)
def test_deb822_rejects_broken_stanzas(text, line, problem):
    with pytest.raises(ac.SourcesError) as err:
        ac.edit_deb822(text, COMPONENTS, TRIXIE, DEBIAN_URIS)
    assert err.value.line == line
    assert problem in str(err.value)


def test_deb822_without_components_is_fine_when_the_stanza_is_not_debian():
    text = "Types: deb\nURIs: https://example.com/repo\nSuites: ./\n"
    assert ac.edit_deb822(text, COMPONENTS, TRIXIE, DEBIAN_URIS) == (text, [], 0)


# ---- the module --------------------------------------------------------------------------------------


def _args(path, **extra):
    args = {"path": str(path), "components": COMPONENTS, "suites": TRIXIE, "uris": DEBIAN_URIS}
    args.update(extra)
    return args


@pytest.fixture
def deb822_file(tmp_path):
    path = tmp_path / "debian.sources"
    path.write_text(DEB822)
    path.chmod(0o644)
    return path


def test_module_check_mode_reports_the_change_and_writes_nothing(deb822_file):
    result = run_module(ac, _args(deb822_file), check_mode=True, diff=True)
    assert not result.failed, result.result
    assert result.result["changed"] is True
    assert result.result["format"] == "deb822"
    assert result.result["matched"] == 2
    assert result.result["diff"]["before"] == DEB822
    assert result.result["diff"]["after"] == DEB822_EXPECTED
    assert deb822_file.read_text() == DEB822


def test_module_edits_with_a_backup_and_then_changes_nothing(deb822_file):
    first = run_module(ac, _args(deb822_file, backup=True))
    assert not first.failed, first.result
    assert first.result["changed"] is True
    assert deb822_file.read_text() == DEB822_EXPECTED
    backup = first.result["backup_file"]
    with open(backup) as handle:
        assert handle.read() == DEB822
    assert stat.S_IMODE(os.stat(deb822_file).st_mode) == 0o644

    second = run_module(ac, _args(deb822_file, backup=True))
    assert second.result["changed"] is False
    assert second.result["entries"] == []
    assert "backup_file" not in second.result


def test_module_one_line_file_and_mode(tmp_path):
    path = tmp_path / "sources.list"
    path.write_text(ONE_LINE)
    result = run_module(ac, _args(path, suites=BOOKWORM, mode="0600"))
    assert not result.failed, result.result
    assert result.result["format"] == "one-line"
    assert path.read_text() == ONE_LINE_EXPECTED
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_module_bad_file_fails_and_leaves_it_byte_for_byte(tmp_path):
    path = tmp_path / "debian.sources"
    original = DEB822 + "\nTypes: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie\n"
    path.write_text(original)
    result = run_module(ac, _args(path))
    assert result.failed
    assert result.result["msg"] == (
        f"{path} was left unchanged: line 27: the stanza that starts on line 27 has no 'Components' field; "
        "add 'Components: main' (only suites ending in '/' may omit it)"
    )
    assert result.result["line"] == 27
    assert path.read_text() == original


def test_module_failed_validation_leaves_the_file_unchanged(deb822_file):
    result = run_module(ac, _args(deb822_file, validate="/bin/false %s"))
    assert result.failed
    assert "failed validation" in result.result["msg"]
    assert deb822_file.read_text() == DEB822
    assert [p.name for p in deb822_file.parent.iterdir()] == ["debian.sources"]


def test_module_validation_sees_the_candidate(deb822_file):
    result = run_module(ac, _args(deb822_file, validate="grep -q 'main contrib non-free non-free-firmware' %s"))
    assert not result.failed, result.result
    assert deb822_file.read_text() == DEB822_EXPECTED


def test_module_missing_file(tmp_path):
    result = run_module(ac, _args(tmp_path / "missing.sources"))
    assert result.failed
    assert "does not exist" in result.result["msg"]
    assert str(tmp_path / "missing.sources") in result.result["msg"]


def test_module_rejects_non_utf8(tmp_path):
    path = tmp_path / "sources.list"
    path.write_bytes(b"deb http://deb.debian.org/debian bookworm main \xff\n")
    result = run_module(ac, _args(path, suites=BOOKWORM))
    assert result.failed
    assert "is not UTF-8" in result.result["msg"]
    assert path.read_bytes() == b"deb http://deb.debian.org/debian bookworm main \xff\n"


def test_module_requires_components(deb822_file):
    result = run_module(ac, _args(deb822_file, components=[]))
    assert result.failed
    assert result.result["msg"] == "components must name at least one entry"


def test_backup_goes_to_the_backup_tree_not_into_sources_list_d(tmp_path, backup_root):
    directory = tmp_path / "sources.list.d"
    directory.mkdir()
    real = tmp_path / "real.sources"
    real.write_text(DEB822)
    link = directory / "debian.sources"
    link.symlink_to(real)
    result = run_module(ac, _args(link, backup=True))
    assert not result.failed, result.result
    assert sorted(os.listdir(directory)) == ["debian.sources"], "APT reads every file here: no backup beside it"
    assert link.is_symlink() and real.read_text() == DEB822_EXPECTED
    assert result.result["backup_file"].startswith(f"{backup_root}{real}.")
    with open(result.result["backup_file"]) as handle:
        assert handle.read() == DEB822
