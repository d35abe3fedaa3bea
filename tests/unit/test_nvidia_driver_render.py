"""Render the nvidia_driver role's data the way Ansible does and check the exact results.

The role keeps its platform differences as data: defaults/main.yml, vars/main.yml and one platform
file that tasks/set_vars.yml picks with first_found from gpu_node_facts' __gpu_node_facts_platform_files (its
releases a map by major version inside it, __nvidia_driver_releases). These tests load
the same files in the same order, render them with Ansible's own Templar for each platform, and assert
the package names, module streams, repository URLs and decisions (skip, Secure Boot, fabric manager,
operator mode, reboot) the tasks act on.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import filter_loader, init_plugin_loader
from ansible.template import Templar, trust_as_template
from conftest import load_module

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "nvidia_driver"
LOADER = DataLoader()
# The checks by name (plugins/filter/nvidia_driver_plan.py): the variable check's rules, the preflight's
RULES = {"variable": "__nvidia_driver_variable_rules", "preflight": "__nvidia_driver_preflight_checks"}
# tasks/set_vars.yml: the set_fact of the plan
SET_VARS = yaml.safe_load((ROLE / "tasks" / "set_vars.yml").read_text())[0]["ansible.builtin.set_fact"][
    "__nvidia_driver_plan"
]
role_variables = load_module("role_variables", subdir="plugins/action")
init_plugin_loader()  # the builtin lookups the plan's inputs use (file, first_found, fileglob, vars)
# the filters the old program called by name, which the role now calls through the plan (test_nvidia_driver_plan.py)
filter_loader.add_directory(str(ROOT / "tests" / "fixtures" / "nvidia_driver" / "filter_plugins"))
CUDA = "https://developer.download.nvidia.com/compute/cuda/repos"

PLATFORMS = {
    "ubuntu2204": {
        "distribution": "Ubuntu",
        "distribution_major_version": "22",
        "distribution_version": "22.04",
        "distribution_release": "jammy",
        "os_family": "Debian",
        "kernel": "5.15.0-91-generic",
    },
    "ubuntu2404": {
        "distribution": "Ubuntu",
        "distribution_major_version": "24",
        "distribution_version": "24.04",
        "distribution_release": "noble",
        "os_family": "Debian",
        "kernel": "6.8.0-45-generic",
    },
    "ubuntu2604": {
        "distribution": "Ubuntu",
        "distribution_major_version": "26",
        "distribution_version": "26.04",
        "distribution_release": "resolute",
        "os_family": "Debian",
        "kernel": "7.0.0-44-generic",
    },
    "rocky8": {
        "distribution": "Rocky",
        "distribution_major_version": "8",
        "distribution_version": "8.10",
        "distribution_release": "Green Obsidian",
        "os_family": "RedHat",
        "kernel": "4.18.0-553.el8_10.x86_64",
    },
    "rocky9": {
        "distribution": "Rocky",
        "distribution_major_version": "9",
        "distribution_version": "9.4",
        "distribution_release": "Blue Onyx",
        "os_family": "RedHat",
        "kernel": "5.14.0-427.13.1.el9_4.x86_64",
    },
    "rocky10": {
        "distribution": "Rocky",
        "distribution_major_version": "10",
        "distribution_version": "10.0",
        "distribution_release": "Red Quartz",
        "os_family": "RedHat",
        "kernel": "6.12.0-55.9.1.el10_0.x86_64",
    },
    "alma9": {
        "distribution": "AlmaLinux",
        "distribution_major_version": "9",
        "distribution_version": "9.4",
        "distribution_release": "Seafoam Ocelot",
        "os_family": "RedHat",
        "kernel": "5.14.0-427.13.1.el9_4.x86_64",
    },
    "rhel9": {
        "distribution": "RedHat",
        "distribution_major_version": "9",
        "distribution_version": "9.4",
        "distribution_release": "Plow",
        "os_family": "RedHat",
        "kernel": "5.14.0-427.13.1.el9_4.x86_64",
    },
    "centos9": {
        "distribution": "CentOS",
        "distribution_major_version": "9",
        "distribution_version": "9",
        "distribution_release": "Stream",
        "os_family": "RedHat",
        "kernel": "5.14.0-427.el9.x86_64",
    },
    "rocky7": {
        "distribution": "Rocky",
        "distribution_major_version": "7",
        "distribution_version": "7.9",
        "distribution_release": "",
        "os_family": "RedHat",
        "kernel": "3.10.0-1160.el7.x86_64",
    },
    "debian12": {
        "distribution": "Debian",
        "distribution_major_version": "12",
        "distribution_version": "12.7",
        "distribution_release": "bookworm",
        "os_family": "Debian",
        "kernel": "6.1.0-27-amd64",
    },
    "debian13": {
        "distribution": "Debian",
        "distribution_major_version": "13",
        "distribution_version": "13.1",
        "distribution_release": "trixie",
        "os_family": "Debian",
        "kernel": "6.12.48+deb13-amd64",
    },
    "forky": {
        "distribution": "Debian",
        "distribution_major_version": "n/a",
        "distribution_version": "n/a",
        "distribution_release": "forky",
        "os_family": "Debian",
        "kernel": "6.16.12+deb14-amd64",
    },
    "ubuntu2004": {
        "distribution": "Ubuntu",
        "distribution_major_version": "20",
        "distribution_version": "20.04",
        "distribution_release": "focal",
        "os_family": "Debian",
        "kernel": "5.4.0-200-generic",
    },
    "mint21": {
        "distribution": "Linux Mint",
        "distribution_major_version": "21",
        "distribution_version": "21.3",
        "distribution_release": "virginia",
        "os_family": "Debian",
        "kernel": "5.15.0-91-generic",
    },
    "arch": {
        "distribution": "Archlinux",
        "distribution_major_version": "n/a",
        "distribution_version": "n/a",
        "distribution_release": "n/a",
        "os_family": "Archlinux",
        "kernel": "6.17.1-arch1-1",
    },
}

GPU_NODE = {
    "has_gpu": True,
    "gpu_count": 8,
    "nvswitch_count": 0,
    "driver": {"loaded": False, "version": None},
    "container": False,
    "secure_boot": None,
}


def _load(path: Path) -> dict:
    return LOADER.load_from_file(str(path), trusted_as_template=True) or {}


def _lookup(platform: str, stdout: str) -> dict:
    """The registered result of tasks/install.yml's headers lookup: its command (package_query) and what it printed."""
    role = Role(platform)
    return {
        "rc": 0,
        "cmd": role[
            "__nvidia_driver_running_kernel_headers | gpunode.provisioning.package_query(__nvidia_driver_pkg_mgr)"
        ],
        "stdout": stdout,
    }


class Role:
    """The role's variables for one platform, rendered on demand like Ansible does: the plan
    (plugins/filter/nvidia_driver_plan.py) as tasks/set_vars.yml works it out, and the thin variables that read it. The
    decisions keep the names they had as variables (``role["__nvidia_driver_branch"]``): each is read from the plan
    (``__nvidia_driver_plan.branch``) or the installed packages' view (``__nvidia_driver_installed``)."""

    def __init__(self, platform: str, arch: str = "x86_64", facts: dict | None = None, **variables):
        self.facts = dict(PLATFORMS[platform], architecture=arch, gpu_node=dict(GPU_NODE))
        for key, value in (facts or {}).items():
            if key == "gpu_node":
                self.facts["gpu_node"].update(value)
            else:
                self.facts[key] = value
        public = {k: v for k, v in variables.items() if not k.startswith("__")}
        internal = {k: v for k, v in variables.items() if k.startswith("__")}
        merged = _load(ROLE / "defaults" / "main.yml")
        merged.update(public)
        merged.update(_load(ROOT / "roles" / "gpu_node_facts" / "vars" / "main.yml"))  # the dependency's shared values
        merged.update(_load(ROLE / "vars" / "main.yml"))
        merged.update(ansible_facts=self.facts, role_path=str(ROLE), inventory_hostname="node1")
        # the public variables as a list (the vars file reads meta/argument_specs.yml for them)
        merged["__nvidia_driver_public_variables"] = list(_load(ROLE / "defaults" / "main.yml"))
        templar = Templar(loader=LOADER, variables=merged)
        self.vars_file = self._first_found(templar, "__gpu_node_facts_platform_files")
        merged.update(internal)
        self.internal = internal
        # tasks/set_vars.yml's set_fact: the plan rendered once, a value from then on
        merged["__nvidia_driver_plan"] = Templar(loader=LOADER, variables=merged).template(trust_as_template(SET_VARS))
        self.variables = merged
        self.templar = Templar(loader=LOADER, variables=merged)

    @staticmethod
    def _first_found(templar: Templar, name: str) -> Path | None:
        """Pick the platform file exactly as the role's first_found lookup does (tasks/set_vars.yml)."""
        spec = templar.evaluate_expression(trust_as_template(name))
        for file in spec["files"]:
            for directory in spec["paths"]:
                candidate = Path(directory) / file
                if candidate.is_file():
                    return candidate
        raise AssertionError(f"no platform file found among {spec['files']}")

    def __getitem__(self, name: str):
        from test_nvidia_driver_plan import plan_names  # that module reads this one

        return self.templar.evaluate_expression(trust_as_template(plan_names(name)))

    def condition(self, expression: str) -> bool:
        from test_nvidia_driver_plan import plan_names

        return self.templar.evaluate_conditional(trust_as_template(plan_names(expression)))

    def check(self, name: str, group: str = "preflight") -> bool:
        """Whether one of the role's checks (vars/main.yml __nvidia_driver_<group>_checks) holds on this node."""
        return self[f"{RULES[group]}['{name}']['ok']"] is True

    def variable_errors(self) -> list[str]:
        """What the role_variables task (tasks/main.yml) refuses: the msg of every variable check that is not ok."""
        checks = self.variables["__nvidia_driver_variable_checks"]
        return role_variables.rule_problems(
            checks,
            lambda template: self.templar.template(
                trust_as_template(template) if isinstance(template, str) else template
            ),
        )

    def check_message(self, name: str, group: str = "preflight") -> str:
        """The message a failed check fails the run with, whitespace collapsed as the callback shows it."""
        return " ".join(self[f"{RULES[group]}['{name}']['msg']"].split())


