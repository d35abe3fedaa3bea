"""plugins/doc_fragments/gpunode_file_write.py: the file-writing modules' shared documentation lives once.

Every module of library/ that takes `backup` gets the option, the attributes of a safe file write and its
write contract from the fragment (ansible.cfg doc_fragment_plugins), and none repeats that text.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import ROOT, load_module

fragment = load_module("gpunode_file_write", subdir="plugins/doc_fragments").ModuleDocFragment
SHARED = yaml.safe_load(fragment.DOCUMENTATION)


def _documentation(path: Path) -> str:
    text = path.read_text()
    start = text.index('DOCUMENTATION = r"""') + len('DOCUMENTATION = r"""')
    return text[start : text.index('"""', start)]


def _writers() -> list[str]:
    """Modules (and action-backed modules) that write a file with a backup."""
    return [
        "apt_components",
        "config_file_write",
        "containerd_config",
        "docker_daemon_config",
        "kubelet_flags",
        "toml_merge",
    ]


def _rendered(names: list[str]) -> dict:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-doc"), "-j", "-M", "library", *names],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return {name: entry["doc"] for name, entry in json.loads(result.stdout).items()}


def test_every_module_with_a_backup_option_is_in_the_list():
    # one ansible-doc run for every module (one per module was about 1.5 CPU s each)
    docs = _rendered(sorted(p.stem for p in (ROOT / "library").glob("*.py")))
    takes_backup = {name for name, doc in docs.items() if "backup" in doc["options"]}
    assert takes_backup == set(_writers())


def test_no_module_repeats_the_shared_documentation():
    for name in _writers():
        source = _documentation(ROOT / "plugins" / "modules" / f"{name}.py")
        doc = yaml.safe_load(source)
        assert "gpunode.provisioning.gpunode_file_write" in doc["extends_documentation_fragment"], name
        assert "backup" not in doc["options"], f"{name} documents backup itself"
        assert "Keep a timestamped copy" not in source, name
        assert "Write contract" not in source or name == "config_file_write", name


def test_each_module_renders_the_shared_backup_option_attributes_and_write_contract():
    backup = SHARED["options"]["backup"]
    for name, doc in _rendered(_writers()).items():
        assert doc["options"]["backup"]["description"] == backup["description"], name
        assert doc["options"]["backup"]["default"] is False, name
        assert doc["attributes"]["safe_file_operations"]["support"] == "full", name
        assert doc["attributes"]["check_mode"]["support"] == "full", name
        assert "validate" in doc["options"], name
        assert any(note.startswith("Write contract:") for note in doc["notes"]), name


READ_ONLY = ["gpu_validate_checks", "nvidia_driver_kernels"]


def test_read_only_modules_take_their_attributes_from_one_fragment():
    shared = yaml.safe_load(
        load_module("gpunode_read_only", subdir="plugins/doc_fragments").ModuleDocFragment.DOCUMENTATION
    )
    for name, doc in _rendered(READ_ONLY).items():
        source = _documentation(ROOT / "plugins" / "modules" / f"{name}.py")
        fragments = yaml.safe_load(source)["extends_documentation_fragment"]
        assert "gpunode.provisioning.gpunode_read_only" in fragments, name
        assert "attributes" not in yaml.safe_load(source), f"{name} documents its attributes itself"
        for attribute, value in shared["attributes"].items():
            for key, expected in value.items():
                assert doc["attributes"][attribute][key] == expected, (name, attribute, key)
