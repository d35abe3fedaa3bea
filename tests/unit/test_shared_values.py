"""The values several roles share have one home, roles/gpu_node_facts/vars/main.yml (every role depends on that
role and sees its vars): the roles' defaults and the doctor take them from there, so changing one (the runtime
binary, say) touches that file alone (issue 28)."""

from __future__ import annotations

import ast
import functools
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
    "__gpu_node_facts_kubelet_config_dir",
    "__gpu_node_facts_kubelet_main_config",
    "__gpu_node_facts_seccomp_root",
    "__gpu_node_facts_apparmor_profile_name",
    "__gpu_node_facts_seccomp_profile_name",
    "__gpu_node_facts_toolkit_config",
]
# Where a default or a fallback would be a copy: the roles' and playbooks' YAML, the doctor module with its check
# families, the facts' GPU-pods and workloads files, the facts action and the filters. Only values count: YAML's
# scalars and Python's strings (a module's DOCUMENTATION as YAML), not comments, docstrings or descriptions, which
# may show the value. node_facts/installers.py is not among them: it describes the installers' own layouts, as
# their sources write them (cited there), which kubeadm's happen to share with the kubelet role's defaults.
PLACES = sorted(
    [path for folder in ("roles", "playbooks", "inventories") for path in (ROOT / folder).rglob("*.yml")]
    + [
        ROOT / "library" / "gpu_validate_checks.py",
        *sorted((ROOT / "plugins" / "module_utils" / "gpu_validate").glob("*.py")),
        ROOT / "plugins" / "module_utils" / "kubernetes" / "gpu_pods.py",
        ROOT / "plugins" / "module_utils" / "node_facts" / "workloads.py",
        ROOT / "plugins" / "action" / "gpu_node_facts.py",
    ]
    + sorted((ROOT / "plugins" / "filter").glob("*.py"))
)
PROSE_KEYS = {"description", "short_description", "notes"}
MODULE_DOCS = {"DOCUMENTATION", "EXAMPLES", "RETURN"}


def _yaml_values(data, key: str = ""):
    """(key, string) for every scalar in parsed YAML (keys too), leaving out prose."""
    if isinstance(data, dict):
        for name, value in data.items():
            if str(name) in PROSE_KEYS:
                continue
            yield key, str(name)
            yield from _yaml_values(value, str(name))
    elif isinstance(data, list):
        for item in data:
            yield from _yaml_values(item, key)
    elif data is not None:
        yield key, str(data)


@functools.cache
def written_values(path) -> list:
    """(key, string) pairs of what a file writes as values: YAML scalars, Python string constants (keyword or
    dict key as the key; a module's documentation parsed as YAML), never comments or docstrings."""
    text = path.read_text()
    if path.suffix == ".yml":
        return [pair for doc in yaml.safe_load_all(text) for pair in _yaml_values(doc)]
    tree = ast.parse(text)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    pairs = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") in MODULE_DOCS for t in node.targets):
            docstrings.add(id(node.value))
            pairs += _yaml_values(yaml.safe_load(node.value.value))
        elif isinstance(node, ast.keyword) and isinstance(node.value, ast.Constant):
            docstrings.add(id(node.value))
            pairs.append((node.arg or "", str(node.value.value)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            pairs.append(("", node.value))
    return pairs


def copies_of(name: str, value: str, pairs) -> list:
    """The written values that repeat a shared value: a path anywhere in a string; a name (the profiles') as the
    whole value or a quoted Jinja literal of a profile name's key (`fuse` is also a module, a role and a family);
    the threshold as code has it (a quoted version or a tuple), not prose about kubelet releases."""
    if name.endswith("_min"):
        pattern = re.compile(rf"^{re.escape(value)}$|[\"']{re.escape(value)}[\"']|\({value.replace('.', ', ')}\)")
        return [text for _key, text in pairs if pattern.search(text)]
    if "/" in value or "." in value:
        return [text for _key, text in pairs if value in text.replace(".conf.j2", ".j2").replace("e.g. 50-gpu", "")]
    literal = re.compile(rf"^{re.escape(value)}$|[\"']{re.escape(value)}[\"']")
    return [text for key, text in pairs if re.search(r"profile(_name)?$", key) and literal.search(text)]


@pytest.mark.parametrize("name", SHARED)
def test_the_value_lives_in_the_facts_role_vars_only(name):
    value = shared_values()[name]
    copies = {}
    for path in PLACES:
        if path != HOME:
            found = copies_of(name, value, written_values(path))
            if found:
                copies[str(path.relative_to(ROOT))] = found
    assert copies == {}, f"{value} ({name}) is repeated in {copies}: take it from {HOME.relative_to(ROOT)}"


def test_the_doctor_has_no_fallback_for_what_the_roles_pass():
    spec = load_module("gpu_validate_checks").ARGUMENT_SPEC
    for option in (
        "runtime_binary",
        "kubelet_dropin_name",
        "kubelet_dropin_min",
        "kubelet_config_dir",
        "kubelet_main_config",
        "seccomp_root",
        "apparmor_profile",
        "seccomp_profile",
        "toolkit_config",
    ):
        assert spec[option].get("required") is True and "default" not in spec[option], option
    passed = yaml.safe_load((ROOT / "roles" / "gpu_validate" / "tasks" / "checks.yml").read_text())[0]
    # the variable check, then the module (plugins/action/role_read.py)
    read = passed["gpunode.provisioning.role_read"]["reads"][0]
    assert read["module"] == "gpunode.provisioning.gpu_validate_checks"
    assert read["args"]["kubelet_dropin_min"] == "{{ __gpu_node_facts_kubelet_dropin_min }}"


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
