"""The nvidia_driver role's plan (plugins/filter/nvidia_driver_plan.py, issue 51): the same decisions as the program of
lazy variables it replaced (tests/fixtures/nvidia_driver/vars_before_plan/: the role's vars/main.yml and platform files
at 0926595), rendered by Ansible on the same variables and facts, node by node: every variable the old program had,
read from the plan, the installed packages' view or the thin variable that keeps its name, and every check's verdict
and message.

``plan_names`` maps the old names onto the new ones; tests/unit/test_nvidia_driver_render.py reads the role through
it."""

from __future__ import annotations

import copy
import re

import pytest
import yaml
from conftest import ROOT, load_module

ROLE = ROOT / "roles" / "nvidia_driver"
OLD_DIR = ROOT / "tests/fixtures/nvidia_driver/vars_before_plan"
plan_filter = load_module("nvidia_driver_plan", subdir="plugins/filter")


def _defaults() -> dict:
    return yaml.safe_load((ROLE / "defaults/main.yml").read_text())


def _plan_keys() -> set[str]:
    """Every key the plan has on some platform (the plan's names of the old variables)."""
    main = yaml.safe_load((ROLE / "vars/main.yml").read_text())
    keys: set[str] = set()
    facts = {
        "distribution": "Ubuntu",
        "distribution_major_version": "24",
        "distribution_version": "24.04",
        "distribution_release": "noble",
        "architecture": "x86_64",
        "kernel": "6.8.0-45-generic",
        "gpu_node": {},
    }
    for platform in ("Ubuntu", "Debian", "RedHat", "default"):
        inputs = {
            "params": _defaults(),
            "facts": facts,
            "platform": yaml.safe_load((ROLE / "vars" / f"{platform}.yml").read_text()),
            "platform_defaults": main["__nvidia_driver_platform_defaults"],
            "releases": [],
            "hostname": "n",
            "connection": "ssh",
            "this_month": "2026-11",
            "branches": main["__nvidia_driver_branches"],
            "imex_nodes_file": main["__nvidia_driver_imex_nodes_file"],
        }
        plan = plan_filter.nvidia_driver_plan(inputs)
        keys |= set(plan) - {"node"}
        installed = set(plan_filter.nvidia_driver_installed(plan, {}))
    return keys, installed


PLAN_KEYS, INSTALLED_KEYS = _plan_keys()
MOK = {"mok_present": "__nvidia_driver_mok.present", "mok_state": "__nvidia_driver_mok.state"}
_NAME = re.compile(r"__nvidia_driver_([a-z0-9_]+)\b")


def _new_name(match: re.Match) -> str:
    name = match.group(1)
    if name in INSTALLED_KEYS:
        return f"__nvidia_driver_installed.{name}"
    if name in PLAN_KEYS:
        return f"__nvidia_driver_plan.{name}"
    return MOK.get(name, match.group(0))


def plan_names(expression: str) -> str:
    """An expression over the old variables' names, over the plan's (``__nvidia_driver_branch`` ->
    ``__nvidia_driver_plan.branch``); the names the vars file keeps (constants, thin variables) stay."""
    return _NAME.sub(_new_name, expression)


# ------------------------------------------------------------------------------------- the old program beside the plan
# imported late: test_nvidia_driver_render imports plan_names from here
from test_nvidia_driver_render import LOADER, Role, _load


class OldRole(Role):
    """The role as it was: the old vars/main.yml and the old platform file (the one the role's first_found picks)."""

    def __init__(self, platform: str, **kwargs):
        super().__init__(platform, **kwargs)
        from ansible.template import Templar

        merged = {k: v for k, v in self.variables.items() if not k.startswith("__nvidia_driver_")}
        merged.update(_load(OLD_DIR / "main.yml"))
        merged.update(_load(OLD_DIR / self.vars_file.name))
        merged.update({k: v for k, v in self.variables.items() if k in self.internal})
        self.variables = merged
        self.templar = Templar(loader=LOADER, variables=merged)

    def __getitem__(self, name: str):
        from ansible.template import trust_as_template

        return self.templar.evaluate_expression(trust_as_template(name))