# ---- platform files ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("platform", "vars_file", "family", "known", "supported"),
    [
        ("ubuntu2204", "Ubuntu.yml", "ubuntu", True, True),
        ("ubuntu2404", "Ubuntu.yml", "ubuntu", True, True),
        ("ubuntu2604", "Ubuntu.yml", "ubuntu", True, True),
        ("ubuntu2004", "Ubuntu.yml", "ubuntu", False, False),
        ("rocky8", "RedHat.yml", "el", True, True),
        ("rocky9", "RedHat.yml", "el", True, True),
        ("rocky10", "RedHat.yml", "el", True, True),
        ("alma9", "RedHat.yml", "el", True, True),
        ("rhel9", "RedHat.yml", "el", True, True),
        ("centos9", "RedHat.yml", "el", True, False),
        ("rocky7", "RedHat.yml", "el", False, False),
        ("debian12", "Debian.yml", "debian", True, True),
        ("debian13", "Debian.yml", "debian", True, True),
        ("forky", "Debian.yml", "debian", False, True),
        ("mint21", "Debian.yml", "debian", False, False),
        ("arch", "default.yml", "unsupported", False, False),
    ],
)
def test_platform_file_and_support(platform, vars_file, family, known, supported):
    role = Role(platform)
    assert role.vars_file.name == vars_file
    assert role["__nvidia_driver_family"] == family
    assert role["__nvidia_driver_release_known"] is known
    assert bool(role["__nvidia_driver_supported"]) is supported


# What each platform's one file gives it, as the release files gave before the one mechanism (issue 40): default
# branch, the branches its archive packages, EL's module streams, package manager, pin form, open modules packaged.
PLATFORM_DATA = {
    "debian12": ("580", [], False, "apt", "=", "-*", True),
    "debian13": ("580", [], False, "apt", "=", "-*", True),
    "forky": ("", [], False, "apt", "=", "-*", True),
    "ubuntu2204": ("580", [], False, "apt", "=", "-*", True),
    "ubuntu2404": ("580", [], False, "apt", "=", "-*", True),
    "ubuntu2604": ("580", ["580", "595", "615"], False, "apt", "=", "-*", True),
    "rocky8": ("580", [], True, "dnf", "-", "", True),
    "rocky9": ("580", [], True, "dnf", "-", "", True),
    "alma9": ("580", [], True, "dnf", "-", "", True),
    "rhel9": ("580", [], True, "dnf", "-", "", True),
    "rocky10": ("580", [], False, "dnf", "-", "", True),
    "arch": ("", [], False, "apt", "=", "-*", False),
}


@pytest.mark.parametrize("platform", list(PLATFORM_DATA))
def test_each_platform_gets_its_data_from_its_one_file(platform):
    role = Role(platform)
    default_branch, choices, streams, pkg_mgr, separator, revision, open_available = PLATFORM_DATA[platform]
    assert role["__nvidia_driver_default_branch"] == default_branch
    assert role["__nvidia_driver_branch_choices"] == choices
    assert role["__nvidia_driver_dnf_module_streams"] is streams
    assert role["__nvidia_driver_pkg_mgr"] == pkg_mgr
    assert role["__nvidia_driver_pin_separator"] == separator
    assert role["__nvidia_driver_pin_revision"] == revision
    assert role["__nvidia_driver_open_available"] is open_available


def test_the_platform_files_are_the_one_mechanism():
    """The role loads its platform data only in tasks/set_vars.yml, one task, from gpu_node_facts' file list; no
    release files beside the platform files, no first_found or os_family map anywhere else."""
    tasks = yaml.safe_load((ROLE / "tasks" / "set_vars.yml").read_text())
    found = "lookup('ansible.builtin.first_found', __gpu_node_facts_platform_files)"
    assert [task["name"] for task in tasks] == ["Load the platform data and work out the driver's plan"]
    assert found in tasks[0]["ansible.builtin.set_fact"]["__nvidia_driver_plan"]
    assert sorted(p.name for p in (ROLE / "vars").glob("*.yml")) == [
        "Debian.yml",
        "RedHat.yml",
        "Ubuntu.yml",
        "default.yml",
        "main.yml",
    ]
    for path in [*ROLE.glob("tasks/*.yml"), *ROLE.glob("vars/*.yml"), ROLE / "handlers" / "main.yml"]:
        if path.name != "set_vars.yml":
            assert "first_found" not in path.read_text(), path
            assert "os_family'] ==" not in path.read_text() and "}[ansible_facts" not in path.read_text(), path


def test_the_refusal_names_the_releases_with_a_file_of_their_own():
    """Adding a release adds it to __nvidia_driver_releases of its platform file; the refusal reads them (the filter
    nvidia_driver_releases), no list to keep in step."""
    from ansible.plugins.loader import init_plugin_loader

    init_plugin_loader()  # ansible.builtin.fileglob, as ansible-playbook resolves it
    role = Role("ubuntu2004")
    assert not role.check("platform")
    assert role.check_message("platform") == (
        "The nvidia_driver role supports Debian and the releases its vars/ platform files list:"
        " Debian 12, Debian 13, RedHat 10, RedHat 8, RedHat 9, Ubuntu 22, Ubuntu 24, Ubuntu 26"
        " (RedHat: RHEL, Rocky Linux and AlmaLinux); node1 runs Ubuntu 20.04."
    )


def test_the_releases_filter_reads_each_platform_files_releases(tmp_path):
    releases = load_module("nvidia_driver_platforms", subdir="plugins/filter").nvidia_driver_releases
    files = sorted(str(path) for path in (ROLE / "vars").glob("*.yml"))
    assert releases(files) == [
        "Debian 12",
        "Debian 13",
        "RedHat 10",
        "RedHat 8",
        "RedHat 9",
        "Ubuntu 22",
        "Ubuntu 24",
        "Ubuntu 26",
    ]
    (tmp_path / "Foo.yml").write_text("__nvidia_driver_releases: [1]\n")
    with pytest.raises(AnsibleFilterError, match=r"Foo[.]yml: __nvidia_driver_releases must map a major version"):
        releases([str(tmp_path / "Foo.yml")])


@pytest.mark.parametrize(
    ("platform", "branch", "choices"),
    [
        ("debian12", "580", []),
        ("debian13", "580", []),
        ("forky", "", []),
        ("ubuntu2204", "580", []),
        ("rocky9", "580", []),
    ],
)
def test_default_branch(platform, branch, choices):
    role = Role(platform)
    assert role["__nvidia_driver_branch"] == branch
    assert role["__nvidia_driver_branch_choices"] == choices


def test_branch_comes_from_the_version_when_only_the_version_is_set():
    assert Role("ubuntu2204", nvidia_driver_version="570.195.03")["__nvidia_driver_branch"] == "570"
    assert Role("ubuntu2204", nvidia_driver_branch="575")["__nvidia_driver_branch"] == "575"


# ---- Ubuntu ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variables", "specs", "holds", "version_package"),
    [
        ({}, ["nvidia-driver-580-server"], ["nvidia-driver-580-server"], "nvidia-kernel-common-580-server"),
        (
            {"nvidia_driver_flavour": "open"},
            ["nvidia-driver-580-server-open"],
            ["nvidia-driver-580-server-open"],
            "nvidia-kernel-common-580-server",
        ),
        (
            {"nvidia_driver_ubuntu_packages": "headless"},
            ["nvidia-headless-580-server", "nvidia-utils-580-server"],
            ["nvidia-headless-580-server", "nvidia-utils-580-server"],
            "nvidia-kernel-common-580-server",
        ),
        (
            {
                "nvidia_driver_ubuntu_packages": "headless",
                "nvidia_driver_flavour": "open",
                "nvidia_driver_branch": "570",
            },
            ["nvidia-headless-570-server-open", "nvidia-utils-570-server"],
            ["nvidia-headless-570-server-open", "nvidia-utils-570-server"],
            "nvidia-kernel-common-570-server",
        ),
        (
            {"nvidia_driver_ubuntu_precompiled": True},
            [
                "nvidia-headless-no-dkms-580-server",
                "nvidia-utils-580-server",
                "linux-modules-nvidia-580-server-generic",
            ],
            ["nvidia-headless-no-dkms-580-server", "nvidia-utils-580-server"],
            "nvidia-kernel-common-580-server",
        ),
        (
            {
                "nvidia_driver_ubuntu_precompiled": True,
                "nvidia_driver_flavour": "open",
                "nvidia_driver_ubuntu_kernel_flavour": "generic-hwe-22.04",
            },
            [
                "nvidia-headless-no-dkms-580-server-open",
                "nvidia-utils-580-server",
                "linux-modules-nvidia-580-server-open-generic-hwe-22.04",
            ],
            ["nvidia-headless-no-dkms-580-server-open", "nvidia-utils-580-server"],
            "nvidia-kernel-common-580-server",
        ),
        (
            {"nvidia_driver_version": "580.95.05"},
            ["nvidia-driver-580-server=580.95.05-*"],
            ["nvidia-driver-580-server"],
            "nvidia-kernel-common-580-server",
        ),
        (
            {"nvidia_driver_ubuntu_cuda_repo": True, "nvidia_driver_ubuntu_packages": "headless"},
            ["nvidia-headless-580", "nvidia-utils-580"],
            ["nvidia-headless-580", "nvidia-utils-580"],
            "nvidia-kernel-common-580",
        ),
    ],
)
@pytest.mark.parametrize("platform", ["ubuntu2204", "ubuntu2404", "ubuntu2604"])
def test_ubuntu_packages(platform, variables, specs, holds, version_package):
    role = Role(platform, **variables)
    assert role["__nvidia_driver_package_specs"] == specs
    assert role["__nvidia_driver_hold_packages"] == holds
    assert role["__nvidia_driver_version_package"] == version_package
    assert role["__nvidia_driver_pkg_mgr"] == "apt"
    assert role["__nvidia_driver_module_name"] == "nvidia"


