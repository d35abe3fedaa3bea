"""The platform data of gpu_validate and security_profiles (issue 40): loaded with the one mechanism
(tasks/set_vars.yml, the first found of gpu_node_facts' __gpu_node_facts_platform_files), once per play by
gpu_node_facts, whose vars/<platform>.yml holds the data of every role on site.yml's no-op path (issue 47); each
platform gets its values."""

from __future__ import annotations

import pytest
import yaml
from conftest import ROOT, platform_file, platform_names

SET_VARS = [
    {
        "name": "Load the platform data",
        "ansible.builtin.include_vars": "{{ lookup('ansible.builtin.first_found', __gpu_node_facts_platform_files) }}",
    }
]
# (distribution, version, os_family): what Ansible reports on each
PLATFORMS = {
    "debian12": ("Debian", "12", "Debian"),
    "debian13": ("Debian", "13", "Debian"),
    "ubuntu2204": ("Ubuntu", "22.04", "Debian"),
    "ubuntu2404": ("Ubuntu", "24.04", "Debian"),
    "rhel9": ("RedHat", "9.6", "RedHat"),
    "rocky9": ("Rocky", "9.6", "RedHat"),
    "alma10": ("AlmaLinux", "10.0", "RedHat"),
    "arch": ("Archlinux", "rolling", "Archlinux"),
}
DEBIAN_FAMILY = {"debian12", "debian13", "ubuntu2204", "ubuntu2404"}
REDHAT_FAMILY = {"rhel9", "rocky9", "alma10"}


def platform_data(role: str, platform: str) -> dict:
    """The values of ``role`` that gpu_node_facts' tasks/set_vars.yml loads on ``platform``: the first of the names
    that exists, its keys of that role."""
    data = yaml.safe_load(platform_file(role, *PLATFORMS[platform]).read_text())
    return platform_names(role, data)


@pytest.mark.parametrize("role", ["gpu_validate", "security_profiles", "gpu_node_facts"])
def test_the_role_loads_its_platform_data_the_one_way(role):
    assert yaml.safe_load((ROOT / "roles" / "gpu_node_facts" / "tasks" / "set_vars.yml").read_text()) == SET_VARS
    # every platform file sets the same names of the role, so no value of another platform is left over
    keys = {
        p.name: set(platform_names(role, yaml.safe_load(p.read_text())))
        for p in (ROOT / "roles" / "gpu_node_facts" / "vars").glob("*.yml")
    }
    keys.pop("main.yml")
    assert len(set(map(frozenset, keys.values()))) == 1, keys


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_doctor_reads_packages_apparmor_and_the_kubelet_env_file_of_the_platform(platform):
    data = platform_data("gpu_validate", platform)
    if platform in DEBIAN_FAMILY:
        assert data == {
            "__gpu_node_facts_validate_package_version_argv": ["dpkg-query", "--show", "--showformat=${Version}"],
        }
    elif platform in REDHAT_FAMILY:
        assert data == {
            "__gpu_node_facts_validate_package_version_argv": [
                "rpm",
                "--query",
                "--queryformat",
                "%{VERSION}-%{RELEASE}",
            ],
        }
    else:
        assert data == {
            "__gpu_node_facts_validate_package_version_argv": [],
        }


@pytest.mark.parametrize("platform", PLATFORMS)
def test_security_profiles_installs_apparmor_only_where_it_confines_containers(platform):
    data = platform_data("security_profiles", platform)
    if platform in DEBIAN_FAMILY:
        assert data == {
            "__gpu_node_facts_security_apparmor_packages": ["apparmor"],
            "__gpu_node_facts_security_apparmor_parser": "/sbin/apparmor_parser",
            "__gpu_node_facts_security_apparmor_service": "apparmor",
            "__gpu_node_facts_security_apparmor_service_link": (
                "/etc/systemd/system/sysinit.target.wants/apparmor.service"
            ),
        }
    else:
        assert data["__gpu_node_facts_security_apparmor_packages"] == []


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_shared_platform_values_apparmor_and_the_kubelet_env_file(platform):
    """Written once, in gpu_node_facts' platform files: the kubelet role, security_profiles and the doctor read them."""
    data = platform_data("gpu_node_facts", platform)
    assert data == {
        "__gpu_node_facts_apparmor_os": platform in DEBIAN_FAMILY,
        "__gpu_node_facts_kubelet_env_file_default": (
            "/etc/sysconfig/kubelet" if platform in REDHAT_FAMILY else "/etc/default/kubelet"
        ),
        # gpu_settings' NVreg_* parameters: the initramfs rebuilt after a modprobe.d change
        "__gpu_node_facts_initramfs_command": (
            ["dracut", "-f"]
            if platform in REDHAT_FAMILY
            else ["update-initramfs", "-u"]
            if platform in DEBIAN_FAMILY
            else []
        ),
    }
    for role in ("kubelet", "gpu_validate", "security_profiles"):
        assert not set(data) & set(platform_data(role, platform)), role
