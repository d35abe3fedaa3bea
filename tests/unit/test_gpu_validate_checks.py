"""Unit tests of library/gpu_validate_checks.py, the doctor's checks as one node-side module.

Each check is a function of its inputs (parameters, node facts, command results, files); the
tables below give each one a passing case and the failing cases, with the row it must return
(the same rows the role's YAML returned before). A fake node (FakeNode) answers the commands
and file reads of the family functions; one test runs the real subprocess runner.
"""

from __future__ import annotations

import fnmatch
import json
import os
import stat
import sys

import pytest
from conftest import doctor_params, load_module

checks = load_module("gpu_validate_checks")

PARAMS = doctor_params(checks)

GPU_NODE = {
    "has_gpu": True,
    "gpu_count": 2,
    "nouveau_loaded": False,
    "driver": {"loaded": True, "version": "580.95.05", "modules": ["nvidia", "nvidia_uvm", "nvidia_peermem"]},
    "nvidia_smi": "/usr/bin/nvidia-smi",
    "kubelet": {"installed": True, "running": True, "version": "1.31.2"},
    "apparmor_enabled": True,
    "apparmor": {"kernel_enabled": True, "securityfs": True},
}
NO_GPU = {**GPU_NODE, "has_gpu": False, "gpu_count": 0, "driver": {"loaded": False, "version": "", "modules": []}}
MISSING = (2, "", "[Errno 2] No such file or directory: 'x'")


def params(**overrides) -> dict:
    return {**PARAMS, **overrides}


def node(**overrides) -> dict:
    return {**GPU_NODE, **overrides}


def row(check, status, detail, fix=""):
    return {"check": check, "status": status, "detail": detail, "fix": fix}


