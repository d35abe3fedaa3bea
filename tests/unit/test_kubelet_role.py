"""Consistency of roles/kubelet: defaults, argument specs and the README."""

from __future__ import annotations

from pathlib import Path

import yaml
from conftest import load_module

ENTRY_POINT = load_module("role_variables", subdir="plugins/action").ENTRY_POINT
ROLE = Path(__file__).resolve().parents[2] / "roles" / "kubelet"


def _load(relative: str):
    return yaml.safe_load((ROLE / relative).read_text())


def test_argument_specs_name_exactly_the_defaults_with_the_same_default_values():
    defaults = _load("defaults/main.yml")
    options = _load("meta/argument_specs.yml")["argument_specs"][ENTRY_POINT]["options"]
    assert list(options) == list(defaults)
    mismatched = {
        name: (spec.get("default"), defaults[name])
        for name, spec in options.items()
        if spec.get("default") != defaults[name]
    }
    assert mismatched == {}


def test_every_option_has_a_description_and_a_type():
    options = _load("meta/argument_specs.yml")["argument_specs"][ENTRY_POINT]["options"]
    assert [name for name, spec in options.items() if not spec.get("description") or not spec.get("type")] == []


def test_the_role_reads_the_shared_values_and_facts_from_gpu_node_facts():
    # the facts preflight lives once (the dependency), and so does the drop-in threshold
    assert "gpu_node_facts" in _load("meta/main.yml")["dependencies"]
    tasks = "".join(path.read_text() for path in sorted((ROLE / "tasks").glob("*.yml")))
    assert "ansible.builtin.setup" not in tasks and "gpu_node_facts:" not in tasks
    assert "__gpu_node_facts_kubelet_dropin_min" in (ROLE / "vars" / "main.yml").read_text()
    assert "apply:" not in tasks.replace("    apply: {tags: [kubelet]}", "")


def test_the_role_works_out_its_plan_without_set_fact():
    tasks = "".join(path.read_text() for path in sorted((ROLE / "tasks").glob("*.yml")))
    assert "ansible.builtin.set_fact" not in tasks
