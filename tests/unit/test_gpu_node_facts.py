"""Unit tests for plugins/modules/gpu_node_facts.py.

Parsers are tested with real command and kernel output. Whole nodes are tested against file trees built
from tests/fixtures/sysfs/*.yml (see the README there) with real sysfs layouts: relative symlinks from
/sys/bus/pci/devices into /sys/devices, driver and iommu_group links.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd.versions import parse_containerd_version
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts import installers as node_facts_installers
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.gpu import (
    parse_numa_node,
    parse_nvidia_driver_version,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.host import version_at_least
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.installers import (
    CONTAINERD2_GATE,
    parse_rancher_version,
    release_gate,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.kernel import parse_kernel_release
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.platform import (
    parse_mokutil_sb_state,
    parse_secure_boot_efivar,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.runtimes import (
    KUBELET_CONFIG_DIR_MIN,
    parse_crio_version,
    parse_docker_version,
    parse_kubelet_version,
    parse_oci_runtime_version,
)
from conftest import ROOT, gather_node_facts, load_module, run_module, shared_values

facts_module = load_module("gpu_node_facts")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"
SECURE_BOOT_VAR = "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"

# The names other roles use: renaming or dropping one breaks them.
# the parameter the role passes from the value's one home
TOOLKIT = {"toolkit_config": shared_values()["__gpu_node_facts_toolkit_config"]}
CONTRACT_KEYS = {
    "has_gpu",
    "gpu_count",
    "gpus",
    "nvswitch_count",
    "nvswitches",
    "driver",
    "nvidia_smi",
    "runtimes",
    "kernel",
    "oci_runtimes",
    "runtimes_installed",
    "runtimes_running",
    "kubelet",
    "container",
    "container_type",
    "vm",
    "vm_type",
    "apparmor_enabled",
    "secure_boot",
    "fuse",
}
SERVICE_KEYS = {"installed", "running", "version", "binary"}
SYSTEMCTL_IS_ACTIVE = (
    "/usr/bin/systemctl",
    "is-active",
    "docker.service",
    "containerd.service",
    "crio.service",
    "kubelet.service",
)


# --- tree builder -------------------------------------------------------------------------------------


def _symlink(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


def _add_pci_function(root: Path, line: str) -> None:
    """Add one function from an `lspci -nn`-like line.

    <address> <vendor>:<device> <class> [numa=N] [iommu=N] [driver=X] [parent=A] [physfn]
    """
    address, ids, pci_class, *options = line.split()
    vendor, device = ids.split(":")
    opts = dict(option.split("=", 1) if "=" in option else (option, "") for option in options)
    domain = address.split(":")[0]
    parent = f"{opts['parent']}/" if "parent" in opts else ""
    function_dir = root / "sys" / "devices" / f"pci{domain}:00" / f"{parent}{address}"
    function_dir.mkdir(parents=True)
    for name, value in (("vendor", vendor), ("device", device), ("class", pci_class)):
        (function_dir / name).write_text(f"0x{value}\n")
    (function_dir / "numa_node").write_text(f"{opts.get('numa', '-1')}\n")
    if "driver" in opts:
        driver_dir = root / "sys" / "bus" / "pci" / "drivers" / opts["driver"]
        driver_dir.mkdir(parents=True, exist_ok=True)
        _symlink(function_dir / "driver", driver_dir)
    if "iommu" in opts:
        group_dir = root / "sys" / "kernel" / "iommu_groups" / opts["iommu"]
        group_dir.mkdir(parents=True, exist_ok=True)
        _symlink(function_dir / "iommu_group", group_dir)
    if "physfn" in opts:
        _symlink(function_dir / "physfn", function_dir.parent)
    _symlink(root / "sys" / "bus" / "pci" / "devices" / address, function_dir)


def build_tree(root: Path, spec: dict) -> Path:
    for line in spec.get("pci", []):
        _add_pci_function(root, line)
    for rel, text in spec.get("files", {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for rel, hex_bytes in spec.get("binary_files", {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(bytes.fromhex(hex_bytes))
    for rel in spec.get("dirs", []):
        (root / rel).mkdir(parents=True, exist_ok=True)
    for rel in spec.get("executables", []):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("#!/bin/sh\nexit 0\n")
        (root / rel).chmod(0o755)
    for pid, comm in spec.get("processes", {}).items():
        (root / "proc" / str(pid)).mkdir(parents=True, exist_ok=True)
        (root / "proc" / str(pid) / "comm").write_text(f"{comm}\n")
    if "cpu_flags" in spec:
        (root / "proc").mkdir(exist_ok=True)
        (root / "proc" / "cpuinfo").write_text(f"processor\t: 0\nflags\t\t: {spec['cpu_flags']}\n\n")
    return root


def node(tmp_path: Path, name: str) -> Path:
    spec = yaml.safe_load((FIXTURES / f"{name}.yml").read_text())
    return build_tree(tmp_path / name, spec)


class FakeCommands:
    """Stands in for module.run_command: answers from a table keyed by argv, records every call."""

    def __init__(self, answers: dict[tuple[str, ...], tuple[int, str, str] | None]):
        self.answers = answers
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: list[str]):
        self.calls.append(tuple(argv))
        return self.answers.get(tuple(argv), (127, "", f"{argv[0]}: command not found"))


# --- parsers (real output) ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("Docker version 20.10.24+dfsg1, build 297e128\n", ("20.10.24", "20.10.24+dfsg1")),
        ("Docker version 26.1.5+dfsg1, build a72d7cd\n", ("26.1.5", "26.1.5+dfsg1")),
        ("Docker version 28.5.1, build f8215cc\n", ("28.5.1", "28.5.1")),
        ("dockerd: command not found\n", (None, None)),
        ("", (None, None)),
    ],
)
def test_parse_docker_version(output, expected):
    assert parse_docker_version(output) == expected


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        # Debian 12 package
        ("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+b1\n", ("1.6.20", "1.6.20~ds1")),
        # Docker's containerd.io package, 2.x
        ("containerd containerd.io v2.1.4 75cb2b7193e4e490e9fbdc236c0e811ccaba3376\n", ("2.1.4", "2.1.4")),
        # Docker's containerd.io package on EL, 1.6
        ("containerd containerd.io 1.6.32 8b3b7ca2e5ce38e8f31a34f35b2b68ceb8470d89\n", ("1.6.32", "1.6.32")),
        # upstream release tarball, 1.7
        (
            "containerd github.com/containerd/containerd v1.7.24 88bf19b2105c8b17560993bee28a01ddc2f97182\n",
            ("1.7.24", "1.7.24"),
        ),
        # 2.x module path ends in /v2: that is not the version
        (
            "containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7193e4e490e9fbdc236c0e811ccaba3376\n",
            ("2.1.4", "2.1.4"),
        ),
        ("containerd: error while loading shared libraries\n", (None, None)),
        (None, (None, None)),
    ],
)
def test_parse_containerd_version(output, expected):
    assert parse_containerd_version(output) == expected


CRIO_1_19 = """crio version 1.19.6
Version:       1.19.6
GitCommit:     c12bb210e9888cf6160134c7e636ee952c45c05a
GitTreeState:  clean
BuildDate:     2022-03-15T18:18:24Z
GoVersion:     go1.15.2
Compiler:      gc
Platform:      linux/amd64
Linkmode:      dynamic
"""
CRIO_VERSION_FIELD_ONLY = """Version:        1.31.0
GitCommit:      5bd2ce1d0c8a8ac7a4d9a6d7ebf1bbc2e7f2a1b4
GitCommitDate:  2024-08-27T14:38:54Z
GitTreeState:   clean
GoVersion:      go1.22.5
Compiler:       gc
Platform:       linux/amd64
Linkmode:       static
"""


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (CRIO_1_19, ("1.19.6", "1.19.6")),
        ("crio version 1.30.0\nVersion:        1.30.0\nGoVersion:      go1.22.0\n", ("1.30.0", "1.30.0")),
        (CRIO_VERSION_FIELD_ONLY, ("1.31.0", "1.31.0")),
        (
            "INFO[0000] RDT is not enabled: failed to detect resctrl mount point\ncrio version 1.22.0\n",
            ("1.22.0", "1.22.0"),
        ),
        ("GoVersion:      go1.22.5\n", (None, None)),
    ],
)
def test_parse_crio_version(output, expected):
    assert parse_crio_version(output) == expected


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("Kubernetes v1.31.2\n", ("1.31.2", "1.31.2")),
        ("Kubernetes v1.28.15\n", ("1.28.15", "1.28.15")),
        ("Kubernetes v1.30.4+k3s1\n", ("1.30.4", "1.30.4+k3s1")),
        ("Flag --foo has been deprecated\n", (None, None)),
    ],
)
def test_parse_kubelet_version(output, expected):
    assert parse_kubelet_version(output) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n"
            "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n",
            ("535.183.01", "proprietary"),
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build  "
            "(dvs-builder@U16-I3-B03-4-3)  Thu Feb 22 01:25:25 UTC 2024\n"
            "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n",
            ("550.54.14", "open"),
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.65.06  Release Build  "
            "(dvs-builder@U22-I3-AE18-23-3)  Wed Jul 23 23:07:33 UTC 2025\n",
            ("580.65.06", "open"),
        ),
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  177.80  Wed Oct  1 14:43:46 PDT 2008\n",
            ("177.80", "proprietary"),
        ),
        ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64 malformed\n", (None, None)),
        ("", (None, None)),
    ],
)
def test_parse_nvidia_driver_version(text, expected):
    assert parse_nvidia_driver_version(text) == expected


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (bytes.fromhex("0600000001"), True),  # NV+BS+RT attributes, value 1
        (bytes.fromhex("0600000000"), False),
        (bytes.fromhex("2600000001"), True),  # with the time-based authenticated write attribute
        (bytes.fromhex("06000000"), None),  # attributes only: unreadable value
        (b"", None),
        (None, None),
    ],
)
def test_parse_secure_boot_efivar(data, expected):
    assert parse_secure_boot_efivar(data) is expected


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("SecureBoot enabled\n", True),
        ("SecureBoot disabled\n", False),
        ("SecureBoot disabled\nPlatform is in Setup Mode\n", False),
        ("This system doesn't support Secure Boot\n", False),
        ("EFI variables are not supported on this system\n", None),
        (None, None),
    ],
)
def test_parse_mokutil_sb_state(output, expected):
    assert parse_mokutil_sb_state(output) is expected


@pytest.mark.parametrize(("text", "expected"), [("0\n", 0), ("1\n", 1), ("-1\n", None), ("", None), (None, None)])
def test_parse_numa_node(text, expected):
    assert parse_numa_node(text) == expected


@pytest.mark.parametrize(
    ("version", "expected"), [("1.30.0", True), ("1.31.2", True), ("1.29.10", False), ("2.0", True), (None, None)]
)
def test_kubelet_config_dir_threshold(version, expected):
    assert version_at_least(version, KUBELET_CONFIG_DIR_MIN) is expected


@pytest.mark.parametrize(
    ("files", "dirs", "expected"),
    [
        ({"sys/module/apparmor/parameters/enabled": "Y\n"}, ["sys/kernel/security/apparmor"], (True, True, True)),
        ({"sys/module/apparmor/parameters/enabled": "N\n"}, ["sys/kernel/security/apparmor"], (False, True, False)),
        ({"sys/module/apparmor/parameters/enabled": "Y\n"}, [], (True, False, False)),  # container: no securityfs
        ({}, [], (False, False, False)),  # kernel without AppArmor (EL)
    ],
)
def test_apparmor(tmp_path, files, dirs, expected):
    root = build_tree(tmp_path, {"files": files, "dirs": dirs})
    facts = gather_node_facts(str(root))
    assert (facts["apparmor"]["kernel_enabled"], facts["apparmor"]["securityfs"], facts["apparmor_enabled"]) == expected


# --- whole nodes from fixture trees ------------------------------------------------------------------


def test_dgx_a100_gpus_and_nvswitches(tmp_path):
    facts = gather_node_facts(str(node(tmp_path, "dgx_a100")))

    assert facts["has_gpu"] is True
    assert facts["gpu_count"] == 8
    assert [gpu["pci_address"] for gpu in facts["gpus"]] == [
        "0000:10:00.0",
        "0000:16:00.0",
        "0000:49:00.0",
        "0000:4d:00.0",
        "0000:8a:00.0",
        "0000:8f:00.0",
        "0000:c6:00.0",
        "0000:ca:00.0",
    ]
    assert facts["gpus"][0] == {
        "pci_address": "0000:10:00.0",
        "vendor_id": "0x10de",
        "device_id": "0x20b2",
        "class": "0x030200",
        "class_name": "3D controller",
        "numa_node": 0,
        "iommu_group": 21,
        "driver": "nvidia",
    }
    assert [gpu["numa_node"] for gpu in facts["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert {gpu["driver"] for gpu in facts["gpus"]} == {"nvidia"}
    assert facts["gpu_vf_count"] == 0
    assert facts["nvswitch_count"] == 6
    assert facts["nvswitches"][0] == {
        "pci_address": "0000:54:00.0",
        "device_id": "0x1af1",
        "class": "0x068000",
        "numa_node": 0,
        "driver": "nvidia-nvswitch",
    }
    assert [switch["pci_address"][5:7] for switch in facts["nvswitches"]] == ["54", "55", "56", "57", "58", "59"]


@pytest.mark.parametrize(
    ("fixture", "superchip", "addresses", "numa"),
    [
        ("gh200", "GH200", ["0009:01:00.0"], [0]),
        ("gb200", "GB200", ["0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"], [0, 0, 1, 1]),
        ("hgx_b200", None, [], [0, 0, 0, 0, 1, 1, 1, 1]),  # B200 (0x2901) on x86: Blackwell, no Grace
        ("dgx_a100", None, [], [0, 0, 0, 0, 1, 1, 1, 1]),
    ],
)
def test_grace_superchips_from_their_gpus(tmp_path, fixture, superchip, addresses, numa):
    """Arm64 Grace nodes (sysfs fixtures gh200, gb200): the superchip GPUs in their own PCI domains behind
    NVIDIA's root ports, their NUMA nodes the Grace CPUs', no NVSwitch on PCI (NVL72's switches are in switch trays)."""
    facts = gather_node_facts(str(node(tmp_path, fixture)))
    assert facts["grace"] == {"superchip": superchip, "gpus": addresses}
    assert [gpu["numa_node"] for gpu in facts["gpus"]] == numa
    if superchip:
        assert [gpu["pci_address"] for gpu in facts["gpus"]] == addresses
        assert {gpu["class_name"] for gpu in facts["gpus"]} == {"3D controller"}
        assert facts["nvswitch_count"] == 0
        assert facts["has_gpu"] is True


def test_dgx_a100_driver_and_node(tmp_path):
    facts = gather_node_facts(str(node(tmp_path, "dgx_a100")))

    assert facts["driver"] == {
        "loaded": True,
        "version": "535.183.01",
        "source": "proc",
        "kernel_module_type": "proprietary",
        "modules": ["nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_peermem"],
    }
    assert facts["nouveau_loaded"] is False
    assert facts["nvidia_smi"] == "/usr/bin/nvidia-smi"
    assert facts["secure_boot"] is True
    assert facts["apparmor_enabled"] is True
    assert facts["fuse"] == {"device": True, "module_loaded": True, "builtin": False}
    assert (facts["container"], facts["container_type"]) == (False, None)
    assert (facts["vm"], facts["vm_type"]) == (False, None)


def test_dgx_a100_runtimes_without_commands(tmp_path):
    facts = gather_node_facts(str(node(tmp_path, "dgx_a100")))

    assert facts["runtimes_installed"] == ["containerd"]
    assert facts["runtimes_running"] == ["containerd"]
    assert facts["runtimes"]["containerd"] == {
        "installed": True,
        "binary": "/usr/bin/containerd",
        "version": None,
        "version_full": None,
        "running": True,
        "service_state": None,
        "socket": "/run/containerd/containerd.sock",
    }
    assert facts["runtimes"]["docker"]["installed"] is False
    assert facts["runtimes"]["docker"]["running"] is False
    assert facts["runtimes"]["crio"]["binary"] is None
    assert facts["kubelet"]["installed"] is True
    assert facts["kubelet"]["running"] is True
    assert facts["kubelet"]["version"] is None
    assert facts["kubelet"]["config_dir_supported"] is None


def test_dgx_a100_with_commands(tmp_path):
    root = node(tmp_path, "dgx_a100")
    commands = FakeCommands(
        {
            SYSTEMCTL_IS_ACTIVE: (
                3,
                "inactive\nactive\ninactive\nactivating\n",
                "",
            ),
            ("/usr/bin/containerd", "--version"): (
                0,
                "containerd github.com/containerd/containerd 1.7.24~ds1 1.7.24~ds1-6+b2\n",
                "",
            ),
            ("/usr/bin/kubelet", "--version"): (0, "Kubernetes v1.31.2\n", ""),
        }
    )
    facts = gather_node_facts(str(root), run_command=commands)

    assert facts["runtimes"]["containerd"]["version"] == "1.7.24"
    assert facts["runtimes"]["containerd"]["version_full"] == "1.7.24~ds1"
    assert facts["runtimes"]["containerd"]["service_state"] == "active"
    assert facts["runtimes"]["docker"]["service_state"] == "inactive"
    assert facts["runtimes_running"] == ["containerd"]
    assert facts["kubelet"]["version"] == "1.31.2"
    assert facts["kubelet"]["config_dir_supported"] is True
    # "activating" is not active, but a kubelet process is there (it restarts in a loop until it joins)
    assert facts["kubelet"]["service_state"] == "activating"
    assert facts["kubelet"]["running"] is True
    # Secure Boot was read from the EFI variable, so mokutil was not needed; no detect-virt binary in the tree
    assert not [call for call in commands.calls if "mokutil" in call[0] or "detect-virt" in call[0]]
    assert ("/usr/bin/containerd", "--version") in commands.calls
    assert not [call for call in commands.calls if call[0] in ("/usr/sbin/dockerd", "/usr/bin/crio")]


def test_systemctl_inactive_without_process_is_not_running(tmp_path):
    spec = yaml.safe_load((FIXTURES / "dgx_a100.yml").read_text())
    del spec["processes"][1422]  # containerd crashed, its socket file is left behind
    root = build_tree(tmp_path, spec)
    commands = FakeCommands(
        {
            SYSTEMCTL_IS_ACTIVE: (
                3,
                "inactive\nfailed\ninactive\nactive\n",
                "",
            ),
        }
    )
    facts = gather_node_facts(str(root), run_command=commands)

    assert facts["runtimes"]["containerd"]["running"] is False
    assert facts["runtimes"]["containerd"]["service_state"] == "failed"
    assert facts["runtimes"]["containerd"]["socket"] == "/run/containerd/containerd.sock"
    assert facts["runtimes_running"] == []
    assert facts["runtimes_installed"] == ["containerd"]


def test_workstation_vga_gpu_without_driver(tmp_path):
    facts = gather_node_facts(str(node(tmp_path, "workstation")))

    assert facts["has_gpu"] is True
    assert facts["gpu_count"] == 1, "the GPU's HDMI audio function and the Intel iGPU are not NVIDIA GPUs"
    assert facts["gpus"] == [
        {
            "pci_address": "0000:01:00.0",
            "vendor_id": "0x10de",
            "device_id": "0x24b0",
            "class": "0x030000",
            "class_name": "VGA compatible controller",
            "numa_node": None,
            "iommu_group": 12,
            "driver": None,
        }
    ]
    assert facts["nvswitch_count"] == 0
    assert facts["driver"] == {
        "loaded": False,
        "version": None,
        "source": None,
        "kernel_module_type": None,
        "modules": [],
    }
    assert facts["nvidia_smi"] is None
    assert facts["secure_boot"] is False
    assert facts["fuse"] == {"device": True, "module_loaded": False, "builtin": False}
    assert facts["runtimes_installed"] == ["docker", "containerd"]
    assert facts["runtimes_running"] == ["docker", "containerd"]
    assert facts["runtimes"]["docker"]["binary"] == "/usr/sbin/dockerd"
    assert facts["runtimes"]["docker"]["socket"] == "/run/docker.sock"
    assert facts["kubelet"]["installed"] is False
    assert facts["kubelet"]["running"] is False


def test_node_without_nvidia(tmp_path):
    facts = gather_node_facts(str(node(tmp_path, "no_nvidia")))

    assert facts["has_gpu"] is False
    assert facts["gpu_count"] == 0
    assert facts["gpus"] == []
    assert facts["nvswitches"] == []
    assert facts["driver"]["loaded"] is False
    assert facts["secure_boot"] is None, "legacy BIOS boot: no /sys/firmware/efi"
    assert facts["apparmor_enabled"] is False
    assert facts["fuse"] == {"device": True, "module_loaded": True, "builtin": True}
    assert facts["runtimes_installed"] == ["crio"]
    assert facts["runtimes_running"] == ["crio"]
    assert facts["runtimes"]["crio"]["socket"] == "/var/run/crio/crio.sock"
    assert facts["kubelet"]["running"] is True
    assert (facts["vm"], facts["container"]) == (False, False)


def test_container_on_a_vm(tmp_path):
    facts = gather_node_facts(str(node(tmp_path, "container")))

    assert (facts["container"], facts["container_type"]) == (True, "docker")
    assert (facts["vm"], facts["vm_type"]) == (True, "qemu")
    assert facts["has_gpu"] is False
    assert facts["apparmor"] == {"kernel_enabled": True, "securityfs": False}
    assert facts["apparmor_enabled"] is False
    assert facts["fuse"] == {"device": False, "module_loaded": True, "builtin": False}
    assert facts["secure_boot"] is None
    assert facts["runtimes_running"] == ["docker", "containerd"]
    assert facts["runtimes"]["containerd"]["socket"] is None


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"run/.containerenv": 'engine="podman-4.3.1"\n'}, "podman"),
        ({"run/systemd/container": "systemd-nspawn\n"}, "systemd-nspawn"),
        ({"proc/1/environ": "PATH=/usr/bin\0container=lxc\0TERM=xterm\0"}, "lxc"),
        ({"proc/1/cgroup": "1:name=systemd:/kubepods/besteffort/pod0a1b/4e5f\n"}, "container-other"),
        ({"proc/1/cgroup": "0::/init.scope\n"}, None),
    ],
)
def test_container_kinds_from_files(tmp_path, files, expected):
    facts = gather_node_facts(str(build_tree(tmp_path, {"files": files})))
    assert facts["container_type"] == expected
    assert facts["container"] is (expected is not None)