class FakeNode:
    """Commands answer from a table (a missing one as a missing binary), files from a dict; records what ran."""

    def __init__(self, commands=None, files=None, devices=(), mtimes=None, which=()):
        self.commands = {tuple(k): v for k, v in (commands or {}).items()}
        self.mtimes = dict(mtimes or {})
        self.found = set(which)
        self.files = dict(files or {})
        self.devices = set(devices)
        self.ran = []

    def run(self, argv, timeout=None):
        self.ran.append(list(argv))
        return self.commands.get(tuple(argv), MISSING)

    def which(self, name, opt_dirs):
        return f"/usr/bin/{name}" if name in self.found else None

    def lstat(self, path):
        if path in self.devices:
            return os.stat_result((stat.S_IFCHR | 0o666, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        if path in self.files:
            return os.stat_result((stat.S_IFREG | 0o644, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        return None

    def read(self, path):
        return self.files.get(path)

    def mtime(self, path):
        return self.mtimes.get(path)

    def glob(self, pattern):
        return sorted(p for p in self.mtimes if fnmatch.fnmatch(p, pattern))

    def boot_time(self):
        return 1_700_000_000.0


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
    assert checks.driver_row(params(**p), facts) == expected


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
    assert checks.smi_row(facts, smi) == expected


def test_a_long_nvidia_smi_message_is_cut_at_a_word_as_jinja_truncate_did():
    words = " ".join(["mismatch"] * 40)  # 359 characters
    detail = checks.smi_row(GPU_NODE, (1, words, ""))["detail"]
    assert detail == "exit code 1: " + " ".join(["mismatch"] * 17) + "..."
    assert checks._truncate("x" * 165) == "x" * 165  # within Jinja's leeway of 5


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
    assert checks.reboot_row(params(**p), GPU_NODE, kernels) == expected


def test_reboot_row_without_gpu_is_skipped():
    assert checks.reboot_row(params(), NO_GPU, None) == row(REBOOT, "skipped", "no GPU")


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
    assert checks.peermem_row(params(**p), facts, boot_file) == expected


def test_the_driver_family_asks_nvidia_smi_and_reads_the_kernels_of_the_tree(tmp_path):
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot" / "vmlinuz-6.8.0-151-generic").write_bytes(b"MZ")
    fake = FakeNode(
        commands={("/usr/bin/nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"): SMI_OK}
    )
    rows = checks.check_driver(params(kernels_root=str(tmp_path)), GPU_NODE, fake)
    assert [r["check"] for r in rows] == ["NVIDIA driver", "nvidia-smi", REBOOT, "nvidia-peermem"]
    assert rows[1]["status"] == "ok"
    assert rows[2]["detail"] == "kernel 6.8.0-151-generic boots next (newest /boot/vmlinuz-*) and has no NVIDIA module"
    # without a GPU nothing runs
    fake = FakeNode()
    assert {r["status"] for r in checks.check_driver(params(), NO_GPU, fake)} == {"skipped"}
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
    assert checks.toolkit_row(params(**p), facts, ctk, pkg) == (expected, installed)


def test_the_toolkit_family_asks_nvidia_ctk_and_the_package_manager():
    argv = ["dpkg-query", "--show", "--showformat=${Version}"]
    fake = FakeNode(commands={("nvidia-ctk", "--version"): CTK, (*argv, "nvidia-container-toolkit"): PKG})
    rows, installed = checks.check_toolkit(params(package_version_argv=argv), GPU_NODE, fake)
    assert rows == [row("container toolkit", "ok", "nvidia-container-toolkit 1.17.8-1")] and installed
    assert fake.ran == [["nvidia-ctk", "--version"], [*argv, "nvidia-container-toolkit"]]


# ---- fuse --------------------------------------------------------------------------------------------------

FUSE_FIX = "Run site.yml --tags fuse (loads the fuse module)"


@pytest.mark.parametrize(
    ("fake", "expected"),
    [
        (FakeNode(devices=["/dev/fuse"]), row("/dev/fuse", "ok", "character device, mode 0666")),
        (FakeNode(files={"/dev/fuse": ""}), row("/dev/fuse", "fail", "exists but is not a character device", FUSE_FIX)),
        (
            FakeNode(),
            row(
                "/dev/fuse",
                "fail",
                "missing: FUSE pods (device plugin resource github.com/fuse) cannot mount",
                FUSE_FIX,
            ),
        ),
    ],
)
def test_fuse(fake, expected):
    assert checks.check_fuse(params(), GPU_NODE, fake) == [expected]


# ---- security ----------------------------------------------------------------------------------------------

PROFILES = "/sys/kernel/security/apparmor/profiles"
SECCOMP = "/var/lib/kubelet/seccomp/profiles/fuse.json"
SECCOMP_OK = row("seccomp profile fuse", "ok", f"{SECCOMP} (localhostProfile: profiles/fuse.json)")
AA = "AppArmor profile fuse"


@pytest.mark.parametrize(
    ("p", "facts", "files", "expected"),
    [
        (
            {},
            GPU_NODE,
            {"/etc/apparmor.d/fuse": "", PROFILES: "docker-default (enforce)\nfuse (complain)\n"},
            row(AA, "ok", "installed and loaded (complain)"),
        ),
        (
            {},
            GPU_NODE,
            {"/etc/apparmor.d/fuse": "", PROFILES: "docker-default (enforce)\nfuse-other (enforce)\n"},
            row(
                AA,
                "fail",
                "installed in /etc/apparmor.d but not loaded",
                "apparmor_parser -r /etc/apparmor.d/fuse (or run site.yml --tags apparmor)",
            ),
        ),
        (
            {},
            GPU_NODE,
            {PROFILES: "fuse (enforce)\n"},
            row(AA, "fail", "/etc/apparmor.d/fuse is missing", "Run site.yml --tags apparmor"),
        ),
        (
            {},
            node(apparmor_enabled=False, apparmor={"kernel_enabled": False}),
            {"/etc/apparmor.d/fuse": ""},
            row(
                AA,
                "warn",
                "installed, not loaded: the kernel has AppArmor disabled; pods that reference it do not start here",
                "Boot with AppArmor enabled (apparmor=1 security=apparmor), or do not schedule"
                " AppArmor-confined FUSE pods here",
            ),
        ),
        (
            {},
            node(apparmor_enabled=False, apparmor={"kernel_enabled": True}),
            {"/etc/apparmor.d/fuse": ""},
            row(
                AA,
                "warn",
                "installed, not loaded: the kernel has AppArmor enabled but no securityfs;"
                " pods that reference it do not start here",
                "Boot with AppArmor enabled (apparmor=1 security=apparmor), or do not schedule"
                " AppArmor-confined FUSE pods here",
            ),
        ),
        (
            {"apparmor_os": False},
            GPU_NODE,
            {},
            row(AA, "skipped", "this OS has no AppArmor (SELinux confines containers)"),
        ),
    ],
)
def test_apparmor(p, facts, files, expected):
    rows = checks.check_security(params(**p), facts, FakeNode(files={**files, SECCOMP: "{}"}))
    assert rows == [expected, SECCOMP_OK]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"defaultAction": "SCMP_ACT_ERRNO"}', SECCOMP_OK),
        (None, row("seccomp profile fuse", "fail", f"{SECCOMP} is missing", "Run site.yml --tags seccomp")),
        (
            "[]",
            row(
                "seccomp profile fuse",
                "fail",
                f"{SECCOMP} is a JSON list, not an object",
                "Run site.yml --tags seccomp",
            ),
        ),
        (
            "",
            row(
                "seccomp profile fuse",
                "fail",
                f"{SECCOMP} is not valid JSON (Expecting value: line 1 column 1 (char 0))",
                "Run site.yml --tags seccomp",
            ),
        ),
    ],
)
def test_seccomp(text, expected):
    assert checks.seccomp_row(params(), text) == expected


# ---- kubelet -----------------------------------------------------------------------------------------------

DROPIN = "/etc/kubernetes/kubelet.conf.d/50-gpu-node.conf"
MAIN = "/var/lib/kubelet/config.yaml"
ENV = "/etc/default/kubelet"
WITH_CONFIG_DIR = 'KUBELET_EXTRA_ARGS="--config-dir=/etc/kubernetes/kubelet.conf.d"\n'
KC = "kubelet configuration"


@pytest.mark.parametrize(
    ("p", "kubelet", "files", "expected"),
    [
        (
            {},
            {"installed": True, "version": "1.31.2"},
            {DROPIN: "", ENV: WITH_CONFIG_DIR},
            row(KC, "ok", f"drop-in {DROPIN} (kubelet 1.31.2)"),
        ),
        ({}, {"installed": False}, {DROPIN: ""}, row(KC, "ok", f"drop-in {DROPIN} (no kubelet yet)")),
        (
            {},
            {"installed": True, "version": "1.27.6"},
            {MAIN: ""},
            row(KC, "ok", f"merged into {MAIN} (kubelet 1.27.6 reads no drop-ins)"),
        ),
        (
            {"kubelet_config_mode": "merge"},
            {"installed": True, "version": ""},
            {MAIN: ""},
            row(KC, "ok", f"merged into {MAIN} (kubelet ? reads no drop-ins)"),
        ),
        (
            {},
            {"installed": True, "version": "1.31.2"},
            {DROPIN: "", ENV: 'KUBELET_EXTRA_ARGS=""\n'},
            row(
                KC,
                "warn",
                f"drop-in {DROPIN} is there, but {ENV} passes no --config-dir: the kubelet does not read it",
                "Run site.yml --tags kubelet",
            ),
        ),
        (
            {},
            {"installed": True, "version": "1.31.2"},
            {MAIN: ""},
            row(KC, "fail", f"no drop-in at {DROPIN} on a node with kubelet 1.31.2", "Run site.yml --tags kubelet"),
        ),
        (
            {},
            {"installed": True},
            {},
            row(
                KC,
                "fail",
                f"no drop-in at {DROPIN} on a node with kubelet (version unknown)",
                "Run site.yml --tags kubelet",
            ),
        ),
        ({}, {"installed": False}, {}, row(KC, "skipped", "no kubelet installed and no drop-in")),
    ],
)
def test_kubelet(p, kubelet, files, expected):
    assert checks.check_kubelet(params(**p), node(kubelet=kubelet), FakeNode(files=files)) == [expected]


# ---- docker -----------------------------------------------------------------------------------------------

INFO_OK = (
    '{"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}, "runc": {"path": "runc"}},'
    ' "default": "runc"}'
)
DOCKER = {
    "ok": True,
    "error": "",
    "runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}, "runc": {}},
    "default": "runc",
}
ZERO = (0, "0", "")
IMG = {"test_image": "busybox:latest"}
ISOLATED = {"nvidia": ZERO, "default": ZERO}
D_RUNTIME, D_DEFAULT, D_RUN = "docker: nvidia runtime", "docker: default runtime", "docker: container via nvidia"
D_ISO_N, D_ISO_D = "docker: GPU isolation (nvidia)", "docker: GPU isolation (default)"
DOCKER_OK = [
    row(D_RUNTIME, "ok", "nvidia -> /usr/bin/nvidia-container-runtime"),
    row(D_DEFAULT, "ok", "runc (nvidia is not the default)"),
    row(D_RUN, "ok", "docker run --runtime nvidia busybox:latest true"),
    row(D_ISO_N, "ok", "NVIDIA_VISIBLE_DEVICES=all, no GPU requested: no /dev/nvidia* device"),
    row(D_ISO_D, "ok", "NVIDIA_VISIBLE_DEVICES=all, no GPU requested: no /dev/nvidia* device"),
]


def _with(rows, **replace):
    """DOCKER_OK with some rows replaced (by check name)."""
    return [replace.get(r["check"], r) for r in rows]


def test_docker_info_reads_the_json_of_the_format_and_refuses_anything_else():
    assert checks.docker_info((0, INFO_OK, ""))["runtimes"]["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"
    assert checks.docker_info((1, "", "Cannot connect to the Docker daemon"))["error"] == (
        "Cannot connect to the Docker daemon"
    )
    assert checks.docker_info((0, "{not json", ""))["ok"] is False


@pytest.mark.parametrize(
    ("p", "facts", "docker", "image", "run", "isolation", "expected"),
    [
        (IMG, GPU_NODE, DOCKER, True, ZERO, ISOLATED, DOCKER_OK),
        (
            IMG,
            GPU_NODE,
            {**DOCKER, "default": "nvidia"},
            True,
            ZERO,
            {"nvidia": (0, "4", ""), "default": (0, "4\n", "")},
            _with(
                DOCKER_OK,
                **{
                    D_DEFAULT: row(
                        D_DEFAULT,
                        "fail",
                        "nvidia is the default runtime: every container that sets NVIDIA_VISIBLE_DEVICES (all CUDA"
                        " images do) can get GPUs, also pods that request none",
                        "Set nvidia_container_toolkit_set_as_default: false and run site.yml --tags runtime",
                    ),
                    D_ISO_N: row(
                        D_ISO_N,
                        "fail",
                        "NVIDIA_VISIBLE_DEVICES=all, no GPU requested: 4 /dev/nvidia* devices visible",
                        "Set nvidia_container_toolkit_accept_envvar_when_unprivileged: false,"
                        " run site.yml --tags toolkit",
                    ),
                    D_ISO_D: row(
                        D_ISO_D,
                        "fail",
                        "NVIDIA_VISIBLE_DEVICES=all, no GPU requested: 4 /dev/nvidia* devices visible",
                        "Make runc the default (nvidia_container_toolkit_set_as_default: false),"
                        " run site.yml --tags runtime",
                    ),
                },
            ),
        ),
        (
            {**IMG, "nvidia_default_allowed": True},
            GPU_NODE,
            {**DOCKER, "default": "nvidia"},
            True,
            ZERO,
            ISOLATED,
            _with(
                DOCKER_OK,
                **{
                    D_DEFAULT: row(
                        D_DEFAULT,
                        "warn",
                        "nvidia is the default runtime: every container that sets NVIDIA_VISIBLE_DEVICES (all CUDA"
                        " images do) can get GPUs, also pods that request none",
                        "Intended (nvidia_container_toolkit_set_as_default): give GPU pods devices through CDI and keep"
                        " NVIDIA_VISIBLE_DEVICES hardening on",
                    )
                },
            ),
        ),
        (
            IMG,
            GPU_NODE,
            DOCKER,
            True,
            (124, "", ""),
            {"nvidia": (125, "", "docker: Error response from daemon: OCI runtime create failed"), "default": ZERO},
            _with(
                DOCKER_OK,
                **{
                    D_RUN: row(
                        D_RUN, "fail", "no answer within 120 s", "Look for a hanging runtime hook: journalctl -u docker"
                    ),
                    D_ISO_N: row(
                        D_ISO_N,
                        "fail",
                        "the container did not run: exit code 125 docker: Error response from daemon: OCI runtime"
                        " create failed",
                        "Read the error; the test image needs sh, ls and wc",
                    ),
                },
            ),
        ),
        (
            IMG,
            GPU_NODE,
            DOCKER,
            True,
            (127, "", 'exec: "true": executable file not found'),
            {"nvidia": (0, "sh: ls: not found", ""), "default": ZERO},
            _with(
                DOCKER_OK,
                **{
                    D_RUN: row(
                        D_RUN,
                        "fail",
                        'exit code 127: exec: "true": executable file not found',
                        "Read the error; check /etc/nvidia-container-runtime/config.toml and docker run options"
                        " (gpu_validate_docker_run_options)",
                    ),
                    D_ISO_N: row(
                        D_ISO_N,
                        "fail",
                        "the container did not run: exit code 0",
                        "Read the error; the test image needs sh, ls and wc",
                    ),
                },
            ),
        ),
        (
            IMG,
            GPU_NODE,
            DOCKER,
            False,
            None,
            {},
            _with(
                DOCKER_OK,
                **{
                    D_RUN: row(
                        D_RUN,
                        "warn",
                        "image busybox:latest is not in docker (never pulled)",
                        "Load or pull busybox:latest on the node, or name an image it has",
                    ),
                    D_ISO_N: row(
                        D_ISO_N,
                        "warn",
                        "image busybox:latest is not in docker (never pulled)",
                        "Load or pull busybox:latest on the node (it needs sh, ls and wc)",
                    ),
                    D_ISO_D: row(
                        D_ISO_D,
                        "warn",
                        "image busybox:latest is not in docker (never pulled)",
                        "Load or pull busybox:latest on the node (it needs sh, ls and wc)",
                    ),
                },
            ),
        ),
        (
            {},
            NO_GPU,
            {**DOCKER, "runtimes": {"runc": {}}},
            False,
            None,
            {},
            [
                row(D_RUNTIME, "skipped", "no GPU (and no toolkit installed)"),
                row(D_DEFAULT, "ok", "runc (nvidia is not the default)"),
                row(D_RUN, "skipped", "no test image (gpu_validate_test_image)"),
                row(D_ISO_N, "skipped", "no GPU"),
                row(D_ISO_D, "skipped", "no GPU"),
            ],
        ),
        (
            IMG,
            GPU_NODE,
            {"ok": False, "error": "Cannot connect to the Docker daemon", "runtimes": {}, "default": ""},
            False,
            None,
            {},
            [
                row(
                    D_RUNTIME,
                    "fail",
                    "docker info failed: Cannot connect to the Docker daemon",
                    "Check docker: systemctl status docker; journalctl -u docker",
                ),
                row(D_DEFAULT, "skipped", "docker info failed"),
                row(D_RUN, "skipped", "the nvidia runtime is not registered"),
                row(D_ISO_N, "skipped", "the nvidia runtime is not registered"),
                row(
                    D_ISO_D,
                    "warn",
                    "image busybox:latest is not in docker (never pulled)",
                    "Load or pull busybox:latest on the node (it needs sh, ls and wc)",
                ),
            ],
        ),
    ],
)
def test_docker_rows(p, facts, docker, image, run, isolation, expected):
    assert checks.docker_rows(params(**p), facts, docker, image, run, isolation, toolkit_installed=False) == expected


def test_docker_without_the_nvidia_runtime_fails_where_the_toolkit_is_installed():
    docker = {**DOCKER, "runtimes": {"runc": {}}}
    rows = checks.docker_rows(params(), NO_GPU, docker, False, None, {}, toolkit_installed=True)
    assert rows[0] == row(
        D_RUNTIME, "fail", "no nvidia runtime in docker info (runtimes: runc)", "Run site.yml --tags runtime"
    )


def test_docker_not_running_is_one_warning():
    facts = node(runtimes={"docker": {"installed": True, "running": False}})
    fake = FakeNode()
    assert checks.check_docker(params(), facts, fake, False) == [
        row(
            D_RUNTIME,
            "warn",
            "docker is installed but not running: nothing checked",
            "Start docker (systemctl start docker), or leave docker out of gpu_validate_runtimes",
        )
    ]
    assert fake.ran == []


def test_the_docker_family_runs_its_containers_with_the_options_under_timeout():
    facts = node(runtimes={"docker": {"installed": True, "running": True}})
    count = ["busybox:latest", "sh", "-c", "ls /dev/nvidia* 2>/dev/null | wc -l"]
    t = ["timeout", "120", "docker", "run", "--rm"]
    opts = ["--network", "none"]
    fake = FakeNode(
        commands={
            ("docker", "info", "--format", checks.DOCKER_INFO_FORMAT): (0, INFO_OK, ""),
            ("docker", "image", "inspect", "busybox:latest"): (0, "[{}]", ""),
            (*t, "--runtime", "nvidia", *opts, "busybox:latest", "true"): (0, "", ""),
            (*t, "--runtime", "nvidia", "--env", "NVIDIA_VISIBLE_DEVICES=all", *opts, *count): ZERO,
            (*t, "--env", "NVIDIA_VISIBLE_DEVICES=all", *opts, *count): ZERO,
            (*t, "--cap-add", "SYS_ADMIN", "--env", "NVIDIA_VISIBLE_DEVICES=all", *opts, *count): (0, "4", ""),
        }
    )
    result = checks.run_checks(params(families=["isolation", "docker"], runtimes=["docker"], node=facts, **IMG), fake)
    assert result["checks"][:5] == DOCKER_OK
    assert result["checks"][5]["check"] == "docker: GPU isolation (default, CAP_SYS_ADMIN)"
    assert result["checks"][5]["detail"] == (
        "a FUSE-like container (CAP_SYS_ADMIN, NVIDIA_VISIBLE_DEVICES=all, no GPU requested) sees 4 /dev/nvidia*"
        " devices: the default runtime hands out GPUs"
    )
    assert len(fake.ran) == 6
    assert [*t, "--env", "NVIDIA_VISIBLE_DEVICES=all", *opts, *count] in fake.ran  # the default runtime: no --runtime

    # without the nvidia runtime registered, the default runtime's container still runs
    fake.commands[("docker", "info", "--format", checks.DOCKER_INFO_FORMAT)] = (0, '{"runtimes": {"runc": {}}}', "")
    fake.ran = []
    rows = checks.check_docker(params(**IMG), facts, fake, False)
    assert [(r["check"], r["status"]) for r in rows[-2:]] == [(D_ISO_N, "skipped"), (D_ISO_D, "ok")]
    assert fake.ran[-1] == [*t, "--env", "NVIDIA_VISIBLE_DEVICES=all", *opts, *count]


@pytest.mark.parametrize(
    ("p", "facts", "result", "expected"),
    [
        (
            IMG,
            GPU_NODE,
            ZERO,
            row(
                "docker: GPU isolation (default, CAP_SYS_ADMIN)",
                "ok",
                "a FUSE-like container (CAP_SYS_ADMIN, NVIDIA_VISIBLE_DEVICES=all, no GPU requested):"
                " no /dev/nvidia* device" + checks.SYS_ADMIN_NOTE,
            ),
        ),
        (
            IMG,
            GPU_NODE,
            (0, "2", ""),
            row(
                "docker: GPU isolation (default, CAP_SYS_ADMIN)",
                "fail",
                "a FUSE-like container (CAP_SYS_ADMIN, NVIDIA_VISIBLE_DEVICES=all, no GPU requested) sees 2"
                " /dev/nvidia* devices: the default runtime hands out GPUs",
                "Make runc the default (nvidia_container_toolkit_set_as_default: false), run site.yml --tags runtime;"
                " FUSE pods must not use RuntimeClass nvidia unless they request GPUs",
            ),
        ),
        (
            IMG,
            GPU_NODE,
            (1, "", "Unable to find image"),
            row(
                "docker: GPU isolation (default, CAP_SYS_ADMIN)",
                "fail",
                "the container did not run: exit code 1 Unable to find image",
                "Read the error; the test image needs sh, ls and wc",
            ),
        ),
        (
            {},
            GPU_NODE,
            None,
            row("docker: GPU isolation (default, CAP_SYS_ADMIN)", "skipped", "no test image (gpu_validate_test_image)"),
        ),
        (IMG, NO_GPU, None, row("docker: GPU isolation (default, CAP_SYS_ADMIN)", "skipped", "no GPU")),
    ],
)
def test_docker_sys_admin_row(p, facts, result, expected):
    assert checks.docker_sys_admin_row(params(**p), facts, result) == expected


def test_docker_isolation_needs_docker_among_the_runtimes_and_running():
    running = node(runtimes={"docker": {"installed": True, "running": True}})
    assert checks.check_docker_isolation(params(runtimes=["containerd"], **IMG), running, FakeNode()) == []
    stopped = node(runtimes={"docker": {"installed": True, "running": False}})
    assert checks.check_docker_isolation(params(runtimes=["docker"], **IMG), stopped, FakeNode()) == []


# ---- containerd -------------------------------------------------------------------------------------------

PLUGINS_OK = (
    "TYPE                                  ID                       PLATFORMS      STATUS\n"
    "io.containerd.runtime.v2              task                     linux/amd64    ok\n"
    "io.containerd.grpc.v1                 cri                      linux/amd64    ok\n"
)


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ((0, PLUGINS_OK, ""), {"cri": "ok"}),
        (
            (0, PLUGINS_OK.replace("linux/amd64    ok\n", "linux/amd64    error\n"), ""),
            {"cri": "error", "cri_detail": "io.containerd.grpc.v1/cri=error"},
        ),
        (
            (
                0,
                "TYPE ID PLATFORMS STATUS\nio.containerd.cri.v1 images - skip\nio.containerd.cri.v1 runtime - ok\n",
                "",
            ),
            {"cri": "error", "cri_detail": "io.containerd.cri.v1/images=skip"},
        ),
        (
            (0, "TYPE ID PLATFORMS STATUS\nio.containerd.runtime.v2 task linux/amd64 ok\n", ""),
            {"cri": "error", "cri_detail": "no CRI plugin listed"},
        ),
        (
            (1, "", "ctr: failed to dial\nconnection refused"),
            {"cri": "unreachable", "cri_detail": "connection refused"},
        ),
    ],
)
def test_cri_plugins(result, expected):
    assert checks.cri_plugins(result) == expected