@pytest.mark.parametrize(
    ("platform", "found", "headers"),
    [
        ("ubuntu2204", True, ["linux-headers-5.15.0-91-generic", "linux-headers-generic"]),
        ("ubuntu2204", False, ["linux-headers-generic"]),
        ("ubuntu2404", True, ["linux-headers-6.8.0-45-generic", "linux-headers-generic"]),
    ],
)
def test_ubuntu_headers_follow_the_apt_lookup(platform, found, headers):
    policy = "linux-headers-x:\n  Installed: (none)\n  Candidate: 5.15.0-91.101\n" if found else ""
    role = Role(platform, __nvidia_driver_headers_lookup=_lookup(platform, policy))
    assert role["__nvidia_driver_kernel_headers_packages"] == headers


def test_ubuntu_headers_without_a_candidate_fall_back_to_the_metapackage():
    policy = "linux-headers-x:\n  Installed: (none)\n  Candidate: (none)\n"
    role = Role("ubuntu2204", __nvidia_driver_headers_lookup=_lookup("ubuntu2204", policy))
    assert role["__nvidia_driver_kernel_headers_packages"] == ["linux-headers-generic"]


def test_ubuntu_precompiled_needs_no_headers_and_no_mok_key():
    role = Role("ubuntu2204", facts={"gpu_node": {"secure_boot": True}}, nvidia_driver_ubuntu_precompiled=True)
    assert role["__nvidia_driver_builds_modules"] is False
    assert role["__nvidia_driver_kernel_headers_packages"] == []
    assert role["__nvidia_driver_signs_modules"] is False


@pytest.mark.parametrize(
    ("platform", "arch", "keyring", "source_file"),
    [
        (
            "ubuntu2204",
            "x86_64",
            f"{CUDA}/ubuntu2204/x86_64/cuda-keyring_1.1-1_all.deb",
            "/etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list",
        ),
        (
            "ubuntu2404",
            "x86_64",
            f"{CUDA}/ubuntu2404/x86_64/cuda-keyring_1.1-1_all.deb",
            "/etc/apt/sources.list.d/cuda-ubuntu2404-x86_64.list",
        ),
        (
            "ubuntu2404",
            "aarch64",
            f"{CUDA}/ubuntu2404/sbsa/cuda-keyring_1.1-1_all.deb",
            "/etc/apt/sources.list.d/cuda-ubuntu2404-sbsa.list",
        ),
    ],
)
def test_ubuntu_cuda_repository(platform, arch, keyring, source_file):
    role = Role(platform, arch=arch, nvidia_driver_ubuntu_cuda_repo=True)
    assert role["__nvidia_driver_cuda_keyring_url"] == keyring
    assert role["__nvidia_driver_cuda_source_file"] == source_file


def test_cuda_repository_mirror():
    role = Role("ubuntu2204", nvidia_driver_cuda_repo_url="http://mirror.example.com/cuda")
    assert role["__nvidia_driver_cuda_keyring_url"] == (
        "http://mirror.example.com/cuda/ubuntu2204/x86_64/cuda-keyring_1.1-1_all.deb"
    )
    assert role["__nvidia_driver_official_cuda_repo_url"] == CUDA


@pytest.mark.parametrize(
    ("variables", "ok"),
    [
        ({}, True),
        ({"nvidia_driver_branch": "595"}, True),
        ({"nvidia_driver_version": "615.71.09"}, True),
        ({"nvidia_driver_version": "580.178.04"}, True),
        # transitional in resolute: nvidia-driver-535-server installs 580.178.04, -590- installs 595
        ({"nvidia_driver_branch": "535"}, False),
        ({"nvidia_driver_branch": "570"}, False),
        ({"nvidia_driver_branch": "590"}, False),
        ({"nvidia_driver_branch": "610"}, False),  # no -server packages
        ({"nvidia_driver_branch": "535", "nvidia_driver_ubuntu_cuda_repo": True}, True),  # not checked there
    ],
)
def test_ubuntu_2604_branches_its_archive_packages(variables, ok):
    """Ubuntu 26.04 (resolute): its archive's real branches, from its Packages indexes (2026-11-28)."""
    role = Role("ubuntu2604", **variables)
    assert role.check("branch_packaged") is ok
    if not ok:
        assert "Ubuntu 26 packages only the NVIDIA 580, 595, 615 driver" in role.check_message("branch_packaged")


def test_ubuntu_2604_precompiled_fabric_manager_and_imex():
    """The names resolute's archive has: linux-modules-nvidia-580-server-open-generic (kernel 7.0.0-44),
    nvidia-fabricmanager-580 and nvidia-imex-580 580.178.04, all at the driver's version."""
    role = Role(
        "ubuntu2604",
        nvidia_driver_ubuntu_precompiled=True,
        nvidia_driver_flavour="open",
        nvidia_driver_version="580.178.04",
        nvidia_driver_imex="dra",
        facts={"gpu_node": {"nvswitch_count": 4}},
    )
    assert role["__nvidia_driver_package_specs"] == [
        "nvidia-headless-no-dkms-580-server-open=580.178.04-*",
        "nvidia-utils-580-server=580.178.04-*",
        "linux-modules-nvidia-580-server-open-generic",
    ]
    assert role["__nvidia_driver_fabricmanager_spec"] == "nvidia-fabricmanager-580=580.178.04-*"
    assert role["__nvidia_driver_imex_spec"] == "nvidia-imex-580=580.178.04-*"
    assert role["__nvidia_driver_version_package"] == "nvidia-kernel-common-580-server"
    assert Role("ubuntu2604", arch="aarch64", nvidia_driver_ubuntu_cuda_repo=True)[
        "__nvidia_driver_cuda_keyring_url"
    ] == (f"{CUDA}/ubuntu2604/sbsa/cuda-keyring_1.1-1_all.deb")


# ---- RHEL, Rocky Linux, AlmaLinux ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("platform", "variables", "streams", "stream", "specs"),
    [
        ("rocky8", {}, True, "580-dkms", ["nvidia-driver-cuda", "kmod-nvidia-latest-dkms", "nvidia-persistenced"]),
        ("rocky9", {}, True, "580-dkms", ["nvidia-driver-cuda", "kmod-nvidia-latest-dkms", "nvidia-persistenced"]),
        (
            "rocky9",
            {"nvidia_driver_flavour": "open"},
            True,
            "580-open",
            ["nvidia-driver-cuda", "kmod-nvidia-open-dkms", "nvidia-persistenced"],
        ),
        (
            "rocky9",
            {"nvidia_driver_version": "570.195.03"},
            True,
            "570-dkms",
            [
                "nvidia-driver-cuda-570.195.03",
                "kmod-nvidia-latest-dkms-570.195.03",
                "nvidia-persistenced-570.195.03",
            ],
        ),
        (
            "rocky10",
            {},
            False,
            "580-dkms",
            ["nvidia-driver-cuda-580.*", "kmod-nvidia-latest-dkms-580.*", "nvidia-persistenced-580.*"],
        ),
        (
            "rocky10",
            {"nvidia_driver_flavour": "open", "nvidia_driver_persistenced": False},
            False,
            "580-open",
            ["nvidia-driver-cuda-580.*", "kmod-nvidia-open-dkms-580.*"],
        ),
        (
            "rocky10",
            {"nvidia_driver_version": "580.95.05", "nvidia_driver_flavour": "open"},
            False,
            "580-open",
            ["nvidia-driver-cuda-580.95.05", "kmod-nvidia-open-dkms-580.95.05", "nvidia-persistenced-580.95.05"],
        ),
    ],
)
def test_el_packages_and_module_streams(platform, variables, streams, stream, specs):
    role = Role(platform, **variables)
    assert bool(role["__nvidia_driver_dnf_module_streams"]) is streams
    assert role["__nvidia_driver_dnf_module_stream"] == stream
    assert role["__nvidia_driver_package_specs"] == specs
    assert role["__nvidia_driver_pkg_mgr"] == "dnf"
    assert role["__nvidia_driver_hold_packages"] == [re.sub(r"-(580|570)\..*$", "", spec) for spec in specs]


def test_el_module_stream_regex_reads_dnf_output():
    regex = Role("rocky9")["__nvidia_driver_dnf_module_enabled_regex"]
    listing = (
        "CUDA and drivers from NVIDIA\n"
        "Name          Stream      Profiles                   Summary\n"
        "nvidia-driver 580-dkms [e] default [d], fm, ks, src  Nvidia driver for 580-dkms branch\n"
    )
    assert re.search(regex, listing)
    assert not re.search(regex, listing.replace("580-dkms [e]", "570-dkms [e]"))
    assert re.search(regex, listing.replace("580-dkms [e]", "580-dkms [d][e]"))
    assert not re.search(regex, listing.replace("580-dkms [e]", "580-dkms"))


@pytest.mark.parametrize(
    ("platform", "arch", "repo", "source_file", "epel", "key", "crb"),
    [
        (
            "rocky8",
            "x86_64",
            f"{CUDA}/rhel8/x86_64/cuda-rhel8.repo",
            "/etc/yum.repos.d/cuda-rhel8.repo",
            "https://dl.fedoraproject.org/pub/epel/epel-release-latest-8.noarch.rpm",
            "https://dl.fedoraproject.org/pub/epel/RPM-GPG-KEY-EPEL-8",
            "powertools",
        ),
        (
            "rocky9",
            "x86_64",
            f"{CUDA}/rhel9/x86_64/cuda-rhel9.repo",
            "/etc/yum.repos.d/cuda-rhel9.repo",
            "https://dl.fedoraproject.org/pub/epel/epel-release-latest-9.noarch.rpm",
            "https://dl.fedoraproject.org/pub/epel/RPM-GPG-KEY-EPEL-9",
            "crb",
        ),
        (
            "rocky10",
            "aarch64",
            f"{CUDA}/rhel10/sbsa/cuda-rhel10.repo",
            "/etc/yum.repos.d/cuda-rhel10.repo",
            "https://dl.fedoraproject.org/pub/epel/epel-release-latest-10.noarch.rpm",
            "https://dl.fedoraproject.org/pub/epel/RPM-GPG-KEY-EPEL-10",
            "crb",
        ),
        (
            "alma9",
            "x86_64",
            f"{CUDA}/rhel9/x86_64/cuda-rhel9.repo",
            "/etc/yum.repos.d/cuda-rhel9.repo",
            "https://dl.fedoraproject.org/pub/epel/epel-release-latest-9.noarch.rpm",
            "https://dl.fedoraproject.org/pub/epel/RPM-GPG-KEY-EPEL-9",
            "crb",
        ),
        (
            "rhel9",
            "x86_64",
            f"{CUDA}/rhel9/x86_64/cuda-rhel9.repo",
            "/etc/yum.repos.d/cuda-rhel9.repo",
            "https://dl.fedoraproject.org/pub/epel/epel-release-latest-9.noarch.rpm",
            "https://dl.fedoraproject.org/pub/epel/RPM-GPG-KEY-EPEL-9",
            "codeready-builder-for-rhel-9-x86_64-rpms",
        ),
    ],
)
def test_el_repositories(platform, arch, repo, source_file, epel, key, crb):
    role = Role(platform, arch=arch)
    assert role["__nvidia_driver_cuda_repo_file_url"] == repo
    assert role["__nvidia_driver_cuda_source_file"] == source_file
    assert role["__nvidia_driver_epel_release_url"] == epel
    assert role["__nvidia_driver_epel_gpg_key_url"] == key
    assert role["__nvidia_driver_crb_repo"] == crb