@pytest.mark.parametrize(
    ("dmi", "flags", "expected"),
    [
        ({"sys_vendor": "VMware, Inc.", "product_name": "VMware7,1"}, "fpu hypervisor", "vmware"),
        ({"sys_vendor": "Microsoft Corporation", "product_name": "Virtual Machine"}, "fpu hypervisor", "microsoft"),
        ({"sys_vendor": "Microsoft Corporation", "product_name": "Surface Laptop 5"}, "fpu vme", None),
        ({"sys_vendor": "Amazon EC2", "product_name": "p4d.24xlarge"}, "fpu hypervisor", "amazon"),
        ({"sys_vendor": "Amazon EC2", "product_name": "p4de.metal"}, "fpu vme", None),
        ({"sys_vendor": "Google", "product_name": "Google Compute Engine"}, "fpu hypervisor", "google"),
        ({"sys_vendor": "Acme"}, "fpu vme hypervisor", "vm-other"),
        ({"sys_vendor": "Dell Inc.", "product_name": "PowerEdge XE9680"}, "fpu vme", None),
    ],
)
def test_vm_kinds_from_files(tmp_path, dmi, flags, expected):
    files = {f"sys/class/dmi/id/{key}": f"{value}\n" for key, value in dmi.items()}
    facts = gather_node_facts(str(build_tree(tmp_path, {"files": files, "cpu_flags": flags})))
    assert facts["vm_type"] == expected
    assert facts["vm"] is (expected is not None)