def test_crictl_facts():
    info = json.dumps(
        {
            "status": {"conditions": [{"type": "RuntimeReady", "status": True}]},
            "config": {"containerd": {"runtimes": {"nvidia": {}}}},
        }
    )
    assert checks.crictl_facts((0, info, ""), "nvidia") == {"crictl_ready": "yes", "crictl_handler": "yes"}
    assert checks.crictl_facts((0, "{}", ""), "nvidia") == {"crictl_ready": "no", "crictl_handler": "no"}
    assert checks.crictl_facts((1, "", "connect: no such file"), "nvidia") == {}
    assert checks.crictl_facts((0, "not json", ""), "nvidia") == {}
    assert checks.crictl_facts(None, "nvidia") == {}


CTRD = {
    "ok": True,
    "error": "",
    "runtimes": ["nvidia", "runc"],
    "default": "runc",
    "default_entry": {"runtime_type": "io.containerd.runc.v2", "binary": ""},
    "registered": True,
    "running": True,
    "image": True,
    "cri": {"cri": "ok", "started": "1700000100.000000", "written": "1700000050.000000000", "written_file": ""},
    "id": "gpu-validate-x",
}
CIMG = {"containerd_test_image": "docker.io/library/busybox:latest"}
C_CRI, C_REG, C_LIVE, C_DEF = (
    "containerd: CRI plugin",
    "containerd: nvidia runtime",
    "containerd: running config",
    "containerd: default runtime",
)
C_RUN, C_ISO = "containerd: container via nvidia", "containerd: GPU isolation (nvidia)"
CONTAINERD_OK = [
    row(C_CRI, "ok", "ctr plugins ls: cri ok (the kubelet can run pods)"),
    row(C_REG, "ok", "runtimes.nvidia in the effective configuration"),
    row(C_LIVE, "ok", "containerd started after its config files were last written"),
    row(C_DEF, "ok", "runc (nvidia is not the default)"),
    row(C_RUN, "ok", "ctr run --runc-binary /usr/bin/nvidia-container-runtime docker.io/library/busybox:latest true"),
    row(C_ISO, "ok", "NVIDIA_VISIBLE_DEVICES=all, no GPU requested: no /dev/nvidia* device"),
]
RESTART = (
    "Restart containerd (systemctl restart containerd), or rerun site.yml --tags runtime: it finishes"
    " a restart an interrupted run left pending"
)
NOT_RUNNING = ("containerd is not running", "Start containerd (systemctl start containerd)")


