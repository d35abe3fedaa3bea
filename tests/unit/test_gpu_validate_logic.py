"""plugins/module_utils/gpu_validate_logic.py: what the doctor reads from runtime dumps and kubelet files.

On the node the module runs on python3 < 3.11 (Debian 11/12, Ubuntu 22.04, EL 9): no tomllib, no
PyYAML. Its small TOML reader must read every configuration dump the project knows exactly as
tomllib does, and the featureGates reader what PyYAML reads.
"""

from __future__ import annotations

import tomllib

import gpu_validate_logic as logic
import pytest
import yaml
from conftest import ROOT

DUMPS = sorted((ROOT / "tests" / "fixtures").glob("c*/*.toml"))
LOG_AROUND = 'time="2025" level=info msg="config"\n[plugins.cri.containerd.runtimes.nvidia]\n  runtime_type = "x"\n'


@pytest.fixture
def no_tomllib(monkeypatch):
    monkeypatch.setattr(logic, "tomllib", None)


def test_the_fixtures_are_there():
    assert len(DUMPS) >= 8, DUMPS


@pytest.mark.parametrize("path", DUMPS, ids=lambda p: p.name)
def test_the_small_reader_finds_the_runtimes_tomllib_finds(path, no_tomllib):
    text = path.read_text()
    with_reader = logic.runtime_config(text)
    logic.tomllib = tomllib
    assert with_reader == logic.runtime_config(text)
    assert with_reader["parsed"] is True


@pytest.mark.parametrize("path", DUMPS, ids=lambda p: p.name)
def test_the_small_reader_reads_the_scalars_tomllib_reads(path, no_tomllib):
    def scalars(doc, prefix=()):
        for key, value in doc.items():
            if isinstance(value, dict):
                yield from scalars(value, (*prefix, key))
            elif not isinstance(value, list):
                yield (*prefix, key), value

    text = path.read_text()
    mine = dict(scalars(logic.toml_tables(text)))
    theirs = dict(scalars(tomllib.loads(text)))
    assert theirs and {key: mine.get(key) for key in theirs} == theirs


@pytest.mark.parametrize(
    "text",
    [LOG_AROUND, "[a\nb = 1\n", 'a = "x" junk\n', "a = 'x\n", "a = 1 2\n", "just text\n"],
)
def test_text_that_is_not_toml_is_refused_by_both_readers(text, no_tomllib):
    with pytest.raises(logic.TomlError):
        logic.toml_tables(text)
    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads(text)


def test_text_around_the_dump_falls_back_to_the_headers_without_tomllib(no_tomllib):
    assert logic.runtime_config(LOG_AROUND) == {
        "runtimes": ["nvidia"],
        "default": None,
        "parsed": False,
        "default_entry": {"runtime_type": "", "binary": ""},
    }


def test_multi_line_arrays_and_strings_are_read_over(no_tomllib):
    text = 'a = [\n  "x",  # ]\n  "y",\n]\nb = """\nline\n"""\n'
    text += '[t.runtimes.nvidia]\nruntime_type = "io.containerd.runc.v2"\n'
    assert logic.toml_tables(text)["b"] == "\nline\n"
    assert logic.runtime_config(text)["runtimes"] == ["nvidia"]
    assert tomllib.loads(text)["b"] == "line\n"  # tomllib drops the newline after the opening quotes


GATES = [
    ("featureGates:\n  UserNamespacesSupport: true\n  Other: false\n", {"UserNamespacesSupport": True, "Other": False}),
    (
        "kind: KubeletConfiguration\nfeatureGates: {UserNamespacesSupport: true}\nmaxPods: 110\n",
        {"UserNamespacesSupport": True},
    ),
    ('{"featureGates": {"UserNamespacesSupport": false}}', {"UserNamespacesSupport": False}),
    ("featureGates:\n  # a comment\n\n  UserNamespacesSupport: yes\nmaxPods: 110\n", {"UserNamespacesSupport": True}),
    ('featureGates:\n  "UserNamespacesSupport": "true"\n', {"UserNamespacesSupport": "true"}),  # a string, not on
    ("featureGates:\n  A: true\nlogging:\n  format: text\n", {"A": True}),
    ("maxPods: 110\n", {}),
    ("featureGates:\nmaxPods: 110\n", {}),
    ("", {}),
]


@pytest.mark.parametrize(("text", "gates"), GATES)
def test_feature_gates_are_read_as_pyyaml_reads_them(text, gates):
    assert logic.feature_gates(text) == gates
    doc = yaml.safe_load(text) or {}
    assert (doc.get("featureGates") or {}) == gates