HGX = {"nvswitch_count": 4, "gpus": [{"pci_address": "0000:18:00.0", "device_id": "0x2330", "class": "0x0302"}]}
NVL5 = {**HGX, "nvlink_fabric": {"nvl5": True}}
BLACKWELL = {"gpus": [{"pci_address": "0000:18:00.0", "device_id": "0x2901", "class": "0x0302"}]}
PASCAL = {"gpus": [{"pci_address": "0000:18:00.0", "device_id": "0x15f8", "class": "0x0302"}]}
LOADED_570 = {"driver": {"loaded": True, "version": "570.86.15", "kernel_module_type": "proprietary"}}
MOK_ONE = {"stdout": "present: /var/lib/dkms/mok.key\nno certificate at /var/lib/dkms/mok.pub"}
MOK_PENDING = {
    "stdout": "present: /var/lib/shim-signed/mok/MOK.priv\npresent: /var/lib/shim-signed/mok/MOK.der\npending"
}
DKMS_580 = {"nvidia-kernel-dkms": [{"version": "580.95.05-1"}], "nvidia-driver-cuda": [{"version": "580.95.05-1"}]}
EL_580 = {
    "kmod-nvidia-open-dkms": [{"version": "3:580.95.05-1.el9"}],
    "nvidia-fabric-manager": [{"version": "580.82.07-1"}],
    "nvidia-imex": [{"version": "580.95.05-1"}],
    "kernel": [{"version": "5.14.0"}],
    "kernel-core": [{"version": "5.14.0"}],
}
UBUNTU_HOST = {
    "nvidia-kernel-common-580-server": [{"version": "580.95.05-0ubuntu1"}],
    "nvidia-fabricmanager-580": [{"version": "580.95.05-1"}],
    "linux-generic": [{"version": "6.8.0.45.45"}],
    "linux-image-generic": [{"version": "6.8.0.45.45"}],
}

