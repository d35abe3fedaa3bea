"""plugins/filter/package_versions.py: the toolkit role's package versions, installed and offered, which were Jinja
programs in tasks/packages_apt.yml (now also vars/main.yml) and packages_dnf.yml. The expected values are what those
programs rendered for the same command output (checked with Ansible's Templar when the filters replaced them); the last
test renders the tasks' own expressions."""

from __future__ import annotations

import pytest
import yaml
from conftest import ROOT, load_module, render_role_value

versions = load_module("package_versions", subdir="plugins/filter")
TASKS = ROOT / "roles" / "nvidia_container_toolkit" / "tasks"
MADISON = [
    "nvidia-container-toolkit | 1.18.0-1 | https://nvidia.github.io/libnvidia-container/stable/deb/amd64  Packages",
    "nvidia-container-toolkit | 1.17.8-1 | file:/srv/repo  Packages",
    "libnvidia-container1 |   1.18.0-1 | file:/srv/repo  Packages",
    "N: Unable to locate package nvidia-container-toolkit-base",
]
REPOQUERY = [
    "nvidia-container-toolkit\t1.17.8-1",
    "nvidia-container-toolkit\t1.18.0-1",
    "nvidia-container-toolkit\t1.17.8-1",
    "nvidia-container-toolkit\t1.9.0-1",
    "nvidia-container-toolkit\t1.17.10-1",
    "libnvidia-container1\t1.18.0-1",
    "Last metadata expiration check: 0:01:02 ago",
]
PACKAGES = {
    "nvidia-container-toolkit": [{"version": "1.17.8", "release": "1"}, {"version": "1.18.0", "release": "1"}],
    "libnvidia-container1": [{"version": "1.18.0", "release": "1"}],
    "bash": [{"version": "5.1.8", "release": "9.el9"}],
}
NAMES = [
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
]


def test_dpkg_lines_give_version_and_selection():
    lines = ["nvidia-container-toolkit 1.17.8-1 hold", "libnvidia-container1 1.17.8-1 install"]
    assert versions.dpkg_installed(lines) == {
        "nvidia-container-toolkit": {"version": "1.17.8-1", "selection": "hold"},
        "libnvidia-container1": {"version": "1.17.8-1", "selection": "install"},
    }
    assert versions.dpkg_installed([]) == {}


def test_a_dpkg_line_of_other_fields_is_refused_naming_it():
    with pytest.raises(versions.AnsibleFilterError, match="'a b'"):
        versions.dpkg_installed(["a b"])


def test_madison_gives_the_offered_versions_newest_first():
    assert versions.apt_madison_versions(MADISON) == {
        "nvidia-container-toolkit": ["1.18.0-1", "1.17.8-1"],
        "libnvidia-container1": ["1.18.0-1"],
    }


def test_repoquery_gives_each_version_once_newest_first_by_version_not_text():
    assert versions.dnf_repoquery_versions(REPOQUERY) == {
        "nvidia-container-toolkit": ["1.18.0-1", "1.17.10-1", "1.17.8-1", "1.9.0-1"],
        "libnvidia-container1": ["1.18.0-1"],
    }
    # versions that compare equal keep version_sort | reverse's order: the later one first
    assert versions.dnf_repoquery_versions(["x\t1.0", "x\t1.00"]) == {"x": ["1.00", "1.0"]}


def test_rpm_package_facts_give_the_last_installed_version_of_the_named_packages():
    assert versions.rpm_installed_versions(PACKAGES, NAMES) == {
        "nvidia-container-toolkit": {"version": "1.18.0-1"},
        "libnvidia-container1": {"version": "1.18.0-1"},
    }


def _block_vars(name: str) -> dict:
    return yaml.safe_load((TASKS / name).read_text())[0]["vars"]


def test_the_apt_tasks_expressions_read_the_node_and_madison():
    # the apt read is the first read of tasks/read.yml's role_read (vars/main.yml derives the installed packages)
    role_vars = yaml.safe_load((TASKS.parent / "vars" / "main.yml").read_text())
    variables = {
        **{key: role_vars[key] for key in ("__nvidia_container_toolkit_apt_node", "__nvidia_container_toolkit_dpkg")},
        **_block_vars("packages_apt.yml"),
        "__nvidia_container_toolkit_node": {
            "reads": [{"stdout_lines": ["trusted", "nvidia-container-toolkit 1.17.8-1 hold"]}, {}, {}]
        },
        "__nvidia_container_toolkit_madison": {"stdout_lines": MADISON},
    }
    assert render_role_value("{{ __nvidia_container_toolkit_installed }}", variables) == {
        "nvidia-container-toolkit": {"version": "1.17.8-1", "selection": "hold"}
    }
    assert render_role_value("{{ __nvidia_container_toolkit_available }}", variables) == versions.apt_madison_versions(
        MADISON
    )


def test_the_dnf_tasks_expressions_read_repoquery_and_package_facts():
    variables = {
        **_block_vars("packages_dnf.yml"),
        "__nvidia_container_toolkit_packages": NAMES,
        "__nvidia_container_toolkit_repoquery": {"stdout_lines": REPOQUERY},
        "ansible_facts": {"packages": PACKAGES},
    }
    assert render_role_value("{{ __nvidia_container_toolkit_available }}", variables)["nvidia-container-toolkit"] == [
        "1.18.0-1",
        "1.17.10-1",
        "1.17.8-1",
        "1.9.0-1",
    ]
    assert render_role_value("{{ __nvidia_container_toolkit_installed }}", variables) == {
        "nvidia-container-toolkit": {"version": "1.18.0-1"},
        "libnvidia-container1": {"version": "1.18.0-1"},
    }


# tasks/version.yml's __nvidia_container_toolkit_missing, a Jinja pipeline until commit 233085d (read from git), is
# the filter packages_missing_at: both rendered by Ansible's Templar on the same inputs.
OLD_MISSING = """{{ __nvidia_container_toolkit_packages
   | reject('in', __nvidia_container_toolkit_installed
                  | dict2items | selectattr('value.version', 'equalto', __nvidia_container_toolkit_target)
                  | map(attribute='key') | list)
   | reject('in', __nvidia_container_toolkit_available
                  | dict2items | selectattr('value', 'contains', __nvidia_container_toolkit_target)
                  | map(attribute='key') | list)
   | list }}"""
FOUR = [
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
]
MISSING_CASES = [
    (target, installed, available)
    for target in ["1.17.8-1", "1.17.7-1", ""]
    for installed in [{}, {"libnvidia-container1": {"version": "1.17.7-1"}}, {n: {"version": "1.17.8-1"} for n in FOUR}]
    for available in [{}, {n: ["1.17.8-1", "1.17.7-1"] for n in FOUR[:3]}, {n: ["1.17.7-1"] for n in FOUR}]
]  # 27


@pytest.mark.parametrize(("target", "installed", "available"), MISSING_CASES)
def test_the_missing_packages_are_what_the_jinja_pipeline_found(target, installed, available):
    import yaml

    task = yaml.safe_load((ROOT / "roles" / "nvidia_container_toolkit" / "tasks" / "version.yml").read_text())[1]
    variables = {
        "__nvidia_container_toolkit_packages": FOUR,
        "__nvidia_container_toolkit_target": target,
        "__nvidia_container_toolkit_installed": installed,
        "__nvidia_container_toolkit_available": available,
    }
    new = render_role_value(task["vars"]["__nvidia_container_toolkit_missing"], variables)
    assert new == render_role_value(OLD_MISSING, variables)
