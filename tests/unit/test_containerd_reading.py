"""Where the regexes that read containerd's and CRI-O's configs for the facts, the GPU-pods guard and the doctor were
wrong, and the one reader (containerd/tables.py, issue 51) reads the file as the runtime does.

Each test names what the regexes answered. They use only names that existed before the reader, so that they can be
run against the old code, where each one fails.
"""

from __future__ import annotations

import importlib

from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import logic
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.containerd import (
    config_versions,
    containerd_versions_row,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.kubernetes import gpu_pods
from conftest import GPU_NODE, FakeNode, gather_node_facts

NVIDIA = "/usr/bin/nvidia-container-runtime"
CRI = 'plugins."io.containerd.grpc.v1.cri"'
RUNC_DEFAULT = (
    f"version = 2\n[{CRI}.containerd]\n  default_runtime_name = 'runc'\n"
    f"[{CRI}.containerd.runtimes.nvidia.options]\n  BinaryName = '{NVIDIA}'\n"
)


def _default(texts) -> tuple:
    state = gpu_pods.containerd_runtime_state(texts, "1.7.24")
    return state["default"], state["default_nvidia"]


def test_a_default_runtime_name_in_a_multi_line_string_is_text():
    text = (
        RUNC_DEFAULT + '[plugins."io.containerd.internal.v1.opt"]\n  note = """\ndefault_runtime_name = "nvidia"\n"""\n'
    )
    assert _default([text]) == ("runc", False)  # the regexes: ("nvidia", True), the last assignment in the text


def test_a_default_runtime_name_in_another_table_is_not_the_cri_plugins():
    # a runtime's options table, then another plugin's table, after the CRI plugin's own
    for table in (f"{CRI}.containerd.runtimes.nvidia.options", 'plugins."io.containerd.runtime.v1.linux"'):
        text = RUNC_DEFAULT + f"[{table}]\n  default_runtime_name = 'nvidia'\n"
        assert _default([text]) == ("runc", False), table  # the regexes: ("nvidia", True)


def test_enable_cdi_outside_the_cri_table_does_not_turn_cdi_on():
    text = RUNC_DEFAULT + "[plugins.'io.containerd.nri.v1.nri']\n  enable_cdi = true\n"
    assert gpu_pods.containerd_runtime_state([text], "1.7.24")["cdi"] is False  # the regexes: True


def test_a_binary_name_in_a_string_is_no_runtime():
    text = f"version = 2\n[{CRI}.containerd]\n  note = '''\n[{CRI}.containerd.runtimes.gpu.options]\n"
    text += f"BinaryName = '{NVIDIA}'\n'''\n"
    assert gpu_pods.containerd_runtime_state([text], "1.7.24")["nvidia_entries"] == {}  # the regexes: {"gpu": ...}


def test_crio_default_runtime_outside_crio_runtime_is_not_crios():
    texts = ['[crio.runtime]\ndefault_runtime = "crun"\n', '[crio.image]\ndefault_runtime = "nvidia"\n']
    assert gpu_pods.crio_runtime_state(texts)["default"] == "crun"  # the regexes: "nvidia"


def test_the_facts_follow_relative_and_nested_imports_as_containerd_does(tmp_path):
    """containerd joins a relative import to the importing file's directory and reads the imports of imports
    (resolveImports, containerd_versions.load_order); the regex globbed from the node's root and stopped there."""
    binary = tmp_path / "usr/bin/containerd"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    etc = tmp_path / "etc/containerd"
    (etc / "conf.d").mkdir(parents=True)
    (etc / "config.toml").write_text(
        RUNC_DEFAULT.replace("version = 2\n", "version = 2\nimports = ['conf.d/*.toml']\n")
    )
    (etc / "conf.d/10-gpu.toml").write_text("version = 2\nimports = ['/etc/containerd/gpu-default.toml']\n")
    (etc / "gpu-default.toml").write_text(f"version = 2\n[{CRI}.containerd]\n  default_runtime_name = 'nvidia'\n")
    state = gather_node_facts(str(tmp_path))["runtime_defaults"]["containerd"]
    assert (state["default"], state["default_nvidia"]) == ("nvidia", True)  # the regex: ("runc", False)


def test_the_toolkit_keys_in_a_multi_line_string_are_text(tmp_path):
    config = tmp_path / "etc/nvidia-container-runtime/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('note = """\naccept-nvidia-visible-devices-envvar-when-unprivileged = false\n"""\n')
    facts = gpu_pods.toolkit_config_facts(str(tmp_path), "/etc/nvidia-container-runtime/config.toml")
    assert facts["accept_envvar_when_unprivileged"] is None  # the regex: False
    assert facts["accept_envvar_when_unprivileged_effective"] is True  # the toolkit's default: the door is open


def test_the_doctor_reads_a_dump_behind_log_lines_by_its_tables():
    text = 'time="2025" level=info msg="config"\n' + RUNC_DEFAULT
    assert logic.runtime_config(text)["default_entry"] == {"runtime_type": "", "binary": ""}
    text = 'time="2025" level=info msg="config"\n' + RUNC_DEFAULT.replace("'runc'", "'nvidia'")
    # the regexes: a runtime found by its header only, the default entry unread
    assert logic.runtime_config(text)["default_entry"] == {"runtime_type": "", "binary": NVIDIA}


def _without_tomllib(monkeypatch) -> None:
    """The node's python3 before 3.11: whichever module holds the reader runs without tomllib."""
    for name in ("containerd.tables", "gpu_validate.logic"):
        try:
            module = importlib.import_module(f"ansible_collections.gpunode.provisioning.plugins.module_utils.{name}")
        except ImportError:
            continue
        if hasattr(module, "tomllib"):
            monkeypatch.setattr(module, "tomllib", None)


def test_the_doctor_follows_imports_without_tomllib(monkeypatch):
    """Python < 3.11 (Debian 11/12, Ubuntu 22.04, EL 9): the old small reader kept arrays as text, so the doctor's
    drop-in version row saw no imported file and passed a drop-in that containerd 2.3 refuses."""
    _without_tomllib(monkeypatch)
    root, dropin = "/etc/containerd/config.toml", "/etc/containerd/conf.d/99-nvidia.toml"
    files = {root: "version = 2\nimports = ['/etc/containerd/conf.d/*.toml']\n", dropin: "version = 4\n"}
    versions = config_versions(root, FakeNode(files=files, mtimes={path: 1.0 for path in files}))
    assert versions["files"] == [(root, 2), (dropin, 4)]  # the old reader: [(root, 2)]
    node = {**GPU_NODE, "runtimes": {"containerd": {"installed": True, "running": True, "version": "2.3.4"}}}
    assert containerd_versions_row(node, {"versions": versions})["status"] == "fail"  # the old reader: "ok"