@pytest.mark.parametrize(
    ("p", "facts", "c", "run", "isolation", "expected"),
    [
        (CIMG, GPU_NODE, CTRD, ZERO, ZERO, CONTAINERD_OK),
        (
            CIMG,
            GPU_NODE,
            {**CTRD, "cri": {**CTRD["cri"], "crictl_ready": "yes", "crictl_handler": "yes"}},
            ZERO,
            (0, "4", ""),
            _with(
                CONTAINERD_OK,
                **{
                    C_CRI: row(C_CRI, "ok", "crictl info: RuntimeReady (the kubelet can run pods)"),
                    C_LIVE: row(
                        C_LIVE,
                        "ok",
                        "crictl info lists the nvidia handler; containerd started after its config files were last"
                        " written",
                    ),
                    C_ISO: row(
                        C_ISO,
                        "fail",
                        "NVIDIA_VISIBLE_DEVICES=all, no GPU requested: 4 /dev/nvidia* devices visible",
                        "Set nvidia_container_toolkit_accept_envvar_when_unprivileged: false,"
                        " run site.yml --tags toolkit",
                    ),
                },
            ),
        ),
        (
            CIMG,
            GPU_NODE,
            {
                **CTRD,
                "default": "nvidia",
                "cri": {
                    "cri": "error",
                    "cri_detail": "io.containerd.grpc.v1/cri=error",
                    "started": "1700000100.000000",
                    "written": "1700000200.000000000",
                    "written_file": "/etc/containerd/conf.d/99-nvidia.toml",
                    "crictl_ready": "no",
                },
            },
            (124, "", ""),
            (1, "", "ctr: failed to create shim task"),
            [
                row(C_CRI, "fail", "crictl info: the runtime is not RuntimeReady"),
                row(C_REG, "ok", "runtimes.nvidia in the effective configuration"),
                row(
                    C_LIVE,
                    "warn",
                    "/etc/containerd/conf.d/99-nvidia.toml was written after containerd started: the running daemon"
                    " does not run what the file says",
                    RESTART,
                ),
                row(
                    C_DEF,
                    "fail",
                    "default_runtime_name is nvidia: every pod whose image sets NVIDIA_VISIBLE_DEVICES (all CUDA"
                    " images do) can get GPUs, also pods that request none",
                    "Set nvidia_container_toolkit_set_as_default: false and run site.yml --tags runtime",
                ),
                row(
                    C_RUN, "fail", "no answer within 120 s", "Look for a hanging runtime hook: journalctl -u containerd"
                ),
                row(
                    C_ISO,
                    "fail",
                    "the container did not run: exit code 1 ctr: failed to create shim task",
                    "Read the error; the test image needs sh, ls and wc",
                ),
            ],
        ),
        (
            CIMG,
            GPU_NODE,
            {**CTRD, "cri": {"cri": "error", "cri_detail": "io.containerd.grpc.v1/cri=error", "crictl_handler": "no"}},
            (1, "", "ctr: runc did not terminate successfully"),
            ZERO,
            _with(
                CONTAINERD_OK,
                **{
                    C_CRI: row(
                        C_CRI,
                        "fail",
                        "containerd runs but its CRI plugin did not load, so the kubelet can run no pod:"
                        " io.containerd.grpc.v1/cri=error",
                        "journalctl -u containerd | grep 'failed to load plugin' names the config problem"
                        " (e.g. default_runtime_name naming a runtime that is not configured); fix it and restart"
                        " containerd, or run site.yml --tags runtime",
                    ),
                    C_LIVE: row(
                        C_LIVE, "fail", "crictl info: the running containerd has no nvidia runtime handler", RESTART
                    ),
                    C_RUN: row(
                        C_RUN,
                        "fail",
                        "exit code 1: ctr: runc did not terminate successfully",
                        "Read the error; check /etc/nvidia-container-runtime/config.toml and"
                        " gpu_validate_containerd_run_options",
                    ),
                },
            ),
        ),
        (
            CIMG,
            GPU_NODE,
            {**CTRD, "cri": {"cri": "unreachable", "cri_detail": "connection refused"}, "image": False},
            None,
            None,
            _with(
                CONTAINERD_OK,
                **{
                    C_CRI: row(C_CRI, "fail", "ctr cannot reach containerd: connection refused"),
                    C_LIVE: row(C_LIVE, "warn", "the start time of containerd is unknown"),
                    C_RUN: row(
                        C_RUN,
                        "warn",
                        "image docker.io/library/busybox:latest is not in ctr namespace default (never pulled)",
                        "ctr -n default images pull (or import) docker.io/library/busybox:latest, or name an image the"
                        " node has",
                    ),
                    C_ISO: row(
                        C_ISO,
                        "warn",
                        "image docker.io/library/busybox:latest is not in ctr namespace default",
                        "Pull or import the image into that namespace (it needs sh, ls and wc)",
                    ),
                },
            ),
        ),
        (
            CIMG,
            GPU_NODE,
            {**CTRD, "running": False, "cri": {}, "image": False},
            None,
            None,
            _with(
                CONTAINERD_OK,
                **{
                    C_CRI: row(C_CRI, "warn", *NOT_RUNNING),
                    C_LIVE: row(C_LIVE, "warn", "containerd is not running"),
                    C_RUN: row(C_RUN, "warn", *NOT_RUNNING),
                    C_ISO: row(C_ISO, "warn", *NOT_RUNNING),
                },
            ),
        ),
        (
            {},
            NO_GPU,
            {**CTRD, "ok": False, "error": "failed to load TOML", "runtimes": [], "registered": False, "default": ""},
            None,
            None,
            _with(
                CONTAINERD_OK,
                **{
                    C_REG: row(
                        C_REG,
                        "fail",
                        "containerd config dump failed: failed to load TOML",
                        "Fix /etc/containerd/config.toml (containerd config dump names the problem)",
                    ),
                    C_DEF: row(C_DEF, "skipped", "containerd config dump failed"),
                    C_RUN: row(C_RUN, "skipped", "no test image (gpu_validate_containerd_test_image)"),
                    C_ISO: row(C_ISO, "skipped", "no GPU"),
                },
            ),
        ),
        (
            CIMG,
            NO_GPU,
            {**CTRD, "runtimes": ["runc"], "registered": False},
            None,
            None,
            _with(
                CONTAINERD_OK,
                **{
                    C_REG: row(C_REG, "skipped", "no GPU (and no toolkit installed)"),
                    C_RUN: row(C_RUN, "skipped", "the nvidia runtime is not registered"),
                    C_ISO: row(C_ISO, "skipped", "no GPU"),
                },
            ),
        ),
    ],
)
def test_containerd_rows(p, facts, c, run, isolation, expected):
    assert checks.containerd_rows(params(**p), facts, c, run, isolation, toolkit_installed=False) == expected


