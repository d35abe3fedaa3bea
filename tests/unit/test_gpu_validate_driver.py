"""The doctor's driver and toolkit families (plugins/module_utils/gpu_validate/driver.py): each row passing and failing.

Each check is a function of its inputs (parameters, node facts, command results, files); the tables give each
row a passing case and the failing cases. FakeNode (conftest.py) answers the commands and file reads."""

from __future__ import annotations

import pytest
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.driver import (
    check_driver,
    check_toolkit,
    driver_row,
    peermem_row,
    reboot_row,
    smi_row,
    toolkit_row,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import truncate
from conftest import GPU_NODE, MISSING, NO_GPU, FakeNode, node, params, row

# ---- driver ------------------------------------------------------------------------------------------------

DRIVER_FIX_PIN = "Reboot to load the installed driver, or run playbooks/upgrade_driver.yml with the pin"


@pytest.mark.parametrize(
    ("p", "facts", "expected"),
    [
        ({}, GPU_NODE, row("NVIDIA driver", "ok", "580.95.05 loaded")),
        (
            {"driver_version": "580.95"},
            GPU_NODE,
            row("NVIDIA driver", "ok", "580.95.05 loaded (pin: version 580.95)"),
        ),
        ({"driver_branch": "580"}, GPU_NODE, row("NVIDIA driver", "ok", "580.95.05 loaded (pin: branch 580)")),
        (
            {"driver_version": "580.65.06"},
            GPU_NODE,
            row("NVIDIA driver", "fail", "580.95.05 loaded, but the pin is version 580.65.06", DRIVER_FIX_PIN),
        ),
        (
            {"driver_version": "580.9"},  # a prefix pin matches whole components only
            GPU_NODE,
            row("NVIDIA driver", "fail", "580.95.05 loaded, but the pin is version 580.9", DRIVER_FIX_PIN),
        ),
        (
            {"driver_branch": "570"},
            GPU_NODE,
            row("NVIDIA driver", "fail", "580.95.05 loaded, but the pin is branch 570", DRIVER_FIX_PIN),
        ),
        (
            {"driver_version": "580.95.05", "driver_branch": "570"},
            GPU_NODE,
            row("NVIDIA driver", "fail", "580.95.05 loaded, but the pin is version 580.95.05", DRIVER_FIX_PIN),
        ),
        (
            {},
            node(driver={"loaded": False}, nouveau_loaded=True),
            row(
                "NVIDIA driver",
                "fail",
                "not loaded on a node with 2 GPU(s); nouveau is loaded",
                "Run site.yml --tags driver; when the driver is installed, reboot the node to load it",
            ),
        ),
        ({}, NO_GPU, row("NVIDIA driver", "skipped", "no GPU (no NVIDIA GPU on PCI)")),
    ],
)
def test_driver_row(p, facts, expected):
    assert driver_row(params(**p), facts) == expected


SMI_OK = (0, "NVIDIA A100-SXM4-80GB, 580.95.05\nNVIDIA A100-SXM4-80GB, 580.95.05", "")


@pytest.mark.parametrize(
    ("facts", "smi", "expected"),
    [
        (GPU_NODE, SMI_OK, row("nvidia-smi", "ok", "2 GPU(s): NVIDIA A100-SXM4-80GB")),
        (
            GPU_NODE,
            (0, "NVIDIA A100-SXM4-80GB, 580.95.05", ""),
            row(
                "nvidia-smi",
                "warn",
                "sees 1 of the 2 GPUs on PCI",
                "Look for fallen-off GPUs (dmesg | grep -i xid) and reset or reboot",
            ),
        ),
        (
            GPU_NODE,
            (18, "", "Failed to initialize NVML: Driver/library version mismatch"),
            row(
                "nvidia-smi",
                "fail",
                "exit code 18: Failed to initialize NVML: Driver/library version mismatch",
                "Read the nvidia-smi message; a driver/library version mismatch needs a reboot",
            ),
        ),
        (
            GPU_NODE,
            None,
            row(
                "nvidia-smi",
                "fail",
                "not installed",
                "Run site.yml --tags driver (nvidia-smi comes with the driver packages)",
            ),
        ),
        (NO_GPU, None, row("nvidia-smi", "skipped", "no GPU")),
    ],
)
def test_smi_row(facts, smi, expected):
    assert smi_row(facts, smi) == expected


def test_a_long_nvidia_smi_message_is_cut_at_a_word_as_jinja_truncate_did():
    words = " ".join(["mismatch"] * 40)  # 359 characters
    detail = smi_row(GPU_NODE, (1, words, ""))["detail"]
    assert detail == "exit code 1: " + " ".join(["mismatch"] * 17) + "..."
    assert truncate("x" * 165) == "x" * 165  # within Jinja's leeway of 5


def _kernel(release, next_boot, module="/lib/modules/r/updates/dkms/nvidia.ko.zst", version=None):
    return {"release": release, "next_boot": next_boot, "module": module, "module_version": version}


REBOOT = "driver after next reboot"


@pytest.mark.parametrize(
    ("p", "kernels", "expected"),
    [
        (
            {},
            {"kernels": [_kernel("6.8.0-149-generic", True)], "next_boot_rule": "newest /boot/vmlinuz-*"},
            row(REBOOT, "ok", "kernel 6.8.0-149-generic boots next with NVIDIA module nvidia.ko.zst"),
        ),
        (  # an older kernel with its module too
            {},
            {"kernels": [_kernel("6.8.0-151-generic", True), _kernel("6.8.0-149-generic", False)]},
            row(REBOOT, "ok", "kernel 6.8.0-151-generic boots next with NVIDIA module nvidia.ko.zst"),
        ),
        (
            {"driver_version": "580.95"},
            {"kernels": [_kernel("6.8.0-149-generic", True, version="580.95.05")]},
            row(REBOOT, "ok", "kernel 6.8.0-149-generic boots next with NVIDIA module 580.95.05"),
        ),
        (
            {},
            {
                "kernels": [_kernel("6.8.0-151-generic", True, module=None), _kernel("6.8.0-149-generic", False)],
                "next_boot_rule": "newest /boot/vmlinuz-*",
            },
            row(
                REBOOT,
                "fail",
                "kernel 6.8.0-151-generic boots next (newest /boot/vmlinuz-*) and has no NVIDIA module",
                "Run site.yml --tags driver: it builds or installs the module for every installed kernel,"
                " or names the missing headers; do not reboot before",
            ),
        ),
        (
            {"driver_version": "580.95.05"},
            {"kernels": [_kernel("6.8.0-149-generic", True, version="570.172.08")]},
            row(
                REBOOT,
                "fail",
                "kernel 6.8.0-149-generic boots next with NVIDIA module 570.172.08, but the pin is version 580.95.05",
                "Run playbooks/upgrade_driver.yml with the pin, or rebuild the module (dkms autoinstall)",
            ),
        ),
        (
            {},
            {"kernels": [_kernel("6.8.0-151-generic", True), _kernel("6.8.0-149-generic", False, module=None)]},
            row(
                REBOOT,
                "warn",
                "kernel 6.8.0-151-generic boots next with the NVIDIA module; no module for 6.8.0-149-generic",
                "Run site.yml --tags driver, or remove the kernels without a module",
            ),
        ),
        (
            {},
            {"kernels": [], "next_boot": None},
            row(REBOOT, "skipped", "no kernel image in /boot (a container boots its host kernel)"),
        ),
    ],
)
def test_reboot_row(p, kernels, expected):
    assert reboot_row(params(**p), GPU_NODE, kernels) == expected


def test_reboot_row_without_gpu_is_skipped():
    assert reboot_row(params(), NO_GPU, None) == row(REBOOT, "skipped", "no GPU")


PEERMEM_FILE = "/etc/modules-load.d/nvidia-peermem.conf"


@pytest.mark.parametrize(
    ("p", "facts", "boot_file", "expected"),
    [
        (
            {"peermem": True},
            GPU_NODE,
            True,
            row("nvidia-peermem", "ok", f"loaded, and loaded at boot ({PEERMEM_FILE})"),
        ),
        (
            {"peermem": True},
            GPU_NODE,
            False,
            row(
                "nvidia-peermem",
                "fail",
                f"{PEERMEM_FILE} is missing: not loaded at boot",
                "Run site.yml --tags driver with nvidia_driver_peermem: true",
            ),
        ),
        (
            {"peermem": True},
            node(driver={"loaded": True, "version": "580.95.05", "modules": ["nvidia"]}),
            True,
            row(
                "nvidia-peermem",
                "fail",
                "not loaded next to the NVIDIA driver",
                "modprobe nvidia-peermem; it needs the InfiniBand core (ib_core) loaded",
            ),
        ),
        (
            {"peermem": True},
            node(driver={"loaded": False}),
            True,
            row(
                "nvidia-peermem",
                "warn",
                f"loads at boot ({PEERMEM_FILE}); the NVIDIA driver is not loaded",
                "Reboot to load the driver (and nvidia-peermem with it)",
            ),
        ),
        ({"peermem": True}, NO_GPU, False, row("nvidia-peermem", "skipped", "no GPU")),
        ({}, GPU_NODE, False, row("nvidia-peermem", "skipped", "not asked for (gpu_validate_peermem is false)")),
    ],
)
def test_peermem_row(p, facts, boot_file, expected):
    assert peermem_row(params(**p), facts, boot_file) == expected


def test_the_driver_family_asks_nvidia_smi_and_reads_the_kernels_of_the_tree(tmp_path):
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot" / "vmlinuz-6.8.0-151-generic").write_bytes(b"MZ")
    fake = FakeNode(
        commands={("/usr/bin/nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"): SMI_OK}
    )
    rows = check_driver(params(kernels_root=str(tmp_path)), GPU_NODE, fake)
    assert [r["check"] for r in rows] == ["NVIDIA driver", "nvidia-smi", REBOOT, "nvidia-peermem"]
    assert rows[1]["status"] == "ok"
    assert rows[2]["detail"] == "kernel 6.8.0-151-generic boots next (newest /boot/vmlinuz-*) and has no NVIDIA module"
    # without a GPU nothing runs
    fake = FakeNode()
    assert {r["status"] for r in check_driver(params(), NO_GPU, fake)} == {"skipped"}
    assert fake.ran == []


# ---- toolkit -----------------------------------------------------------------------------------------------

CTK = (0, "NVIDIA Container Toolkit CLI version 1.17.8\ncommit: fake", "")
PKG = (0, "1.17.8-1", "")
NOT_INSTALLED = (1, "", "dpkg-query: no packages found matching nvidia-container-toolkit")


@pytest.mark.parametrize(
    ("p", "facts", "ctk", "pkg", "expected", "installed"),
    [
        (
            {"toolkit_version": "1.17.8-1"},
            GPU_NODE,
            CTK,
            PKG,
            row("container toolkit", "ok", "nvidia-container-toolkit 1.17.8-1 (pin 1.17.8-1)"),
            True,
        ),
        ({}, GPU_NODE, CTK, None, row("container toolkit", "ok", "nvidia-container-toolkit 1.17.8"), True),
        (  # no package manager data: the CLI version matches the pin's version part
            {"toolkit_version": "1.17.8-1"},
            GPU_NODE,
            (0, "NVIDIA Container Toolkit CLI version v1.17.8", ""),
            NOT_INSTALLED,
            row("container toolkit", "ok", "nvidia-container-toolkit 1.17.8 (pin 1.17.8-1)"),
            True,
        ),
        (
            {"toolkit_version": "1.18.0-1"},
            GPU_NODE,
            CTK,
            PKG,
            row(
                "container toolkit",
                "fail",
                "1.17.8-1 installed, but the pin is 1.18.0-1",
                "Run site.yml --tags toolkit to install the pinned version",
            ),
            True,
        ),
        (
            {},
            GPU_NODE,
            MISSING,
            NOT_INSTALLED,
            row(
                "container toolkit",
                "fail",
                "nvidia-ctk not found and nvidia-container-toolkit not installed",
                "Run site.yml --tags toolkit",
            ),
            False,
        ),
        (
            {},
            NO_GPU,
            MISSING,
            NOT_INSTALLED,
            row("container toolkit", "skipped", "no GPU (and no toolkit installed)"),
            False,
        ),
        (
            {},
            NO_GPU,
            (0, "", ""),
            None,
            row("container toolkit", "skipped", "no GPU (and no toolkit installed)"),
            False,
        ),
    ],
)
def test_toolkit_row(p, facts, ctk, pkg, expected, installed):
    assert toolkit_row(params(**p), facts, ctk, pkg) == (expected, installed)


SCRIPTS = "TEST STAND-IN package, script stand-ins: NVIDIA's tools are not in it (not in GPUNODE_UPSTREAM_DIR)\nmore\n"
CARRYING = "TEST STAND-IN package carrying NVIDIA's own tools (toolkit 1.20.0 built from source)\nmore\n"


def test_the_toolkit_row_names_a_stand_in_package_and_warns_only_for_script_stand_ins():
    """Issue 41: the doctor says what stood in. Packages carrying NVIDIA's tools: ok, named; script stand-ins (nothing
    of NVIDIA's runs): warn, named, with the fix. Never a failure the stand-in causes."""
    pin = {"toolkit_version": "1.17.8-1"}
    base = "nvidia-container-toolkit 1.17.8-1 (pin 1.17.8-1)"
    assert toolkit_row(params(**pin), GPU_NODE, CTK, PKG, CARRYING) == (
        row("container toolkit", "ok", f"{base}: {CARRYING.splitlines()[0]}"),
        True,
    )
    scripts, installed = toolkit_row(params(**pin), NO_GPU, CTK, PKG, SCRIPTS)
    assert installed and scripts["status"] == "warn"
    assert scripts["detail"] == f"{base}: {SCRIPTS.splitlines()[0]}"
    assert "nvidia_container_toolkit_repo_base_url" in scripts["fix"]
    # a wrong pin still fails, stand-in or not
    assert toolkit_row(params(toolkit_version="1.18.0-1"), GPU_NODE, CTK, PKG, SCRIPTS)[0]["status"] == "fail"


def test_the_toolkit_family_reads_the_packages_stand_in_marker():
    argv = ["dpkg-query", "--show", "--showformat=${Version}"]
    fake = FakeNode(
        commands={("nvidia-ctk", "--version"): CTK, (*argv, "nvidia-container-toolkit"): PKG},
        files={"/usr/share/doc/nvidia-container-toolkit/STAND-IN": SCRIPTS},
    )
    rows, _ = check_toolkit(params(package_version_argv=argv), GPU_NODE, fake)
    assert rows[0]["status"] == "warn" and "script stand-ins" in rows[0]["detail"]


def test_the_toolkit_family_asks_nvidia_ctk_and_the_package_manager():
    argv = ["dpkg-query", "--show", "--showformat=${Version}"]
    fake = FakeNode(commands={("nvidia-ctk", "--version"): CTK, (*argv, "nvidia-container-toolkit"): PKG})
    rows, installed = check_toolkit(params(package_version_argv=argv), GPU_NODE, fake)
    assert rows == [row("container toolkit", "ok", "nvidia-container-toolkit 1.17.8-1")] and installed
    assert fake.ran == [["nvidia-ctk", "--version"], [*argv, "nvidia-container-toolkit"]]