def test_detect_virt_output_wins_over_files(tmp_path):
    root = node(tmp_path, "container")
    (root / "usr" / "bin").mkdir(parents=True, exist_ok=True)
    detect_virt = root / "usr" / "bin" / "systemd-detect-virt"
    detect_virt.write_text("#!/bin/sh\n")
    detect_virt.chmod(0o755)
    commands = FakeCommands(
        {
            ("/usr/bin/systemd-detect-virt", "--container"): (0, "docker\n", ""),
            ("/usr/bin/systemd-detect-virt", "--vm"): (0, "kvm\n", ""),
        }
    )
    facts = gather_node_facts(str(root), run_command=commands)
    assert (facts["container_type"], facts["vm_type"]) == ("docker", "kvm")

    commands.answers[("/usr/bin/systemd-detect-virt", "--vm")] = (1, "none\n", "")
    facts = gather_node_facts(str(root), run_command=commands)
    assert (facts["vm"], facts["vm_type"]) == (False, None), "systemd-detect-virt knows better than DMI"


def test_gpu_virtual_functions_open_driver_from_sysfs(tmp_path):
    root = build_tree(
        tmp_path,
        {
            "pci": [
                "0000:41:00.0 10de:2331 030200 numa=1 iommu=40 driver=nvidia",
                "0000:41:00.4 10de:2331 030200 numa=1 iommu=44 driver=nvidia physfn",
                "0000:41:00.5 10de:2331 030200 numa=1 iommu=45 physfn",
            ],
            # version from the module's sysfs directory only (no /proc/driver/nvidia in the tree)
            "files": {"sys/module/nvidia/version": "570.124.06\n", "sys/module/nouveau/initstate": "live\n"},
        },
    )
    facts = gather_node_facts(str(root))
    assert facts["gpu_count"] == 1
    assert facts["gpu_vf_count"] == 2
    assert facts["gpus"][0]["device_id"] == "0x2331"
    assert facts["driver"]["loaded"] is True
    assert (facts["driver"]["version"], facts["driver"]["source"]) == ("570.124.06", "sysfs")
    assert facts["driver"]["kernel_module_type"] is None
    assert facts["nouveau_loaded"] is True