def test_containerd_without_the_nvidia_runtime_fails_where_the_toolkit_is_installed():
    c = {**CTRD, "runtimes": ["runc"], "registered": False}
    rows = checks.containerd_rows(params(), NO_GPU, c, None, None, toolkit_installed=True)
    assert rows[1] == row(
        C_REG, "fail", "no runtimes.nvidia in containerd config dump (runtimes: runc)", "Run site.yml --tags runtime"
    )


CONTAINERD_DUMP = (
    "version = 2\n"
    '[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "runc"\n'
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n'
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n  runtime_type = "io.containerd.runc.v2"\n'
    '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
    '    BinaryName = "/usr/bin/nvidia-container-runtime"\n'
)
SYSTEMCTL = ("systemctl", "show", "containerd", "-p", "ExecMainStartTimestampMonotonic", "--value")


def test_the_containerd_family_asks_the_running_daemon_and_compares_its_start_with_the_config_files():
    facts = node(runtimes={"containerd": {"installed": True, "running": True, "binary": "/usr/bin/containerd"}})
    fake = FakeNode(
        commands={
            ("/usr/bin/containerd", "config", "dump"): (0, CONTAINERD_DUMP, ""),
            ("ctr", "plugins", "ls"): (0, PLUGINS_OK, ""),
            SYSTEMCTL: (0, "100000000", ""),  # 100 s after boot: 1_700_000_100
            ("ctr", "--namespace", "default", "images", "ls", "--quiet"): (0, "docker.io/library/busybox:latest", ""),
        },
        mtimes={
            "/etc/containerd/config.toml": 1_700_000_050.0,
            "/etc/containerd/conf.d/99-nvidia.toml": 1_700_000_150.0,
        },
    )
    c = checks.containerd_state(params(**CIMG), facts, fake)
    assert c["cri"] == {
        "cri": "ok",
        "started": "1700000100.000000",
        "written": "1700000150.000000000",
        "written_file": "/etc/containerd/conf.d/99-nvidia.toml",
    }
    assert (c["ok"], c["registered"], c["image"], c["default"]) == (True, True, True, "runc")
    assert c["id"].startswith("gpu-validate-") and len(c["id"]) == len("gpu-validate-") + 12
    rows = checks.containerd_rows(params(**CIMG), facts, c, ZERO, ZERO, False)
    assert rows[2]["status"] == "warn" and rows[2]["detail"].startswith("/etc/containerd/conf.d/99-nvidia.toml was")
    # the newest file counts, whichever comes first
    fake.mtimes["/etc/containerd/config.toml"] = 1_700_000_160.0
    assert checks.containerd_state(params(**CIMG), facts, fake)["cri"]["written_file"] == "/etc/containerd/config.toml"
    # a systemd that cannot say when containerd started: the CRI row says the check failed, the start is unknown
    fake.commands[SYSTEMCTL] = (1, "", "Failed to connect to bus: No such file or directory")
    c = checks.containerd_state(params(**CIMG), facts, fake)
    assert c["cri"] == {"check_error": "Failed to connect to bus: No such file or directory"}
    rows = checks.containerd_rows(params(**CIMG), facts, c, ZERO, ZERO, False)
    assert rows[0] == row(C_CRI, "fail", "the check failed: Failed to connect to bus: No such file or directory")
    assert rows[2] == row(C_LIVE, "warn", "the start time of containerd is unknown")
    fake.commands[SYSTEMCTL] = (0, "n/a", "")
    assert checks.containerd_state(params(**CIMG), facts, fake)["cri"] == {
        "check_error": "systemctl printed 'n/a', not microseconds"
    }


def test_the_containerd_containers_go_through_the_nvidia_binary_and_cris_default_runtime():
    facts = node(runtimes={"containerd": {"installed": True, "running": True}})
    c = {
        **CTRD,
        "default": "nvidia",
        "default_entry": {"runtime_type": "io.containerd.runc.v2", "binary": "/usr/bin/nvidia-container-runtime"},
    }
    fake = FakeNode()
    p = params(
        families=["containerd", "isolation"],
        runtimes=["containerd"],
        containerd_run_options=["--cpu-shares", "0"],
        **CIMG,
    )
    checks.check_containerd(p, facts, fake, False, c)
    checks.check_containerd_isolation(p, facts, fake, c)
    head = ["timeout", "120", "ctr", "--namespace", "default", "run", "--rm", "--runtime", "io.containerd.runc.v2"]
    nvidia = ["--runc-binary", "/usr/bin/nvidia-container-runtime"]
    image = ["--cpu-shares", "0", "docker.io/library/busybox:latest"]
    count = ["sh", "-c", "ls /dev/nvidia* 2>/dev/null | wc -l"]
    assert fake.ran == [
        [*head, *nvidia, *image, "gpu-validate-x-run", "true"],
        [*head, *nvidia, "--env", "NVIDIA_VISIBLE_DEVICES=all", *image, "gpu-validate-x-count", *count],
        [
            *head,
            *nvidia,
            "--cap-add",
            "CAP_SYS_ADMIN",
            "--env",
            "NVIDIA_VISIBLE_DEVICES=all",
            *image,
            "gpu-validate-x-sys-admin",
            *count,
        ],
    ]
    # runc as CRI's default: no --runc-binary (the shim's own runc); a non-runc shim gets none either
    fake = FakeNode()
    checks.check_containerd_isolation(p, facts, fake, CTRD)
    assert "--runc-binary" not in fake.ran[0]
    fake = FakeNode()
    kata = {**CTRD, "default_entry": {"runtime_type": "io.containerd.kata.v2", "binary": "/opt/kata/bin/x"}}
    checks.check_containerd_isolation(p, facts, fake, kata)
    assert fake.ran[0][8:11] == ["io.containerd.kata.v2", "--cap-add", "CAP_SYS_ADMIN"]


