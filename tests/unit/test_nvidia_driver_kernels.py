"""Unit tests for plugins/modules/nvidia_driver_kernels.py and the nvidia_driver role's reboot readiness check.

Nodes are file trees under tmp_path laid out as Debian, Ubuntu and EL install kernels and NVIDIA modules:
/boot/vmlinuz-<release>, /lib/modules/<release>/build/Makefile (headers), DKMS's updates/dkms/, Ubuntu's
precompiled kernel/nvidia-<branch>srv[-open]/ directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.template import Templar, trust_as_template
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia import kernels as kernels_utils
from conftest import load_module, run_module
from test_nvidia_driver_render import LOADER, ROLE, Role

kernels_module = load_module("nvidia_driver_kernels")


def make_node(root: Path, kernels: dict[str, dict]) -> Path:
    """kernels: release -> {module: relative path below /lib/modules/<release> or None, headers: bool}."""
    (root / "boot").mkdir(parents=True, exist_ok=True)
    for release, spec in kernels.items():
        (root / "boot" / f"vmlinuz-{release}").write_bytes(b"MZ")
        (root / "boot" / f"config-{release}").write_text("CONFIG_MODULES=y\n")
        modules = root / "lib" / "modules" / release
        (modules / "kernel" / "fs").mkdir(parents=True, exist_ok=True)
        (modules / "kernel" / "fs" / "fuse.ko.xz").write_bytes(b"")
        if spec.get("module"):
            (modules / spec["module"]).parent.mkdir(parents=True, exist_ok=True)
            (modules / spec["module"]).write_bytes(b"")
        if spec.get("headers"):
            (modules / "build").mkdir()
            (modules / "build" / "Makefile").write_text("VERSION = 6\n")
    return root


DEBIAN_UPDATE_WITHOUT_HEADERS = {
    "6.1.0-9-amd64": {"module": "updates/dkms/nvidia-current.ko.xz", "headers": True},
    "6.1.0-28-amd64": {"module": "updates/dkms/nvidia-current.ko.xz", "headers": True},
    "6.1.0-30-amd64": {"module": None, "headers": False},  # unattended-upgrades installed the image only
}


def test_the_newest_kernel_boots_next_and_lacks_the_module(tmp_path):
    root = make_node(tmp_path, DEBIAN_UPDATE_WITHOUT_HEADERS)
    result = kernels_utils.inspect(str(root))
    assert [k["release"] for k in result["kernels"]] == ["6.1.0-30-amd64", "6.1.0-28-amd64", "6.1.0-9-amd64"]
    assert result["next_boot"] == "6.1.0-30-amd64"  # 30 > 28 > 9 in version order, not in text order
    assert result["next_boot_rule"] == "newest /boot/vmlinuz-*"
    assert result["missing"] == ["6.1.0-30-amd64"]
    assert result["kernels"][0] == {
        "release": "6.1.0-30-amd64",
        "next_boot": True,
        "headers": False,
        "module": None,
        "module_version": None,
    }
    assert result["kernels"][1]["module"] == "/lib/modules/6.1.0-28-amd64/updates/dkms/nvidia-current.ko.xz"
    assert result["kernels"][1]["headers"] is True


def test_grubby_names_the_default_kernel_on_el(tmp_path):
    root = make_node(
        tmp_path,
        {
            "5.14.0-427.13.1.el9_4.x86_64": {"module": "extra/nvidia-open/nvidia.ko.xz", "headers": True},
            "5.14.0-503.11.1.el9_5.x86_64": {"module": None, "headers": False},
        },
    )
    (root / "boot" / "vmlinuz-0-rescue-0123456789abcdef").write_bytes(b"MZ")
    result = kernels_utils.inspect(str(root), grubby_default="/boot/vmlinuz-5.14.0-427.13.1.el9_4.x86_64\n")
    assert result["next_boot"] == "5.14.0-427.13.1.el9_4.x86_64"
    assert result["next_boot_rule"] == "grubby --default-kernel"
    assert [k["release"] for k in result["kernels"]] == ["5.14.0-503.11.1.el9_5.x86_64", "5.14.0-427.13.1.el9_4.x86_64"]
    assert result["missing"] == ["5.14.0-503.11.1.el9_5.x86_64"]  # checked too, although it does not boot next


def test_ubuntus_precompiled_modules_count_and_dkms_updates_win(tmp_path):
    root = make_node(
        tmp_path,
        {"6.8.0-149-generic": {"module": "kernel/nvidia-580srv-open/nvidia.ko.zst"}},
    )
    result = kernels_utils.inspect(str(root), module_version=lambda path: "580.95.05")
    [kernel] = result["kernels"]
    assert kernel["module"] == "/lib/modules/6.8.0-149-generic/kernel/nvidia-580srv-open/nvidia.ko.zst"
    assert kernel["module_version"] == "580.95.05"
    dkms = root / "lib" / "modules" / "6.8.0-149-generic" / "updates" / "dkms"
    dkms.mkdir(parents=True)
    (dkms / "nvidia.ko.zst").write_bytes(b"")
    assert kernels_utils.inspect(str(root))["kernels"][0]["module"].endswith("/updates/dkms/nvidia.ko.zst")


def test_other_nvidia_modules_are_not_the_driver(tmp_path):
    root = make_node(tmp_path, {"6.8.0-149-generic": {"module": "updates/dkms/nvidia-uvm.ko.zst"}})
    assert kernels_utils.inspect(str(root))["missing"] == ["6.8.0-149-generic"]


def test_a_container_without_kernel_images_has_nothing_to_check(tmp_path):
    result = kernels_utils.inspect(str(tmp_path))
    assert result == {"kernels": [], "next_boot": None, "next_boot_rule": None, "missing": []}


def test_the_module_runs_read_only(tmp_path):
    root = make_node(tmp_path, DEBIAN_UPDATE_WITHOUT_HEADERS)
    result = run_module(kernels_module, {"root": str(root)}).result
    assert result["changed"] is False
    assert result["missing"] == ["6.1.0-30-amd64"]


# ---- the role's check --------------------------------------------------------------------------------------


def _readiness_assert() -> dict:
    tasks = yaml.safe_load((ROLE / "tasks" / "kernels.yml").read_text())
    return next(t for t in tasks if t["name"].startswith("Check that every installed kernel has"))


def _render(role: Role, task: dict, found: dict, built: dict | None = None) -> tuple[bool, str]:
    variables = dict(role.variables, __nvidia_driver_kernels_found=found)
    if built is not None:
        variables["__nvidia_driver_kernels_built"] = built
    variables.update({name: trust_as_template(value) for name, value in task["vars"].items()})
    templar = Templar(loader=LOADER, variables=variables)
    ok = templar.evaluate_conditional(trust_as_template(task["ansible.builtin.assert"]["that"]))
    message = templar.template(
        trust_as_template(task["ansible.builtin.assert"]["fail_msg" if not ok else "success_msg"])
    )
    return ok, " ".join(message.split())


def test_a_next_boot_kernel_without_headers_fails_naming_it(tmp_path):
    found = kernels_utils.inspect(str(make_node(tmp_path, DEBIAN_UPDATE_WITHOUT_HEADERS)))
    role = Role("debian12", facts={"packages": {"nvidia-kernel-dkms": [{"version": "535.216.01-1~deb12u1"}]}})
    ok, message = _render(role, _readiness_assert(), found, built=found)
    assert not ok
    assert message.startswith(
        "node1 would boot without its NVIDIA driver: kernel 6.1.0-30-amd64 (the kernel the boot loader starts next, "
        "newest /boot/vmlinuz-*) has no NVIDIA module and DKMS could not build one: its headers "
        "linux-headers-6.1.0-30-amd64 are not installed and not in the package sources; Do not reboot"
    )
    assert message.endswith(
        "apt-get purge linux-image-<release>), or make a kernel with the module the boot loader's default."
    )


def test_a_module_of_another_driver_version_is_not_ready(tmp_path):
    root = make_node(tmp_path, {"6.8.0-149-generic": {"module": "kernel/nvidia-580srv-open/nvidia.ko.zst"}})
    found = kernels_utils.inspect(str(root), module_version=lambda path: "580.95.05")
    role = Role(
        "ubuntu2404",
        nvidia_driver_ubuntu_precompiled=True,
        facts={"packages": {"nvidia-kernel-common-580-server": [{"version": "580.178.04-0ubuntu0.24.04.1"}]}},
    )
    ok, message = _render(role, _readiness_assert(), found)
    assert not ok
    assert (
        "kernel 6.8.0-149-generic (the kernel the boot loader starts next, newest /boot/vmlinuz-*) has NVIDIA "
        "module 580.95.05, not the installed driver 580.178.04;" in message
    )


def test_kernels_with_the_installed_drivers_module_pass(tmp_path):
    root = make_node(tmp_path, {"6.8.0-149-generic": {"module": "kernel/nvidia-580srv-open/nvidia.ko.zst"}})
    found = kernels_utils.inspect(str(root), module_version=lambda path: "580.178.04")
    role = Role(
        "ubuntu2404",
        nvidia_driver_ubuntu_precompiled=True,
        facts={"packages": {"nvidia-kernel-common-580-server": [{"version": "580.178.04-0ubuntu0.24.04.1"}]}},
    )
    ok, message = _render(role, _readiness_assert(), found)
    assert ok
    assert message == (
        "node1: 1 installed kernel(s), each with the NVIDIA module of driver 580.178.04 "
        "(next boot: 6.8.0-149-generic, newest /boot/vmlinuz-*)."
    )


@pytest.mark.parametrize(
    ("platform", "variables", "prefix"),
    [
        ("debian12", {}, "linux-headers-"),
        ("ubuntu2404", {}, "linux-headers-"),
        (
            "ubuntu2404",
            {"nvidia_driver_ubuntu_precompiled": True, "nvidia_driver_flavour": "open"},
            "linux-modules-nvidia-580-server-open-",
        ),
        ("rocky9", {}, "kernel-devel-"),
    ],
)
def test_the_package_a_kernel_without_module_needs(platform, variables, prefix):
    assert Role(platform, **variables)["__nvidia_driver_kernel_package_prefix"] == prefix


def test_only_looked_up_packages_with_a_candidate_are_installed():
    role = Role("debian12")
    lookup = {
        "results": [
            {
                "cmd": ["apt-cache", "policy", "linux-headers-6.1.0-30-amd64"],
                "rc": 0,
                "stdout": "linux-headers-6.1.0-30-amd64:\n  Installed: (none)\n  Candidate: 6.1.124-1\n",
            },
            {"cmd": ["apt-cache", "policy", "linux-headers-6.1.0-999-amd64"], "rc": 0, "stdout": ""},
            {
                "cmd": ["apt-cache", "policy", "linux-headers-6.1.0-31-amd64"],
                "rc": 0,
                "stdout": "linux-headers-6.1.0-31-amd64:\n  Installed: (none)\n  Candidate: (none)\n",
            },
        ]
    }
    templar = Templar(loader=LOADER, variables=dict(role.variables, __nvidia_driver_kernel_packages_lookup=lookup))
    assert templar.evaluate_expression(trust_as_template("__nvidia_driver_kernel_packages_available")) == [
        "linux-headers-6.1.0-30-amd64"
    ]