def test_secure_boot_from_mokutil_when_efivars_are_missing(tmp_path):
    root = build_tree(tmp_path, {"dirs": ["sys/firmware/efi"], "executables": ["usr/bin/mokutil"]})
    commands = FakeCommands({("/usr/bin/mokutil", "--sb-state"): (0, "SecureBoot enabled\n", "")})
    assert gather_node_facts(str(root), run_command=commands)["secure_boot"] is True
    assert gather_node_facts(str(root))["secure_boot"] is None, "no commands: unknown"


def test_old_sysfs_efi_vars_data_file(tmp_path):
    root = build_tree(
        tmp_path,
        {"binary_files": {"sys/firmware/efi/vars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c/data": "01"}},
    )
    assert gather_node_facts(str(root))["secure_boot"] is True


def test_empty_tree_gives_a_complete_answer(tmp_path):
    facts = gather_node_facts(str(tmp_path))
    assert set(facts) >= CONTRACT_KEYS
    assert facts["has_gpu"] is False
    assert facts["driver"]["loaded"] is False
    assert facts["runtimes_installed"] == []
    assert facts["secure_boot"] is None
    assert (facts["container"], facts["vm"]) == (False, False)


def test_unreadable_pci_files_are_skipped_not_fatal(tmp_path):
    root = build_tree(tmp_path, {"pci": ["0000:3b:00.0 10de:20b5 030200 numa=0"]})
    function_dir = root / "sys" / "bus" / "pci" / "devices" / "0000:3b:00.0"
    (function_dir / "class").unlink()
    (function_dir / "numa_node").write_text("garbage\n")
    (root / "sys" / "bus" / "pci" / "devices" / "0000:3c:00.0").symlink_to("../../../devices/gone")
    facts = gather_node_facts(str(root))
    assert facts["gpu_count"] == 0, "a function without a class is not counted as a GPU"


# --- the module --------------------------------------------------------------------------------------


def test_fact_names_are_the_contract(tmp_path):
    facts = gather_node_facts(str(node(tmp_path, "dgx_a100")))
    missing = CONTRACT_KEYS - set(facts)
    assert not missing, f"fact names other roles use are missing: {sorted(missing)}"
    for name in ("docker", "containerd", "crio"):
        assert set(facts["runtimes"][name]) >= SERVICE_KEYS, name
    assert set(facts["kubelet"]) >= SERVICE_KEYS
    assert set(facts["driver"]) >= {"loaded", "version"}
    assert set(facts["fuse"]) >= {"device", "module_loaded"}
    assert set(facts["gpus"][0]) >= {"pci_address", "vendor_id", "device_id", "class", "numa_node", "driver"}
    assert set(facts["nvswitches"][0]) >= {"pci_address", "device_id"}


def _documented_facts() -> dict:
    return yaml.safe_load(facts_module.RETURN)["ansible_facts"]["contains"]["gpu_node"]["contains"]


def _undocumented(name: str, sample, value) -> list[str]:
    """Where a fact's value and its RETURN sample disagree on keys (dicts, entries keyed by runtime, lists of dicts)."""
    if isinstance(sample, list) and sample and isinstance(sample[0], dict):
        return [f"{name}[]: {sorted(set(item) ^ set(sample[0]))}" for item in value if set(item) != set(sample[0])]
    if not isinstance(sample, dict) or not isinstance(value, dict):
        return []
    if name == "path_exists":  # keyed by the paths the task asks about (test_paths): none here
        return []
    if name in ("runtimes", "oci_runtimes", "runtime_defaults"):  # keyed by runtime: compare the entries
        return [
            f"{name}.{key}: {sorted(set(entry) ^ set(sample[key]))}"
            for key, entry in value.items()
            if key in sample and set(entry) != set(sample[key])
        ]
    return [f"{name}: {sorted(set(value) ^ set(sample))}"] if set(value) != set(sample) else []