CSA = "containerd: GPU isolation (default, CAP_SYS_ADMIN)"
CSA_LIKE = "a FUSE-like container (CAP_SYS_ADMIN, NVIDIA_VISIBLE_DEVICES=all, no GPU requested)"
NVIDIA_DEFAULT = {
    **CTRD,
    "default": "nvidia",
    "default_entry": {"runtime_type": "io.containerd.runc.v2", "binary": "/usr/bin/nvidia-container-runtime"},
}


@pytest.mark.parametrize(
    ("p", "facts", "c", "result", "expected"),
    [
        (
            CIMG,
            GPU_NODE,
            CTRD,
            ZERO,
            row(
                CSA,
                "ok",
                f"{CSA_LIKE} through CRI's default runtime runc (io.containerd.runc.v2, runc): no /dev/nvidia* device"
                + checks.SYS_ADMIN_NOTE,
            ),
        ),
        (
            CIMG,
            GPU_NODE,
            NVIDIA_DEFAULT,
            (0, "4", ""),
            row(
                CSA,
                "fail",
                f"{CSA_LIKE} through CRI's default runtime nvidia (io.containerd.runc.v2,"
                " /usr/bin/nvidia-container-runtime) sees 4 /dev/nvidia* devices: every pod without a RuntimeClass"
                " that has CAP_SYS_ADMIN can get GPUs",
                "Make runc CRI's default (nvidia_container_toolkit_set_as_default: false, or fix default_runtime_name"
                " and runtimes.nvidia in config.toml), run site.yml --tags runtime; FUSE pods must not use"
                " RuntimeClass nvidia unless they request GPUs",
            ),
        ),
        (
            CIMG,
            GPU_NODE,
            CTRD,
            (1, "", "ctr: unknown flag"),
            row(
                CSA,
                "fail",
                "the container did not run through CRI's default runtime runc (io.containerd.runc.v2, runc):"
                " exit code 1 ctr: unknown flag",
                "Read the error; the test image needs sh, ls and wc, and gpu_validate_containerd_run_options apply to"
                " this container too",
            ),
        ),
        (
            CIMG,
            GPU_NODE,
            {**CTRD, "ok": False, "error": "failed to load TOML"},
            None,
            row(
                CSA,
                "fail",
                "containerd config dump failed, so CRI's default runtime is unknown: failed to load TOML",
                "Fix /etc/containerd/config.toml (containerd config dump names the problem)",
            ),
        ),
        (
            CIMG,
            GPU_NODE,
            {**CTRD, "image": False},
            None,
            row(
                CSA,
                "warn",
                "image docker.io/library/busybox:latest is not in ctr namespace default",
                "Pull or import the image into that namespace (it needs sh, ls and wc)",
            ),
        ),
        (CIMG, GPU_NODE, {**CTRD, "running": False}, None, row(CSA, "warn", *NOT_RUNNING)),
        ({}, GPU_NODE, CTRD, None, row(CSA, "skipped", "no test image (gpu_validate_containerd_test_image)")),
        (CIMG, NO_GPU, CTRD, None, row(CSA, "skipped", "no GPU")),
    ],
)
def test_containerd_sys_admin_row(p, facts, c, result, expected):
    assert checks.containerd_sys_admin_row(params(**p), facts, c, result) == expected


# ---- crio -------------------------------------------------------------------------------------------------

CRIO_DUMP = (
    '[crio.runtime]\ndefault_runtime = "{default}"\n[crio.runtime.runtimes.runc]\nruntime_path = ""\n'
    '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\n'
)
CRIO_NO_NVIDIA = '[crio.runtime]\ndefault_runtime = "crun"\n[crio.runtime.runtimes.crun]\nruntime_path = ""\n'
DEFAULT_DETAIL = (
    "default_runtime is nvidia: every pod whose image sets NVIDIA_VISIBLE_DEVICES (all CUDA images do) can get GPUs,"
    " also pods that request none"
)


@pytest.mark.parametrize(
    ("p", "facts", "dump", "toolkit", "expected"),
    [
        (
            {},
            GPU_NODE,
            (0, CRIO_DUMP.format(default="runc"), 'time="now" level=info msg="Starting CRI-O"'),
            True,
            [
                row("crio: nvidia runtime", "ok", "crio.runtime.runtimes.nvidia in the effective configuration"),
                row("crio: default runtime", "ok", "runc (nvidia is not the default)"),
            ],
        ),
        (
            {},
            GPU_NODE,
            (0, CRIO_DUMP.format(default="nvidia"), ""),
            True,
            [
                row("crio: nvidia runtime", "ok", "crio.runtime.runtimes.nvidia in the effective configuration"),
                row(
                    "crio: default runtime",
                    "fail",
                    DEFAULT_DETAIL,
                    "Set nvidia_container_toolkit_set_as_default: false and run site.yml --tags runtime",
                ),
            ],
        ),
        (
            {"nvidia_default_allowed": True},
            GPU_NODE,
            (0, CRIO_DUMP.format(default="nvidia"), ""),
            True,
            [
                row("crio: nvidia runtime", "ok", "crio.runtime.runtimes.nvidia in the effective configuration"),
                row(
                    "crio: default runtime",
                    "warn",
                    DEFAULT_DETAIL,
                    "Intended (nvidia_container_toolkit_set_as_default): give GPU pods devices through CDI",
                ),
            ],
        ),
        (
            {},
            NO_GPU,
            (0, CRIO_NO_NVIDIA, ""),
            True,  # the toolkit is installed: the runtime must be registered even without a GPU
            [
                row(
                    "crio: nvidia runtime",
                    "fail",
                    "no crio.runtime.runtimes.nvidia (runtimes: crun)",
                    "Run site.yml --tags runtime",
                ),
                row("crio: default runtime", "ok", "crun (nvidia is not the default)"),
            ],
        ),
        (
            {},
            NO_GPU,
            (0, CRIO_NO_NVIDIA, ""),
            False,
            [
                row("crio: nvidia runtime", "skipped", "no GPU (and no toolkit installed)"),
                row("crio: default runtime", "ok", "crun (nvidia is not the default)"),
            ],
        ),
        (
            {},
            GPU_NODE,
            (1, "", 'level=fatal msg="validating runtime config: invalid runtime_path"\n'),
            True,
            [
                row(
                    "crio: nvidia runtime",
                    "fail",
                    'crio config failed: level=fatal msg="validating runtime config: invalid runtime_path"',
                    "Fix the CRI-O configuration (crio config names the problem)",
                ),
                row("crio: default runtime", "skipped", "crio config failed"),
            ],
        ),
    ],
)
def test_crio(p, facts, dump, toolkit, expected):
    assert checks.crio_rows(params(**p), facts, dump, toolkit) == expected


def test_the_crio_family_asks_the_crio_binary_of_the_facts_and_knows_the_toolkit_of_the_same_run():
    facts = node(runtimes={"crio": {"installed": True, "binary": "/usr/local/bin/crio"}}, has_gpu=False)
    fake = FakeNode(
        commands={("/usr/local/bin/crio", "config"): (0, CRIO_NO_NVIDIA, ""), ("nvidia-ctk", "--version"): CTK}
    )
    result = checks.run_checks(params(families=["crio", "toolkit"], runtimes=["crio"], node=facts), fake)
    assert [r["status"] for r in result["checks"]] == ["ok", "fail", "ok"]  # toolkit, then crio's two rows
    assert fake.ran[-1] == ["/usr/local/bin/crio", "config"]


# ---- confinement -------------------------------------------------------------------------------------------