def test_el_mirrors():
    role = Role(
        "rocky9",
        nvidia_driver_cuda_repo_url="https://mirror.example.com/cuda",
        nvidia_driver_epel_url="https://mirror.example.com/epel",
    )
    assert role["__nvidia_driver_cuda_repo_file_url"] == "https://mirror.example.com/cuda/rhel9/x86_64/cuda-rhel9.repo"
    assert (
        role["__nvidia_driver_epel_release_url"] == "https://mirror.example.com/epel/epel-release-latest-9.noarch.rpm"
    )


@pytest.mark.parametrize(
    ("answer", "headers"),
    [
        ("5.14.0\n", ["kernel-devel-5.14.0-427.13.1.el9_4.x86_64", "kernel-devel"]),
        ("", ["kernel-devel"]),
    ],
)
def test_el_headers_follow_the_dnf_lookup(answer, headers):
    role = Role("rocky9", __nvidia_driver_headers_lookup=_lookup("rocky9", answer))
    assert role["__nvidia_driver_kernel_headers_packages"] == headers


def test_el_fabric_manager_gets_the_installed_driver_version():
    role = Role(
        "rocky9",
        facts={
            "gpu_node": {"nvswitch_count": 4},
            "packages": {"kmod-nvidia-latest-dkms": [{"version": "580.95.05", "release": "1.el9"}]},
        },
    )
    assert role["__nvidia_driver_fabricmanager_enabled"] is True
    assert role["__nvidia_driver_fabricmanager_spec"] == "nvidia-fabric-manager-580.95.05"
    assert role["__nvidia_driver_hold_packages"] == [
        "nvidia-driver-cuda",
        "kmod-nvidia-latest-dkms",
        "nvidia-persistenced",
        "nvidia-fabric-manager",
    ]
    assert role["__nvidia_driver_initramfs_command"] == ["dracut", "-f"]
    assert role["__nvidia_driver_initramfs_tool"] == "/usr/bin/dracut"


# ---- Debian ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("platform", "variables", "specs", "holds"),
    [
        (
            "debian12",
            {},
            [
                "nvidia-driver",
                "nvidia-kernel-dkms",
                "firmware-nvidia-gsp",
                "firmware-misc-nonfree",
                "nvidia-persistenced",
            ],
            ["nvidia-driver", "nvidia-kernel-dkms", "firmware-nvidia-gsp"],
        ),
        (
            "debian12",
            {"nvidia_driver_flavour": "open", "nvidia_driver_persistenced": False},
            ["nvidia-driver", "nvidia-open-kernel-dkms", "firmware-nvidia-gsp", "firmware-misc-nonfree"],
            ["nvidia-driver", "nvidia-open-kernel-dkms", "firmware-nvidia-gsp"],
        ),
        (
            "debian12",
            {"nvidia_driver_version": "535.216.01"},
            [
                "nvidia-driver=535.216.01-*",
                "nvidia-kernel-dkms=535.216.01-*",
                "firmware-nvidia-gsp=535.216.01-*",
                "firmware-misc-nonfree",
                "nvidia-persistenced",
            ],
            ["nvidia-driver", "nvidia-kernel-dkms", "firmware-nvidia-gsp"],
        ),
        (
            "debian13",
            {"nvidia_driver_flavour": "open"},
            [
                "nvidia-driver",
                "nvidia-open-kernel-dkms",
                "firmware-nvidia-gsp",
                "firmware-misc-nonfree",
                "nvidia-persistenced",
            ],
            ["nvidia-driver", "nvidia-open-kernel-dkms", "firmware-nvidia-gsp"],
        ),
    ],
)
def test_debian_archive_packages(platform, variables, specs, holds):
    role = Role(platform, nvidia_driver_debian_cuda_repo=False, **variables)
    assert role["__nvidia_driver_package_specs"] == specs
    assert role["__nvidia_driver_hold_packages"] == holds
    assert role["__nvidia_driver_fabricmanager_package"] == ""


CUDA_KEY = "EB693B3035CD5710E231E123A4B469963BF863CC"


@pytest.mark.parametrize(
    ("platform", "variables", "specs", "holds", "module"),
    [
        (
            "debian12",
            {},
            ["nvidia-driver-cuda=580.*", "nvidia-kernel-dkms=580.*", "nvidia-persistenced=580.*"],
            ["nvidia-driver-cuda", "nvidia-kernel-dkms", "nvidia-persistenced"],
            "nvidia",
        ),
        (
            "debian13",
            {"nvidia_driver_flavour": "open", "nvidia_driver_persistenced": False},
            ["nvidia-driver-cuda=580.*", "nvidia-kernel-open-dkms=580.*"],
            ["nvidia-driver-cuda", "nvidia-kernel-open-dkms"],
            "nvidia",
        ),
        (
            "debian13",
            {"nvidia_driver_version": "595.58.03", "nvidia_driver_flavour": "open"},
            [
                "nvidia-driver-cuda=595.58.03-*",
                "nvidia-kernel-open-dkms=595.58.03-*",
                "nvidia-persistenced=595.58.03-*",
            ],
            ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-persistenced"],
            "nvidia",
        ),
        (
            "debian12",
            {"nvidia_driver_branch": "595"},
            ["nvidia-driver-cuda=595.*", "nvidia-kernel-dkms=595.*", "nvidia-persistenced=595.*"],
            ["nvidia-driver-cuda", "nvidia-kernel-dkms", "nvidia-persistenced"],
            "nvidia",
        ),
        (
            "debian12",
            {"nvidia_driver_debian_cuda_repo": False, "nvidia_driver_flavour": "open"},
            [
                "nvidia-driver",
                "nvidia-open-kernel-dkms",
                "firmware-nvidia-gsp",
                "firmware-misc-nonfree",
                "nvidia-persistenced",
            ],
            ["nvidia-driver", "nvidia-open-kernel-dkms", "firmware-nvidia-gsp"],
            "nvidia-current-open",
        ),
    ],
)
def test_debian_cuda_repository_packages(platform, variables, specs, holds, module):
    """NVIDIA's CUDA repository (the default on Debian 12 and 13): the compute-only packages, pinned to the branch
    (every branch is in one suite) or to nvidia_driver_version, and held; the archive's names without it."""
    role = Role(platform, **variables)
    assert role["__nvidia_driver_package_specs"] == specs
    assert role["__nvidia_driver_hold_packages"] == holds
    assert role["__nvidia_driver_module_name"] == module
    assert role["__nvidia_driver_version_package"] == holds[1]


def test_debian_cuda_repository_takes_any_branch_the_archive_one():
    assert Role("debian12", nvidia_driver_branch="595").check("branch_packaged")
    archive = Role("debian12", nvidia_driver_debian_cuda_repo=False, nvidia_driver_branch="580")
    assert not archive.check("branch_packaged")
    assert "set nvidia_driver_debian_cuda_repo to true" in archive.check_message("branch_packaged")
    # a Debian release without a CUDA repository keeps its archive
    assert Role("forky")["__nvidia_driver_debian_cuda"] is False


@pytest.mark.parametrize(
    ("platform", "arch", "variables", "uri"),
    [
        ("debian12", "x86_64", {}, f"{CUDA}/debian12/x86_64/"),
        ("debian13", "aarch64", {}, f"{CUDA}/debian13/sbsa/"),
        (
            "debian13",
            "x86_64",
            {"nvidia_driver_cuda_repo_url": "http://127.0.0.1:8766/cuda/"},
            "http://127.0.0.1:8766/cuda/debian13/x86_64/",
        ),
    ],
)
def test_debian_cuda_repository_source_and_key(platform, arch, variables, uri):
    """One variable (nvidia_driver_cuda_repo_url) moves the source and the key to a mirror; the key is the
    repository's own signed-by keyring."""
    role = Role(platform, arch=arch, **variables)
    assert role["__nvidia_driver_cuda_apt_uri"] == uri
    assert role["__nvidia_driver_cuda_key_url"] == uri + "3bf863cc.pub"
    assert role["__nvidia_driver_cuda_source_file"] == "/etc/apt/sources.list.d/nvidia-driver-cuda.list"
    assert role["__nvidia_driver_cuda_keyring_path"] == "/usr/share/keyrings/nvidia-driver-cuda-keyring.gpg"
    assert role["__nvidia_driver_cuda_fingerprint"] == CUDA_KEY


def _probe(stdout: str, rc: int = 0) -> dict:
    return {"__nvidia_driver_cuda_probe": {"rc": rc, "stdout_lines": stdout.splitlines()}}


@pytest.mark.parametrize(
    ("stdout", "rc", "problem"),
    [
        (
            f"fpr:{CUDA_KEY}\nHit:1 http://127.0.0.1:8766/cuda/debian13/x86_64  InRelease\nReading package lists...",
            0,
            "",
        ),
        (
            "fpr:0123456789ABCDEF0123456789ABCDEF01234567\nHit:1 x InRelease",
            0,
            "has the fingerprint(s) 0123456789ABCDEF",
        ),
        (f"fpr:{CUDA_KEY}\nfpr:0123456789ABCDEF0123456789ABCDEF01234567", 0, "expects exactly EB693B30"),
        ("gpg: no valid OpenPGP data found.", 2, "has no OpenPGP key"),
        (
            f"fpr:{CUDA_KEY}\nErr:1 http://m/debian13/x86_64  InRelease\n  The following signatures couldn't be"
            " verified"
            "\nW: GPG error: http://m/debian13/x86_64  InRelease: NO_PUBKEY 1234",
            0,
            "apt refused NVIDIA's CUDA repository",
        ),
        (f"fpr:{CUDA_KEY}\nE: The repository 'http://m/debian13/x86_64  Release' is not signed.", 100, "is not signed"),
    ],
)
def test_debian_cuda_repository_key_and_signature_checks(stdout, rc, problem):
    """tasks/repository_debian_cuda.yml refuses (nothing written) unless the key file holds exactly the expected key and
    apt accepts the repository's signature with it."""
    text = " ".join((Role("debian13", **_probe(stdout, rc))["__nvidia_driver_cuda_probe_problem"] or "").split())
    if problem:
        assert problem in text
        assert "Nothing was written" in text
    else:
        assert text == ""


