"""The values several roles share have one home, roles/gpu_node_facts/vars/main.yml (every role depends on that
role and sees its vars): the roles' defaults and the doctor take them from there, so changing one (the runtime
binary, say) touches that file alone (issue 28)."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import ROOT, load_module, shared_values

HOME = ROOT / "roles" / "gpu_node_facts" / "vars" / "main.yml"
SHARED = [
    "__gpu_node_facts_runtime_binary",
    "__gpu_node_facts_state_dir",
    "__gpu_node_facts_kubelet_dropin_name",
    "__gpu_node_facts_kubelet_dropin_min",
]
# Where a default or a fallback would be a copy: the roles' and playbooks' YAML and templates' targets, the doctor
# module with its check families and the filters. Documentation (README, EXAMPLES of other modules) may show the value.
PLACES = sorted(
    [path for folder in ("roles", "playbooks", "inventories") for path in (ROOT / folder).rglob("*.yml")]
    + [
        ROOT / "library" / "gpu_validate_checks.py",
        *sorted((ROOT / "plugins" / "module_utils").glob("gpu_validate_*.py")),
    ]
    + sorted((ROOT / "plugins" / "filter").glob("*.py"))
)


@pytest.mark.parametrize("name", SHARED)
def test_the_value_lives_in_the_facts_role_vars_only(name):
    value = shared_values()[name]
    # the threshold as code has it (a quoted version or a tuple), not the prose about kubelet releases
    pattern = re.compile(
        rf"[\"']{re.escape(value)}[\"']|\({value.replace('.', ', ')}\)" if name.endswith("_min") else re.escape(value)
    )
    copies = [
        str(path.relative_to(ROOT))
        for path in PLACES
        if path != HOME and pattern.search(path.read_text().replace(".conf.j2", ".j2").replace("e.g. 50-gpu", ""))
    ]
    assert copies == [], f"{value} ({name}) is repeated in {copies}: take it from {HOME.relative_to(ROOT)}"


def test_the_doctor_has_no_fallback_for_what_the_roles_pass():
    spec = load_module("gpu_validate_checks").ARGUMENT_SPEC
    for option in ("runtime_binary", "kubelet_dropin_name", "kubelet_dropin_min"):
        assert spec[option].get("required") is True and "default" not in spec[option], option
    passed = yaml.safe_load((ROOT / "roles" / "gpu_validate" / "tasks" / "checks.yml").read_text())[0]
    assert passed["gpu_validate_checks"]["kubelet_dropin_min"] == "{{ __gpu_node_facts_kubelet_dropin_min }}"


def test_one_platform_list_and_one_min_ansible_version():
    metas = {
        path.parent.parent.name: yaml.safe_load(path.read_text()) for path in (ROOT / "roles").glob("*/meta/main.yml")
    }
    assert {meta["galaxy_info"]["min_ansible_version"] for meta in metas.values()} == {"2.18"}
    assert [role for role, meta in metas.items() if "platforms" in meta["galaxy_info"]] == ["gpu_node_facts"]
    assert all(
        "gpu_node_facts" in str(meta["dependencies"]) for role, meta in metas.items() if role != "gpu_node_facts"
    )


def test_tests_that_call_the_doctor_directly_pass_the_shared_values():
    """The doctor module has no fallback for the shared values: a test helper that runs gpu_validate_checks itself
    (not through the gpu_validate role) passes them from tests/doctor_params.py, else every row it asks for fails
    with 'missing required arguments'."""
    callers = [
        path
        for folder in ("molecule", "tests")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "unit" not in path.relative_to(ROOT).parts and '"gpu_validate_checks"' in path.read_text()
    ]
    assert callers, "no test helper calls the doctor module directly: this test looks in the wrong place"
    assert [str(p.relative_to(ROOT)) for p in callers if "shared_doctor_params()" not in p.read_text()] == []