# name: (platform, the role's variables, facts, architecture)
CASES = {
    "ubuntu2404-defaults": ("ubuntu2404", {}, {}, "x86_64"),
    "ubuntu2404-precompiled-open-secure-boot": (
        "ubuntu2404",
        {"nvidia_driver_ubuntu_precompiled": True, "nvidia_driver_flavour": "open", "nvidia_driver_branch": "580"},
        {"gpu_node": {"secure_boot": True}},
        "x86_64",
    ),
    "ubuntu2404-dkms-secure-boot-pending": (
        "ubuntu2404",
        {
            "nvidia_driver_ubuntu_packages": "headless",
            "__nvidia_driver_mok_probe": MOK_PENDING,
            "nvidia_driver_mok_password": "enroll-me",
        },
        {"gpu_node": {"secure_boot": True}},
        "x86_64",
    ),
    "ubuntu2204-cuda-exact-fabric-imex-nvlsm": (
        "ubuntu2204",
        {
            "nvidia_driver_ubuntu_cuda_repo": True,
            "nvidia_driver_version": "580.95.05",
            "nvidia_driver_imex": "host",
            "nvidia_driver_imex_nodes": ["192.0.2.11", "2001:db8::2"],
            "nvidia_driver_imex_settings": {"SERVER_PORT": 50010},
            "nvidia_driver_cuda_repo_url": "http://mirror.example/cuda/",
        },
        {"gpu_node": NVL5, "packages": UBUNTU_HOST},
        "x86_64",
    ),
    "ubuntu2604-refused-branch-610": ("ubuntu2604", {"nvidia_driver_branch": "610"}, {}, "x86_64"),
    "ubuntu2604-595-imex-dra-arm64": (
        "ubuntu2604",
        {"nvidia_driver_branch": "595", "nvidia_driver_imex": "dra", "nvidia_driver_hold_kernel": True},
        {"gpu_node": HGX, "packages": UBUNTU_HOST},
        "aarch64",
    ),
    "ubuntu2404-refused-precompiled-and-cuda": (
        "ubuntu2404",
        {"nvidia_driver_ubuntu_precompiled": True, "nvidia_driver_ubuntu_cuda_repo": True},
        {},
        "x86_64",
    ),
    "debian12-defaults-cuda-repo": ("debian12", {}, {"packages": DKMS_580}, "x86_64"),
    "debian12-refused-one-mok-file": (
        "debian12",
        {"__nvidia_driver_mok_probe": MOK_ONE},
        {"gpu_node": {"secure_boot": True}},
        "x86_64",
    ),
    "debian12-refused-mok-content-half": (
        "debian12",
        {"nvidia_driver_mok_key_content": "-----BEGIN PRIVATE KEY-----"},
        {"gpu_node": {"secure_boot": True}},
        "x86_64",
    ),
    "debian12-archive-open-535": (
        "debian12",
        {
            "nvidia_driver_debian_cuda_repo": False,
            "nvidia_driver_flavour": "open",
            "nvidia_driver_version": "535.216.01",
        },
        {},
        "x86_64",
    ),
    "debian13-arm64-persistenced-off": ("debian13", {"nvidia_driver_persistenced": False}, {}, "aarch64"),
    "debian12-refused-fabric-imex-nvlsm": (
        "debian12",
        {"nvidia_driver_fabricmanager": "always", "nvidia_driver_imex": "dra", "nvidia_driver_nvlsm": "always"},
        {"gpu_node": HGX},
        "x86_64",
    ),
    "rocky9-prefix-refused-fabric-apart": (
        "rocky9",
        {
            "nvidia_driver_version": "580.95",
            "nvidia_driver_version_change": "refuse",
            "nvidia_driver_imex": "host",
            "nvidia_driver_imex_nodes": ["10.0.0.1"],
            "nvidia_driver_hold_kernel": True,
            "nvidia_driver_flavour": "open",
        },
        {"gpu_node": HGX, "packages": EL_580},
        "x86_64",
    ),
    "rocky10-branch-pin": ("rocky10", {"nvidia_driver_branch": "580"}, {"packages": EL_580}, "x86_64"),
    "rocky8-powertools-570": ("rocky8", {"nvidia_driver_branch": "570"}, {}, "x86_64"),
    "rhel9-crb-local-connection": ("rhel9", {"ansible_connection": "local"}, {}, "x86_64"),
    "alma9-container-reboot-never": (
        "alma9",
        {"nvidia_driver_reboot": "never"},
        {"gpu_node": {"container": True}},
        "x86_64",
    ),
    "refused-version-change-under-loaded-driver": (
        "ubuntu2404",
        {"nvidia_driver_version_change": "refuse", "nvidia_driver_branch": "580"},
        {"gpu_node": LOADED_570},
        "x86_64",
    ),
    "refused-blackwell-proprietary": (
        "ubuntu2404",
        {"nvidia_driver_flavour": "proprietary"},
        {"gpu_node": BLACKWELL},
        "x86_64",
    ),
    "pascal-auto-proprietary": ("debian12", {}, {"gpu_node": PASCAL}, "x86_64"),
    "operator-refused-host-packages": (
        "ubuntu2404",
        {"nvidia_driver_managed_by": "operator"},
        {"packages": {"nvidia-driver-580-server": [{"version": "580.95.05"}], "nvidia-dkms-580": [{"version": "1"}]}},
        "x86_64",
    ),
    "no-gpu": ("debian12", {}, {"gpu_node": {"has_gpu": False}}, "x86_64"),
    "refused-centos": ("centos9", {}, {}, "x86_64"),
    "refused-ubuntu2004": ("ubuntu2004", {}, {}, "x86_64"),
    "refused-ppc64le": ("ubuntu2404", {}, {}, "ppc64le"),
    "forky": ("forky", {}, {}, "x86_64"),
    "refused-arch": ("arch", {}, {}, "x86_64"),
    "refused-variables-version": ("ubuntu2404", {"nvidia_driver_version": "580.95.05-1ubuntu1"}, {}, "x86_64"),
    "refused-variables-branch-mismatch": (
        "rocky9",
        {"nvidia_driver_version": "570.86.15", "nvidia_driver_branch": "580"},
        {},
        "x86_64",
    ),
    "refused-variables-branch-fingerprint": (
        "debian12",
        {"nvidia_driver_branch": "58", "nvidia_driver_cuda_repo_key_fingerprint": "EB69 3B30"},
        {},
        "x86_64",
    ),
    "refused-variables-imex": (
        "ubuntu2404",
        {
            "nvidia_driver_imex": "host",
            "nvidia_driver_imex_nodes": ["node-a", "10.0.0.300x"],
            "nvidia_driver_imex_settings": {"NOT_A_KEY": 1, "LOG_LEVEL": "4\n5"},
        },
        {},
        "x86_64",
    ),
    "refused-variables-imex-empty": ("ubuntu2404", {"nvidia_driver_imex": "host"}, {}, "x86_64"),
}
# Task results the thin variables read, the same for each case (the headers lookup found the running kernel's headers)
TASK_RESULTS = {
    "__nvidia_driver_packages_result": {"changed": False},
    "__nvidia_driver_kernel_hold_before": {"content": "WyJsaW51eC1nZW5lcmljIl0="},
}
OLD_VARIABLES = sorted(
    {
        name
        for path in OLD_DIR.glob("*.yml")
        for name in yaml.safe_load(path.read_text())
        if name
        not in (
            # read a task result that no case registers (the CUDA key probe, the kernels' lookup, the kernels)
            "__nvidia_driver_cuda_probe_problem",
            "__nvidia_driver_kernels_not_ready",
            "__nvidia_driver_kernel_packages_available",
        )
    }
)
# the old rules' names, the new ones
RULES = {
    "__nvidia_driver_variable_checks": "__nvidia_driver_variable_rules",
    "__nvidia_driver_preflight_checks": "__nvidia_driver_preflight_checks",
}


