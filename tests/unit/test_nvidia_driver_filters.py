"""The nvidia_driver role's Jinja programs that became named filters (issue 40), each proven equal to the Jinja it
replaced: the old expression (tests/fixtures/nvidia_driver/old_programs.yml, as it was in
roles/nvidia_driver/vars/main.yml and tasks/kernels.yml before the change) and the role's current one are rendered
by Ansible's Templar on the same inputs and must agree. The
filters themselves: plugins/filter/nvidia_driver_packages.py and plugins/filter/nvidia_driver_run.py."""

from __future__ import annotations

import itertools

import pytest
import yaml
from ansible.plugins.loader import filter_loader, init_plugin_loader
from conftest import ROOT, load_module, render_role_value

ROLE = ROOT / "roles" / "nvidia_driver"
# The filter calls as the role's vars made them before its plan filter (issue 51): the plan calls the same functions
# (tests/unit/test_nvidia_driver_plan.py proves it decides what these did); the ones the vars file still has, as it has
# them now.
VARS = {
    **yaml.safe_load((ROOT / "tests" / "fixtures" / "nvidia_driver" / "vars_before_plan" / "main.yml").read_text()),
    **yaml.safe_load((ROLE / "vars" / "main.yml").read_text()),
}
KERNELS_TASKS = yaml.safe_load((ROLE / "tasks" / "kernels.yml").read_text())
init_plugin_loader()
# the filters the old program called by name, which the role now calls through the plan
filter_loader.add_directory(str(ROOT / "tests" / "fixtures" / "nvidia_driver" / "filter_plugins"))
packages = load_module("nvidia_driver_packages", subdir="plugins/filter")
run = load_module("nvidia_driver_run", subdir="plugins/filter")

# The old programs, verbatim (commit fc8b5eb): test data in tests/fixtures, as YAML folds them.
OLD = yaml.safe_load((ROOT / "tests" / "fixtures" / "nvidia_driver" / "old_programs.yml").read_text())
OLD_REFUSAL = OLD.pop("__nvidia_driver_kernels_refusal")


def _cases_ubuntu_packages():
    for name, open_, precompiled, choice in itertools.product(
        ["580-server", "580", "535-server"], ["", "-open"], [True, False], ["driver", "headless"]
    ):
        yield {
            "__nvidia_driver_ubuntu_name": name,
            "__nvidia_driver_ubuntu_open": open_,
            "nvidia_driver_ubuntu_precompiled": precompiled,
            "nvidia_driver_ubuntu_packages": choice,
        }


def _cases_hold_packages():
    pinned = [["nvidia-driver-580-server"], ["nvidia-driver-cuda", "kmod-nvidia-latest-dkms", "nvidia-persistenced"]]
    for pins, fm, fm_pkg, imex, imex_pkg, host, nvlsm, nvlsm_pkg in itertools.product(
        pinned, *[[True, False], ["nvidia-fabricmanager-580", ""]] * 2, [True, False], [True, False], ["nvlsm", ""]
    ):
        yield {
            "__nvidia_driver_pinned_packages": pins,
            "__nvidia_driver_fabricmanager_enabled": fm,
            "__nvidia_driver_fabricmanager_package": fm_pkg,
            "__nvidia_driver_imex_enabled": imex,
            "__nvidia_driver_imex_package": imex_pkg and "nvidia-imex",
            "__nvidia_driver_host_mode": host,
            "__nvidia_driver_nvlsm_enabled": nvlsm,
            "__nvidia_driver_nvlsm_package": nvlsm_pkg,
        }


def _cases_kernel_headers_packages():
    for requested, available, builds in itertools.product(
        [[], ["linux-headers-amd64"], ["kernel-devel", "kernel-headers"]], [True, False], [True, False]
    ):
        yield {
            "nvidia_driver_kernel_headers": requested,
            "__nvidia_driver_running_kernel_headers": "linux-headers-6.1.0-27-amd64",
            "__nvidia_driver_running_headers_available": available,
            "__nvidia_driver_kernel_headers_meta": "linux-headers-amd64",
            "__nvidia_driver_builds_modules": builds,
        }


