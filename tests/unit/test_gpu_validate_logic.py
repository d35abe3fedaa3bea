"""plugins/module_utils/gpu_validate/logic.py: what the doctor reads from runtime dumps and kubelet files.

On the node the module runs on python3 < 3.11 (Debian 11/12, Ubuntu 22.04, EL 9): no tomllib, no
PyYAML. Its small TOML reader must read every configuration dump the project knows exactly as
tomllib does, and the featureGates reader what PyYAML reads.
"""

from __future__ import annotations

import tomllib

import pytest
import yaml
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import logic
from conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "containerd"
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


# --- runtime configuration dumps (containerd config dump, crio config) ---------------------------------------

NVIDIA_V2 = """
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
    BinaryName = "/usr/bin/nvidia-container-runtime"
"""


def test_containerd_v2_dump_lists_the_runtimes_and_the_default():
    text = (FIXTURES / "v2-debian12-containerd-1.6.toml").read_text() + NVIDIA_V2
    assert logic.runtime_config(text) == {
        "runtimes": ["nvidia", "runc"],
        "default": "runc",
        "parsed": True,
        "default_entry": {"runtime_type": "io.containerd.runc.v2", "binary": ""},
    }


def test_containerd_v1_dump_reads_default_runtime_name_not_the_default_runtime_table():
    result = logic.runtime_config((FIXTURES / "v1-containerd-1.4.toml").read_text())
    assert result["runtimes"] == ["runc"]
    assert result["default"] == "runc"


def test_containerd_v3_dump_with_nvidia_as_default():
    text = (FIXTURES / "v3-containerd-2.1.toml").read_text().replace("default_runtime_name = 'runc'", "")
    text = text.replace(
        "[plugins.'io.containerd.cri.v1.runtime'.containerd]",
        "[plugins.'io.containerd.cri.v1.runtime'.containerd]\n      default_runtime_name = 'nvidia'",
    )
    text += "\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]\n"
    text += "  runtime_type = 'io.containerd.runc.v2'\n"
    text += "  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia.options]\n"
    text += "    BinaryName = '/usr/bin/nvidia-container-runtime'\n"
    result = logic.runtime_config(text)
    assert result == {
        "runtimes": ["nvidia", "runc"],
        "default": "nvidia",
        "parsed": True,
        # what the doctor's CAP_SYS_ADMIN container runs through: CRI's default, not ctr's
        "default_entry": {"runtime_type": "io.containerd.runc.v2", "binary": "/usr/bin/nvidia-container-runtime"},
    }


def test_crio_config_lists_runtimes_and_default_runtime():
    text = (
        '[crio]\n[crio.runtime]\ndefault_runtime = "crun"\n'
        '[crio.runtime.runtimes.crun]\nruntime_path = ""\n'
        '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\nruntime_type = "oci"\n'
    )
    assert logic.runtime_config(text) == {
        "runtimes": ["crun", "nvidia"],
        "default": "crun",
        "parsed": True,
        "default_entry": {"runtime_type": "", "binary": ""},
    }


def test_text_that_is_not_toml_falls_back_to_table_headers():
    text = 'time="2025" level=info msg="config"\n' + NVIDIA_V2 + '  default_runtime_name = "nvidia"\n'
    text += "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.'kata-qemu']\n"
    assert logic.runtime_config(text) == {
        "runtimes": ["kata-qemu", "nvidia"],
        "default": "nvidia",
        "parsed": False,
        "default_entry": {"runtime_type": "", "binary": ""},  # the fallback reads no runtime table
    }


def test_empty_dump_has_no_runtimes_and_no_default():
    assert logic.runtime_config("") == {
        "runtimes": [],
        "default": None,
        "parsed": True,
        "default_entry": {"runtime_type": "", "binary": ""},
    }
    assert logic.runtime_config(None)["runtimes"] == []


# --- JSON check ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"defaultAction": "SCMP_ACT_ERRNO"}', ""),
        ("", "not valid JSON"),
        ("{", "not valid JSON"),
        ("[1, 2]", "a JSON list, not an object"),
    ],
)
def test_json_problem(text, problem):
    result = logic.json_problem(text)
    assert result.startswith(problem) if problem else result == ""
