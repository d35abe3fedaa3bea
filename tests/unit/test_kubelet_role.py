"""Consistency of roles/kubelet: defaults, argument specs and the README."""

from __future__ import annotations

from pathlib import Path

import yaml

ROLE = Path(__file__).resolve().parents[2] / "roles" / "kubelet"


def _load(relative: str):
    return yaml.safe_load((ROLE / relative).read_text())


def test_argument_specs_name_exactly_the_defaults_with_the_same_default_values():
    defaults = _load("defaults/main.yml")
    options = _load("meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    assert list(options) == list(defaults)
    mismatched = {
        name: (spec.get("default"), defaults[name])
        for name, spec in options.items()
        if spec.get("default") != defaults[name]
    }
    assert mismatched == {}


def test_every_option_has_a_description_and_a_type():
    options = _load("meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    assert [name for name, spec in options.items() if not spec.get("description") or not spec.get("type")] == []


def test_readme_documents_every_variable():
    readme = (ROLE / "README.md").read_text()
    assert [name for name in _load("defaults/main.yml") if f"`{name}`" not in readme] == []