KERNELS = [
    {"release": "6.1.0-27-amd64", "module": None, "module_version": None, "headers": True, "next_boot": True},
    {"release": "6.1.0-26-amd64", "module": None, "module_version": None, "headers": False, "next_boot": False},
    {"release": "6.1.0-25-amd64", "module": "/lib/modules/x/nvidia.ko", "module_version": "535.216.01",
     "headers": True, "next_boot": False},
    {"release": "6.1.0-24-amd64", "module": "/lib/modules/y/nvidia.ko", "module_version": "580.95.05",
     "headers": True, "next_boot": True},
    {"release": "6.1.0-23-amd64", "module": "/lib/modules/z/nvidia.ko", "module_version": None,
     "headers": False, "next_boot": False},
]  # fmt: skip


def _kernel_sets():
    yield []
    for size in (1, 2, 5):
        yield from (list(combo) for combo in itertools.combinations(KERNELS, size))


def _cases_kernels_not_ready():
    for kernels, installed in itertools.product(_kernel_sets(), ["", "580.95.05", "535.216.01"]):
        yield {"__nvidia_driver_kernels": {"kernels": kernels}, "__nvidia_driver_installed_version": installed}


def _cases_changes_version():
    for current, version, branch in itertools.product(
        ["", "580.95.05", "535.216.01", "580.9"], ["", "580.95", "580.95.05", "580.9", "535.216.01"], ["", "580", 535]
    ):
        yield {
            "__nvidia_driver_current_version": current,
            "nvidia_driver_version": version,
            "nvidia_driver_branch": branch,
        }


SOURCE_RESULTS = [
    "__nvidia_driver_apt_components_result",
    "__nvidia_driver_cuda_keyring",
    "__nvidia_driver_cuda_mirror",
    "__nvidia_driver_cuda_repo_file",
    "__nvidia_driver_epel_release",
    "__nvidia_driver_crb",
]
RESULTS = [
    None,  # not registered (the task did not run on this platform)
    {"changed": False},
    {"changed": True},
    {"skipped": True, "changed": False},
    {"results": [{"changed": False}, {"changed": True}]},  # a loop's result
    {"results": [{"changed": False}]},
]


def _cases_sources_changed():
    streams = [(False, ""), (True, "nvidia-driver 580-dkms [e]"), (True, "nvidia-driver 570-dkms [e]"), (True, None)]
    for index, result, (module_streams, stdout) in itertools.product(range(len(SOURCE_RESULTS)), RESULTS, streams):
        case = {
            "__nvidia_driver_dnf_module_streams": module_streams,
            "__nvidia_driver_dnf_module_enabled_regex": "nvidia-driver +580-dkms \\\\[e\\\\]",
        }
        if stdout is not None:
            case["__nvidia_driver_module_list"] = {"stdout": stdout}
        if result is not None:
            case[SOURCE_RESULTS[index]] = result
            case[SOURCE_RESULTS[-1 - index]] = {"changed": False}
        yield case


def _cases_install_pending():
    names = ["__nvidia_driver_packages_result", "__nvidia_driver_fabricmanager_result",
             "__nvidia_driver_fabric_services_result"]  # fmt: skip
    states = [None, {"changed": False}, {"changed": True}, {"failed": True, "changed": False}]
    for check_mode, *results in itertools.product([True, False], states, states, states):
        case = {"ansible_check_mode": check_mode}
        case.update({name: result for name, result in zip(names, results, strict=True) if result is not None})
        yield case


CASES = {
    "__nvidia_driver_ubuntu_packages": list(_cases_ubuntu_packages()),
    "__nvidia_driver_hold_packages": list(_cases_hold_packages()),
    "__nvidia_driver_kernel_headers_packages": list(_cases_kernel_headers_packages()),
    "__nvidia_driver_kernels_not_ready": list(_cases_kernels_not_ready()),
    "__nvidia_driver_changes_version": list(_cases_changes_version()),
    "__nvidia_driver_sources_changed": list(_cases_sources_changed()),
    "__nvidia_driver_install_pending": list(_cases_install_pending()),
}