def test_debian_cuda_repository_refusal_task_renders_a_string_when_trusted():
    """The assert's fail_msg must be a string even when the problem renders to nothing (Ansible refuses None)."""
    tasks = yaml.safe_load((ROLE / "tasks" / "repository_debian_cuda.yml").read_text())
    block = next(task for task in tasks if "block" in task)["block"]
    assert_task = next(task for task in block if "ansible.builtin.assert" in task)["ansible.builtin.assert"]
    role = Role("debian13", **_probe(f"fpr:{CUDA_KEY}\nHit:1 x InRelease", 0))
    assert role.templar.template(trust_as_template(assert_task["fail_msg"])) == ""
    assert role.condition(assert_task["that"])


def test_debian_cuda_repository_fingerprint_must_be_a_fingerprint():
    assert (
        Role(
            "debian12", nvidia_driver_cuda_repo_key_fingerprint="eb69 3b30 35cd 5710 e231 e123 a4b4 6996 3bf8 63cc"
        ).variable_errors()
        == []
    )
    (error,) = Role("debian12", nvidia_driver_cuda_repo_key_fingerprint="3bf863cc").variable_errors()
    assert "nvidia_driver_cuda_repo_key_fingerprint" in error


@pytest.mark.parametrize(
    ("platform", "suites"),
    [
        ("debian12", ["bookworm", "bookworm-updates", "bookworm-security", "bookworm-backports"]),
        ("debian13", ["trixie", "trixie-updates", "trixie-security", "trixie-backports"]),
    ],
)
def test_debian_apt_components_and_suites(platform, suites):
    role = Role(platform)
    assert role["__nvidia_driver_apt_suites"] == suites
    assert role["__nvidia_driver_apt_components"] == ["contrib", "non-free", "non-free-firmware"]
    assert role["nvidia_driver_apt_source_files"] == [
        "/etc/apt/sources.list",
        "/etc/apt/sources.list.d/debian.sources",
    ]


@pytest.mark.parametrize(
    ("platform", "arch", "found", "headers"),
    [
        ("debian12", "x86_64", True, ["linux-headers-6.1.0-27-amd64", "linux-headers-amd64"]),
        ("debian12", "x86_64", False, ["linux-headers-amd64"]),
        ("debian13", "aarch64", False, ["linux-headers-arm64"]),
        ("debian13", "x86_64", True, ["linux-headers-6.12.48+deb13-amd64", "linux-headers-amd64"]),
    ],
)
def test_debian_headers(platform, arch, found, headers):
    policy = "x:\n  Installed: (none)\n  Candidate: 6.1.112-1\n" if found else ""
    role = Role(platform, arch=arch, __nvidia_driver_headers_lookup=_lookup(platform, policy))
    assert role["__nvidia_driver_kernel_headers_packages"] == headers


def test_named_kernel_headers_replace_the_derived_ones():
    """What molecule does in a container: DKMS builds for the Debian kernel whose headers it installs."""
    role = Role("debian12", nvidia_driver_kernel_headers=["linux-headers-amd64"])
    assert role["__nvidia_driver_kernel_headers_packages"] == ["linux-headers-amd64"]


@pytest.mark.parametrize(("flavour", "module"), [("proprietary", "nvidia-current"), ("open", "nvidia-current-open")])
def test_debian_module_name(flavour, module):
    role = Role("debian13", nvidia_driver_debian_cuda_repo=False, nvidia_driver_flavour=flavour)
    assert role["__nvidia_driver_module_name"] == module
    assert role["__nvidia_driver_initramfs_command"] == ["update-initramfs", "-u"]


# ---- decisions -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("has_gpu", "force", "skip"),
    [(True, False, False), (False, False, True), (False, True, False), (True, True, False)],
)
def test_nodes_without_gpu_are_skipped_unless_forced(has_gpu, force, skip):
    role = Role("debian12", facts={"gpu_node": {"has_gpu": has_gpu}}, nvidia_driver_force=force)
    assert role["__nvidia_driver_skip"] is skip


@pytest.mark.parametrize(
    ("platform", "secure_boot", "variables", "signs"),
    [
        ("rocky9", True, {}, True),
        ("debian12", True, {}, True),
        ("ubuntu2404", True, {}, True),
        ("ubuntu2404", True, {"nvidia_driver_ubuntu_precompiled": True}, False),
        ("debian12", True, {"nvidia_driver_managed_by": "operator"}, False),
        ("debian12", False, {}, False),
        ("debian12", None, {}, False),
    ],
)
def test_dkms_signs_the_modules_under_secure_boot(platform, secure_boot, variables, signs):
    role = Role(platform, facts={"gpu_node": {"secure_boot": secure_boot}}, **variables)
    assert role["__nvidia_driver_signs_modules"] is signs


@pytest.mark.parametrize(
    ("platform", "variables", "key", "cert"),
    [
        # where each distribution's dkms looks when framework.conf names no key (checked in dkms 3.0.10 and 3.0.11)
        ("debian12", {}, "/var/lib/dkms/mok.key", "/var/lib/dkms/mok.pub"),
        ("rocky9", {}, "/var/lib/dkms/mok.key", "/var/lib/dkms/mok.pub"),
        ("ubuntu2404", {}, "/var/lib/shim-signed/mok/MOK.priv", "/var/lib/shim-signed/mok/MOK.der"),
        (
            "ubuntu2404",
            {"nvidia_driver_mok_key": "/root/mok/signing.key", "nvidia_driver_mok_cert": "/root/mok/signing.der"},
            "/root/mok/signing.key",
            "/root/mok/signing.der",
        ),
    ],
)
def test_mok_paths(platform, variables, key, cert):
    role = Role(platform, **variables)
    assert (role["__nvidia_driver_mok_key_path"], role["__nvidia_driver_mok_cert_path"]) == (key, cert)


@pytest.mark.parametrize(
    ("probe", "state"),
    [
        # the preflight's probe prints what mokutil --test-key said, then "pending" when --list-new shows the cert
        ("/var/lib/dkms/mok.pub is already enrolled\n", "enrolled"),
        ("/var/lib/dkms/mok.pub is not enrolled\npending\n", "pending"),
        ("/var/lib/dkms/mok.pub is already in the enrollment request\npending\n", "pending"),
        ("/var/lib/dkms/mok.pub is not enrolled\n", "absent"),
        ("no certificate at /var/lib/dkms/mok.pub\n", "absent"),
        ("no mokutil or openssl\n", "absent"),
    ],
)
def test_mok_enrollment_state_from_the_probe(probe, state):
    role = Role("debian12", __nvidia_driver_mok_probe={"stdout": probe})
    assert role["__nvidia_driver_mok_state"] == state


@pytest.mark.parametrize(
    ("registered", "queue"),
    [
        ({"__nvidia_driver_mok_probe": {"stdout": "x is already enrolled"}}, False),
        ({"__nvidia_driver_mok_probe": {"stdout": "x is not enrolled\npending"}}, False),
        ({"__nvidia_driver_mok_probe": {"stdout": "no certificate at x"}}, True),
        # a certificate written or created in this run is new to the firmware, whatever the probe saw before
        (
            {
                "__nvidia_driver_mok_probe": {"stdout": "x is already enrolled"},
                "__nvidia_driver_mok_cert_written": {"changed": True},
            },
            True,
        ),
        (
            {
                "__nvidia_driver_mok_probe": {"stdout": "x is not enrolled\npending"},
                "__nvidia_driver_mok_created": {"changed": True},
            },
            True,
        ),
    ],
)
def test_the_mok_is_queued_only_when_mokutil_does_not_know_it(registered, queue):
    role = Role("debian12", **registered)
    assert role["__nvidia_driver_mok_queue"] is queue


@pytest.mark.parametrize(
    ("platform", "variables", "packages"),
    [
        ("debian12", {}, ["linux-image-amd64", "linux-headers-amd64"]),
        ("ubuntu2404", {}, ["linux-generic", "linux-image-generic", "linux-headers-generic"]),
        (
            "ubuntu2204",
            {"nvidia_driver_ubuntu_kernel_flavour": "generic-hwe-22.04"},
            ["linux-generic-hwe-22.04", "linux-image-generic-hwe-22.04", "linux-headers-generic-hwe-22.04"],
        ),
        ("rocky9", {}, ["kernel", "kernel-core", "kernel-devel"]),
    ],
)
def test_kernel_hold_packages(platform, variables, packages):
    assert Role(platform, **variables)["__nvidia_driver_kernel_hold_packages"] == packages


def test_only_installed_kernel_packages_are_held():
    role = Role("debian12", facts={"packages": {"linux-headers-amd64": [{"version": "6.1.158-1"}]}})
    assert role["__nvidia_driver_kernel_hold_installed"] == ["linux-headers-amd64"]


@pytest.mark.parametrize(
    ("hold", "recorded", "released"),
    [
        (True, None, []),
        (True, ["linux-image-amd64", "linux-headers-amd64"], ["linux-image-amd64"]),  # no longer installed
        (False, ["linux-headers-amd64"], ["linux-headers-amd64"]),
        (False, None, []),
    ],
)
def test_turning_the_kernel_hold_off_releases_what_the_role_held(hold, recorded, released):
    before = {"content": base64.b64encode(json.dumps(recorded).encode()).decode()} if recorded else {"failed": True}
    role = Role(
        "debian12",
        facts={"packages": {"linux-headers-amd64": [{"version": "6.1.158-1"}]}},
        nvidia_driver_hold_kernel=hold,
        __nvidia_driver_kernel_hold_before=before,
    )
    assert role["__nvidia_driver_kernel_released"] == released


