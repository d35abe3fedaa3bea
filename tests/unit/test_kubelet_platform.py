"""The kubelet role's platform data (issue 40, one mechanism): gpu_node_facts' tasks/set_vars.yml loads the first
found of __gpu_node_facts_platform_files from roles/gpu_node_facts/vars, once per play (issue 47); each platform gets
its KUBELET_EXTRA_ARGS file and the package with getsubids."""

from __future__ import annotations

import pytest
import yaml
from conftest import ROOT, platform_file, platform_names, render_role_value

ROLE = ROOT / "roles" / "kubelet"


def _platform_data(distribution: str, version: str, family: str, role: str = "kubelet") -> dict:
    data = yaml.safe_load(platform_file(role, distribution, version, family).read_text())
    return platform_names(role, data)


@pytest.mark.parametrize(
    ("distribution", "version", "family", "env_file", "package"),
    [
        ("Debian", "12", "Debian", "/etc/default/kubelet", "uidmap"),
        ("Ubuntu", "24.04", "Debian", "/etc/default/kubelet", "uidmap"),
        ("Rocky", "9.5", "RedHat", "/etc/sysconfig/kubelet", "shadow-utils"),
        ("RedHat", "10.0", "RedHat", "/etc/sysconfig/kubelet", "shadow-utils"),
        ("SLES", "15.6", "Suse", "/etc/default/kubelet", "uidmap"),
    ],
)
def test_each_platform_gets_its_env_file_and_getsubids_package(distribution, version, family, env_file, package):
    data = _platform_data(distribution, version, family)
    assert data == {"__gpu_node_facts_kubelet_getsubids_package": package}
    # the env file default is shared with the doctor: gpu_node_facts' platform data
    data.update(_platform_data(distribution, version, family, "gpu_node_facts"))
    assert data["__gpu_node_facts_kubelet_env_file_default"] == env_file
    variables = {"kubelet_env_file": "", **data}
    path = yaml.safe_load((ROLE / "vars/main.yml").read_text())["__kubelet_env_file_path"]
    assert render_role_value(path, variables) == env_file
    assert render_role_value(path, {**variables, "kubelet_env_file": "/etc/kubelet.env"}) == "/etc/kubelet.env"


def test_the_role_loads_no_platform_data_itself_its_dependency_does():
    assert not (ROLE / "tasks/set_vars.yml").exists()
    other = "".join(p.read_text() for p in ROLE.rglob("*.yml"))
    assert "first_found" not in other and "os_family" not in other and "set_vars.yml" not in other
    assert "gpu_node_facts" in yaml.safe_load((ROLE / "meta/main.yml").read_text())["dependencies"]