@pytest.mark.parametrize("name", list(OLD))
def test_each_filter_renders_what_the_old_jinja_did(name):
    assert "{%" not in VARS[name] and len(VARS[name].strip().splitlines()) <= 5, VARS[name]
    cases = CASES[name]
    assert len(cases) >= 8
    for case in cases:
        old = render_role_value(OLD[name], case)
        # the inputs where the role's vars read them now: the plan, the installed packages' view
        values = {key.removeprefix("__nvidia_driver_"): value for key, value in case.items()}
        new = render_role_value(
            VARS[name], {**case, "__nvidia_driver_plan": values, "__nvidia_driver_installed": values}
        )
        assert new == old, (case, old, new)
        assert type(new) is type(old), (case, old, new)


def test_the_kernel_refusal_says_what_the_old_loop_did():
    """The whole refusal of tasks/kernels.yml, byte for byte, for every set of kernels, both ways of getting modules."""
    task = next(t for t in KERNELS_TASKS if t.get("name") == "Check that every installed kernel has the NVIDIA module")
    message = task["ansible.builtin.assert"]["fail_msg"]
    problems = task["vars"]["__nvidia_driver_kernel_problems"]
    assert "{%" not in message + problems
    count = 0
    for kernels, builds, installed, pkg_mgr in itertools.product(
        _kernel_sets(), [True, False], ["580.95.05", ""], ["apt", "dnf"]
    ):
        case = {
            "inventory_hostname": "node1",
            "__nvidia_driver_kernels_not_ready": kernels,
            "__nvidia_driver_kernels": {"next_boot_rule": "GRUB_DEFAULT=0"},
            "__nvidia_driver_installed_version": installed,
            "__nvidia_driver_kernel_package_prefix": "linux-headers-" if pkg_mgr == "apt" else "kernel-devel-",
            "__nvidia_driver_builds_modules": builds,
            "__nvidia_driver_pkg_mgr": pkg_mgr,
        }
        # the same values where the role reads them now: the plan, the installed packages' view
        case["__nvidia_driver_plan"] = {
            "kernel_package_prefix": case["__nvidia_driver_kernel_package_prefix"],
            "builds_modules": builds,
            "pkg_mgr": pkg_mgr,
        }
        case["__nvidia_driver_installed"] = {"installed_version": installed}
        case["__nvidia_driver_kernel_problems"] = render_role_value(problems, case)
        assert render_role_value(message, case) == render_role_value(OLD_REFUSAL, case), case
        count += 1
    assert count >= 100


def test_the_filters_directly():
    assert packages.nvidia_driver_ubuntu_packages("580-server", "-open", False, "driver") == [
        "nvidia-driver-580-server-open"
    ]
    assert packages.nvidia_driver_hold_packages(["a"], [[True, "fm"], [True, ""], [False, "nvlsm"]]) == ["a", "fm"]
    with pytest.raises(Exception, match="a companion is"):
        packages.nvidia_driver_hold_packages(["a"], ["fm"])
    assert packages.nvidia_driver_kernel_headers_packages(
        [], "linux-headers-6.1", False, "linux-headers-amd64", True
    ) == ["linux-headers-amd64"]
    assert run.nvidia_driver_changes_version("580.95.05", "580.95", "") is False
    assert run.nvidia_driver_changes_version("580.95.05", "", "570") is True
    assert run.nvidia_driver_any_changed([{}, {"results": [{"changed": True}]}]) is True
    assert run.nvidia_driver_any_changed_or_failed([{"failed": True}]) is True
    with pytest.raises(Exception, match="task results"):
        run.nvidia_driver_any_changed(["changed"])
    assert run.nvidia_driver_kernels_not_ready(KERNELS, "580.95.05") == [KERNELS[0], KERNELS[1], KERNELS[2]]
    assert run.nvidia_driver_kernel_problems([KERNELS[2]], "x", "580.95.05", "linux-headers-", True) == (
        "kernel 6.1.0-25-amd64 has NVIDIA module 535.216.01, not the installed driver 580.95.05; "
    )