@pytest.mark.parametrize(
    ("setting", "nvswitches", "enabled"),
    [("auto", 0, False), ("auto", 6, True), ("always", 0, True), ("never", 6, False)],
)
def test_fabric_manager_follows_the_nvswitches(setting, nvswitches, enabled):
    role = Role(
        "ubuntu2204",
        facts={"gpu_node": {"nvswitch_count": nvswitches}},
        nvidia_driver_fabricmanager=setting,
        nvidia_driver_version="580.95.05",
    )
    assert role["__nvidia_driver_fabricmanager_enabled"] is enabled
    assert role["__nvidia_driver_fabricmanager_spec"] == "nvidia-fabricmanager-580=580.95.05-*"
    expected_holds = ["nvidia-driver-580-server"] + (["nvidia-fabricmanager-580"] if enabled else [])
    assert role["__nvidia_driver_hold_packages"] == expected_holds


def test_operator_mode_finds_host_driver_packages_only():
    packages = {
        name: [{"version": "1"}]
        for name in (
            "nvidia-driver-580-server",
            "nvidia-dkms-580-server",
            "linux-modules-nvidia-580-server-generic",
            "kmod-nvidia-open-dkms",
            "nvidia-container-toolkit",
            "libnvidia-container1",
            "nvidia-fabricmanager-580",
            "bash",
        )
    }
    role = Role("ubuntu2204", facts={"packages": packages}, nvidia_driver_managed_by="operator")
    assert role["__nvidia_driver_host_mode"] is False
    assert role["__nvidia_driver_builds_modules"] is False
    assert role["__nvidia_driver_host_packages_found"] == [
        "kmod-nvidia-open-dkms",
        "linux-modules-nvidia-580-server-generic",
        "nvidia-dkms-580-server",
        "nvidia-driver-580-server",
    ]


@pytest.mark.parametrize(
    ("platform", "installed", "loaded", "expected_version", "required"),
    [
        ("debian12", "535.216.01-1~deb12u1", None, "535.216.01", True),
        ("debian12", "535.216.01-1~deb12u1", "535.216.01", "535.216.01", False),
        ("ubuntu2204", "580.95.05-0ubuntu0.22.04.2", "570.172.08", "580.95.05", True),
        ("rocky9", "3:580.95.05", "580.95.05", "580.95.05", False),
        ("rocky9", None, None, "", False),
    ],
)
def test_reboot_only_when_the_installed_driver_is_not_the_loaded_one(
    platform, installed, loaded, expected_version, required
):
    probe = Role(platform)
    packages = {} if installed is None else {probe["__nvidia_driver_version_package"]: [{"version": installed}]}
    role = Role(
        platform,
        facts={"packages": packages, "gpu_node": {"driver": {"loaded": loaded is not None, "version": loaded}}},
    )
    assert role["__nvidia_driver_installed_version"] == expected_version
    assert role["__nvidia_driver_reboot_required"] is required


@pytest.mark.parametrize(
    ("variables", "container", "blocker"),
    [
        ({}, False, ""),
        ({"nvidia_driver_reboot": "never"}, False, "nvidia_driver_reboot is never"),
        ({}, True, "the node is a container"),
        ({"ansible_connection": "local"}, False, "the play runs over a local connection"),
        ({"ansible_connection": "ansible.builtin.local"}, False, "the play runs over a local connection"),
        ({"ansible_connection": "ssh"}, False, ""),
    ],
)
def test_reboot_blockers(variables, container, blocker):
    role = Role("debian12", facts={"gpu_node": {"container": container}}, **variables)
    assert role["__nvidia_driver_reboot_blocker"] == blocker


@pytest.mark.parametrize(
    ("loaded", "result", "start"), [(True, {}, True), (True, {"changed": True}, False), (False, {}, False)]
)
def test_services_start_only_with_a_loaded_unchanged_driver(loaded, result, start):
    role = Role(
        "debian12",
        facts={"gpu_node": {"driver": {"loaded": loaded, "version": "535.216.01" if loaded else None}}},
        __nvidia_driver_packages_result=result,
    )
    assert role["__nvidia_driver_start_services"] is start


# ---- variable checks: argument_specs (types and choices) and the role's rules, one role_variables task ----------

ARGUMENT_SPEC = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"][
    role_variables.ENTRY_POINT
]["options"]
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
PREFLIGHT = LOADER.load_from_file(str(ROLE / "tasks" / "preflight.yml"), trusted_as_template=True)
MAIN = LOADER.load_from_file(str(ROLE / "tasks" / "main.yml"), trusted_as_template=True)


def _task(tasks: list, name: str) -> dict:
    return next(task for task in tasks if task["name"] == name)


def _spec_problems(values: dict) -> list[str]:
    """What the role_variables task says about the types and choices of these values."""
    return role_variables.type_problems(ARGUMENT_SPEC, values) + role_variables.choice_problems(ARGUMENT_SPEC, values)


def test_argument_spec_accepts_the_defaults():
    assert _spec_problems(dict(DEFAULTS)) == []


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            {"nvidia_driver_flavour": "closed"},
            "nvidia_driver_flavour must be one of auto, proprietary, open (got 'closed')",
        ),
        (
            {"nvidia_driver_managed_by": "gpu-operator"},
            "nvidia_driver_managed_by must be one of host, operator (got 'gpu-operator')",
        ),
        ({"nvidia_driver_reboot": "always"}, "nvidia_driver_reboot must be one of auto, never (got 'always')"),
        (
            {"nvidia_driver_fabricmanager": "yes"},
            "nvidia_driver_fabricmanager must be one of auto, always, never (got 'yes')",
        ),
        (
            {"nvidia_driver_module_params": ["NVreg_EnableGpuFirmware=0"]},
            "nvidia_driver_module_params must be a mapping (got a list)",
        ),
        ({"nvidia_driver_hold": "maybe"}, "nvidia_driver_hold must be a boolean (got a string ('maybe'))"),
    ],
)
def test_argument_spec_rejects_bad_values(override, message):
    problems = _spec_problems(dict(DEFAULTS, **override))
    assert [problem for problem in problems if problem.startswith(message)], problems


def test_argument_spec_cannot_check_the_version_format_so_the_preflight_assert_does():
    """argument_specs types nvidia_driver_version as str only: a malformed string passes it ..."""
    assert _spec_problems(dict(DEFAULTS, nvidia_driver_version="580.95.05-1ubuntu1")) == []
    # ... and the role's first check rejects it, with the regex kept in vars/main.yml, before the no-GPU exit.
    role = Role("ubuntu2204", nvidia_driver_version="580.95.05-1ubuntu1")
    assert role.variables["__nvidia_driver_check_inputs"]["version_regex"] == "{{ __nvidia_driver_version_regex }}"
    assert role.check("version", "variable") is False
    assert role.variable_errors() == [
        "nvidia_driver_version is '580.95.05-1ubuntu1', which is not an NVIDIA driver version: use the upstream "
        'version as nvidia-smi prints it, e.g. "580.95.05" (no package revision such as "-1ubuntu1"), or "" for the '
        "newest driver of the branch."
    ]
    names = [task["name"] for task in MAIN]
    check = _task(MAIN, "Check the nvidia_driver variables")
    assert check["gpunode.provisioning.role_variables"]["checks"] == "__nvidia_driver_variable_checks"
    assert names.index(check["name"]) < names.index("Leave the node without an NVIDIA GPU alone")


@pytest.mark.parametrize(
    ("version", "valid"),
    [
        ("", True),
        ("580.95.05", True),
        ("535.216.01", True),
        ("550.163.01", True),
        ("570.86.10", True),
        ("390.157", True),
        (580.95, True),
        ("580", False),
        ("580.", False),
        ("580.x", False),
        ("v580.95.05", False),
        ("580.95.05-1", False),
        ("580.95.05.1", False),
        ("580.95.123", False),
        ("58.95.05", False),
        ("latest", False),
    ],
)
def test_preflight_version_assert(version, valid):
    assert Role("rocky9", nvidia_driver_version=version).check("version", "variable") is valid


@pytest.mark.parametrize(
    ("branch", "valid"), [("", True), ("580", True), (570, True), ("58", False), ("580-server", False)]
)
def test_preflight_branch_assert(branch, valid):
    assert Role("rocky9", nvidia_driver_branch=branch).check("branch", "variable") is valid


@pytest.mark.parametrize(
    ("branch", "version", "valid"),
    [("", "580.95.05", True), ("580", "", True), ("580", "580.95.05", True), ("570", "580.95.05", False)],
)
def test_preflight_branch_and_version_must_agree(branch, version, valid):
    role = Role("rocky9", nvidia_driver_branch=branch, nvidia_driver_version=version)
    assert role.check("version_of_branch", "variable") is valid
    assert (role.variable_errors() == []) is valid


ARCHIVE = "nvidia_driver_debian_cuda_repo"


@pytest.mark.parametrize(
    ("platform", "variables", "valid"),
    [
        ("debian12", {ARCHIVE: False}, True),
        ("debian12", {ARCHIVE: False, "nvidia_driver_branch": "535"}, True),
        ("debian12", {ARCHIVE: False, "nvidia_driver_branch": "550"}, False),
        ("debian13", {ARCHIVE: False, "nvidia_driver_version": "535.216.01"}, False),
        ("debian13", {ARCHIVE: False, "nvidia_driver_version": "550.163.01"}, True),
        ("debian13", {"nvidia_driver_version": "535.216.01"}, True),
        ("forky", {"nvidia_driver_branch": "560"}, True),
        ("ubuntu2204", {"nvidia_driver_branch": "535"}, True),
    ],
)
def test_preflight_branch_must_be_packaged(platform, variables, valid):
    assert Role(platform, **variables).check("branch_packaged") is valid


# ---- templates ----------------------------------------------------------------------------------------------------


def _render_template(role: Role, relative: str) -> str:
    """Render a role template with the template module's settings (trim_blocks, kept trailing newline)."""
    source = (ROLE / "templates" / relative).read_text()
    templar = role.templar.copy_with_new_env(
        available_variables=dict(role.variables, ansible_managed="Ansible managed")
    )
    return templar.template(
        trust_as_template(source), escape_backslashes=False, overrides={"trim_blocks": True, "lstrip_blocks": False}
    )