@pytest.mark.parametrize("fixture", [*sorted(p.stem for p in FIXTURES.glob("*.yml")), "rke2 agent", "empty tree"])
def test_the_documentation_names_every_fact_the_module_returns(tmp_path, fixture):
    """RETURN is the facts' one description (ansible-doc renders it): its keys are the facts the subject files
    (plugins/module_utils/node_facts/*.py) assemble, and each sample has the keys of the fact it shows."""
    commands = None
    if fixture == "rke2 agent":
        root = rke2_agent(tmp_path)
        commands = FakeCommands({("/usr/local/bin/rke2", "--version"): (0, RKE2_VERSION, "")})
    elif fixture == "empty tree":
        root = tmp_path
    else:
        root = node(tmp_path, fixture)
    facts = gather_node_facts(str(root), run_command=commands)
    documented = _documented_facts()
    assert sorted(facts) == sorted(documented), (
        f"returned but not in RETURN: {sorted(set(facts) - set(documented))}; "
        f"in RETURN but not returned: {sorted(set(documented) - set(facts))}"
    )
    wrong = [line for name, doc in documented.items() for line in _undocumented(name, doc.get("sample"), facts[name])]
    assert not wrong, f"RETURN samples whose keys differ from the facts: {wrong}"


@pytest.mark.parametrize("check_mode", [False, True])
def test_module_sets_facts_from_root(tmp_path, monkeypatch, check_mode):
    from ansible.module_utils.basic import AnsibleModule

    def no_commands(self, *args, **kwargs):
        raise AssertionError(f"the module ran a command with gather_runtimes=false: {args}")

    monkeypatch.setattr(AnsibleModule, "run_command", no_commands)
    root = node(tmp_path, "dgx_a100")
    result = run_module(facts_module, {**TOOLKIT, "root": str(root), "gather_runtimes": False}, check_mode=check_mode)

    assert not result.failed, result.result
    assert result.result["changed"] is False
    facts = result.result["ansible_facts"]["gpu_node"]
    assert facts == gather_node_facts(str(root))
    assert facts["gpu_count"] == 8
    assert facts["nvswitch_count"] == 6
    assert facts["driver"]["version"] == "535.183.01"


def test_module_runs_no_command_below_another_root(tmp_path, monkeypatch):
    from ansible.module_utils.basic import AnsibleModule

    def no_commands(self, *args, **kwargs):
        raise AssertionError(f"commands describe the running system, not the tree at root: {args}")

    monkeypatch.setattr(AnsibleModule, "run_command", no_commands)
    result = run_module(facts_module, {**TOOLKIT, "root": str(node(tmp_path, "workstation"))})
    assert not result.failed, result.result
    assert result.result["ansible_facts"]["gpu_node"]["runtimes"]["docker"]["version"] is None


def test_module_fails_on_a_root_that_is_no_directory(tmp_path):
    missing = tmp_path / "nope"
    result = run_module(facts_module, {**TOOLKIT, "root": str(missing)})
    assert result.failed
    assert str(missing) in result.result["msg"]
    assert "not a directory" in result.result["msg"]


# --- kernel and OCI runtimes (what user-namespaced FUSE pods need) ------------------------------------


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev\n", ("1.1.5", "1.1.5+ds1")),
        ("runc version 1.2.5\ncommit: v1.2.5-0-g59923ef\nspec: 1.2.0\n", ("1.2.5", "1.2.5")),
        ("crun version 1.9.2\ncommit: 35274d346d2e9ffeacb22cc11590b0266a23d6\n+SYSTEMD +SELINUX\n", ("1.9.2", "1.9.2")),
        ("crun version UNKNOWN\n", (None, None)),
        ("", (None, None)),
    ],
)
def test_parse_oci_runtime_version(output, expected):
    assert parse_oci_runtime_version(output) == expected


@pytest.mark.parametrize(
    ("release", "expected"),
    [
        ("6.1.0-28-amd64\n", ("6.1.0", "6.1.0-28-amd64")),
        ("6.12.48+deb13-amd64", ("6.12.48", "6.12.48+deb13-amd64")),
        ("5.14.0-427.13.1.el9_4.x86_64", ("5.14.0", "5.14.0-427.13.1.el9_4.x86_64")),
        ("6.3-rc1", ("6.3", "6.3-rc1")),
        ("", (None, None)),
    ],
)
def test_parse_kernel_release(release, expected):
    assert parse_kernel_release(release) == expected


def test_kernel_and_oci_runtimes_from_the_tree(tmp_path):
    (tmp_path / "proc" / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "proc" / "sys" / "user").mkdir(parents=True)
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "sys" / "kernel" / "osrelease").write_text("6.1.0-28-amd64\n")
    (tmp_path / "proc" / "sys" / "user" / "max_user_namespaces").write_text("0\n")
    (tmp_path / "proc" / "self" / "status").write_text("Name:\tpython3\nSeccomp:\t0\nSeccomp_filters:\t0\n")
    sbin = tmp_path / "usr" / "sbin"
    sbin.mkdir(parents=True)
    (sbin / "runc").write_text("#!/bin/sh\n")
    (sbin / "runc").chmod(0o755)
    commands = FakeCommands({("/usr/sbin/runc", "--version"): (0, "runc version 1.1.5+ds1\ncommit: x\n", "")})
    facts = gather_node_facts(str(tmp_path), run_command=commands)
    assert facts["kernel"] == {
        "release": "6.1.0-28-amd64",
        "version": "6.1.0",
        "max_user_namespaces": 0,
        "seccomp": True,
    }
    assert facts["oci_runtimes"]["runc"] == {
        "installed": True,
        "binary": "/usr/sbin/runc",
        "version": "1.1.5",
        "version_full": "1.1.5+ds1",
    }
    assert facts["oci_runtimes"]["crun"]["installed"] is False
    assert not [call for call in commands.calls if "crun" in call[0]]


def test_kernel_facts_of_an_empty_tree_are_unknown(tmp_path):
    facts = gather_node_facts(str(tmp_path))
    assert facts["kernel"] == {"release": None, "version": None, "max_user_namespaces": None, "seccomp": False}
    assert facts["oci_runtimes"]["runc"]["version"] is None


# --- cluster installers (paths and gates cited in node_facts/installers.py) ---------------------------


