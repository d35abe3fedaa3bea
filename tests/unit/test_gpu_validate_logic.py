"""plugins/module_utils/gpu_validate/logic.py: what the doctor reads from runtime dumps and kubelet files.

On the node the module runs on python3 < 3.11 (Debian 11/12, Ubuntu 22.04, EL 9): no tomllib, no
PyYAML. The small TOML reader it shares (containerd/tables.py) must read every configuration dump the
project knows exactly as tomllib does, and the featureGates reader what PyYAML reads.
"""

from __future__ import annotations

import tomllib

import pytest
import yaml
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import tables
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import logic
from conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "containerd"
DUMPS = sorted((ROOT / "tests" / "fixtures").glob("c*/*.toml"))
LOG_AROUND = 'time="2025" level=info msg="config"\n[plugins.cri.containerd.runtimes.nvidia]\n  runtime_type = "x"\n'


@pytest.fixture
def no_tomllib(monkeypatch):
    monkeypatch.setattr(tables, "tomllib", None)


def test_the_fixtures_are_there():
    assert len(DUMPS) >= 8, DUMPS


@pytest.mark.parametrize("path", DUMPS, ids=lambda p: p.name)
def test_the_small_reader_finds_the_runtimes_tomllib_finds(path, no_tomllib):
    """The doctor reads dumps through containerd/tables.py (tests/unit/test_containerd_tables.py tests the reader)."""
    text = path.read_text()
    with_reader = logic.runtime_config(text)
    tables.tomllib = tomllib
    assert with_reader == logic.runtime_config(text)
    assert with_reader["parsed"] is True


def test_text_around_the_dump_is_left_out_without_tomllib(no_tomllib):
    assert logic.runtime_config(LOG_AROUND) == {
        "runtimes": ["nvidia"],
        "default": None,
        "parsed": False,
        "default_entry": {"runtime_type": "", "binary": ""},
    }


def test_multi_line_arrays_and_strings_are_read_over(no_tomllib):
    text = 'a = [\n  "x",  # ]\n  "y",\n]\nb = """\nline\n"""\n'
    text += '[plugins.cri.containerd.runtimes.nvidia]\nruntime_type = "io.containerd.runc.v2"\n'
    assert logic.runtime_config(text)["runtimes"] == ["nvidia"]


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


def test_log_lines_around_a_dump_are_left_out_and_the_dump_read_as_containerd_reads_it():
    dump = "version = 2\n" + NVIDIA_V2 + "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.'kata-qemu']\n"
    dump += '[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "nvidia"\n'
    text = 'time="2025" level=info msg="config"\n' + dump + 'time="2025" level=info msg="done"\n'
    assert logic.runtime_config(text) == {
        "runtimes": ["kata-qemu", "nvidia"],
        "default": "nvidia",
        "parsed": False,
        "default_entry": {"runtime_type": "io.containerd.runc.v2", "binary": "/usr/bin/nvidia-container-runtime"},
    }


def test_a_default_runtime_name_in_another_table_is_no_default():
    """Issue 51: the regex over the text took `default_runtime_name` in any table (here a runtime's options)."""
    text = 'time="2025" level=info msg="config"\n' + NVIDIA_V2 + '  default_runtime_name = "nvidia"\n'
    text += "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.'kata-qemu']\n"
    assert logic.runtime_config(text) == {
        "runtimes": ["kata-qemu", "nvidia"],
        "default": None,  # the regexes before: "nvidia"
        "parsed": False,
        "default_entry": {"runtime_type": "", "binary": ""},
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