def test_nouveau_blacklist_template():
    assert _render_template(Role("debian12"), "etc/modprobe.d/blacklist-nouveau.conf.j2") == (
        "#\n# Ansible managed\n#\n"
        "# nouveau must not bind the NVIDIA GPUs: the NVIDIA driver owns them.\n"
        "blacklist nouveau\n"
        "options nouveau modeset=0\n"
    )


@pytest.mark.parametrize(
    ("platform", "archive", "module"),
    [("ubuntu2404", False, "nvidia"), ("debian12", True, "nvidia-current"), ("debian12", False, "nvidia")],
)
def test_module_parameters_template(platform, archive, module):
    role = Role(
        platform,
        nvidia_driver_debian_cuda_repo=not archive,
        nvidia_driver_module_params={
            "NVreg_EnableGpuFirmware": 0,
            "NVreg_DeviceFileMode": "0660",
            "NVreg_PreserveVideoMemoryAllocations": True,
        },
    )
    assert _render_template(role, "etc/modprobe.d/nvidia-module-parameters.conf.j2") == (
        "#\n# Ansible managed\n#\n"
        "# Parameters of the NVIDIA kernel module (nvidia_driver_module_params).\n"
        f"options {module} NVreg_DeviceFileMode=0660 NVreg_EnableGpuFirmware=0 NVreg_PreserveVideoMemoryAllocations=1\n"
    )


# ---- check mode -----------------------------------------------------------------------------------------------------

ENABLED_580_DKMS = "nvidia-driver 580-dkms [e] default [d], fm, ks, src  Nvidia driver for 580-dkms branch\n"


@pytest.mark.parametrize(
    ("platform", "registered", "changed"),
    [
        ("debian12", {}, False),
        ("debian12", {"__nvidia_driver_apt_components_result": {"changed": True}}, True),
        ("debian12", {"__nvidia_driver_cuda_source": {"changed": True}}, True),
        ("debian13", {"__nvidia_driver_cuda_keyring_file": {"changed": True}}, True),
        ("ubuntu2204", {"__nvidia_driver_cuda_keyring": {"changed": True}}, True),
        ("rocky9", {"__nvidia_driver_module_list": {"rc": 1, "stdout": ""}}, True),
        ("rocky9", {"__nvidia_driver_module_list": {"rc": 0, "stdout": ENABLED_580_DKMS}}, False),
        ("rocky10", {}, False),
        ("rocky10", {"__nvidia_driver_cuda_repo_file": {"changed": True}}, True),
    ],
)
def test_sources_changed_in_this_run(platform, registered, changed):
    assert Role(platform, **registered)["__nvidia_driver_sources_changed"] is changed


@pytest.mark.parametrize(
    ("check_mode", "result", "pending"),
    [
        (True, {"changed": True}, True),
        (True, {"failed": True}, True),
        (True, {}, False),
        (False, {"changed": True}, False),
    ],
)
def test_install_pending_only_in_check_mode(check_mode, result, pending):
    role = Role("debian12", ansible_check_mode=check_mode, __nvidia_driver_packages_result=result)
    assert role["__nvidia_driver_install_pending"] is pending


# ---- driver version changes: refused in site.yml, done by playbooks/upgrade_driver.yml ----------------------


def _preflight_check_task() -> dict:
    return _task(PREFLIGHT, "Check the platform, the variables and the node against each other")


@pytest.mark.parametrize(
    ("loaded", "installed", "variables", "changes"),
    [
        ("570.172.08", None, {"nvidia_driver_version": "580.95.05"}, True),
        ("580.95.05", None, {"nvidia_driver_version": "580.95.05"}, False),
        (None, "570.172.08-1", {"nvidia_driver_version": "580.95.05"}, True),  # installed, reboot pending
        ("570.172.08", "580.95.05-1", {"nvidia_driver_version": "580.95.05"}, True),  # loaded one counts
        ("570.172.08", None, {"nvidia_driver_branch": "580"}, True),
        ("570.172.08", None, {"nvidia_driver_branch": "570"}, False),
        ("570.172.08", None, {}, False),  # nothing requested: the installed driver stays
        (None, None, {"nvidia_driver_version": "580.95.05"}, False),  # a node without a driver gets one
        ("580.95.05", None, {"nvidia_driver_version": "580.95"}, False),  # a prefix pin matches its full version
        (None, "580.95.05-0ubuntu1", {"nvidia_driver_version": "580.95"}, False),
        ("580.105.08", None, {"nvidia_driver_version": "580.95"}, True),
        ("580.951.01", None, {"nvidia_driver_version": "580.95"}, True),  # a prefix of components, not of text
    ],
)
def test_a_driver_version_change_is_detected_from_the_loaded_else_the_installed_driver(
    loaded, installed, variables, changes
):
    probe = Role("ubuntu2204")
    packages = {} if installed is None else {probe["__nvidia_driver_version_package"]: [{"version": installed}]}
    role = Role(
        "ubuntu2204",
        facts={"packages": packages, "gpu_node": {"driver": {"loaded": loaded is not None, "version": loaded}}},
        nvidia_driver_version_change="refuse",
        **variables,
    )
    assert role["__nvidia_driver_changes_version"] is changes
    assert role.check("version_kept") is (not changes)
    assert role.condition(_preflight_check_task()["ansible.builtin.assert"]["that"]) is (not changes)


def test_the_refusal_names_the_versions_and_the_rolling_playbook():
    role = Role(
        "debian12",
        facts={"gpu_node": {"driver": {"loaded": True, "version": "535.216.01"}}},
        nvidia_driver_version="550.163.01",
        nvidia_driver_version_change="refuse",
    )
    assert not role.check("version_kept")
    allowed = Role(
        "debian12",
        facts={"gpu_node": {"driver": {"loaded": True, "version": "535.216.01"}}},
        nvidia_driver_version="550.163.01",
    )
    assert allowed.check("version_kept")  # the rolling upgrade (allow) changes the version
    failed = role.templar.template(trust_as_template(_preflight_check_task()["ansible.builtin.assert"]["fail_msg"]))
    # Debian 12 packages only 535, so the run also names that broken check; each check keeps its own words
    assert role.check_message("version_kept") in " ".join(failed.split())
    assert role.check_message("version_kept") == (
        "node1 has NVIDIA driver 535.216.01 (loaded), but nvidia_driver_version is 550.163.01. Changing it replaces "
        "the driver under running GPU pods and reboots the node, and this play would do that to all its nodes at "
        "once, without a drain. Nothing was changed. Upgrade with the rolling playbook, which drains and reboots one "
        "batch at a time: ansible-playbook -i <inventory> playbooks/upgrade_driver.yml "
        "-e nvidia_driver_version=550.163.01; or set nvidia_driver_version to 535.216.01 to keep the node's driver."
    )


def test_site_yml_refuses_version_changes_and_the_rolling_upgrade_allows_them():
    assert Role("debian12", nvidia_driver_version_change="refuse")["__nvidia_driver_refuses_changes"] is True
    assert Role("debian12")["__nvidia_driver_refuses_changes"] is False
    gpu_nodes = yaml.safe_load((ROOT / "playbooks" / "gpu_nodes.yml").read_text())[0]
    [driver] = [role for role in gpu_nodes["roles"] if role["role"] == "nvidia_driver"]
    assert driver["vars"]["nvidia_driver_version_change"] == "refuse"
    upgrade = yaml.safe_load((ROOT / "playbooks" / "upgrade_driver.yml").read_text())[0]
    change = yaml.safe_load((ROOT / "playbooks" / "tasks" / "upgrade_driver_change.yml").read_text())
    [driver] = [task for task in change if task.get("ansible.builtin.include_role", {}).get("name") == "nvidia_driver"]
    assert driver["vars"]["nvidia_driver_version_change"] == "allow"
    assert upgrade["serial"] and upgrade["max_fail_percentage"] == 0


# ---- fabric manager in lockstep with the driver ---------------------------------------------------------


def _fabricmanager_role(platform: str, driver: str | None, fabricmanager: str | None, **variables) -> Role:
    probe = Role(platform, facts={"gpu_node": {"nvswitch_count": 4}})
    packages = {}
    if driver:
        packages[probe["__nvidia_driver_version_package"]] = [{"version": driver}]
    if fabricmanager:
        packages[probe["__nvidia_driver_fabricmanager_package"]] = [{"version": fabricmanager}]
    return Role(platform, facts={"packages": packages, "gpu_node": {"nvswitch_count": 4}}, **variables)


@pytest.mark.parametrize(
    ("platform", "driver", "fabricmanager", "apart"),
    [
        ("ubuntu2404", "580.178.04-0ubuntu0.24.04.1", "580.178.04-0ubuntu0.24.04.1", False),
        ("ubuntu2404", "580.178.04-0ubuntu0.24.04.1", "580.95.05-0ubuntu1", True),
        ("ubuntu2404", "580.178.04-0ubuntu0.24.04.1", None, False),  # not installed yet: the role installs it
        ("ubuntu2404", None, "580.95.05-0ubuntu1", False),  # no driver yet
        ("rocky9", "3:580.95.05-1.el9", "580.95.05-1", False),  # epoch and revision ignored
        ("rocky9", "3:580.105.08-1.el9", "580.95.05-1", True),
    ],
)
def test_fabric_manager_apart_from_the_driver_is_found(platform, driver, fabricmanager, apart):
    role = _fabricmanager_role(platform, driver, fabricmanager, nvidia_driver_version_change="refuse")
    assert role["__nvidia_driver_fabricmanager_apart"] is apart
    assert role.check("fabricmanager_with_driver") is (not apart)
    # nvidia_driver_version_change allow (the rolling upgrade) puts them together instead of failing
    assert _fabricmanager_role(platform, driver, fabricmanager).check("fabricmanager_with_driver")