def _files(root: Path, executables=(), files=(), dirs=(), links=None) -> Path:
    for path in dirs:
        (root / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for path in (*executables, *files):
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("#!/bin/sh\n")
        if path in executables:
            target.chmod(0o755)
    for link, target in (links or {}).items():
        (root / link.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / link.lstrip("/")).symlink_to(target)
    return root


SYSTEMD = {"executables": ["/usr/bin/systemctl"], "dirs": ["/run/systemd/system"]}
RKE2_VERSION = (
    "rke2 version v1.32.2+rke2r1 (5fa8f2d0d6c4b8a6b1f0c8e2f1d2a3b4c5d6e7f8)\ngo version go1.23.6 X:boringcrypto\n"
)
K3S_OLD_VERSION = "k3s version v1.27.4+k3s1 (36645e73)\ngo version go1.20.6\n"


def rke2_agent(tmp_path: Path) -> Path:
    return _files(
        tmp_path,
        executables=[*SYSTEMD["executables"], "/usr/local/bin/rke2", "/var/lib/rancher/rke2/data/abc/bin/containerd"],
        files=[
            "/usr/local/lib/systemd/system/rke2-server.service",
            "/usr/local/lib/systemd/system/rke2-agent.service",
            "/run/k3s/containerd/containerd.sock",
        ],
        dirs=[*SYSTEMD["dirs"], "/var/lib/rancher/rke2/agent/etc/containerd"],
        links={"/var/lib/rancher/rke2/bin": "data/abc/bin"},
    )


def test_parse_rancher_version():
    assert parse_rancher_version(RKE2_VERSION) == ("1.32.2", "1.32.2+rke2r1")
    assert parse_rancher_version(K3S_OLD_VERSION) == ("1.27.4", "1.27.4+k3s1")
    assert parse_rancher_version("rke2: not found") == (None, None)


@pytest.mark.parametrize(
    ("version", "gate", "expected"),
    [
        ("1.24.16", "BASE_TEMPLATE_GATE", False),
        ("1.24.17", "BASE_TEMPLATE_GATE", True),
        ("1.23.99", "BASE_TEMPLATE_GATE", False),
        ("1.28.0", "BASE_TEMPLATE_GATE", False),
        ("1.28.1", "BASE_TEMPLATE_GATE", True),
        ("1.29.0", "BASE_TEMPLATE_GATE", True),
        ("1.26.11", "DEFAULT_RUNTIME_GATE", False),
        ("1.26.12", "DEFAULT_RUNTIME_GATE", True),
        ("1.25.16", "DEFAULT_RUNTIME_GATE", False),
        ("1.28.5", "DEFAULT_RUNTIME_GATE", True),
        ("1.29.0", "DEFAULT_RUNTIME_GATE", True),
        (None, "DEFAULT_RUNTIME_GATE", None),
    ],
)
def test_installer_release_gates(version, gate, expected):
    assert release_gate(version, getattr(node_facts_installers, gate)) is expected


@pytest.mark.parametrize(
    ("version", "expected"),
    [("1.31.5", False), ("1.31.6", True), ("1.32.1", False), ("1.32.2", True), ("1.33.0", True)],
)
def test_rke2_containerd_2_gate(version, expected):
    assert release_gate(version, CONTAINERD2_GATE["rke2"], first=31) is expected
    assert release_gate("1.30.9", CONTAINERD2_GATE["rke2"]) is False


def test_rke2_agent_node(tmp_path):
    root = rke2_agent(tmp_path)
    commands = FakeCommands(
        {
            ("/usr/bin/systemctl", "is-active", "rke2-server.service", "rke2-agent.service"): (
                3,
                "inactive\nactive\n",
                "",
            ),
            ("/usr/local/bin/rke2", "--version"): (0, RKE2_VERSION, ""),
            ("/var/lib/rancher/rke2/bin/containerd", "--version"): (
                0,
                "containerd github.com/k3s-io/containerd v2.0.2-k3s2 e8b9b7b4\n",
                "",
            ),
        }
    )
    installer = gather_node_facts(str(root), run_command=commands)["installer"]
    etc = "/var/lib/rancher/rke2/agent/etc/containerd"
    assert installer["name"] == "rke2"
    assert installer["found"] == ["rke2"]
    assert (installer["version"], installer["version_full"]) == ("1.32.2", "1.32.2+rke2r1")
    assert installer["service"] == "rke2-agent.service"
    assert installer["service_state"] == "active"
    assert installer["containerd"] == {
        "binary": "/var/lib/rancher/rke2/bin/containerd",
        "version": "2.0.2",
        "socket": "/run/k3s/containerd/containerd.sock",
        "running": True,
        "config": f"{etc}/config.toml",
        "config_regenerated": "agent start",
        "template": f"{etc}/config-v3.toml.tmpl",
        "templates": [f"{etc}/config-v3.toml.tmpl", f"{etc}/config.toml.tmpl"],
        "template_base": True,
        "nvidia_detection": True,
        "default_runtime_option": True,
    }
    assert installer["kubelet"] == {
        "settings": "agent_config_dropin",
        "config": "/etc/rancher/rke2/config.yaml",
        "dropin_dir": "/etc/rancher/rke2/config.yaml.d",
        "dropin": "/etc/rancher/rke2/config.yaml.d/90-gpu-node-kubelet.yaml",
        "files": ["/etc/rancher/rke2/config.yaml", "/etc/rancher/rke2/config.yaml.d"],
    }
    # the standard containerd is not there: the runtimes facts stay as they were (no containerd on PATH)
    assert installer["containerd"]["binary"] not in (None, "/usr/bin/containerd")


def test_the_runtime_defaults_of_an_rke2_node_are_its_own_containerds(tmp_path):
    """The GPU pods guard (issue 25) reads runtime_defaults: on RKE2/k3s they come from the installer's containerd
    with the config its agent generated, not from a containerd on PATH (there is none)."""
    root = rke2_agent(tmp_path)
    etc = "/var/lib/rancher/rke2/agent/etc/containerd"
    dump = (
        'version = 3\n[plugins."io.containerd.cri.v1.runtime".containerd]\n  default_runtime_name = "nvidia"\n'
        '[plugins."io.containerd.cri.v1.runtime"]\n  enable_cdi = false\n'
    )
    commands = FakeCommands(
        {
            ("/usr/local/bin/rke2", "--version"): (0, RKE2_VERSION, ""),
            ("/var/lib/rancher/rke2/bin/containerd", "--version"): (0, "containerd x v2.0.2-k3s2 e8b9\n", ""),
            ("/var/lib/rancher/rke2/bin/containerd", "--config", f"{etc}/config.toml", "config", "dump"): (0, dump, ""),
        }
    )
    facts = gather_node_facts(str(root), run_command=commands)
    assert facts["runtimes_installed"] == []
    state = facts["runtime_defaults"]["containerd"]
    assert (state["default"], state["cdi"], state["source"]) == ("nvidia", False, "containerd config dump")
    # without commands: the generated config.toml itself
    (root / etc.lstrip("/")).mkdir(parents=True, exist_ok=True)
    (root / etc.lstrip("/") / "config.toml").write_text(dump.replace('"nvidia"', '"runc"'))
    state = gather_node_facts(str(root), run_command=None)["runtime_defaults"]
    assert state["containerd"]["default"] == "runc" and state["containerd"]["source"] == "files"


def test_old_k3s_server_gets_the_v2_template_and_no_default_runtime_option(tmp_path):
    root = _files(
        tmp_path,
        executables=[*SYSTEMD["executables"], "/usr/local/bin/k3s", "/var/lib/rancher/k3s/data/1a2b/bin/containerd"],
        files=["/etc/systemd/system/k3s.service"],
        dirs=SYSTEMD["dirs"],
        links={"/var/lib/rancher/k3s/data/current": "1a2b"},
    )
    commands = FakeCommands(
        {
            ("/usr/bin/systemctl", "is-active", "k3s.service"): (0, "active\n", ""),
            ("/usr/local/bin/k3s", "--version"): (0, K3S_OLD_VERSION, ""),
            ("/var/lib/rancher/k3s/data/current/bin/containerd", "--version"): (
                0,
                "containerd github.com/k3s-io/containerd v1.7.3-k3s1\n",
                "",
            ),
        }
    )
    installer = gather_node_facts(str(root), run_command=commands)["installer"]
    assert installer["name"] == "k3s"
    assert installer["service"] == "k3s.service"
    assert installer["containerd"]["binary"] == "/var/lib/rancher/k3s/data/current/bin/containerd"
    assert installer["containerd"]["template"] == "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl"
    assert installer["containerd"]["template_base"] is False  # 1.27.5 has it, 1.27.4 not
    assert installer["containerd"]["default_runtime_option"] is False
    assert installer["containerd"]["nvidia_detection"] is None  # not verified for this release
    assert installer["containerd"]["running"] is False
    assert installer["kubelet"]["dropin_dir"] == "/etc/rancher/k3s/config.yaml.d"


def test_k3s_without_commands_knows_its_paths_but_no_version_or_gate(tmp_path):
    root = _files(tmp_path, executables=["/usr/local/bin/k3s"], files=["/etc/systemd/system/k3s-agent.service"])
    installer = gather_node_facts(str(root))["installer"]
    assert installer["name"] == "k3s"
    assert installer["service"] == "k3s-agent.service"
    assert installer["version"] is None
    assert installer["containerd"]["template"] is None
    assert installer["containerd"]["template_base"] is None
    assert installer["containerd"]["default_runtime_option"] is None
    assert installer["containerd"]["socket"] == "/run/k3s/containerd/containerd.sock"


def test_the_active_installer_wins_when_both_rancher_installers_left_traces(tmp_path):
    root = rke2_agent(tmp_path)
    _files(root, executables=["/usr/local/bin/k3s"], files=["/etc/systemd/system/k3s-agent.service"])
    commands = FakeCommands(
        {
            ("/usr/bin/systemctl", "is-active", "rke2-server.service", "rke2-agent.service", "k3s-agent.service"): (
                3,
                "inactive\ninactive\nactive\n",
                "",
            ),
        }
    )
    installer = gather_node_facts(str(root), run_command=commands)["installer"]
    assert installer["name"] == "k3s"
    assert installer["found"] == ["rke2", "k3s"]


def test_kubespray_node(tmp_path):
    root = _files(
        tmp_path,
        executables=["/usr/local/bin/containerd", "/usr/local/bin/kubelet"],
        files=["/etc/kubernetes/kubelet.env", "/etc/containerd/cri-base.json", "/etc/systemd/system/kubelet.service"],
    )
    installer = gather_node_facts(str(root))["installer"]
    assert installer["name"] == "kubespray"
    assert installer["version"] is None
    assert installer["containerd"]["binary"] == "/usr/local/bin/containerd"
    assert installer["containerd"]["config"] == "/etc/containerd/config.toml"
    assert installer["containerd"]["config_regenerated"] == "kubespray run"
    assert installer["kubelet"]["settings"] == "kubespray_inventory"
    assert installer["kubelet"]["files"] == ["/etc/kubernetes/kubelet.env", "/etc/kubernetes/kubelet-config.yaml"]


def test_kubespray_wins_over_kubeadm_traces(tmp_path):
    root = _files(
        tmp_path,
        files=["/etc/kubernetes/kubelet.env", "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"],
    )
    installer = gather_node_facts(str(root))["installer"]
    assert installer["name"] == "kubespray"
    assert installer["found"] == ["kubespray", "kubeadm"]


def test_kubeadm_node_takes_the_kubelets_version(tmp_path):
    root = _files(
        tmp_path,
        executables=["/usr/bin/kubelet", "/usr/bin/containerd"],
        files=["/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"],
    )
    commands = FakeCommands({("/usr/bin/kubelet", "--version"): (0, "Kubernetes v1.31.2\n", "")})
    installer = gather_node_facts(str(root), run_command=commands)["installer"]
    assert installer["name"] == "kubeadm"
    assert installer["version"] == "1.31.2"
    assert installer["evidence"] == ["/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"]
    assert installer["containerd"]["socket"] == "/run/containerd/containerd.sock"
    assert installer["kubelet"]["settings"] == "kubelet_flags"


def test_a_node_without_an_installer_says_unknown(tmp_path):
    installer = gather_node_facts(str(tmp_path))["installer"]
    assert installer["name"] == "unknown"
    assert installer["found"] == []
    assert installer["containerd"] is None


# --- the action: the minimal facts first, where the play gathered none (plugins/action/gpu_node_facts.py) ---------

ACTION_PLAY = """
- name: A play that gathered no facts
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Gather the GPU node facts
      gpu_node_facts:
        gather_runtimes: false
      register: without
    - name: Keep what the one task set
      ansible.builtin.copy:
        content: "{{{{ {{'os_family': ansible_facts.os_family | default(none), 'gpu_node': ansible_facts.gpu_node
                     is defined, 'set': without.ansible_facts.keys() | list}} | to_json }}}}"
        dest: "{out}/without.json"
        mode: "0644"
- name: A play that gathered facts
  hosts: localhost
  connection: local
  gather_facts: true
  tasks:
    - name: Gather the GPU node facts
      gpu_node_facts:
        gather_runtimes: false
      register: gathered
    - name: Keep what the one task set
      ansible.builtin.copy:
        content: "{{{{ gathered.ansible_facts.keys() | list | to_json }}}}"
        dest: "{out}/with.json"
        mode: "0644"
"""


def test_the_one_task_gathers_the_minimal_facts_only_where_the_play_did_not(tmp_path):
    """The role's one task: a play without gather_facts gets the OS family from it (the setup module's min
    subset first), a play that gathered facts gets the GPU node facts alone (setup does not run again)."""
    import json

    from conftest import run_local_playbook

    (tmp_path / "play.yml").write_text(ACTION_PLAY.format(out=tmp_path))
    run = run_local_playbook(tmp_path / "play.yml")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    without = json.loads((tmp_path / "without.json").read_text())
    assert without["os_family"] and without["gpu_node"], without
    assert {"ansible_os_family", "ansible_distribution", "gpu_node"} <= set(without["set"]), without
    assert json.loads((tmp_path / "with.json").read_text()) == ["gpu_node"]


def test_the_action_passes_the_toolkit_config_path_from_its_one_home_where_the_task_names_none():
    """The module has no default for toolkit_config; a task outside the role (a playbook's, an ad-hoc run) gets the
    value of roles/gpu_node_facts/vars/main.yml from the action, and a task's own path is kept."""
    action = load_module("gpu_node_facts", subdir="plugins/action")
    assert action.module_args({"gather_runtimes": False}) == {"gather_runtimes": False, **TOOLKIT}
    assert action.module_args({"toolkit_config": "/opt/nvidia/config.toml"}) == {
        "toolkit_config": "/opt/nvidia/config.toml"
    }
    # the variable check's arguments (the role's task: the action runs role_variables with them) stay out of the module
    checked = {"spec": "meta/argument_specs.yml", "checks": "__gpu_node_facts_variable_checks", "gather_runtimes": True}
    assert action.module_args(checked) == {"gather_runtimes": True, **TOOLKIT}


def test_a_gather_runtimes_that_is_not_a_boolean_is_refused_naming_the_role_variable():
    """The role's one variable is checked by its action (the role has no role_variables task): "yes" or "true" in
    quotes would reach the module as a string; the refusal names gpu_node_facts_gather_runtimes and the fix."""
    action = load_module("gpu_node_facts", subdir="plugins/action")
    assert action.gather_runtimes_problem(True) is None
    assert action.gather_runtimes_problem(False) is None
    for bad in ("yes", "true", 1, None):
        problem = action.gather_runtimes_problem(bad)
        assert problem and problem.startswith("gpu_node_facts_gather_runtimes must be a boolean"), (bad, problem)
        assert "gpu_node_facts_gather_runtimes: true" in problem


# --- the minimal facts in the module's own run (issue 47: no setup module run of its own) --------------------------

MINIMAL_KEYS = {
    "ansible_distribution",
    "ansible_distribution_version",
    "ansible_os_family",
    "ansible_pkg_mgr",
    "ansible_service_mgr",
    "ansible_kernel",
    "ansible_architecture",
}


def test_the_module_gathers_the_minimal_facts_in_its_own_run_where_asked():
    """gather_minimal: setup's min subset under setup's names, with gather_subset and module_setup, beside gpu_node;
    without it the module sets gpu_node alone."""
    asked = run_module(facts_module, {**TOOLKIT, "gather_runtimes": False, "gather_minimal": True})
    assert not asked.failed, asked.result
    facts = asked.result["ansible_facts"]
    assert set(facts) >= MINIMAL_KEYS | {"gpu_node", "gather_subset", "module_setup"}, sorted(facts)
    assert facts["gather_subset"] == ["min"] and facts["module_setup"] is True
    assert facts["ansible_os_family"] and facts["ansible_distribution"]
    assert not any(name.startswith(("ansible_devices", "ansible_interfaces", "ansible_memtotal")) for name in facts)
    plain = run_module(facts_module, {**TOOLKIT, "gather_runtimes": False})
    assert list(plain.result["ansible_facts"]) == ["gpu_node"]


def test_the_minimal_facts_are_those_of_setups_min_subset():
    """The same fact names as ansible.builtin.setup with gather_subset min on this machine."""
    import subprocess
    import sys

    ansible = Path(sys.executable).parent / "ansible"
    interpreter = f"ansible_python_interpreter={sys.executable}"
    setup = subprocess.run(
        [str(ansible), "localhost", "-e", interpreter, "-m", "ansible.builtin.setup", "-a", "gather_subset=min"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert setup.returncode == 0, setup.stdout + setup.stderr
    expected = set(yaml.safe_load(setup.stdout.split("=>", 1)[1])["ansible_facts"])
    ours = run_module(facts_module, {**TOOLKIT, "gather_runtimes": False, "gather_minimal": True})
    assert set(ours.result["ansible_facts"]) - {"gpu_node"} == expected


def test_the_facts_say_which_of_the_test_paths_exist(tmp_path):
    """path_exists: keyed by the path tested, below root (so a reader asking about the running system finds no
    answer about another tree); as given where root is /."""
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "present.conf").write_text("x\n")
    (tmp_path / "etc" / "file").write_text("x\n")
    asked = ["/etc/present.conf", "/etc/absent.conf", "/etc/file/below"]
    facts = gather_node_facts(str(tmp_path), test_paths=asked)
    assert facts["path_exists"] == {
        f"{tmp_path}/etc/present.conf": True,
        f"{tmp_path}/etc/absent.conf": False,
        f"{tmp_path}/etc/file/below": False,
    }
    here = str(tmp_path / "etc" / "present.conf")
    live = run_module(facts_module, {**TOOLKIT, "gather_runtimes": False, "test_paths": [here, here + ".no"]})
    assert live.result["ansible_facts"]["gpu_node"]["path_exists"] == {here: True, here + ".no": False}
    assert gather_node_facts(str(tmp_path))["path_exists"] == {}


def test_a_path_that_cannot_be_told_counts_as_existing(tmp_path, monkeypatch):
    def refused(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(facts_module.os, "stat", refused)
    assert facts_module.path_exists("/", ["/var/lib/secret/file"]) == {"/var/lib/secret/file": True}


def test_the_role_asks_for_the_gpu_settings_files():
    """The facts role's task passes the paths of the gpu_settings role's files, from their one home."""
    shared = shared_values()
    tasks = yaml.safe_load((ROOT / "roles" / "gpu_node_facts" / "tasks" / "main.yml").read_text())
    assert tasks[0]["gpunode.provisioning.gpu_node_facts"]["test_paths"] == "{{ __gpu_node_facts_test_paths }}"
    assert shared["__gpu_node_facts_test_paths"] == [
        "{{ __gpu_node_facts_gpu_settings_record }}",
        "{{ __gpu_node_facts_gpu_settings_unit }}",
        "{{ __gpu_node_facts_gpu_settings_modprobe }}",
    ]


def run_facts_action(task_vars: dict, node_result: dict, args: dict | None = None):
    """plugins/action/gpu_node_facts.py's run with the module runs recorded: (result or the exception, calls)."""
    from unittest import mock

    plugin = load_module("gpu_node_facts", subdir="plugins/action")
    task = mock.MagicMock()
    task.args = {"gather_runtimes": False, **(args or {})}
    task.check_mode = False
    task.diff = False
    task.async_val = 0
    calls = []

    def execute_module(name, module_args=None, task_vars=None, **kwargs):
        calls.append((name, dict(module_args or {})))
        return json_copy(node_result)

    action = plugin.ActionModule(task, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), None)
    with mock.patch.object(action, "_execute_module", side_effect=execute_module):
        try:
            return action.run(task_vars=task_vars), calls
        except Exception as exc:  # the test looks at what the action raised
            return exc, calls


def json_copy(value):
    import json

    return json.loads(json.dumps(value))


DEBIAN_MINIMAL = {
    "ansible_os_family": "Debian",
    "ansible_distribution": "Debian",
    "ansible_distribution_version": "12.8",
    "gather_subset": ["min"],
    "module_setup": True,
}


def test_the_action_runs_one_module_and_no_setup_where_the_play_gathered_no_facts():
    node_result = {"changed": False, "ansible_facts": {**DEBIAN_MINIMAL, "gpu_node": {"has_gpu": False}}}
    result, calls = run_facts_action({"inventory_hostname": "gpu-1"}, node_result)
    assert [name for name, _args in calls] == ["gpunode.provisioning.gpu_node_facts"], calls
    assert calls[0][1]["gather_minimal"] is True
    assert result["ansible_facts"]["ansible_os_family"] == "Debian"
    assert result["ansible_facts"]["gpu_node"] == {"has_gpu": False}
    assert result["ansible_facts"]["module_setup"] is True


def test_the_action_asks_for_no_minimal_facts_where_the_play_has_them():
    node_result = {"changed": False, "ansible_facts": {"gpu_node": {"has_gpu": True}}}
    result, calls = run_facts_action({"ansible_facts": {"os_family": "RedHat"}}, node_result)
    assert len(calls) == 1 and "gather_minimal" not in calls[0][1], calls
    assert result["ansible_facts"] == {"gpu_node": {"has_gpu": True}}


def test_an_unsupported_distribution_from_the_module_run_fails_the_task():
    from ansible.errors import AnsibleActionFail

    suse = {**DEBIAN_MINIMAL, "ansible_os_family": "Suse", "ansible_distribution": "SLES"}
    suse["ansible_distribution_version"] = "15.6"
    raised, calls = run_facts_action({"inventory_hostname": "gpu-9"}, {"ansible_facts": {**suse, "gpu_node": {}}})
    assert isinstance(raised, AnsibleActionFail), raised
    assert str(raised).startswith("gpu-9 runs SLES 15.6: supported are the Debian, Ubuntu and RHEL/Rocky/Alma")
    assert len(calls) == 1
    # known from the play's facts: refused before any module runs
    play = {"os_family": "Suse", "distribution": "SLES", "distribution_version": "15.6"}
    raised, calls = run_facts_action({"inventory_hostname": "gpu-9", "ansible_facts": play}, {"ansible_facts": {}})
    assert isinstance(raised, AnsibleActionFail) and calls == []


def test_a_failed_module_run_is_reported_not_refused():
    result, calls = run_facts_action({}, {"failed": True, "msg": "root /x is not a directory"})
    assert result["failed"] is True and result["msg"] == "root /x is not a directory"
    assert len(calls) == 1
