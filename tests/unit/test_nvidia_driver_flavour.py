"""Unit tests for plugins/filter/nvidia_driver.py: nvidia_driver_flavour auto, from the GPUs' PCI device IDs.

Whole nodes come from the sysfs fixtures (tests/fixtures/sysfs/*.yml) built as real file trees and read by
gpu_node_facts, so the filter sees exactly what the role passes it. The role's wiring (vars/main.yml and the
preflight assert) is rendered with Ansible's Templar through test_nvidia_driver_render's Role helper.
"""

from __future__ import annotations

import pytest
import yaml
from ansible.template import trust_as_template
from conftest import gather_node_facts, load_module
from test_gpu_node_facts import node
from test_nvidia_driver_render import ROLE, Role

flavour_filter = load_module("nvidia_driver", "plugins/filter")
resolve = flavour_filter.nvidia_kernel_module


def _gpus(tmp_path, name: str) -> list[dict]:
    return gather_node_facts(str(node(tmp_path, name)))["gpus"]


@pytest.mark.parametrize(
    ("device_id", "architecture", "support"),
    [
        ("0x1b80", "pre-Turing (Maxwell, Pascal, Volta or older)", "incompatible"),  # GTX 1080, Pascal
        ("0x1db5", "pre-Turing (Maxwell, Pascal, Volta or older)", "incompatible"),  # V100 SXM2
        ("0x1df6", "pre-Turing (Maxwell, Pascal, Volta or older)", "incompatible"),  # V100S PCIe
        ("0x1e02", "Turing", "recommended"),  # TITAN RTX: first ID of the open modules' list
        ("0x1eb8", "Turing", "recommended"),  # T4
        ("0x2182", "Turing", "recommended"),  # GTX 1660 Ti, TU116
        ("0x20b2", "Ampere", "recommended"),  # A100 SXM4 80GB
        ("0x2236", "Ampere", "recommended"),  # A10
        ("0x24b0", "Ampere", "recommended"),  # RTX A4000
        ("0x2330", "Hopper", "recommended"),  # H100 SXM5
        ("0x2335", "Hopper", "recommended"),  # H200
        ("0x2342", "Grace Hopper", "required"),  # GH200 480GB
        ("0x26b9", "Ada Lovelace", "recommended"),  # L40S
        ("0x27b8", "Ada Lovelace", "recommended"),  # L4
        ("0x2901", "Blackwell or newer", "required"),  # B200
        ("0x2b85", "Blackwell or newer", "required"),  # RTX 5090
        ("0x2e06", "Blackwell or newer", "required"),  # GB10
        (None, "unknown", "unknown"),
        ("garbage", "unknown", "unknown"),
    ],
)
def test_architecture_from_the_device_id(device_id, architecture, support):
    assert flavour_filter.gpu_architecture(device_id) == (architecture, support)


def test_any_hopper_on_arm_is_a_grace_hopper():
    assert flavour_filter.gpu_architecture("0x2330", "aarch64") == ("Grace Hopper", "required")


@pytest.mark.parametrize(
    ("fixture", "branch", "flavour", "reason"),
    [
        ("dgx_a100", "580", "open", "open recommended for 0000:10:00.0 (0x20b2, Ampere)"),
        ("dgx_a100", "535", "open", "open recommended for 0000:10:00.0 (0x20b2, Ampere)"),  # data center GPUs
        ("workstation", "580", "open", "open recommended for 0000:01:00.0 (0x24b0, Ampere)"),
        (
            "workstation",
            "535",
            "proprietary",
            "proprietary: branch 535 supports the open modules only on data center GPUs, not on 0000:01:00.0 "
            "(0x24b0, Ampere)",
        ),
        ("hgx_b200", "580", "open", "open required by 0000:18:00.0 (0x2901, Blackwell or newer)"),
        ("gh200", "580", "open", "open required by 0009:01:00.0 (0x2342, Grace Hopper)"),
        ("gb200", "580", "open", "open required by 0008:01:00.0 (0x2941, Blackwell or newer)"),
        (
            "mixed_volta_ampere",
            "580",
            "proprietary",
            "proprietary: the open modules cannot drive 0000:18:00.0 (0x1db5, pre-Turing (Maxwell, Pascal, Volta "
            "or older))",
        ),
        ("no_nvidia", "580", "proprietary", "no NVIDIA GPU found on PCI, so the proprietary default is kept"),
    ],
)
def test_auto_resolves_from_the_sysfs_fixtures(tmp_path, fixture, branch, flavour, reason):
    result = resolve(_gpus(tmp_path, fixture), "auto", branch)
    assert result["error"] == ""
    assert result["flavour"] == flavour
    assert result["reason"].startswith(reason)