def _tool(version):
    return {"installed": version is not None, "version": version, "running": version is not None}


def _conf_node(kernel="6.1.0", containerd="1.6.20", runc="1.1.5", kubelet=None, apparmor=False, fuse=True):
    return {
        "kernel": {"release": f"{kernel}-28-amd64", "version": kernel, "max_user_namespaces": 63413, "seccomp": True},
        "runtimes": {"docker": _tool("20.10.24"), "containerd": _tool(containerd), "crio": _tool(None)},
        "oci_runtimes": {"runc": _tool(runc), "crun": _tool(None)},
        "kubelet": _tool(kubelet),
        "apparmor_enabled": apparmor,
        "fuse": {"device": fuse},
    }


OLD_STACK_NEEDS = (
    "Linux >= 6.3 (has 6.1.0-28-amd64); containerd >= 2.0 or CRI-O >= 1.25 (has containerd 1.6.20);"
    " runc >= 1.2 or crun >= 1.9 (has runc 1.1.5); a kubelet >= 1.30 (none installed)"
)
NO_CONFINEMENT_FIX = (
    "Meet what user namespaces need (above) and run FUSE pods with hostUsers: false (security_profiles"
    " README), or boot a kernel with AppArmor; until then schedule no SYS_ADMIN FUSE pods here"
)
NEW_STACK = {"kernel": "6.12.48", "containerd": "2.1.4", "runc": "1.3.0"}


@pytest.mark.parametrize(
    ("facts", "gates", "apparmor", "seccomp", "expected", "state"),
    [
        (
            _conf_node(**NEW_STACK, kubelet="1.33.1"),
            {},
            None,
            True,
            row(
                "FUSE confinement",
                "ok",
                "user namespaces: pods with hostUsers: false mount FUSE with CAP_SYS_ADMIN in their own user"
                " namespace only",
            ),
            "user_namespaces",
        ),
        (
            _conf_node(**NEW_STACK, kubelet="1.31.2"),
            {"UserNamespacesSupport": True},
            None,
            True,
            row(
                "FUSE confinement",
                "ok",
                "user namespaces: pods with hostUsers: false mount FUSE with CAP_SYS_ADMIN in their own user"
                " namespace only",
            ),
            "user_namespaces",
        ),
        (
            _conf_node(apparmor=True),
            {},
            "docker-default (enforce)\nfuse (enforce)\n",
            True,
            row(
                "FUSE confinement",
                "ok",
                "AppArmor + seccomp: SYS_ADMIN pods under AppArmor profile fuse and seccomp profile fuse.json;"
                f" user namespaces not possible: {OLD_STACK_NEEDS}",
            ),
            "apparmor",
        ),
        (
            _conf_node(apparmor=True),
            {},
            "fuse (complain)\n",  # loaded, but not enforcing
            True,
            row(
                "FUSE confinement",
                "warn",
                "seccomp only: not confined (AppArmor profile fuse is not loaded; seccomp cannot see mount types or"
                " paths, so a SYS_ADMIN pod can unmount /proc/sys and write host-wide kernel settings); user"
                f" namespaces not possible: {OLD_STACK_NEEDS}",
                NO_CONFINEMENT_FIX,
            ),
            "seccomp_only",
        ),
        (
            _conf_node(),
            {},
            None,
            True,
            row(
                "FUSE confinement",
                "warn",
                "seccomp only: not confined (the kernel has no AppArmor; seccomp cannot see mount types or"
                " paths, so a SYS_ADMIN pod can unmount /proc/sys and write host-wide kernel settings); user"
                f" namespaces not possible: {OLD_STACK_NEEDS}",
                NO_CONFINEMENT_FIX,
            ),
            "seccomp_only",
        ),
        (
            _conf_node(),
            {},
            None,
            False,
            row(
                "FUSE confinement",
                "fail",
                f"not possible: no seccomp profile fuse.json and user namespaces need {OLD_STACK_NEEDS}",
                NO_CONFINEMENT_FIX,
            ),
            "not_possible",
        ),
        (
            _conf_node(fuse=False),
            {},
            None,
            True,
            row("FUSE confinement", "fail", "not possible: /dev/fuse is missing", "Run site.yml --tags fuse"),
            "not_possible",
        ),
    ],
)
def test_confinement(facts, gates, apparmor, seccomp, expected, state):
    assert checks.confinement_row(params(), facts, gates, apparmor, seccomp) == (expected, state)


def test_the_confinement_family_reads_the_gate_from_the_drop_in_over_the_main_file():
    facts = _conf_node(**NEW_STACK, kubelet="1.31.2")
    files = {
        MAIN: "kind: KubeletConfiguration\nfeatureGates:\n  UserNamespacesSupport: false\n",
        DROPIN: "featureGates:\n  UserNamespacesSupport: true  # on for FUSE pods\n",
        SECCOMP: "{}",
    }
    rows, state = checks.check_confinement(params(), facts, FakeNode(files=files))
    assert state == "user_namespaces", rows
    files[DROPIN] = "featureGates: {}\n"
    rows, state = checks.check_confinement(params(), facts, FakeNode(files=files))
    assert state == "seccomp_only", rows
    assert "UserNamespacesSupport: true (off by default in kubelet 1.31.2)" in rows[0]["detail"]


# ---- the module --------------------------------------------------------------------------------------------


def test_rows_come_in_the_doctors_order_whatever_the_order_asked():
    fake = FakeNode(devices=["/dev/fuse"], files={DROPIN: "", ENV: WITH_CONFIG_DIR, SECCOMP: "{}"})
    families = ["kubelet", "confinement", "fuse", "security", "toolkit", "driver"]
    result = checks.run_checks(params(families=families, node=NO_GPU), fake)
    assert [r["check"] for r in result["checks"]] == [
        "NVIDIA driver",
        "nvidia-smi",
        REBOOT,
        "nvidia-peermem",
        "container toolkit",
        "/dev/fuse",
        AA,
        "seccomp profile fuse",
        "FUSE confinement",
        KC,
    ]
    assert result["toolkit_installed"] is False
    assert checks.run_checks(params(families=["fuse"], node=GPU_NODE), fake)["toolkit_installed"] is None


def test_a_gpu_can_be_pretended_over_the_facts():
    result = checks.run_checks(params(families=["driver"], node=NO_GPU, has_gpu=True), FakeNode())
    assert result["checks"][0]["detail"] == "not loaded on a node with 0 GPU(s)"
    result = checks.run_checks(params(families=["driver"], node=GPU_NODE, has_gpu=False), FakeNode())
    assert result["checks"][0]["status"] == "skipped"


def test_the_real_runner_turns_a_missing_command_and_a_timeout_into_a_result():
    io = checks.Node(timeout=1)
    rc, _out, err = io.run(["/nonexistent/nvidia-smi"])
    assert rc == 2 and "No such file" in err
    rc, _out, err = io.run([sys.executable, "-c", "import time; time.sleep(5)"])
    assert rc == 124 and "did not answer in 1 s" in err
    # a command that answers: a timeout no loaded machine reaches (Python's start alone can take a second there)
    assert checks.Node(timeout=120).run([sys.executable, "-c", "print('a'); import sys; sys.exit(3)"]) == (3, "a", "")


def test_the_module_returns_the_rows_in_check_mode_too(module_runner, tmp_path):
    (tmp_path / "fuse.json").write_text("{}")
    args = {
        "families": ["fuse", "security"],
        "node": GPU_NODE,
        "fuse_device": "/dev/null",
        "apparmor_os": False,
        "seccomp_root": str(tmp_path / "root"),
        **{key: PARAMS[key] for key in ("runtime_binary", "kubelet_dropin_name", "kubelet_dropin_min")},
    }
    result = module_runner(checks, args, check_mode=True)
    assert not result.failed and result.result["changed"] is False
    assert [r["status"] for r in result.result["checks"]] == ["ok", "skipped", "fail"]


# ---- device plugin vs node (issue 25) ------------------------------------------------------------------------

DP_ENVVAR = {
    "running": True,
    "present": True,
    "pids": [7],
    "strategies": ["envvar"],
    "source": "env",
    "sockets": ["/var/lib/kubelet/device-plugins/nvidia-gpu.sock"],
    "managed_by": "standalone",
}
TK_UPSTREAM = {"accept_envvar_when_unprivileged_effective": True, "accept_volume_mounts_effective": False}
TK_HARDENED = {"accept_envvar_when_unprivileged_effective": False, "accept_volume_mounts_effective": True}