def test_fabric_manager_apart_fails_the_refusing_run_with_the_fix():
    role = _fabricmanager_role(
        "ubuntu2404", "580.178.04-0ubuntu0.24.04.1", "580.95.05-0ubuntu1", nvidia_driver_version_change="refuse"
    )
    check = _preflight_check_task()["ansible.builtin.assert"]
    assert not role.condition(check["that"])
    message = " ".join(role.templar.template(trust_as_template(check["fail_msg"])).split())
    assert message.startswith(
        "node1 has NVIDIA Fabric Manager 580.95.05 (nvidia-fabricmanager-580) but NVIDIA driver 580.178.04."
    )
    assert message.endswith(
        "playbooks/upgrade_driver.yml -e nvidia_driver_version=580.178.04, which installs and holds the fabric "
        "manager at the driver's version; or by hand on the drained node: apt-get install "
        "--allow-change-held-packages --allow-downgrades nvidia-fabricmanager-580=580.178.04-*"
    )


def test_fabric_manager_is_read_in_the_refusing_preflight_even_with_a_loaded_driver():
    task = _task(
        PREFLIGHT,
        "Read the installed packages",
    )
    facts = {"gpu_node": {"nvswitch_count": 4, "driver": {"loaded": True, "version": "1.2"}}}
    assert Role("ubuntu2404", facts=facts, nvidia_driver_version_change="refuse").condition(task["when"])
    assert not Role("ubuntu2404", facts=facts).condition(task["when"])
    assert Role("ubuntu2404", facts=facts, nvidia_driver_managed_by="operator").condition(task["when"])


def test_the_install_ends_with_the_fabric_manager_at_the_drivers_version():
    tasks = yaml.safe_load((ROLE / "tasks" / "install.yml").read_text())
    include = next(
        task for task in tasks if task["name"] == "Check that the fabric manager is at the driver's exact version"
    )
    checks = yaml.safe_load((ROLE / "tasks" / include["ansible.builtin.include_tasks"]).read_text())
    check = checks[2]["ansible.builtin.assert"]
    assert "__nvidia_driver_plan.fabricmanager_enabled" in checks[2]["when"]
    assert include["when"][0] == "__nvidia_driver_plan.fabricmanager_enabled or __nvidia_driver_plan.imex_enabled"
    lockstep = _fabricmanager_role("ubuntu2404", "580.178.04-0ubuntu0.24.04.1", "580.178.04-0ubuntu0.24.04.1")
    assert all(lockstep.condition(that) for that in check["that"])
    for driver, fabricmanager in (("580.178.04-0ubuntu0.24.04.1", "580.95.05-0ubuntu1"), ("580.178.04-1", None)):
        apart = _fabricmanager_role("ubuntu2404", driver, fabricmanager)
        assert not all(apart.condition(that) for that in check["that"])


@pytest.mark.parametrize(
    ("pkg_mgr_platform", "version", "suffix"),
    [
        ("ubuntu2404", "580.95.05", "=580.95.05-*"),
        ("ubuntu2404", "580.95", "=580.95.*"),  # prefix pin: matches 580.95.05-0ubuntu1
        ("rocky9", "580.95.05", "-580.95.05"),
        ("rocky9", "580.95", "-580.95.*"),
    ],
)
def test_a_prefix_pin_installs_its_full_version(pkg_mgr_platform, version, suffix):
    role = Role(pkg_mgr_platform, nvidia_driver_version=version)
    assert role["__nvidia_driver_version_suffix"] == suffix


def test_the_fabric_manager_of_a_prefix_pin_gets_the_installed_full_version():
    role = _fabricmanager_role("ubuntu2404", "580.95.05-0ubuntu1", None, nvidia_driver_version="580.95")
    assert role["__nvidia_driver_fabricmanager_spec"] == "nvidia-fabricmanager-580=580.95.05-*"
    exact = _fabricmanager_role("ubuntu2404", "580.95.05-0ubuntu1", None, nvidia_driver_version="580.95.05")
    assert exact["__nvidia_driver_fabricmanager_spec"] == "nvidia-fabricmanager-580=580.95.05-*"


# ---- the short path of a node the role leaves alone, and the preflight's reads ------------------------------------


def test_a_node_without_gpu_runs_the_variable_check_then_ends_the_role_before_anything_else():
    """The no-op path of a node without a GPU (issue 16): the variable check (role_variables), which also reports that
    the node is left alone (issue 47), and end_role; the platform data, the node reads and every task that changes
    something come after."""
    names = [task["name"] for task in MAIN]
    end = names.index("Leave the node without an NVIDIA GPU alone")
    assert [next(k for k in task if "." in k) for task in MAIN[: end + 1]] == [
        "gpunode.provisioning.role_variables",
        "ansible.builtin.meta",
    ]
    assert MAIN[end]["ansible.builtin.meta"] == "end_role"
    assert MAIN[end]["when"] == "__nvidia_driver_skip"
    report = MAIN[end - 1]["gpunode.provisioning.role_variables"]["report"]
    assert "No NVIDIA GPU was found on " in report and "if __nvidia_driver_skip | bool else ''" in report
    assert Role("debian12", facts={"gpu_node": {"has_gpu": False}}).condition(MAIN[end]["when"])
    assert not Role("debian12", facts={"gpu_node": {"has_gpu": False}}, nvidia_driver_force=True).condition(
        MAIN[end]["when"]
    )
    # the platform data (tasks/set_vars.yml), then the preflight: both after end_role
    imports = [task.get("ansible.builtin.import_tasks") for task in MAIN]
    assert imports.index("set_vars.yml") == end + 1 < imports.index("preflight.yml")


def test_operator_mode_ends_after_the_nouveau_blacklist():
    names = [task["name"] for task in MAIN]
    end = names.index("Leave the driver to the GPU Operator (operator mode)")
    assert names.index("Keep nouveau from claiming the NVIDIA GPUs") < end
    assert names.index("Configure the package sources the driver comes from") > end
    assert Role("debian12", nvidia_driver_managed_by="operator").condition(MAIN[end]["when"])
    assert not Role("debian12").condition(MAIN[end]["when"])


PROBE_ONE_KEY = "present: /var/lib/dkms/mok.key\nno certificate at /var/lib/dkms/mok.pub\n"
PROBE_BOTH = "present: /var/lib/dkms/mok.key\npresent: /var/lib/dkms/mok.pub\n/var/lib/dkms/mok.pub is not enrolled\n"


@pytest.mark.parametrize(
    ("probe", "present", "pair_ok"),
    [
        ("no certificate at /var/lib/dkms/mok.pub\n", [], True),
        (PROBE_ONE_KEY, ["/var/lib/dkms/mok.key"], False),
        (PROBE_BOTH, ["/var/lib/dkms/mok.key", "/var/lib/dkms/mok.pub"], True),
    ],
)
def test_the_probe_tells_which_mok_files_exist(probe, present, pair_ok):
    role = Role(
        "debian12",
        facts={"gpu_node": {"secure_boot": True}},
        nvidia_driver_mok_password="x",
        __nvidia_driver_mok_probe={"stdout": probe},
    )
    assert role["__nvidia_driver_mok_present"] == present
    assert role.check("mok_files") is pair_ok
    if not pair_ok:
        assert role.check_message("mok_files").endswith(
            "but only /var/lib/dkms/mok.key exists. Copy the other file of the pair there (or give both as "
            "nvidia_driver_mok_key_content and nvidia_driver_mok_cert_content), or remove it to let the role create a "
            "new pair. Nothing was changed."
        )


@pytest.mark.parametrize(
    ("probe", "which"),
    [
        ("", "the role creates"),
        (
            "present: /var/lib/shim-signed/mok/MOK.priv\npresent: /var/lib/shim-signed/mok/MOK.der\n"
            "no mokutil or openssl\n",
            "the firmware has not enrolled yet",
        ),
    ],
)
def test_a_mok_without_password_is_refused_naming_whether_the_role_creates_it(probe, which):
    role = Role("ubuntu2404", facts={"gpu_node": {"secure_boot": True}}, __nvidia_driver_mok_probe={"stdout": probe})
    assert not role.check("mok_password")
    assert f"(/var/lib/shim-signed/mok/MOK.der), which {which}." in role.check_message("mok_password")
    assert role.check_message("mok_password").endswith(
        "Nothing was changed. Or set nvidia_driver_ubuntu_precompiled to true to use Canonical's signed modules."
    )
    # without Secure Boot nothing is signed, so nothing is asked
    assert Role("ubuntu2404", __nvidia_driver_mok_probe={"stdout": probe}).check("mok_password")


def test_the_preflight_names_every_broken_check_in_one_run():
    role = Role(
        "ubuntu2404",
        arch="ppc64le",
        nvidia_driver_ubuntu_precompiled=True,
        nvidia_driver_ubuntu_cuda_repo=True,
    )
    broken = [name for name in role["__nvidia_driver_preflight_checks"] if not role.check(name)]
    assert broken == ["architecture", "ubuntu_sources"]
    assert role["__nvidia_driver_preflight_errors"] == [role.check_message(name) for name in broken]
    assert Role("ubuntu2404")["__nvidia_driver_preflight_errors"] == []


@pytest.mark.parametrize(
    ("hold", "recorded", "installed", "selections"),
    [
        (True, None, ["linux-headers-amd64"], {"linux-headers-amd64": "hold"}),
        (False, ["linux-headers-amd64"], ["linux-headers-amd64"], {"linux-headers-amd64": "install"}),
        # a recorded hold of a package that is gone is forgotten, not selected
        (False, ["linux-image-amd64"], ["linux-headers-amd64"], {}),
        (False, None, ["linux-headers-amd64"], {}),
    ],
)
def test_the_apt_kernel_hold_selects_hold_or_install(hold, recorded, installed, selections):
    task = next(
        t
        for t in yaml.safe_load((ROLE / "tasks" / "kernel_hold.yml").read_text())
        if "ansible.builtin.dpkg_selections" in t
    )
    before = {"content": base64.b64encode(json.dumps(recorded).encode()).decode()} if recorded else {"failed": True}
    role = Role(
        "debian12",
        facts={"packages": {name: [{"version": "1"}] for name in installed}},
        nvidia_driver_hold_kernel=hold,
        __nvidia_driver_kernel_hold_before=before,
    )
    items = role.templar.template(trust_as_template(task["loop"]))
    chosen = {}
    for item in items:
        templar = role.templar.copy_with_new_env(available_variables=dict(role.variables, item=item))
        chosen[item] = templar.template(trust_as_template(task["ansible.builtin.dpkg_selections"]["selection"]))
    assert chosen == selections