def _roles(case: str):
    platform, variables, facts, arch = copy.deepcopy(CASES[case])
    variables = {**TASK_RESULTS, **variables}
    if "headers" not in variables:
        variables["__nvidia_driver_headers_lookup"] = {"rc": 0, "stdout": ""}
    return OldRole(platform, arch=arch, facts=facts, **variables), Role(platform, arch=arch, facts=facts, **variables)


def _said(text) -> str:
    return " ".join(str(text).split())


def _rendered(role, name):
    try:
        return role[name], None
    except Exception as error:
        return None, type(error).__name__


@pytest.mark.parametrize("case", list(CASES))
def test_the_plan_decides_what_the_old_variables_decided(case):
    """Every check's verdict and message, then every other variable of the old program."""
    old, new = _roles(case)
    for group, new_group in RULES.items():
        old_rules, new_rules = old[group], new[new_group]
        assert list(new_rules) == list(old_rules), group
        for name, rule in old_rules.items():
            assert new_rules[name]["ok"] is bool(rule["ok"]), (group, name)
            if not rule["ok"]:
                assert _said(new_rules[name]["msg"]) == _said(rule["msg"]), (group, name)
    assert [_said(m) for m in new.variable_errors()] == [_said(m) for m in old.variable_errors()]
    refused = bool(new.variable_errors() or new["__nvidia_driver_preflight_errors"])
    assert refused == ("refused" in case)
    compared = 0
    for name in OLD_VARIABLES:
        if name in RULES or name == "__nvidia_driver_preflight_errors":
            continue
        before, failed = _rendered(old, name)
        if failed:  # e.g. the CUDA repository's path on a platform without one: the role never reads it there
            continue
        after = new[name]
        if isinstance(before, str) and isinstance(after, str):
            before, after = _said(before), _said(after)
        assert after == before, name
        compared += 1
    assert compared > 100
    errors = [_said(message) for message in new["__nvidia_driver_preflight_errors"]]
    assert errors == [_said(message) for message in old["__nvidia_driver_preflight_errors"]]


def test_every_old_variable_has_a_home():
    """Each of the old program's variables is a plan key, a key of the installed packages' view or of the MOK probe's,
    or a name the vars file still has (a constant, a thin variable)."""
    kept = set(yaml.safe_load((ROLE / "vars/main.yml").read_text()))
    homeless = [
        name
        for name in OLD_VARIABLES
        if name not in kept and plan_names(name) == name and name != "__nvidia_driver_refuses_changes"
    ]
    assert homeless == []


def test_the_vars_files_keep_constants_and_thin_variables_only():
    """No decision is worked out in the vars files: the platform files are data, and vars/main.yml's templates read the
    plan, a task's result or a public variable (none of the old program's chains of lazy decisions)."""
    for path in (ROLE / "vars").glob("*.yml"):
        if path.name != "main.yml":
            assert "{{" not in path.read_text(), path
    main = yaml.safe_load((ROLE / "vars/main.yml").read_text())
    templated = [name for name, value in main.items() if "{{" in str(value)]
    assert len(templated) <= 30, templated


# ------------------------------------------------------------------------------------- the filters on their own
def test_a_two_part_version_pins_a_prefix_and_the_fabric_manager_follows_the_installed_driver():
    role = Role("rocky9", facts={"gpu_node": HGX, "packages": EL_580}, nvidia_driver_version="580.95")
    assert role["__nvidia_driver_plan.package_specs"][0] == "nvidia-driver-cuda-580.95.*"
    assert role["__nvidia_driver_installed.fabricmanager_spec"] == "nvidia-fabric-manager-580.95.05"
    assert role["__nvidia_driver_installed.fabricmanager_apart"] is True
    assert "dnf install nvidia-fabric-manager-580.95.05" in role["__nvidia_driver_installed.fabricmanager_fix_command"]


def test_the_plan_is_rendered_once_by_set_vars():
    tasks = yaml.safe_load((ROLE / "tasks/set_vars.yml").read_text())
    assert [task["name"] for task in tasks] == ["Load the platform data and work out the driver's plan"]
    assert list(tasks[0]["ansible.builtin.set_fact"]) == ["__nvidia_driver_plan"]
    main = yaml.safe_load((ROLE / "vars/main.yml").read_text())
    assert "__nvidia_driver_plan" not in main  # a fact of the run, never a lazy variable


def test_the_mok_probe_reads_as_before():
    assert plan_filter.nvidia_driver_mok(MOK_PENDING) == {
        "present": ["/var/lib/shim-signed/mok/MOK.priv", "/var/lib/shim-signed/mok/MOK.der"],
        "state": "pending",
    }
    assert plan_filter.nvidia_driver_mok({"stdout": "x is already enrolled"})["state"] == "enrolled"
    assert plan_filter.nvidia_driver_mok({}) == {"present": [], "state": "absent"}