@pytest.mark.parametrize(
    ("plugin", "defaults", "toolkit", "status"),
    [
        ({"present": False}, {"containerd": {"default": "runc", "cdi": True}}, TK_HARDENED, "skipped"),
        (dict(DP_ENVVAR, strategies=["cdi-cri"]), {"containerd": {"default": "runc", "cdi": True}}, TK_HARDENED, "ok"),
        # mutation: the plugin back on envvar after the node was isolated
        (DP_ENVVAR, {"containerd": {"default": "runc", "cdi": True}}, TK_HARDENED, "fail"),
        # mutation: CDI turned off under a cdi-cri plugin
        (
            dict(DP_ENVVAR, strategies=["cdi-cri"]),
            {"containerd": {"default": "runc", "cdi": False}},
            TK_HARDENED,
            "fail",
        ),
        # kept semantics: works, and leaks GPUs to pods that request none
        (DP_ENVVAR, {"containerd": {"default": "nvidia", "cdi": False}}, TK_UPSTREAM, "warn"),
        # a runtime the doctor was not asked about does not count
        (DP_ENVVAR, {"docker": {"default": "nvidia", "cdi": False}}, TK_UPSTREAM, "fail"),
    ],
)
def test_device_plugin_row(plugin, defaults, toolkit, status):
    node = {"device_plugin": plugin, "runtime_defaults": defaults, "toolkit_config": toolkit, "gpu_workloads": []}
    row = checks.device_plugin_row({"runtimes": ["containerd"], "runtime_name": "nvidia"}, node)
    assert row["check"] == "device plugin vs node"
    assert row["status"] == status, row


def test_device_plugin_row_of_facts_without_the_keys_is_skipped():
    row = checks.device_plugin_row({"runtimes": ["containerd"], "runtime_name": "nvidia"}, {})
    assert row["status"] == "skipped"


# ---- crio on a running CRI-O (issue 24 item 3) --------------------------------------------------------------

CRIO_LIVE = '[crio.runtime]\ncgroup_manager = "cgroupfs"\ndefault_runtime = "{default}"\n' + (
    '[crio.runtime.runtimes.runc]\nruntime_path = "/usr/sbin/runc"\n'
    '[crio.runtime.runtimes.{handler}]\nruntime_path = "/usr/bin/nvidia-container-runtime"\n'
)
CRICTL_READY = (
    '{"status": {"conditions": [{"type": "RuntimeReady", "status": true}, {"type": "NetworkReady", "status": true}]}}'
)
CRICTL_NOT_READY = '{"status": {"conditions": [{"type": "RuntimeReady", "status": false}]}}'
CRICTL_NO_NETWORK = (
    '{"status": {"conditions": [{"type": "RuntimeReady", "status": true}, {"type": "NetworkReady", "status": false,'
    ' "reason": "NetworkPluginNotReady", "message": "No CNI configuration file in /etc/cni/net.d/"}]}}'
)
CRICTL = ["/usr/bin/crictl", "--runtime-endpoint", checks.CRIO_ENDPOINT]


def _crio_node(live, info=(0, CRICTL_READY, ""), image=True):
    return FakeNode(
        commands={
            ("crio", "config"): (0, CRIO_DUMP.format(default="runc"), ""),
            ("crio", "status", "config"): live,
            (*CRICTL, "info"): info,
            ("/usr/bin/crictl", "--image-endpoint", checks.CRIO_ENDPOINT, "inspecti", "busybox"): (
                0 if image else 1,
                "",
                "",
            ),
        },
        which=["crictl"],
    )


def _crio_rows(fake, **p):
    facts = node(runtimes={"crio": {"installed": True, "running": True}}, has_gpu=False)
    c = checks.crio_state(params(crio_test_image="busybox", **p), facts, fake)
    return {r["check"]: r for r in checks.crio_rows(params(**p), facts, c["dump"], True, c)}, c


def test_crio_rows_of_a_running_crio_read_the_daemon_and_its_cri():
    rows, c = _crio_rows(_crio_node((0, CRIO_LIVE.format(default="runc", handler="nvidia"), "")))
    assert c["cgroup_parent"] == "/gpu_validate"  # CRI-O runs cgroupfs: no systemd slice as a pod's parent
    assert rows["crio: CRI"] == row(
        "crio: CRI", "ok", "crictl info: RuntimeReady and NetworkReady (the kubelet can run pods)"
    )
    live = (0, CRIO_LIVE.format(default="runc", handler="nvidia"), "")
    rows, _c = _crio_rows(_crio_node(live, info=(0, CRICTL_NO_NETWORK, "")))
    assert rows["crio: CRI"]["status"] == "fail"
    assert "NetworkReady is false (NetworkPluginNotReady No CNI configuration file" in rows["crio: CRI"]["detail"]
    assert rows["crio: running config"]["status"] == "ok"
    assert rows["crio: default runtime"]["status"] == "ok"


def test_crio_rows_fail_a_cri_that_is_not_ready_and_a_handler_the_running_daemon_lacks():
    live = (0, CRIO_LIVE.format(default="runc", handler="crun"), "")
    rows, _c = _crio_rows(_crio_node(live, info=(0, CRICTL_NOT_READY, "")))
    assert rows["crio: CRI"]["status"] == "fail" and "not RuntimeReady" in rows["crio: CRI"]["detail"]
    live_row = rows["crio: running config"]
    assert live_row["status"] == "fail" and "the running CRI-O has no nvidia runtime handler" in live_row["detail"]
    rows, _c = _crio_rows(_crio_node((1, "", "connection refused"), info=(1, "", "connection refused")))
    assert rows["crio: CRI"]["status"] == "fail"
    assert rows["crio: running config"] == row(
        "crio: running config", "fail", "crio status config failed: connection refused", "journalctl -u crio"
    )


def test_crio_default_runtime_row_reads_the_running_daemon():
    rows, _c = _crio_rows(_crio_node((0, CRIO_LIVE.format(default="nvidia", handler="nvidia"), "")))
    assert rows["crio: default runtime"]["status"] == "fail"


def test_crio_sys_admin_row_fails_when_the_default_handler_hands_out_gpus():
    c = {"running": True, "crictl": "/usr/bin/crictl", "image": True, "live": {"default": "nvidia"}, "default": "runc"}
    gpu = node(has_gpu=True)
    p = params(crio_test_image="busybox")
    ok = checks.crio_sys_admin_row(p, gpu, {**c, "live": {"default": "runc"}}, (0, "0", ""))
    assert ok["status"] == "ok" and "through CRI-O's default runtime runc: no /dev/nvidia* device" in ok["detail"]
    assert ok["detail"].endswith(checks.SYS_ADMIN_NOTE), ok  # what NVIDIA's runtime makes of CAP_SYS_ADMIN
    bad = checks.crio_sys_admin_row(p, gpu, c, (0, "2", ""))
    assert bad["status"] == "fail"
    assert "through CRI-O's default runtime nvidia sees 2 /dev/nvidia* devices" in bad["detail"]
    assert checks.crio_sys_admin_row(p, node(has_gpu=False), c, None)["status"] == "skipped"
    assert checks.crio_sys_admin_row(params(), gpu, c, None)["status"] == "skipped"
    assert checks.crio_sys_admin_row(p, gpu, c, (1, "", "boom"))["status"] == "fail"


def test_crio_container_row_fails_a_pod_through_nvidia_that_does_not_run():
    c = {"running": True, "crictl": "/usr/bin/crictl", "image": True, "live": {"runtimes": ["runc", "nvidia"]}}
    p = params(crio_test_image="busybox")
    rows = checks.crio_container_rows(p, node(has_gpu=False), c, (1, "", "runc create failed"), None)
    assert rows[0]["check"] == "crio: container via nvidia" and rows[0]["status"] == "fail", rows
    assert checks.crio_container_rows(p, node(has_gpu=False), c, (0, "", ""), None)[0]["status"] == "ok"
    missing = checks.crio_container_rows(p, node(has_gpu=False), {**c, "image": False}, None, None)[0]
    assert missing["status"] == "warn"