def test_a_node_with_blackwell_and_pascal_fails_naming_both(tmp_path):
    result = resolve(_gpus(tmp_path, "mixed_pascal_blackwell"), "auto", "580")
    assert result["flavour"] == ""
    assert result["error"] == (
        "No NVIDIA kernel module drives all the GPUs of this node: 0000:02:00.0 (0x2b85, Blackwell or newer) need "
        "the open GPU kernel modules, and 0000:01:00.0 (0x1b80, pre-Turing (Maxwell, Pascal, Volta or older)) work "
        "only with the proprietary ones. Move the older GPUs to another node; nvidia_driver_flavour cannot fix this."
    )


@pytest.mark.parametrize(("loaded", "flavour"), [("proprietary", "proprietary"), ("open", "open"), (None, "open")])
def test_auto_keeps_the_loaded_flavour_when_the_gpus_can_use_it(tmp_path, loaded, flavour):
    assert resolve(_gpus(tmp_path, "dgx_a100"), "auto", "580", loaded)["flavour"] == flavour


def test_auto_does_not_keep_a_loaded_proprietary_driver_that_a_blackwell_cannot_use(tmp_path):
    assert resolve(_gpus(tmp_path, "hgx_b200"), "auto", "580", "proprietary")["flavour"] == "open"


@pytest.mark.parametrize(
    ("fixture", "requested", "error"),
    [
        ("dgx_a100", "proprietary", ""),
        ("dgx_a100", "open", ""),
        ("no_nvidia", "open", ""),
        ("hgx_b200", "proprietary", "nvidia_driver_flavour is proprietary, but 0000:18:00.0 (0x2901, Blackwell"),
        ("mixed_volta_ampere", "open", "nvidia_driver_flavour is open, but the open GPU kernel modules cannot"),
    ],
)
def test_explicit_choices_are_kept_unless_the_gpus_cannot_use_them(tmp_path, fixture, requested, error):
    result = resolve(_gpus(tmp_path, fixture), requested, "580")
    assert result["flavour"] == requested
    assert result["error"].startswith(error) if error else result["error"] == ""


def _preflight_check() -> dict:
    preflight = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    return next(
        task["ansible.builtin.assert"]
        for task in preflight
        if task["name"] == "Check the platform, the variables and the node against each other"
    )


@pytest.mark.parametrize(
    ("fixture", "platform", "arch", "packages"),
    [
        ("hgx_b200", "ubuntu2404", "x86_64", ["nvidia-driver-580-server-open"]),
        ("gh200", "ubuntu2404", "aarch64", ["nvidia-driver-580-server-open"]),
        ("gb200", "ubuntu2404", "aarch64", ["nvidia-driver-580-server-open"]),
        ("gb200", "ubuntu2604", "aarch64", ["nvidia-driver-580-server-open"]),
        ("mixed_volta_ampere", "ubuntu2404", "x86_64", ["nvidia-driver-580-server"]),
        # NVIDIA's CUDA repository's 580 (Debian's default): auto picks the open modules for the workstation's GPUs too
        ("workstation", "debian12", "x86_64", ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-persistenced"]),
        ("dgx_a100", "debian12", "x86_64", ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-persistenced"]),
    ],
)
def test_the_role_installs_the_resolved_flavour(tmp_path, fixture, platform, arch, packages):
    gpus = _gpus(tmp_path, fixture)
    role = Role(platform, arch=arch, facts={"gpu_node": {"gpus": gpus, "gpu_count": len(gpus)}})
    assert role.check("flavour")
    assert role.condition(_preflight_check()["that"])
    assert role["__nvidia_driver_pinned_packages"] == packages


def test_the_role_fails_a_mixed_node_before_anything_changes(tmp_path):
    gpus = _gpus(tmp_path, "mixed_pascal_blackwell")
    role = Role("ubuntu2404", facts={"gpu_node": {"gpus": gpus}})
    check = _preflight_check()
    assert not role.check("flavour")
    assert not role.condition(check["that"])
    message = " ".join(role.templar.template(trust_as_template(check["fail_msg"])).split())
    assert message.startswith("node1: No NVIDIA kernel module drives all the GPUs of this node: 0000:02:00.0")
    assert message.endswith("nvidia_driver_flavour cannot fix this. Nothing was changed.")
