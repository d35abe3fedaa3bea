#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's checks (role gpu_validate), run on the node in one process."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_validate_checks
short_description: Run the GPU node doctor's checks on the node and return one row per check
description:
  - Runs the checks of the families asked for, in one process on the node, and returns their rows
    C({check, status, detail, fix}) in the doctor's order (driver, toolkit, the runtimes of O(runtimes) in
    their order, isolation, doors, fuse, security, confinement, kubelet), whatever the order of O(families). The role
    gpu_validate prints them as a table, writes the report files and fails the node on a failed check; this
    module never fails on a check.
  - "The checks ask the node as it is now: the loaded driver and C(nvidia-smi), the installed kernels and their
    NVIDIA module (the kernel the boot loader starts next), the toolkit package and C(nvidia-ctk --version),
    docker's runtimes (C(docker info)) and test containers through the nvidia runtime and docker's default
    runtime (with and without CAP_SYS_ADMIN; only with O(test_image)), NVIDIA's device plugin against the node (its
    device-list strategy, the runtimes' defaults and the toolkit's config as the facts read them), containerd's
    effective configuration
    (C(containerd config dump)), its CRI plugin (C(ctr plugins ls), C(crictl info)), whether it started after its
    config files were written, and test containers through the nvidia binary and CRI's default runtime (only
    with O(containerd_test_image)), CRI-O's effective configuration
    (C(crio config)), the running CRI-O (C(crio status config), C(crictl info)) and test pods through its nvidia
    handler and its default handler with CAP_SYS_ADMIN (C(crictl run); only with O(crio_test_image)),
    C(/dev/fuse), the AppArmor profile file and the kernel's list of loaded profiles, the
    seccomp profile under the kubelet's seccomp root, how FUSE pods can be confined (user namespaces,
    AppArmor + seccomp, seccomp only), the kubelet drop-in, the kubelet's main configuration and the
    environment file that passes C(--config-dir)."
  - "Per cluster installer (C(installer) of O(node)): on RKE2/k3s the containerd rows ask the installer's own
    containerd (its binary with the generated config, C(ctr) and C(crictl) from its bin directory on its socket,
    the agent unit's start against the template and agent config files) and the kubelet row reads the agent
    config (C(config.yaml), then C(config.yaml.d)) for the kubelet role's drop-in; on kubespray the nvidia runtime
    row names kubespray's inventory variable when a kubespray run re-rendered config.toml without the runtime,
    and the kubelet row says that kubespray renders the kubelet's files."
  - A command that fails or is missing becomes a row with status V(fail) or V(warn) and its message in the
    detail; commands run from argument lists, without a shell, with a time limit.
  - Reads only, never reports a change, and runs the same in check mode.
version_added: "0.3.0"
author:
  - gpu-node-provisioning contributors
extends_documentation_fragment:
  - gpunode_read_only
options:
  families:
    description: Which checks to run.
    type: list
    elements: str
    choices: [driver, toolkit, docker, containerd, crio, isolation, doors, fuse, security, confinement, kubelet]
    required: true
  node:
    description:
      - The node facts of the gpu_node_facts module (C(ansible_facts.gpu_node)) as they are now; the checks read
        C(has_gpu), C(gpu_count), C(nouveau_loaded), C(driver), C(nvidia_smi), C(kubelet), C(apparmor_enabled)
        and C(apparmor).
    type: dict
    required: true
  has_gpu:
    description:
      - Whether the node has an NVIDIA GPU; unset takes C(has_gpu) of O(node). The role passes its own
        settled value, which tests may override to pretend a GPU.
    type: bool
  driver_version:
    description: Driver pin, an exact version or its prefix (V(580.95)); empty for no version pin.
    type: str
    default: ""
  driver_branch:
    description: Driver branch pin (V(580)); empty for none. O(driver_version) wins when both are set.
    type: str
    default: ""
  peermem:
    description: Whether nvidia-peermem must be loaded and loaded at boot; V(false) skips that row.
    type: bool
    default: false
  peermem_file:
    description: The modules-load.d file that loads nvidia-peermem at boot.
    type: path
    default: /etc/modules-load.d/nvidia-peermem.conf
  kernels_root:
    description: Filesystem tree whose C(/boot) and C(/lib/modules) the "driver after next reboot" row reads.
    type: path
    default: /
  toolkit_version:
    description: Toolkit package version pin (V(1.17.8-1)); empty for any version.
    type: str
    default: ""
  toolkit_package:
    description: The toolkit package whose version the package manager reports.
    type: str
    default: nvidia-container-toolkit
  package_version_argv:
    description: Command that prints the installed version of a package (the package is appended); empty to
      rely on C(nvidia-ctk --version) alone.
    type: list
    elements: str
    default: []
  runtimes:
    description:
      - The container runtimes to check, in the order of their rows (the families V(docker) and V(crio) run for
        the runtimes named here); V(isolation) checks docker's default runtime when docker is named.
    type: list
    elements: str
    default: []
  test_image:
    description:
      - An image already present in docker on the node (never pulled) with sh, ls and wc; empty skips the
        container runs ("no test image").
    type: str
    default: ""
  docker_run_options:
    description: Extra C(docker run) options for the test containers.
    type: list
    elements: str
    default: [--network, none]
  container_timeout:
    description: Seconds a test container may take (C(timeout <seconds> docker run ...)) before its row fails.
    type: int
    default: 120
  containerd_test_image:
    description:
      - Full reference of an image present in the ctr namespace O(containerd_namespace) (never pulled) with sh,
        ls and wc; empty skips containerd's container runs.
    type: str
    default: ""
  containerd_namespace:
    description: ctr namespace of O(containerd_test_image).
    type: str
    default: default
  containerd_run_options:
    description: Extra C(ctr run) options for the test containers.
    type: list
    elements: str
    default: []
  crio_test_image:
    description:
      - An image present in CRI-O's image store (never pulled) with sh, ls and wc; empty skips CRI-O's test pods.
        They run through CRI-O's CRI with C(crictl run) (the nvidia handler, and CRI-O's default handler with
        CAP_SYS_ADMIN), on the node's network, and are removed.
    type: str
    default: ""
  runtime_binary:
    description: The nvidia runtime binary; ctr runs containerd's test containers through it (C(--runc-binary)).
    type: path
    required: true
  runtime_name:
    description: The runtime name that the container runtimes must have registered.
    type: str
    default: nvidia
  nvidia_default_allowed:
    description: Whether nvidia as a runtime's default was asked for; then that row warns instead of failing.
    type: bool
    default: false
  toolkit_config:
    description: NVIDIA's runtime configuration, read for the rows of the doors to a GPU without a request.
    type: path
    default: /etc/nvidia-container-runtime/config.toml
  volume_mounts_allowed:
    description:
      - Whether C(accept-nvidia-visible-devices-as-volume-mounts = true) was asked for (the device plugin's
        C(volume-mounts) strategy); then the row about GPUs by volume mount warns instead of failing.
    type: bool
    default: false
  toolkit_installed:
    description:
      - Whether the toolkit is installed, as an earlier run of the V(toolkit) family returned it; used when
        O(families) has no V(toolkit). With the toolkit (or a GPU) a runtime without the nvidia runtime fails.
    type: bool
    default: false
  fuse_device:
    description: The FUSE device node.
    type: path
    default: /dev/fuse
  apparmor_os:
    description: Whether AppArmor confines containers on this OS; V(false) skips the AppArmor row.
    type: bool
    default: true
  apparmor_profile:
    description: Name of the FUSE AppArmor profile.
    type: str
    default: fuse
  apparmor_dir:
    description: Directory of the AppArmor profile files.
    type: path
    default: /etc/apparmor.d
  apparmor_profiles_file:
    description: The kernel's list of loaded AppArmor profiles.
    type: path
    default: /sys/kernel/security/apparmor/profiles
  seccomp_root:
    description: The kubelet's seccomp root; the profile is C(<root>/profiles/<seccomp_profile>.json).
    type: path
    default: /var/lib/kubelet/seccomp
  seccomp_profile:
    description: Name of the FUSE seccomp profile.
    type: str
    default: fuse
  kubelet_config_dir:
    description: The kubelet's drop-in directory (C(--config-dir)).
    type: path
    default: /etc/kubernetes/kubelet.conf.d
  kubelet_dropin_name:
    description: File name of the drop-in the kubelet role writes.
    type: str
    required: true
  kubelet_main_config:
    description: The kubelet's main configuration file.
    type: path
    default: /var/lib/kubelet/config.yaml
  kubelet_env_file:
    description: The file that passes KUBELET_EXTRA_ARGS to the kubelet.
    type: path
    default: /etc/default/kubelet
  kubelet_config_mode:
    description: The kubelet role's C(kubelet_config_mode); V(merge) means the role merged into the main file.
    type: str
    default: auto
  kubelet_dropin_min:
    description: The first kubelet version that reads drop-ins; an older kubelet gets the main file merged.
    type: str
    required: true
  command_timeout:
    description: Seconds each command may take before its row reports it as failed.
    type: int
    default: 60
"""

EXAMPLES = r"""
- name: Check the driver, the toolkit and /dev/fuse
  gpu_validate_checks:
    families: [driver, toolkit, fuse]
    node: "{{ ansible_facts.gpu_node }}"
    driver_version: 580.95.05
    runtime_binary: "{{ __gpu_node_facts_runtime_binary }}"  # the values the roles share (gpu_node_facts vars)
    kubelet_dropin_name: "{{ __gpu_node_facts_kubelet_dropin_name }}"
    kubelet_dropin_min: "{{ __gpu_node_facts_kubelet_dropin_min }}"
  register: doctor

- name: Show the rows
  ansible.builtin.debug:
    msg: "{{ doctor.checks | gpu_validate_table(inventory_hostname) }}"
"""

RETURN = r"""
checks:
  description: One row per check, in the doctor's order.
  returned: always
  type: list
  elements: dict
  sample:
    - {check: NVIDIA driver, status: ok, detail: "580.95.05 loaded (pin: version 580.95.05)", fix: ""}
toolkit_installed:
  description: Whether the toolkit is installed (package or C(nvidia-ctk)); null when O(families) has no V(toolkit).
  returned: always
  type: bool
  sample: true
fuse_confinement:
  description: How FUSE pods are confined (V(user_namespaces), V(apparmor), V(seccomp_only), V(not_possible)); null
    when O(families) has no V(confinement).
  returned: always
  type: str
  sample: seccomp_only
"""

import glob
import json
import os
import random
import re
import shutil
import stat
import string
import subprocess
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpu_pods import CDI_PREFIXES_DEFAULT, toolkit_config_facts
from ansible.module_utils.gpu_pods import doctor_row as gpu_pods_doctor_row
from ansible.module_utils.gpu_validate_logic import (
    TomlError,
    feature_gates,
    json_problem,
    runtime_config,
    toml_tables,
    userns_missing,
)
from ansible.module_utils.nvidia_kernels import inspect_live
from ansible.module_utils.systemd_units import boot_time, main_start_argv, main_start_us

FAMILIES = (
    "driver",
    "toolkit",
    "docker",
    "containerd",
    "crio",
    "isolation",
    "doors",
    "fuse",
    "security",
    "confinement",
    "kubelet",
)


def _bool(value) -> bool:
    """Ansible's bool filter: yes/on/1/true (any case) and true values are True."""
    if isinstance(value, str):
        return value.strip().lower() in ("yes", "on", "1", "true", "y", "t")
    return bool(value)


def _row(check: str, status: str, detail: str, fix: str = "") -> dict:
    return {"check": check, "status": status, "detail": " ".join(str(detail).split()), "fix": fix}


def _truncate(text: str, length: int = 160, end: str = "...", leeway: int = 5) -> str:
    """Jinja's truncate filter with its defaults (whole words, leeway 5)."""
    if len(text) <= length + leeway:
        return text
    return text[: length - len(end)].rsplit(" ", 1)[0] + end


def _version_tuple(version: str) -> tuple:
    """Leading numbers of a version (1.31.2-rc.1 -> (1, 31, 2)) for comparing kubelet versions."""
    match = re.match(r"v?(\d+(?:\.\d+)*)", str(version).strip())
    return tuple(int(p) for p in match.group(1).split(".")) if match else ()


class Node:
    """What the checks read on the node: files and commands. Tests give fakes of both."""

    def __init__(self, timeout: int = 60):
        self.timeout = timeout

    def run(self, argv: list, timeout: int | None = None) -> tuple:
        """(rc, stdout, stderr) of a command; a missing command or a timeout is an rc and a message."""
        env = dict(os.environ, LC_ALL="C", LANG="C")
        timeout = timeout or self.timeout
        try:
            proc = subprocess.run(
                [str(a) for a in argv], capture_output=True, text=True, errors="replace", timeout=timeout, env=env
            )
        except FileNotFoundError as exc:
            return 2, "", str(exc)
        except subprocess.TimeoutExpired:
            return 124, "", f"{argv[0]} did not answer in {timeout} s"
        except OSError as exc:
            return 126, "", str(exc)
        return proc.returncode, proc.stdout.rstrip("\n"), proc.stderr.rstrip("\n")

    def which(self, name: str, opt_dirs: list) -> str | None:
        path = os.pathsep.join([os.environ.get("PATH", ""), *opt_dirs])
        return shutil.which(name, path=path)

    def lstat(self, path: str):
        try:
            return os.lstat(path)
        except OSError:
            return None

    def mtime(self, path: str) -> float | None:
        """Modification time of a file (symlinks followed, as date -r does), None when it is not there."""
        try:
            return os.stat(path).st_mtime
        except OSError:
            return None

    def glob(self, pattern: str) -> list:
        return sorted(glob.glob(pattern))

    def boot_time(self) -> float:
        """Seconds since the epoch at CLOCK_MONOTONIC zero, to place systemd's monotonic time stamps."""
        return boot_time()

    def temp_dir(self) -> str:
        return tempfile.mkdtemp(prefix="gpu-validate-")

    def write(self, path: str, text: str) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)

    def remove_tree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def read(self, path: str) -> str | None:
        """The text of a file, or None when it cannot be read."""
        try:
            with open(path, "rb") as handle:
                return handle.read().decode("utf-8", errors="replace")
        except OSError:
            return None


# ---- driver ------------------------------------------------------------------------------------------------


def driver_row(p: dict, node: dict) -> dict:
    has_gpu = _bool(node.get("has_gpu"))
    driver = node.get("driver") or {}
    loaded = _bool(driver.get("loaded"))
    version = driver.get("version") or ""
    pin_version, pin_branch = p["driver_version"], p["driver_branch"]
    pin = f"version {pin_version}" if pin_version else f"branch {pin_branch}" if pin_branch else ""
    if not has_gpu:
        return _row("NVIDIA driver", "skipped", "no GPU (no NVIDIA GPU on PCI)")
    if not loaded:
        nouveau = "; nouveau is loaded" if _bool(node.get("nouveau_loaded")) else ""
        return _row(
            "NVIDIA driver",
            "fail",
            f"not loaded on a node with {node.get('gpu_count')} GPU(s){nouveau}",
            "Run site.yml --tags driver; when the driver is installed, reboot the node to load it",
        )
    # The branch pin is checked even when an exact version pin matched (the role always did).
    if (pin_version and version != pin_version and not version.startswith(pin_version + ".")) or (
        pin_branch and not version.startswith(pin_branch + ".")
    ):
        return _row(
            "NVIDIA driver",
            "fail",
            f"{version} loaded, but the pin is {pin}",
            "Reboot to load the installed driver, or run playbooks/upgrade_driver.yml with the pin",
        )
    return _row("NVIDIA driver", "ok", f"{version} loaded" + (f" (pin: {pin})" if pin else ""))


def smi_row(node: dict, smi) -> dict:
    """smi: (rc, stdout, stderr) of nvidia-smi, or None when it was not run (no nvidia-smi on the node)."""
    if not _bool(node.get("has_gpu")):
        return _row("nvidia-smi", "skipped", "no GPU")
    if smi is None:
        return _row(
            "nvidia-smi",
            "fail",
            "not installed",
            "Run site.yml --tags driver (nvidia-smi comes with the driver packages)",
        )
    rc, out, err = smi
    if rc != 0:
        return _row(
            "nvidia-smi",
            "fail",
            f"exit code {rc}: " + _truncate(f"{out} {err}".strip()),
            "Read the nvidia-smi message; a driver/library version mismatch needs a reboot",
        )
    lines = [line for line in out.splitlines() if line]
    count = int(node.get("gpu_count") or 0)
    if len(lines) < count:
        return _row(
            "nvidia-smi",
            "warn",
            f"sees {len(lines)} of the {count} GPUs on PCI",
            "Look for fallen-off GPUs (dmesg | grep -i xid) and reset or reboot",
        )
    names = list(dict.fromkeys(line.split(",")[0].strip() for line in lines))
    return _row("nvidia-smi", "ok", f"{len(lines)} GPU(s): " + ", ".join(names))


def reboot_row(p: dict, node: dict, kernels) -> dict:
    """kernels: what nvidia_kernels.inspect returns for the node (None without a GPU)."""
    name = "driver after next reboot"
    if not _bool(node.get("has_gpu")):
        return _row(name, "skipped", "no GPU")
    entries = (kernels or {}).get("kernels") or []
    nxt = next((k for k in entries if k.get("next_boot")), None)
    if not nxt:
        return _row(name, "skipped", "no kernel image in /boot (a container boots its host kernel)")
    release = nxt.get("release") or ""
    if not nxt.get("module"):
        return _row(
            name,
            "fail",
            f"kernel {release} boots next ({kernels.get('next_boot_rule') or ''}) and has no NVIDIA module",
            "Run site.yml --tags driver: it builds or installs the module for every installed kernel,"
            " or names the missing headers; do not reboot before",
        )
    next_version = nxt.get("module_version") or ""
    pin = p["driver_version"]
    if pin and next_version and next_version != pin and not next_version.startswith(pin + "."):
        return _row(
            name,
            "fail",
            f"kernel {release} boots next with NVIDIA module {next_version}, but the pin is version {pin}",
            "Run playbooks/upgrade_driver.yml with the pin, or rebuild the module (dkms autoinstall)",
        )
    others = [k["release"] for k in entries if not k.get("next_boot") and k.get("module") is None]
    if others:
        return _row(
            name,
            "warn",
            f"kernel {release} boots next with the NVIDIA module; no module for {', '.join(others)}",
            "Run site.yml --tags driver, or remove the kernels without a module",
        )
    return _row(
        name, "ok", f"kernel {release} boots next with NVIDIA module {next_version or os.path.basename(nxt['module'])}"
    )


def peermem_row(p: dict, node: dict, boot_file_exists: bool) -> dict:
    path = p["peermem_file"]
    if not p["peermem"]:
        return _row("nvidia-peermem", "skipped", "not asked for (gpu_validate_peermem is false)")
    if not _bool(node.get("has_gpu")):
        return _row("nvidia-peermem", "skipped", "no GPU")
    if not boot_file_exists:
        return _row(
            "nvidia-peermem",
            "fail",
            f"{path} is missing: not loaded at boot",
            "Run site.yml --tags driver with nvidia_driver_peermem: true",
        )
    driver = node.get("driver") or {}
    if not _bool(driver.get("loaded")):
        return _row(
            "nvidia-peermem",
            "warn",
            f"loads at boot ({path}); the NVIDIA driver is not loaded",
            "Reboot to load the driver (and nvidia-peermem with it)",
        )
    if "nvidia_peermem" not in (driver.get("modules") or []):
        return _row(
            "nvidia-peermem",
            "fail",
            "not loaded next to the NVIDIA driver",
            "modprobe nvidia-peermem; it needs the InfiniBand core (ib_core) loaded",
        )
    return _row("nvidia-peermem", "ok", f"loaded, and loaded at boot ({path})")


def check_driver(p: dict, node: dict, io: Node) -> list:
    has_gpu = _bool(node.get("has_gpu"))
    smi = None
    if has_gpu and node.get("nvidia_smi"):
        smi = io.run([node["nvidia_smi"], "--query-gpu=name,driver_version", "--format=csv,noheader"])
    kernels = inspect_live(p["kernels_root"], io.run, io.which) if has_gpu else None
    boot_file = has_gpu and p["peermem"] and io.lstat(p["peermem_file"]) is not None
    return [driver_row(p, node), smi_row(node, smi), reboot_row(p, node, kernels), peermem_row(p, node, boot_file)]


# ---- toolkit -----------------------------------------------------------------------------------------------


def toolkit_row(p: dict, node: dict, ctk, pkg) -> tuple:
    """ctk: (rc, out, err) of nvidia-ctk --version; pkg: that of the package query or None. (row, installed)."""
    cli = ""
    if ctk[0] == 0:
        words = (ctk[1].splitlines() or [""])[0].split()
        cli = re.sub(r"^v", "", words[-1]) if words else ""
    pkg_version = pkg[1].strip() if pkg is not None and pkg[0] == 0 else ""
    installed = pkg_version or cli
    pin = p["toolkit_version"]
    package = p["toolkit_package"]
    matches = not pin or installed == pin or (not pkg_version and cli == pin.split("-")[0])
    if installed and matches:
        row = _row("container toolkit", "ok", f"{package} {installed}" + (f" (pin {pin})" if pin else ""))
    elif installed:
        row = _row(
            "container toolkit",
            "fail",
            f"{installed} installed, but the pin is {pin}",
            "Run site.yml --tags toolkit to install the pinned version",
        )
    elif _bool(node.get("has_gpu")):
        row = _row(
            "container toolkit",
            "fail",
            f"nvidia-ctk not found and {package} not installed",
            "Run site.yml --tags toolkit",
        )
    else:
        row = _row("container toolkit", "skipped", "no GPU (and no toolkit installed)")
    return row, bool(cli or pkg_version)


def check_toolkit(p: dict, node: dict, io: Node) -> tuple:
    ctk = io.run(["nvidia-ctk", "--version"])
    pkg = io.run([*p["package_version_argv"], p["toolkit_package"]]) if p["package_version_argv"] else None
    row, installed = toolkit_row(p, node, ctk, pkg)
    return [row], installed


# ---- doors to a GPU without a request (issue 24) -------------------------------------------------------------
# NVIDIA's runtime (toolkit 1.20, internal/config/image/cuda_image.go, CUDA.VisibleDevices) takes device requests
# from three places besides NVIDIA_VISIBLE_DEVICES: CDI annotations whose keys start with one of
# nvidia-container-runtime.modes.cdi.annotation-prefixes (default ["cdi.k8s.io/"], api/config/v1/config.go),
# and, with accept-nvidia-visible-devices-as-volume-mounts = true, bind mounts of /dev/null under
# /var/run/nvidia-container-devices (requestsFromMounts). Neither is gated by the envvar hardening.

VOLUME_MOUNT_ROOT = "/var/run/nvidia-container-devices"


def _toolkit_config(text) -> tuple:
    """(parsed config.toml, error text); ({}, '') when the file is not there."""
    if text is None:
        return {}, ""
    try:
        return toml_tables(text), ""
    except TomlError as exc:
        return {}, str(exc)


def volume_mount_row(p: dict, text) -> dict:
    """Whether NVIDIA's runtime takes GPUs from /dev/null mounts under /var/run/nvidia-container-devices, which any
    pod allowed a hostPath volume can make."""
    check = "toolkit: GPU by volume mount"
    config, error = _toolkit_config(text)
    if error:
        return _row(
            check, "fail", f"{p['toolkit_config']} is not TOML: {_truncate(error)}", "Run site.yml --tags toolkit"
        )
    if config.get("accept-nvidia-visible-devices-as-volume-mounts") is not True:
        return _row(
            check,
            "ok",
            f"NVIDIA's runtime ignores /dev/null mounts under {VOLUME_MOUNT_ROOT} "
            "(accept-nvidia-visible-devices-as-volume-mounts is not true)",
        )
    detail = (
        f"accept-nvidia-visible-devices-as-volume-mounts = true in {p['toolkit_config']}: a pod with RuntimeClass "
        f"{p['runtime_name']} and a hostPath volume of /dev/null at {VOLUME_MOUNT_ROOT}/<GPU> gets that GPU "
        "without requesting one"
    )
    admission = (
        f"an admission policy must deny hostPath volumes of /dev/null (and any mount under {VOLUME_MOUNT_ROOT}) "
        "to pods that request no nvidia.com/gpu"
    )
    if _bool(p.get("volume_mounts_allowed")):
        return _row(
            check,
            "warn",
            detail + " (asked for: the device plugin's volume-mounts strategy)",
            admission[0].upper() + admission[1:],
        )
    return _row(
        check,
        "fail",
        detail,
        "Run site.yml --tags toolkit (nvidia_container_toolkit_accept_volume_mounts: false; GPU pods get their "
        f"devices through CDI). Only for the device plugin's volume-mounts strategy set it true; then {admission}",
    )


def _path_match(pattern: str, name: str) -> bool:
    """Go's path.Match, which containerd uses for pod_annotations / container_annotations: * and ? never match
    '/', [...] is a class."""
    regex, i = "", 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            regex += "[^/]*"
        elif char == "?":
            regex += "[^/]"
        elif char == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end]
            body = body.replace("\\", "\\\\").replace("[", "\\[")
            regex += "[" + body + "]"
            i = end
        elif char == "\\" and i + 1 < len(pattern):
            i += 1
            regex += re.escape(pattern[i])
        else:
            regex += re.escape(char)
        i += 1
    return re.fullmatch(regex, name) is not None


def _witness(pattern: str) -> str:
    """A name that a path.Match pattern matches, if it matches any: * -> '', ? -> 'x', a class -> one of its
    characters (a character outside it when negated)."""
    out, i = "", 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            pass
        elif char == "?":
            out += "x"
        elif char == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end]
            if body[:1] == "^":
                out += next((c for c in "xyzabc0123456789" if _path_match(pattern[i : end + 1], c)), "x")
            else:
                out += body[:1]
            i = end
        elif char == "\\" and i + 1 < len(pattern):
            i += 1
            out += pattern[i]
        else:
            out += char
        i += 1
    return out


def _passes_prefix(pattern: str, prefix: str) -> bool:
    """Whether an allow-list pattern lets through some annotation key <prefix><name> (a name has no '/')."""
    candidates = [prefix + "x", _witness(pattern)]
    if pattern.startswith(prefix):
        candidates.append(prefix + _witness(pattern[len(prefix) :]))
    return any(
        key.startswith(prefix)
        and len(key) > len(prefix)
        and "/" not in key[len(prefix) :]
        and _path_match(pattern, key)
        for key in candidates
    )


def _runtime_tables(node, found: dict) -> None:
    """Every `...runtimes.<name>` table of a containerd config dump (v1, v2 and v3 alike)."""
    if not isinstance(node, dict):
        return
    runtimes = node.get("runtimes")
    if isinstance(runtimes, dict) and all(isinstance(v, dict) for v in runtimes.values()):
        found.update(runtimes)
    for value in node.values():
        _runtime_tables(value, found)


def annotation_passthrough(dump_text, runtime_name: str) -> dict:
    """pod_annotations and container_annotations of one runtime in `containerd config dump`."""
    found: dict = {}
    try:
        _runtime_tables(toml_tables(str(dump_text or "")), found)
    except TomlError:
        return {}
    entry = found.get(runtime_name) or {}
    return {key: _string_list(entry.get(key)) for key in ("pod_annotations", "container_annotations")}


def _string_list(value) -> list:
    """A TOML array of strings; the text of one when the node's fallback TOML reader (Python < 3.11) kept it as
    text (containerd 2.x dumps ['literal', 'strings'])."""
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str) and value.strip().startswith("["):
        return [d if d else s for d, s in re.findall(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'', value)]
    return []


def check_doors(p: dict, node: dict, io: Node, toolkit_installed: bool, containerd, crio=None) -> list:
    """The doors family: one row per way a pod that requests no GPU could still get one through NVIDIA's runtime
    (containerd: containerd_state(), crio: crio_state(); None when that runtime is not among the runtimes)."""
    if not toolkit_installed:
        return [_row("toolkit: GPU by volume mount", "skipped", "no toolkit installed")]
    text = io.read(p["toolkit_config"])
    rows = [volume_mount_row(p, text)]
    if containerd is not None:
        rows.append(cdi_annotation_row(p, containerd, text))
    if crio is not None:
        rows.append(crio_cdi_annotation_row(p, crio, text))
    return rows


def _annotation_prefixes(toolkit_text) -> list:
    """The prefixes of OCI annotations NVIDIA's runtime reads CDI device requests from (its default when
    config.toml names none)."""
    config, _error = _toolkit_config(toolkit_text)
    cdi = ((config.get("nvidia-container-runtime") or {}).get("modes") or {}).get("cdi") or {}
    prefixes = cdi.get("annotation-prefixes", CDI_PREFIXES_DEFAULT)
    return _string_list(prefixes) if isinstance(prefixes, (list, str)) else list(CDI_PREFIXES_DEFAULT)


def _no_prefix_text(prefixes: list) -> str:
    return ", ".join(prefixes) if prefixes else "none (annotation-prefixes = [])"


def cdi_annotation_row(p: dict, c: dict, toolkit_text) -> dict:
    """Whether containerd hands a pod's CDI annotations to NVIDIA's runtime, which injects the devices they name
    (containerd copies pod annotations into the OCI spec only where the runtime's pod_annotations match them)."""
    check = "containerd: CDI annotations of pods"
    name = p["runtime_name"]
    passthrough = c.get("passthrough")
    if not c.get("registered") or passthrough is None:
        return _row(check, "skipped", f"no {name} runtime in containerd's configuration")
    prefixes = _annotation_prefixes(toolkit_text)
    opened = sorted(
        {
            pattern
            for pattern in passthrough["pod_annotations"]
            for prefix in prefixes
            if _passes_prefix(pattern, prefix)
        }
    )
    if opened:
        return _row(
            check,
            "fail",
            f"pod_annotations {opened} of runtime {name} pass a pod's {', '.join(prefixes)} annotations to NVIDIA's "
            f"runtime, which injects the CDI devices they name: any pod with RuntimeClass {name} gets a GPU by "
            "annotation",
            f"Remove those patterns from pod_annotations of the {name} runtime in containerd's config (device plugins "
            "hand CDI devices to containerd through the CRI, not through pod annotations), or deny "
            f"{', '.join(prefixes)} pod annotations in admission",
        )
    return _row(
        check,
        "ok",
        f"no pod annotation reaches NVIDIA's runtime as a CDI request (prefixes {_no_prefix_text(prefixes)}; "
        f"pod_annotations of {name}: {passthrough['pod_annotations'] or 'none'})",
    )


def crio_cdi_annotation_row(p: dict, c: dict, toolkit_text) -> dict:
    """Whether a pod's CDI annotations reach NVIDIA's runtime through CRI-O. CRI-O copies every pod annotation
    into the OCI spec of each of the pod's containers (cri-o v1.35.6 internal/factory/container/container.go,
    SpecAddAnnotations: "Preserve the sandbox annotations"); its allowed_annotations filter only CRI-O's own
    annotations (server/utils.go FilterDisallowedAnnotations; pkg/config validates them against
    v2.AllAllowedAnnotations), so no CRI-O setting keeps cdi.k8s.io/ keys away from a runtime handler. Only
    NVIDIA's runtime can ignore them: annotation-prefixes = []. CRI-O's own CDI reads container annotations
    (device plugins) and the CRI's CDI devices, not pod annotations (internal/factory/container/device_linux.go)."""
    check = "crio: CDI annotations of pods"
    name = p["runtime_name"]
    if not c.get("ok") or not c.get("registered"):
        return _row(check, "skipped", f"no {name} runtime handler in CRI-O's configuration")
    prefixes = _annotation_prefixes(toolkit_text)
    if prefixes:
        return _row(
            check,
            "fail",
            f"CRI-O copies every pod annotation into the OCI spec of the pod's containers, and NVIDIA's runtime reads "
            f"those with prefix {', '.join(prefixes)} as CDI device requests: any pod with RuntimeClass {name} gets a "
            "GPU by annotation",
            "Run site.yml --tags toolkit (nvidia_container_toolkit_cdi_annotation_prefixes: []; GPU pods get their "
            "devices from CRI-O's own CDI through the CRI), or deny "
            f"{', '.join(prefixes)} pod annotations in admission",
        )
    return _row(
        check,
        "ok",
        f"NVIDIA's runtime reads no OCI annotation as a CDI request (prefixes {_no_prefix_text(prefixes)}), so the "
        f"pod annotations CRI-O passes to the {name} handler request no GPU",
    )


# ---- docker -----------------------------------------------------------------------------------------------

# docker info as one JSON document: its runtimes and its default runtime (a Go template).
DOCKER_INFO_FORMAT = '{"runtimes": {{json .Runtimes}}, "default": {{json .DefaultRuntime}}}'
# What a test container runs to count the NVIDIA device nodes it can see.
COUNT_DEVICES = "ls /dev/nvidia* 2>/dev/null | wc -l"
NO_SH = "Read the error; the test image needs sh, ls and wc"


def _container_run(p: dict, io: Node, argv: list) -> tuple:
    """A test container under `timeout <gpu_validate_container_timeout>` (rc 124 when it hangs)."""
    timeout = int(p["container_timeout"])
    return io.run(["timeout", str(timeout), *argv], timeout=timeout + 15)


def _container_run_row(p: dict, check: str, run, ran: str, service: str, options: str) -> dict:
    """The row of a test container run through a runtime: ok, no answer in time (124 from timeout), or its error."""
    if run[0] == 0:
        return _row(check, "ok", ran)
    if run[0] == 124:
        timeout = p["container_timeout"]
        return _row(
            check, "fail", f"no answer within {timeout} s", f"Look for a hanging runtime hook: journalctl -u {service}"
        )
    return _row(
        check,
        "fail",
        f"exit code {run[0]}: " + _truncate(run[2].strip(), 200),
        f"Read the error; check /etc/nvidia-container-runtime/config.toml and {options}",
    )


def _count(result) -> str | None:
    """The device count a test container printed; None when it did not run or printed something else."""
    if result is None or result[0] != 0:
        return None
    count = result[1].strip()
    return count if re.fullmatch(r"[0-9]+", count) else None


def docker_info(info) -> dict:
    """What `docker info` said: {ok, error, runtimes, default}."""
    rc, out, err = info
    data = None
    if rc == 0 and out.startswith("{"):
        try:
            data = json.loads(out)
        except ValueError as exc:
            err = f"docker info printed no JSON ({exc})"
    if not isinstance(data, dict):
        return {"ok": False, "error": _truncate(err.strip()), "runtimes": {}, "default": ""}
    return {"ok": True, "error": "", "runtimes": data.get("runtimes") or {}, "default": data.get("default") or ""}


def docker_rows(p: dict, node: dict, docker: dict, image: bool, run, isolation: dict, toolkit_installed: bool) -> list:
    """docker: docker_info(); image: the test image is in docker; run: (rc, out, err) of the container through the
    nvidia runtime or None; isolation: {"nvidia"/"default": (rc, out, err) or None} of the counting containers."""
    name, test_image = p["runtime_name"], p["test_image"]
    has_gpu = _bool(node.get("has_gpu"))
    registered = docker["ok"] and name in docker["runtimes"]
    check = "docker: nvidia runtime"
    if not docker["ok"]:
        rows = [
            _row(
                check,
                "fail",
                f"docker info failed: {docker['error']}",
                "Check docker: systemctl status docker; journalctl -u docker",
            ),
            _row("docker: default runtime", "skipped", "docker info failed"),
        ]
    else:
        if registered:
            entry = docker["runtimes"][name]
            path = entry.get("path") if isinstance(entry, dict) and entry.get("path") else "?"
            rows = [_row(check, "ok", f"{name} -> {path}")]
        elif has_gpu or toolkit_installed:
            runtimes = ", ".join(sorted(docker["runtimes"]))
            rows = [
                _row(
                    check,
                    "fail",
                    f"no {name} runtime in docker info (runtimes: {runtimes})",
                    "Run site.yml --tags runtime",
                )
            ]
        else:
            rows = [_row(check, "skipped", "no GPU (and no toolkit installed)")]
        if docker["default"] != name:
            rows.append(_row("docker: default runtime", "ok", f"{docker['default']} ({name} is not the default)"))
        else:
            detail = (
                f"{name} is the default runtime: every container that sets NVIDIA_VISIBLE_DEVICES (all CUDA images"
                " do) can get GPUs, also pods that request none"
            )
            if p["nvidia_default_allowed"]:
                fix = (
                    "Intended (nvidia_container_toolkit_set_as_default): give GPU pods devices through CDI and keep"
                    " NVIDIA_VISIBLE_DEVICES hardening on"
                )
                rows.append(_row("docker: default runtime", "warn", detail, fix))
            else:
                fix = "Set nvidia_container_toolkit_set_as_default: false and run site.yml --tags runtime"
                rows.append(_row("docker: default runtime", "fail", detail, fix))
    missing_image = (
        f"image {test_image} is not in docker (never pulled)",
        f"Load or pull {test_image} on the node, or name an image it has",
    )
    check = "docker: container via nvidia"
    if not test_image:
        rows.append(_row(check, "skipped", "no test image (gpu_validate_test_image)"))
    elif not registered:
        rows.append(_row(check, "skipped", f"the {name} runtime is not registered"))
    elif not image:
        rows.append(_row(check, "warn", *missing_image))
    else:
        rows.append(
            _container_run_row(
                p,
                check,
                run,
                f"docker run --runtime {name} {test_image} true",
                "docker",
                "docker run options (gpu_validate_docker_run_options)",
            )
        )
    for item in ("nvidia", "default"):
        check = f"docker: GPU isolation ({name if item == 'nvidia' else 'default'})"
        result = isolation.get(item)
        count = _count(result)
        if not has_gpu:
            rows.append(_row(check, "skipped", "no GPU"))
        elif not test_image:
            rows.append(_row(check, "skipped", "no test image (gpu_validate_test_image)"))
        elif item == "nvidia" and not registered:
            rows.append(_row(check, "skipped", f"the {name} runtime is not registered"))
        elif not image:
            rows.append(
                _row(check, "warn", missing_image[0], f"Load or pull {test_image} on the node (it needs sh, ls and wc)")
            )
        elif count is None:
            rc, _out, err = result if result is not None else ("", "", "")
            detail = f"the container did not run: exit code {rc} " + _truncate(err.strip(), 200)
            rows.append(_row(check, "fail", detail, NO_SH))
        elif int(count) == 0:
            rows.append(_row(check, "ok", "NVIDIA_VISIBLE_DEVICES=all, no GPU requested: no /dev/nvidia* device"))
        else:
            fix = (
                "Set nvidia_container_toolkit_accept_envvar_when_unprivileged: false, run site.yml --tags toolkit"
                if item == "nvidia"
                else "Make runc the default (nvidia_container_toolkit_set_as_default: false),"
                " run site.yml --tags runtime"
            )
            detail = f"NVIDIA_VISIBLE_DEVICES=all, no GPU requested: {count} /dev/nvidia* devices visible"
            rows.append(_row(check, "fail", detail, fix))
    return rows


def _docker_not_running(node: dict) -> list:
    installed = _bool(((node.get("runtimes") or {}).get("docker") or {}).get("installed"))
    state = "installed but not running" if installed else "not installed"
    return [
        _row(
            "docker: nvidia runtime",
            "warn",
            f"docker is {state}: nothing checked",
            "Start docker (systemctl start docker), or leave docker out of gpu_validate_runtimes",
        )
    ]


def _docker_running(node: dict) -> bool:
    return _bool(((node.get("runtimes") or {}).get("docker") or {}).get("running"))


def check_docker(p: dict, node: dict, io: Node, toolkit_installed: bool) -> list:
    if not _docker_running(node):
        return _docker_not_running(node)
    name, test_image, options = p["runtime_name"], p["test_image"], list(p["docker_run_options"])
    docker = docker_info(io.run(["docker", "info", "--format", DOCKER_INFO_FORMAT]))
    registered = docker["ok"] and name in docker["runtimes"]
    image = bool(test_image) and io.run(["docker", "image", "inspect", test_image])[0] == 0
    run = None
    if image and registered:
        run = _container_run(p, io, ["docker", "run", "--rm", "--runtime", name, *options, test_image, "true"])
    isolation = {}
    for item in ("nvidia", "default"):
        if _bool(node.get("has_gpu")) and image and (item == "default" or registered):
            runtime = ["--runtime", name] if item == "nvidia" else []
            argv = ["docker", "run", "--rm", *runtime, "--env", "NVIDIA_VISIBLE_DEVICES=all", *options]
            isolation[item] = _container_run(p, io, [*argv, test_image, "sh", "-c", COUNT_DEVICES])
    return docker_rows(p, node, docker, image, run, isolation, toolkit_installed)


# NVIDIA's runtime treats a container with CAP_SYS_ADMIN in its bounding set as privileged and then
# honours NVIDIA_VISIBLE_DEVICES whatever its config says: FUSE pods (SYS_ADMIN) are exactly those.
# Through the runtime that pods without a RuntimeClass get, such a container must still see no GPU.
# What follows from NVIDIA's semantics (toolkit 1.20, internal/config/image/privileged.go: CAP_SYS_ADMIN in the
# bounding set is "privileged", and then NVIDIA_VISIBLE_DEVICES counts whatever config.toml says).
SYS_ADMIN_NOTE = (
    "; through RuntimeClass nvidia NVIDIA's runtime would count it as privileged and honour the variable whatever"
    " config.toml says, so SYS_ADMIN pods must use nvidia only when they request GPUs"
)


def docker_sys_admin_row(p: dict, node: dict, result) -> dict:
    """result: (rc, out, err) of the CAP_SYS_ADMIN container through docker's default runtime, or None."""
    check = "docker: GPU isolation (default, CAP_SYS_ADMIN)"
    like = "a FUSE-like container (CAP_SYS_ADMIN, NVIDIA_VISIBLE_DEVICES=all, no GPU requested)"
    if not _bool(node.get("has_gpu")):
        return _row(check, "skipped", "no GPU")
    if not p["test_image"]:
        return _row(check, "skipped", "no test image (gpu_validate_test_image)")
    count = _count(result)
    if count is None:
        rc, _out, err = result if result is not None else ("", "", "")
        return _row(check, "fail", f"the container did not run: exit code {rc} " + _truncate(err.strip(), 200), NO_SH)
    if int(count) == 0:
        return _row(check, "ok", f"{like}: no /dev/nvidia* device{SYS_ADMIN_NOTE}")
    return _row(
        check,
        "fail",
        f"{like} sees {count} /dev/nvidia* devices: the default runtime hands out GPUs",
        "Make runc the default (nvidia_container_toolkit_set_as_default: false), run site.yml --tags runtime;"
        " FUSE pods must not use RuntimeClass nvidia unless they request GPUs",
    )


def check_docker_isolation(p: dict, node: dict, io: Node) -> list:
    if "docker" not in p["runtimes"] or not _docker_running(node):
        return []
    result = None
    if _bool(node.get("has_gpu")) and p["test_image"]:
        argv = ["docker", "run", "--rm", "--cap-add", "SYS_ADMIN", "--env", "NVIDIA_VISIBLE_DEVICES=all"]
        argv += [*p["docker_run_options"], p["test_image"], "sh", "-c", COUNT_DEVICES]
        result = _container_run(p, io, argv)
    return [docker_sys_admin_row(p, node, result)]


# ---- containerd -------------------------------------------------------------------------------------------

CONTAINERD_CONFIG = "/etc/containerd/config.toml"
CONTAINERD_DROPINS = "/etc/containerd/conf.d/*.toml"
CONTAINERD_SOCKET = "unix:///run/containerd/containerd.sock"
RUNC_SHIM = "io.containerd.runc.v2"


def cri_plugins(result) -> dict:
    """What `ctr plugins ls` (stdout and stderr together) says of the CRI plugin: {cri, cri_detail}."""
    rc, out, err = result
    if rc != 0:
        lines = f"{out}\n{err}".strip().splitlines()
        return {"cri": "unreachable", "cri_detail": lines[-1] if lines else ""}
    listed, bad = 0, []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 2 and (fields[0].startswith("io.containerd.cri.") or fields[1] == "cri"):
            listed += 1
            if fields[-1] != "ok":
                bad.append(f"{fields[0]}/{fields[1]}={fields[-1]}")
    if not listed:
        return {"cri": "error", "cri_detail": "no CRI plugin listed"}
    return {"cri": "error", "cri_detail": " ".join(bad)} if bad else {"cri": "ok"}


def crictl_facts(result, runtime_name: str) -> dict:
    """`crictl info` of the running containerd (through the CRI itself): {crictl_ready, crictl_handler} as yes/no;
    {} when crictl is missing, fails or prints no JSON."""
    if result is None or result[0] != 0:
        return {}
    try:
        info = json.loads(result[1])
    except ValueError:
        return {}
    if not isinstance(info, dict):
        return {}
    conditions = (info.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "RuntimeReady" and c.get("status") for c in conditions if isinstance(c, dict))
    runtimes = ((info.get("config") or {}).get("containerd") or {}).get("runtimes") or {}
    return {"crictl_ready": "yes" if ready else "no", "crictl_handler": "yes" if runtime_name in runtimes else "no"}


# RKE2 and k3s run their own containerd (gpu_node_facts' installer facts): its binary and ctr in the installer's
# bin directory, its socket, the config the agent generates at every start from the template and the agent
# config (so those are the files that must be older than the running daemon), and the agent unit that starts it.
# kubespray runs containerd as containerd.service but renders config.toml at every kubespray run.
def agent_managed(installer: dict) -> bool:
    """RKE2/k3s: gpu_node_facts says the installer's agent regenerates containerd's config at every start."""
    return ((installer or {}).get("containerd") or {}).get("config_regenerated") == "agent start"


def containerd_site(node: dict, io: Node) -> dict:
    """Where this node's containerd is and how to reach it: the installer's (RKE2/k3s) or the system's."""
    installer = node.get("installer") or {}
    name = installer.get("name") or "unknown"
    ic = installer.get("containerd") or {}
    if agent_managed(installer) and ic.get("binary"):
        bin_dir = installer.get("bin_dir") or os.path.dirname(ic["binary"])
        socket = ic.get("socket") or ""
        ctr = f"{bin_dir}/ctr" if io.lstat(f"{bin_dir}/ctr") is not None else "ctr"
        crictl = f"{bin_dir}/crictl" if io.lstat(f"{bin_dir}/crictl") is not None else io.which("crictl", [])
        kubelet = installer.get("kubelet") or {}
        dropins = kubelet.get("dropin_dir") or ""
        watched = [*(ic.get("templates") or []), kubelet.get("config") or ""]
        watched += sorted(io.glob(f"{dropins}/*.yaml") + io.glob(f"{dropins}/*.yml")) if dropins else []
        unit = installer.get("service") or f"{name}.service"
        template = ic.get("template") or (ic.get("templates") or [""])[-1]
        return {
            "installer": name,
            "dump": [ic["binary"], "--config", ic.get("config") or "", "config", "dump"],
            "ctr": [ctr, "--address", socket],
            "crictl": [crictl, "--runtime-endpoint", f"unix://{socket}"] if crictl else None,
            "unit": unit,
            "watched": [path for path in watched if path],
            "running": _bool(ic.get("running")),
            "start": f"Start {name}'s agent (systemctl start {unit})",
            "restart": f"Restart {name}'s agent (systemctl restart {unit}): it regenerates config.toml at start",
            "fix_config": f"Fix {template} or the agent config ({name} generates {ic.get('config')} from them at"
            " start; containerd config dump names the problem)",
            "register": f"Run site.yml --tags runtime: it writes {template} or leaves the runtime to {name}'s own"
            " nvidia detection, and restarts the agent",
            "journal": f"journalctl -u {unit}",
        }
    facts = (node.get("runtimes") or {}).get("containerd") or {}
    site = {
        "installer": name,
        "dump": [facts.get("binary") or "containerd", "config", "dump"],
        "ctr": ["ctr"],
        "crictl": ["crictl", "--runtime-endpoint", CONTAINERD_SOCKET] if io.which("crictl", []) else None,
        "unit": "containerd",
        "watched": [CONTAINERD_CONFIG, *io.glob(CONTAINERD_DROPINS)],
        "running": _bool(facts.get("running")),
        "start": "Start containerd (systemctl start containerd)",
        "restart": "Restart containerd (systemctl restart containerd), or rerun site.yml --tags runtime: it"
        " finishes a restart an interrupted run left pending",
        "fix_config": f"Fix {CONTAINERD_CONFIG} (containerd config dump names the problem)",
        "register": "Run site.yml --tags runtime",
        "journal": "journalctl -u containerd",
    }
    if name == "kubespray":
        # kubespray renders config.toml from its template at every run (roles/container-engine/containerd,
        # task "Containerd | Copy containerd config file"): what runtime_config merged in is gone after it, unless
        # kubespray's inventory lists the runtime (containerd_additional_runtimes; roles/runtime_config README).
        site["register"] = (
            "kubespray renders /etc/containerd/config.toml at every kubespray run: add the runtime to"
            " containerd_additional_runtimes in the kubespray inventory (see the runtime_config README) so that"
            " its runs keep it, and rerun site.yml --tags runtime now"
        )
    return site


def containerd_state(p: dict, node: dict, io: Node) -> dict:
    """What containerd reports: its configuration dump, the running daemon (CRI plugin, start time against the
    config files' mtime, crictl) and whether the test image is there."""
    site = containerd_site(node, io)
    running = site["running"]
    rc, out, err = io.run(site["dump"])
    config = runtime_config(out)
    state = {
        "ok": rc == 0,
        "error": _truncate(err.strip()),
        "runtimes": config["runtimes"],
        "default": config["default"] or "",
        "default_entry": config["default_entry"],
        "registered": p["runtime_name"] in config["runtimes"],
        "running": running,
        "site": site,
        "image": False,
        "cri": {},
        # pod_annotations / container_annotations of the nvidia runtime (None: no dump)
        "passthrough": annotation_passthrough(out, p["runtime_name"]) if rc == 0 else None,
        "id": "gpu-validate-" + "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(12)),
    }
    if not running:
        return state
    # The kubelet's view: the CRI plugin can fail to load while containerd runs and `ctr` works (then no pod
    # can run), and a config written after the daemon started is not what it runs.
    rc, out, err = io.run([*site["ctr"], "plugins", "ls"])
    cri = cri_plugins((rc, out, err))
    # when systemd started containerd's main process (RKE2/k3s: the agent's), as seconds since the epoch
    rc, out, err = io.run(main_start_argv(site["unit"]))
    started_us = main_start_us(rc, out)
    if started_us is None:
        # The check itself failed: the CRI plugin row says so (with systemctl's message), and the start time
        # of the running config is unknown.
        state["cri"] = {"check_error": err.strip() or f"systemctl printed {out.strip() or '0'!r}, not microseconds"}
    else:
        cri["started"] = f"{io.boot_time() + started_us / 1e6:.6f}"
    newest, newest_file = 0.0, ""
    for path in site["watched"]:
        mtime = io.mtime(path)
        if mtime is not None and mtime > newest:
            newest, newest_file = mtime, path
    cri["written"] = f"{newest:.9f}"
    cri["written_file"] = newest_file
    if site["crictl"]:
        cri.update(crictl_facts(io.run([*site["crictl"], "info"]), p["runtime_name"]))
    if "check_error" not in state["cri"]:
        state["cri"] = cri
    if p["containerd_test_image"]:
        rc, out, _err = io.run([*site["ctr"], "--namespace", p["containerd_namespace"], "images", "ls", "--quiet"])
        state["image"] = p["containerd_test_image"] in out.splitlines()
    return state


def _ctr_run(p: dict, io: Node, containerd: dict, suffix: str, runtime: list, command: list, env=()) -> tuple:
    argv = [
        *(containerd.get("site") or {}).get("ctr", ["ctr"]),
        "--namespace",
        p["containerd_namespace"],
        "run",
        "--rm",
        *runtime,
        *env,
    ]
    argv += [*p["containerd_run_options"], p["containerd_test_image"], f"{containerd['id']}-{suffix}", *command]
    return _container_run(p, io, argv)


def containerd_rows(p: dict, node: dict, c: dict, run, isolation, toolkit_installed: bool) -> list:
    """c: containerd_state(); run / isolation: (rc, out, err) of the ctr containers through the nvidia binary
    (plain, and counting devices with NVIDIA_VISIBLE_DEVICES=all), None when they did not run."""
    name, image, ns = p["runtime_name"], p["containerd_test_image"], p["containerd_namespace"]
    has_gpu = _bool(node.get("has_gpu"))
    cri = c["cri"]
    site = c.get("site") or {}
    rows = []
    check = "containerd: CRI plugin"
    not_running = ("containerd is not running", site.get("start", "Start containerd (systemctl start containerd)"))
    if not c["running"]:
        rows.append(_row(check, "warn", *not_running))
    elif "check_error" in cri:
        rows.append(_row(check, "fail", "the check failed: " + _truncate(cri["check_error"], 200)))
    elif cri.get("crictl_ready", "yes") != "yes":
        rows.append(_row(check, "fail", "crictl info: the runtime is not RuntimeReady"))
    elif cri.get("cri") == "ok":
        said = "crictl info: RuntimeReady" if "crictl_ready" in cri else "ctr plugins ls: cri ok"
        rows.append(_row(check, "ok", f"{said} (the kubelet can run pods)"))
    elif cri.get("cri") == "unreachable":
        rows.append(_row(check, "fail", f"ctr cannot reach containerd: {cri.get('cri_detail', '')}"))
    else:
        rows.append(
            _row(
                check,
                "fail",
                "containerd runs but its CRI plugin did not load, so the kubelet can run no pod: "
                + cri.get("cri_detail", ""),
                f"{site.get('journal', 'journalctl -u containerd')} | grep 'failed to load plugin' names the config"
                " problem (e.g. default_runtime_name naming a runtime that is not configured); fix it and restart"
                f" {site.get('unit', 'containerd')}, or run site.yml --tags runtime",
            )
        )
    check = "containerd: nvidia runtime"
    if not c["ok"]:
        registered_row = _row(
            check,
            "fail",
            f"containerd config dump failed: {c['error']}",
            site.get("fix_config", f"Fix {CONTAINERD_CONFIG} (containerd config dump names the problem)"),
        )
    elif c["registered"]:
        registered_row = _row(check, "ok", f"runtimes.{name} in the effective configuration")
    elif has_gpu or toolkit_installed:
        installer = site.get("installer", "")
        cause = f" ({installer} node)" if installer not in ("unknown", "kubeadm", "") else ""
        registered_row = _row(
            check,
            "fail",
            f"no runtimes.{name} in containerd config dump{cause} (runtimes: {', '.join(c['runtimes'])})",
            site.get("register", "Run site.yml --tags runtime"),
        )
    else:
        registered_row = _row(check, "skipped", "no GPU (and no toolkit installed)")
    rows.append(registered_row)
    check = "containerd: running config"
    restart = site.get(
        "restart",
        "Restart containerd (systemctl restart containerd), or rerun site.yml --tags runtime: it finishes"
        " a restart an interrupted run left pending",
    )
    started = cri.get("started", "")
    if not c["running"]:
        rows.append(_row(check, "warn", "containerd is not running"))
    elif cri.get("crictl_handler", "yes") != "yes":
        rows.append(_row(check, "fail", f"crictl info: the running containerd has no {name} runtime handler", restart))
    elif not re.fullmatch(r"[0-9]+[.][0-9]+", started):
        rows.append(_row(check, "warn", "the start time of containerd is unknown"))
    elif float(cri.get("written") or 0) >= float(started):
        started_by = "containerd" if site.get("unit", "containerd") == "containerd" else site["unit"]
        detail = f"{cri.get('written_file', '')} was written after {started_by} started: the running daemon does not"
        rows.append(_row(check, "warn", detail + " run what the file says", restart))
    else:
        handler = f"crictl info lists the {name} handler; " if "crictl_handler" in cri else ""
        started_by = "containerd" if site.get("unit", "containerd") == "containerd" else site["unit"]
        rows.append(_row(check, "ok", f"{handler}{started_by} started after its config files were last written"))
    if not c["ok"]:
        rows.append(_row("containerd: default runtime", "skipped", "containerd config dump failed"))
    else:
        rows.append(
            default_runtime_row(
                p,
                "containerd",
                c["default"],
                f"default_runtime_name is {name}: every pod whose image sets",
                "Intended (nvidia_container_toolkit_set_as_default): give GPU pods devices through CDI and keep"
                " NVIDIA_VISIBLE_DEVICES hardening on",
            )
        )
    check = "containerd: container via nvidia"
    if not image:
        state = "no_image"
        rows.append(_row(check, "skipped", "no test image (gpu_validate_containerd_test_image)"))
    elif not c["running"]:
        state = "not_running"
        rows.append(_row(check, "warn", *not_running))
    elif not c["registered"]:
        state = "not_registered"
        rows.append(_row(check, "skipped", f"the {name} runtime is not registered"))
    elif not c["image"]:
        state = "image_missing"
        rows.append(
            _row(
                check,
                "warn",
                f"image {image} is not in ctr namespace {ns} (never pulled)",
                f"ctr -n {ns} images pull (or import) {image}, or name an image the node has",
            )
        )
    else:
        state = "ran"
        rows.append(
            _container_run_row(
                p,
                check,
                run,
                f"ctr run --runc-binary {p['runtime_binary']} {image} true",
                "containerd",
                "gpu_validate_containerd_run_options",
            )
        )
    check = f"containerd: GPU isolation ({name})"
    count = _count(isolation)
    if not has_gpu:
        rows.append(_row(check, "skipped", "no GPU"))
    elif state == "no_image":
        rows.append(_row(check, "skipped", "no test image (gpu_validate_containerd_test_image)"))
    elif state == "not_running":
        rows.append(_row(check, "warn", *not_running))
    elif state == "not_registered":
        rows.append(_row(check, "skipped", f"the {name} runtime is not registered"))
    elif state == "image_missing":
        rows.append(
            _row(
                check,
                "warn",
                f"image {image} is not in ctr namespace {ns}",
                "Pull or import the image into that namespace (it needs sh, ls and wc)",
            )
        )
    elif count is None:
        rc, _out, err = isolation if isolation is not None else ("", "", "")
        rows.append(
            _row(check, "fail", f"the container did not run: exit code {rc} " + _truncate(err.strip(), 200), NO_SH)
        )
    elif int(count) == 0:
        rows.append(_row(check, "ok", "NVIDIA_VISIBLE_DEVICES=all, no GPU requested: no /dev/nvidia* device"))
    else:
        rows.append(
            _row(
                check,
                "fail",
                f"NVIDIA_VISIBLE_DEVICES=all, no GPU requested: {count} /dev/nvidia* devices visible",
                "Set nvidia_container_toolkit_accept_envvar_when_unprivileged: false, run site.yml --tags toolkit",
            )
        )
    return rows


def check_containerd(p: dict, node: dict, io: Node, toolkit_installed: bool, c: dict) -> list:
    run = isolation = None
    nvidia = ["--runtime", RUNC_SHIM, "--runc-binary", p["runtime_binary"]]
    if p["containerd_test_image"] and c["image"] and c["registered"]:
        run = _ctr_run(p, io, c, "run", nvidia, ["true"])
        if _bool(node.get("has_gpu")):
            env = ["--env", "NVIDIA_VISIBLE_DEVICES=all"]
            isolation = _ctr_run(p, io, c, "count", nvidia, ["sh", "-c", COUNT_DEVICES], env)
    return containerd_rows(p, node, c, run, isolation, toolkit_installed)


# Pods without a RuntimeClass get the CRI plugin's default runtime (default_runtime_name in
# `containerd config dump`), not ctr's own default (plain runc): ctr runs the container through that
# runtime's shim (runtime_type) and OCI binary (options.BinaryName), as the CRI plugin would.
def cri_default(c: dict) -> tuple:
    """(name, shim, OCI binary or '') of the runtime that pods without a RuntimeClass get."""
    entry = c.get("default_entry") or {}
    return c.get("default") or "runc", entry.get("runtime_type") or RUNC_SHIM, entry.get("binary") or ""


def containerd_sys_admin_row(p: dict, node: dict, c: dict, result) -> dict:
    check = "containerd: GPU isolation (default, CAP_SYS_ADMIN)"
    image, ns = p["containerd_test_image"], p["containerd_namespace"]
    default, shim, binary = cri_default(c)
    said = f"CRI's default runtime {default} ({shim}, {binary or 'runc'})"
    like = "a FUSE-like container (CAP_SYS_ADMIN, NVIDIA_VISIBLE_DEVICES=all, no GPU requested)"
    if not _bool(node.get("has_gpu")):
        return _row(check, "skipped", "no GPU")
    if not image:
        return _row(check, "skipped", "no test image (gpu_validate_containerd_test_image)")
    if not c["running"]:
        return _row(check, "warn", "containerd is not running", "Start containerd (systemctl start containerd)")
    if not c["ok"]:
        return _row(
            check,
            "fail",
            f"containerd config dump failed, so CRI's default runtime is unknown: {c['error']}",
            "Fix /etc/containerd/config.toml (containerd config dump names the problem)",
        )
    if not c["image"]:
        return _row(
            check,
            "warn",
            f"image {image} is not in ctr namespace {ns}",
            "Pull or import the image into that namespace (it needs sh, ls and wc)",
        )
    count = _count(result)
    if count is None:
        rc, _out, err = result if result is not None else ("", "", "")
        return _row(
            check,
            "fail",
            f"the container did not run through {said}: exit code {rc} " + _truncate(err.strip(), 200),
            "Read the error; the test image needs sh, ls and wc, and gpu_validate_containerd_run_options"
            " apply to this container too",
        )
    if int(count) == 0:
        return _row(check, "ok", f"{like} through {said}: no /dev/nvidia* device{SYS_ADMIN_NOTE}")
    return _row(
        check,
        "fail",
        f"{like} through {said} sees {count} /dev/nvidia* devices: every pod without a RuntimeClass that has"
        " CAP_SYS_ADMIN can get GPUs",
        f"Make runc CRI's default (nvidia_container_toolkit_set_as_default: false, or fix default_runtime_name and"
        f" runtimes.{default} in config.toml), run site.yml --tags runtime; FUSE pods must not use RuntimeClass"
        " nvidia unless they request GPUs",
    )


def check_containerd_isolation(p: dict, node: dict, io: Node, c: dict) -> list:
    result = None
    if _bool(node.get("has_gpu")) and c["running"] and c["ok"] and c["image"]:
        _default, shim, binary = cri_default(c)
        runtime = ["--runtime", shim]
        if binary and re.match(r"io[.]containerd[.]runc[.]", shim):
            runtime += ["--runc-binary", binary]
        env = ["--cap-add", "CAP_SYS_ADMIN", "--env", "NVIDIA_VISIBLE_DEVICES=all"]
        result = _ctr_run(p, io, c, "sys-admin", runtime, ["sh", "-c", COUNT_DEVICES], env)
    return [containerd_sys_admin_row(p, node, c, result)]


# ---- crio -------------------------------------------------------------------------------------------------


CRIO_ENDPOINT = "unix:///var/run/crio/crio.sock"
# Pod and container of the CRI-O test runs, in crictl's JSON form: the node's network (no CNI), a PID namespace per
# container (the kubelet's default: CRI-O then starts no pause container).
CRIO_NAMESPACES = {"network": 2, "pid": 1}


def crio_state(p: dict, node: dict, io: Node) -> dict:
    """What CRI-O reports: `crio config` (the files: crio.conf with its drop-ins), and where it runs, the running
    daemon (`crio status config` over its socket), its CRI (`crictl info`) and whether the test image is there."""
    facts = (node.get("runtimes") or {}).get("crio") or {}
    binary = facts.get("binary") or "crio"
    rc, out, err = io.run([binary, "config"])
    config = runtime_config(out)
    state = {
        "dump": (rc, out, err),
        "ok": rc == 0,
        "error": _truncate(err.strip()),
        "runtimes": config["runtimes"],
        "default": config["default"] or "",
        "registered": p["runtime_name"] in config["runtimes"],
        "running": _bool(facts.get("running")),
        "live": None,
        "cri": None,
        "crictl": None,
        "image": False,
        "cgroup_parent": "gpu_validate.slice",
        "id": "gpu-validate-" + "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(12)),
    }
    if not state["running"]:
        return state
    rc, out, err = io.run([binary, "status", "config"])
    live = runtime_config(out) if rc == 0 else None
    state["live"] = {"ok": rc == 0, "error": _truncate(err.strip()), **(live or {"runtimes": [], "default": ""})}
    if rc == 0 and re.search(r'(?m)^\s*cgroup_manager\s*=\s*"cgroupfs"', out):
        state["cgroup_parent"] = "/gpu_validate"  # CRI-O refuses a systemd slice as parent with cgroupfs
    state["crictl"] = io.which("crictl", [])
    if state["crictl"]:
        state["cri"] = crio_cri_conditions(io.run([state["crictl"], "--runtime-endpoint", CRIO_ENDPOINT, "info"]))
        if p["crio_test_image"]:
            inspect = [state["crictl"], "--image-endpoint", CRIO_ENDPOINT, "inspecti", p["crio_test_image"]]
            state["image"] = io.run(inspect)[0] == 0
    return state


def crio_cri_conditions(result) -> dict:
    """The RuntimeReady and NetworkReady conditions of `crictl info`: {condition: (status, reason and message)};
    {} when crictl failed or printed no JSON. The kubelet reports a node NotReady unless both are true."""
    if result is None or result[0] != 0:
        return {}
    try:
        info = json.loads(result[1])
    except ValueError:
        return {}
    conditions = ((info.get("status") or {}).get("conditions") or []) if isinstance(info, dict) else []
    return {
        c.get("type"): (bool(c.get("status")), f"{c.get('reason') or ''} {c.get('message') or ''}".strip())
        for c in conditions
        if isinstance(c, dict)
    }


def _crictl_run(p: dict, io: Node, c: dict, suffix: str, handler: str, command: list, env=(), caps=()) -> tuple:
    """A pod of one container through CRI-O's CRI (crictl run, as the kubelet would start it) with runtime handler
    ``handler`` ("" for CRI-O's default): (exit code, its log, error) once it exited; the pod is removed."""
    crictl = [c["crictl"], "--runtime-endpoint", CRIO_ENDPOINT, "--image-endpoint", CRIO_ENDPOINT]
    name = f"{c['id']}-{suffix}"
    pod = {
        "metadata": {"name": name, "namespace": "gpu-validate", "uid": name},
        "log_directory": f"/var/log/pods/gpu-validate_{name}",
        "linux": {"cgroup_parent": c["cgroup_parent"], "security_context": {"namespace_options": CRIO_NAMESPACES}},
    }
    container = {
        "metadata": {"name": "check"},
        "image": {"image": p["crio_test_image"]},
        "command": list(command),
        "envs": [{"key": k, "value": v} for k, v in env],
        "log_path": "check.log",
        "linux": {
            "security_context": {
                "namespace_options": CRIO_NAMESPACES,
                "capabilities": {"add_capabilities": list(caps)},
            }
        },
    }
    directory = io.temp_dir()
    try:
        io.write(os.path.join(directory, "pod.json"), json.dumps(pod))
        io.write(os.path.join(directory, "container.json"), json.dumps(container))
        runtime = ["--runtime", handler] if handler else []
        argv = [
            *crictl,
            "run",
            "--no-pull",  # the test image must be there (crictl pulls by default)
            *runtime,
            os.path.join(directory, "container.json"),
            os.path.join(directory, "pod.json"),
        ]
        rc, out, err = _container_run(p, io, argv)
        if rc != 0:
            return rc, out, err
        container_id = out.strip().splitlines()[-1] if out.strip() else ""
        deadline = int(p["container_timeout"])
        for _ in range(deadline * 2):
            rc, out, err = io.run([*crictl, "inspect", container_id])
            status = (json.loads(out).get("status") or {}) if rc == 0 and out.startswith("{") else {}
            if status.get("state") == "CONTAINER_EXITED":
                logs = io.run([*crictl, "logs", container_id])
                return int(status.get("exitCode") or 0), logs[1], status.get("reason", "") + " " + logs[2]
            io.sleep(0.5)
        return 124, "", f"the container did not exit within {deadline} s"
    finally:
        for pod_id in io.run([*crictl, "pods", "--name", name, "--quiet"])[1].split():
            io.run([*crictl, "rmp", "--force", pod_id])
        io.remove_tree(directory)


def crio_rows(
    p: dict, node: dict, dump, toolkit_installed: bool, c: dict | None = None, run=None, isolation=None
) -> list:
    """dump: (rc, out, err) of `crio config` (CRI-O's effective configuration, crio.conf with its drop-ins).
    c: crio_state() where CRI-O runs (None: only the configuration is checked); run / isolation: (rc, out, err) of
    the test pods through the nvidia handler (plain, and counting devices with NVIDIA_VISIBLE_DEVICES=all)."""
    name = p["runtime_name"]
    rc, out, err = dump
    config = runtime_config(out)
    rows = []
    if c is not None:
        rows.append(crio_cri_row(c))
    if rc != 0:
        registered = _row(
            "crio: nvidia runtime",
            "fail",
            "crio config failed: " + _truncate(err.strip()),
            "Fix the CRI-O configuration (crio config names the problem)",
        )
        return [*rows, registered, _row("crio: default runtime", "skipped", "crio config failed")]
    if name in config["runtimes"]:
        registered = _row("crio: nvidia runtime", "ok", f"crio.runtime.runtimes.{name} in the effective configuration")
    elif _bool(node.get("has_gpu")) or toolkit_installed:
        registered = _row(
            "crio: nvidia runtime",
            "fail",
            f"no crio.runtime.runtimes.{name} (runtimes: {', '.join(config['runtimes'])})",
            "Run site.yml --tags runtime",
        )
    else:
        registered = _row("crio: nvidia runtime", "skipped", "no GPU (and no toolkit installed)")
    rows.append(registered)
    if c is not None:
        rows.append(crio_live_row(p, c))
    default = (c or {}).get("live") or {}
    rows.append(
        default_runtime_row(
            p,
            "crio",
            default.get("default") if default.get("ok") else config["default"],
            f"default_runtime is {name}: every pod whose image sets",
            "Intended (nvidia_container_toolkit_set_as_default): give GPU pods devices through CDI",
        )
    )
    if c is not None:
        rows += crio_container_rows(p, node, c, run, isolation)
    return rows


def crio_cri_row(c: dict) -> dict:
    check = "crio: CRI"
    if not c["running"]:
        return _row(check, "warn", "CRI-O is not running", "Start CRI-O (systemctl start crio)")
    if not c["crictl"]:
        return _row(check, "warn", "crictl is not installed: the CRI is not checked", "Install cri-tools (crictl)")
    if not c["cri"]:
        return _row(check, "fail", f"crictl info failed on {CRIO_ENDPOINT}", "journalctl -u crio names the problem")
    ready, why = c["cri"].get("RuntimeReady", (False, "not reported"))
    if not ready:
        return _row(check, "fail", f"crictl info: the runtime is not RuntimeReady ({why})", "journalctl -u crio")
    ready, why = c["cri"].get("NetworkReady", (False, "not reported"))
    if not ready:
        return _row(
            check,
            "fail",
            f"crictl info: NetworkReady is false ({_truncate(why, 200)}): the kubelet reports the node NotReady",
            "Install a CNI network configuration in CRI-O's network_dir (/etc/cni/net.d) and its plugins",
        )
    return _row(check, "ok", "crictl info: RuntimeReady and NetworkReady (the kubelet can run pods)")


def crio_live_row(p: dict, c: dict) -> dict:
    name = p["runtime_name"]
    check = "crio: running config"
    live = c.get("live")
    if not c["running"] or live is None:
        return _row(check, "warn", "CRI-O is not running")
    if not live["ok"]:
        return _row(check, "fail", "crio status config failed: " + live["error"], "journalctl -u crio")
    if c["registered"] and name not in live["runtimes"]:
        return _row(
            check,
            "fail",
            f"the running CRI-O has no {name} runtime handler (crio status config), though its files have one",
            "Restart CRI-O (systemctl restart crio), or rerun site.yml --tags runtime: it finishes a restart an"
            " interrupted run left pending; journalctl -u crio says why a handler was dropped",
        )
    if name in live["runtimes"]:
        return _row(check, "ok", f"the running CRI-O serves the {name} handler (crio status config)")
    return _row(check, "skipped", f"no {name} runtime configured")


def crio_container_rows(p: dict, node: dict, c: dict, run, isolation) -> list:
    name, image = p["runtime_name"], p["crio_test_image"]
    live_handler = name in ((c.get("live") or {}).get("runtimes") or [])
    reason = None
    if not image:
        reason = ("skipped", "no test image (gpu_validate_crio_test_image)", "")
    elif not c["running"]:
        reason = ("warn", "CRI-O is not running", "Start CRI-O (systemctl start crio)")
    elif not c["crictl"]:
        reason = ("warn", "crictl is not installed", "Install cri-tools (crictl)")
    elif not live_handler:
        reason = ("skipped", f"the running CRI-O has no {name} handler", "")
    elif not c["image"]:
        reason = ("warn", f"image {image} is not in CRI-O's image store (never pulled)", f"crictl pull {image}")
    rows = []
    check = "crio: container via nvidia"
    if reason:
        rows.append(_row(check, *reason))
    else:
        rows.append(
            _container_run_row(p, check, run, f"crictl run --runtime {name} {image} true", "crio", "the crio logs")
        )
    check = f"crio: GPU isolation ({name})"
    count = _count(isolation)
    if not _bool(node.get("has_gpu")):
        rows.append(_row(check, "skipped", "no GPU"))
    elif reason:
        rows.append(_row(check, *reason))
    elif count is None:
        rc, _out, err = isolation if isolation is not None else ("", "", "")
        rows.append(_row(check, "fail", f"the pod did not run: exit code {rc} " + _truncate(err.strip(), 200), NO_SH))
    elif int(count) == 0:
        rows.append(_row(check, "ok", "NVIDIA_VISIBLE_DEVICES=all, no GPU requested: no /dev/nvidia* device"))
    else:
        rows.append(
            _row(
                check,
                "fail",
                f"NVIDIA_VISIBLE_DEVICES=all, no GPU requested: {count} /dev/nvidia* devices visible",
                "Set nvidia_container_toolkit_accept_envvar_when_unprivileged: false, run site.yml --tags toolkit",
            )
        )
    return rows


def crio_sys_admin_row(p: dict, node: dict, c: dict, result) -> dict:
    """result: (exit code, log, error) of the CAP_SYS_ADMIN pod through CRI-O's default handler, or None."""
    check = "crio: GPU isolation (default, CAP_SYS_ADMIN)"
    default = ((c.get("live") or {}).get("default")) or c.get("default") or "crun"
    like = "a FUSE-like pod (CAP_SYS_ADMIN, NVIDIA_VISIBLE_DEVICES=all, no GPU requested, no RuntimeClass)"
    if not _bool(node.get("has_gpu")):
        return _row(check, "skipped", "no GPU")
    if not p["crio_test_image"]:
        return _row(check, "skipped", "no test image (gpu_validate_crio_test_image)")
    if not c["running"]:
        return _row(check, "warn", "CRI-O is not running", "Start CRI-O (systemctl start crio)")
    if not c["crictl"]:
        return _row(check, "warn", "crictl is not installed", "Install cri-tools (crictl)")
    if not c["image"]:
        return _row(check, "warn", f"image {p['crio_test_image']} is not in CRI-O's image store", "crictl pull it")
    count = _count(result)
    if count is None:
        rc, _out, err = result if result is not None else ("", "", "")
        detail = f"the pod did not run through CRI-O's default runtime {default}: exit code {rc} "
        return _row(check, "fail", detail + _truncate(err.strip(), 200), NO_SH)
    if int(count) == 0:
        return _row(
            check, "ok", f"{like} through CRI-O's default runtime {default}: no /dev/nvidia* device{SYS_ADMIN_NOTE}"
        )
    return _row(
        check,
        "fail",
        f"{like} through CRI-O's default runtime {default} sees {count} /dev/nvidia* devices: every pod without a"
        " RuntimeClass that has CAP_SYS_ADMIN can get GPUs",
        "Make runc (or crun) CRI-O's default (nvidia_container_toolkit_set_as_default: false, or fix default_runtime"
        " in crio.conf.d), run site.yml --tags runtime; FUSE pods must not use RuntimeClass nvidia unless they"
        " request GPUs",
    )


def check_crio_isolation(p: dict, node: dict, io: Node, c: dict) -> list:
    result = None
    if _bool(node.get("has_gpu")) and c["running"] and c["crictl"] and c["image"]:
        env = [("NVIDIA_VISIBLE_DEVICES", "all")]
        result = _crictl_run(p, io, c, "sys-admin", "", ["sh", "-c", COUNT_DEVICES], env, ["SYS_ADMIN"])
    return [crio_sys_admin_row(p, node, c, result)]


def default_runtime_row(p: dict, runtime: str, default, said: str, allowed_fix: str) -> dict:
    """The "<runtime>: default runtime" row: nvidia as the default is a fail, or a warn when it was asked for.
    said: how the detail starts ("default_runtime is nvidia: every pod whose image sets")."""
    name = p["runtime_name"]
    check = f"{runtime}: default runtime"
    if default != name:
        return _row(check, "ok", f"{default or 'runc'} ({name} is not the default)")
    detail = f"{said} NVIDIA_VISIBLE_DEVICES (all CUDA images do) can get GPUs, also pods that request none"
    if p["nvidia_default_allowed"]:
        return _row(check, "warn", detail, allowed_fix)
    return _row(
        check, "fail", detail, "Set nvidia_container_toolkit_set_as_default: false and run site.yml --tags runtime"
    )


def check_crio(p: dict, node: dict, io: Node, toolkit_installed: bool, c: dict) -> list:
    dump = c["dump"]
    if not c["running"]:
        return crio_rows(p, node, dump, toolkit_installed)
    run = isolation = None
    if (
        p["crio_test_image"]
        and c["crictl"]
        and c["image"]
        and p["runtime_name"] in (c["live"] or {}).get("runtimes", [])
    ):
        run = _crictl_run(p, io, c, "run", p["runtime_name"], ["true"])
        if _bool(node.get("has_gpu")):
            env = [("NVIDIA_VISIBLE_DEVICES", "all")]
            isolation = _crictl_run(p, io, c, "count", p["runtime_name"], ["sh", "-c", COUNT_DEVICES], env)
    return crio_rows(p, node, dump, toolkit_installed, c, run, isolation)


def device_plugin_row(p: dict, node: dict) -> dict:
    """The "device plugin vs node" row (issue 25) from the gpu_node facts read when the doctor started: NVIDIA's
    device plugin and its strategy, the runtimes' defaults (of p["runtimes"]) and the toolkit config's keys."""
    defaults = node.get("runtime_defaults") or {}
    runtimes = {name: defaults[name] for name in p["runtimes"] if name in defaults}
    return gpu_pods_doctor_row(
        node.get("device_plugin") or {},
        runtimes,
        node.get("toolkit_config") or toolkit_config_facts("/nonexistent"),
        p["runtime_name"],
        len(node.get("gpu_workloads") or []),
    )


# ---- fuse --------------------------------------------------------------------------------------------------


def fuse_row(st) -> dict:
    """st: os.lstat of the FUSE device, or None when it is missing."""
    if st is not None and stat.S_ISCHR(st.st_mode):
        return _row("/dev/fuse", "ok", f"character device, mode {stat.S_IMODE(st.st_mode):04o}")
    detail = (
        "exists but is not a character device"
        if st is not None
        else "missing: FUSE pods (device plugin resource github.com/fuse) cannot mount"
    )
    return _row("/dev/fuse", "fail", detail, "Run site.yml --tags fuse (loads the fuse module)")


def check_fuse(p: dict, node: dict, io: Node) -> list:
    return [fuse_row(io.lstat(p["fuse_device"]))]


# ---- security ----------------------------------------------------------------------------------------------


def apparmor_row(p: dict, node: dict, file_exists: bool, loaded_text) -> dict:
    """loaded_text: the kernel's list of loaded profiles ("<name> (<mode>)" per line), None when unread."""
    name = p["apparmor_profile"]
    check = f"AppArmor profile {name}"
    path = f"{p['apparmor_dir']}/{name}"
    if not p["apparmor_os"]:
        return _row(check, "skipped", "this OS has no AppArmor (SELinux confines containers)")
    if not file_exists:
        return _row(check, "fail", f"{path} is missing", "Run site.yml --tags apparmor")
    if not _bool(node.get("apparmor_enabled")):
        kernel = (
            "enabled but no securityfs" if _bool((node.get("apparmor") or {}).get("kernel_enabled")) else "disabled"
        )
        return _row(
            check,
            "warn",
            f"installed, not loaded: the kernel has AppArmor {kernel}; pods that reference it do not start here",
            "Boot with AppArmor enabled (apparmor=1 security=apparmor), or do not schedule"
            " AppArmor-confined FUSE pods here",
        )
    pattern = re.compile(re.escape(name) + " [(]")
    loaded = [line for line in (loaded_text or "").splitlines() if pattern.match(line)]
    if loaded:
        mode = re.search(r"[(][a-z]+[)]", loaded[0])
        return _row(check, "ok", "installed and loaded " + (mode.group(0) if mode else ""))
    return _row(
        check,
        "fail",
        f"installed in {p['apparmor_dir']} but not loaded",
        f"apparmor_parser -r {path} (or run site.yml --tags apparmor)",
    )


def seccomp_row(p: dict, text) -> dict:
    """text: the profile's text, None when it cannot be read."""
    name = p["seccomp_profile"]
    path = f"{p['seccomp_root']}/profiles/{name}.json"
    check = f"seccomp profile {name}"
    if text is None:
        return _row(check, "fail", f"{path} is missing", "Run site.yml --tags seccomp")
    problem = json_problem(text)
    if problem:
        return _row(check, "fail", f"{path} is {problem}", "Run site.yml --tags seccomp")
    return _row(check, "ok", f"{path} (localhostProfile: profiles/{name}.json)")


def check_security(p: dict, node: dict, io: Node) -> list:
    file_exists = p["apparmor_os"] and io.lstat(f"{p['apparmor_dir']}/{p['apparmor_profile']}") is not None
    loaded = None
    if p["apparmor_os"] and _bool(node.get("apparmor_enabled")):
        loaded = io.read(p["apparmor_profiles_file"])
    seccomp = io.read(f"{p['seccomp_root']}/profiles/{p['seccomp_profile']}.json")
    return [apparmor_row(p, node, file_exists, loaded), seccomp_row(p, seccomp)]


# ---- confinement ------------------------------------------------------------------------------------------
# How FUSE pods are confined on this node, in the order of preference:
#   user namespaces     pods with hostUsers: false get CAP_SYS_ADMIN in their own user namespace only;
#   AppArmor + seccomp  SYS_ADMIN pods under the FUSE AppArmor profile (FUSE mounts only, no umount
#                       in /proc, /sys, /dev) and the FUSE seccomp profile;
#   seccomp only        the kernel has no AppArmor: seccomp cannot see a mount's type or path, so a
#                       SYS_ADMIN pod can unmount /proc/sys and write host-wide kernel settings;
#   not possible        no /dev/fuse, or neither of the above can be set up.


def confinement_row(p: dict, node: dict, gates: dict, apparmor_text, seccomp_exists: bool) -> tuple:
    """gates: the kubelet's featureGates as its files set them; apparmor_text: the kernel's loaded profiles
    (None when unread). (row, state)."""
    missing_list = userns_missing(node, gates)
    missing = "; ".join(missing_list)
    profile, seccomp = p["apparmor_profile"], p["seccomp_profile"]
    pattern = re.compile(re.escape(profile) + " [(]enforce[)]")
    apparmor_loaded = any(pattern.match(line) for line in (apparmor_text or "").splitlines())
    seccomp_ok = seccomp_exists and _bool((node.get("kernel") or {}).get("seccomp", True))
    fuse = _bool((node.get("fuse") or {}).get("device"))
    check = "FUSE confinement"
    if fuse and not missing_list:
        detail = (
            "user namespaces: pods with hostUsers: false mount FUSE with CAP_SYS_ADMIN in their own user namespace only"
        )
        return _row(check, "ok", detail), "user_namespaces"
    if fuse and apparmor_loaded and seccomp_ok:
        detail = (
            f"AppArmor + seccomp: SYS_ADMIN pods under AppArmor profile {profile} and seccomp profile {seccomp}.json;"
            f" user namespaces not possible: {missing}"
        )
        return _row(check, "ok", detail), "apparmor"
    fix = (
        "Meet what user namespaces need (above) and run FUSE pods with hostUsers: false (security_profiles"
        " README), or boot a kernel with AppArmor; until then schedule no SYS_ADMIN FUSE pods here"
    )
    if fuse and seccomp_ok:
        why = (
            "the kernel has no AppArmor"
            if not _bool(node.get("apparmor_enabled"))
            else f"AppArmor profile {profile} is not loaded"
        )
        detail = (
            f"seccomp only: not confined ({why}; seccomp cannot see mount types or paths, so a SYS_ADMIN pod can"
            f" unmount /proc/sys and write host-wide kernel settings); user namespaces not possible: {missing}"
        )
        return _row(check, "warn", detail, fix), "seccomp_only"
    if not fuse:
        return _row(check, "fail", "not possible: /dev/fuse is missing", "Run site.yml --tags fuse"), "not_possible"
    detail = f"not possible: no seccomp profile {seccomp}.json and user namespaces need {missing}"
    return _row(check, "fail", detail, fix), "not_possible"


def check_confinement(p: dict, node: dict, io: Node) -> tuple:
    gates: dict = {}
    # The kubelet's featureGates as its files set them; later files win (the drop-in over the main file).
    for path in (p["kubelet_main_config"], f"{p['kubelet_config_dir']}/{p['kubelet_dropin_name']}"):
        gates.update(feature_gates(io.read(path)))
    apparmor = io.read(p["apparmor_profiles_file"]) if _bool(node.get("apparmor_enabled")) else None
    seccomp = io.lstat(f"{p['seccomp_root']}/profiles/{p['seccomp_profile']}.json") is not None
    row, state = confinement_row(p, node, gates, apparmor, seccomp)
    return [row], state


# ---- kubelet -----------------------------------------------------------------------------------------------


def kubelet_row(p: dict, node: dict, dropin_exists: bool, main_exists: bool, env_text) -> dict:
    """env_text: the kubelet's environment file, None when unread."""
    kubelet = node.get("kubelet") or {}
    installed = _bool(kubelet.get("installed"))
    version = kubelet.get("version") or ""
    dropin = f"{p['kubelet_config_dir']}/{p['kubelet_dropin_name']}"
    main = p["kubelet_main_config"]
    merge = p["kubelet_config_mode"] == "merge" or bool(
        version and _version_tuple(version) < _version_tuple(p["kubelet_dropin_min"])
    )
    check = "kubelet configuration"
    if dropin_exists and installed and "--config-dir" not in (env_text or ""):
        return _row(
            check,
            "warn",
            f"drop-in {dropin} is there, but {p['kubelet_env_file']} passes no --config-dir:"
            " the kubelet does not read it",
            "Run site.yml --tags kubelet",
        )
    if dropin_exists:
        return _row(check, "ok", f"drop-in {dropin}" + (f" (kubelet {version})" if version else " (no kubelet yet)"))
    if merge and main_exists:
        return _row(check, "ok", f"merged into {main} (kubelet {version or '?'} reads no drop-ins)")
    if installed:
        return _row(
            check,
            "fail",
            f"no drop-in at {dropin} on a node with kubelet {version or '(version unknown)'}",
            "Run site.yml --tags kubelet",
        )
    return _row(check, "skipped", "no kubelet installed and no drop-in")


AGENT_KEYS = ("node-label", "node-taint", "kubelet-arg")


def _scalar(text: str) -> str:
    text = text.strip()
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'" else text


def agent_settings(text: str) -> dict:
    """The kubelet keys of one RKE2/k3s agent config file (node-label, node-taint, kubelet-arg): YAML read with
    PyYAML where the node has it, else the flat forms the installers document (key: value, key: [a, b], a
    block list). ValueError names the line or the problem."""
    try:
        import yaml  # optional on the node
    except ImportError:
        yaml = None
    if yaml is not None:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(str(exc).replace("\n", " ")) from exc
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise ValueError(f"a mapping of agent options is expected, not {type(data).__name__}")
        return {k: v if isinstance(v, list) else [] if v is None else [v] for k, v in data.items() if k in AGENT_KEYS}
    found: dict = {}
    key = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip() or line.strip() == "---":
            continue
        item = re.match(r"^\s*-\s+(.*)$", line)
        if item and key is not None:
            found.setdefault(key, []).append(_scalar(item.group(1)))
            continue
        match = re.match(r"^([A-Za-z0-9_.+-]+):\s*(.*)$", line)
        if not match:
            raise ValueError(f"line {number} is not key: value ({raw.strip()!r})")
        key, value = match.group(1), match.group(2).strip()
        if key not in AGENT_KEYS:
            key = None
            continue
        if value.startswith("[") and value.endswith("]"):
            found[key] = [_scalar(v) for v in value[1:-1].split(",") if v.strip()]
        else:
            found[key] = [_scalar(value)] if value else []
    return found


def kubelet_agent_row(p: dict, node: dict, files: list, dropin_mtime, started) -> dict:
    """RKE2/k3s: the kubelet's labels, taints and flags come from the agent config (config.yaml, then the
    config.yaml.d files in order; a later file's list replaces an earlier one's), which the agent reads at start.
    files: [(path, text)] in that order; dropin_mtime: the kubelet role's drop-in's mtime (None: missing);
    started: the agent's start as seconds since the epoch (None: unknown or not running)."""
    installer = node.get("installer") or {}
    name, unit = installer.get("name"), installer.get("service") or ""
    kubelet = installer.get("kubelet") or {}
    dropin = kubelet.get("dropin") or ""
    check = "kubelet configuration"
    effective: dict = {}
    for path, text in files:
        try:
            effective.update(agent_settings(text or ""))
        except ValueError as exc:
            return _row(
                check,
                "fail",
                f"{path} cannot be read as {name}'s agent config: {_truncate(str(exc), 200)};"
                " the agent would not start",
                f"Fix {path}, then restart {unit}",
            )
    if dropin_mtime is None:
        return _row(
            check,
            "fail",
            f"no drop-in {dropin} on a {name} node: its kubelet, which {unit} starts from {kubelet.get('config')}"
            " and config.yaml.d, gets none of the GPU node's labels, taints and flags",
            "Run site.yml --tags kubelet",
        )
    if started is not None and dropin_mtime >= started:
        return _row(
            check,
            "warn",
            f"{dropin} was written after {unit} started: the running kubelet does not have its settings",
            f"Restart {unit} (systemctl restart {unit}), or rerun site.yml --tags kubelet",
        )
    counts = ", ".join(f"{key} x{len(effective.get(key) or [])}" for key in AGENT_KEYS)
    version = installer.get("version") or "?"
    return _row(check, "ok", f"drop-in {dropin}: {name} {version}'s agent passes its kubelet {counts}")


def kubelet_kubespray_row(p: dict, node: dict, dropin_exists: bool, env_text) -> dict:
    """kubespray renders the kubelet's environment file and KubeletConfiguration from its inventory at every run
    (roles/kubernetes/node/tasks/kubelet.yml): the kubelet role's drop-in counts only where that file passes
    --config-dir."""
    kubelet = (node.get("installer") or {}).get("kubelet") or {}
    env, config = (kubelet.get("files") or ["/etc/kubernetes/kubelet.env"])[0], kubelet.get("config") or ""
    dropin = f"{p['kubelet_config_dir']}/{p['kubelet_dropin_name']}"
    check = "kubelet configuration"
    if dropin_exists and "--config-dir" in (env_text or ""):
        return _row(check, "ok", f"drop-in {dropin}, passed by kubespray's {env} (--config-dir)")
    return _row(
        check,
        "warn",
        f"kubespray renders {env} and {config} from its inventory at every run"
        + (f"; {env} passes no --config-dir, so the kubelet does not read {dropin}" if dropin_exists else "")
        + ": the GPU node's labels, taints and kubelet settings belong in that inventory",
        "Set node_labels, node_taints, kubelet_config_extra_args (or kubelet_custom_flags) in the kubespray inventory"
        " and rerun kubespray",
    )


def check_kubelet(p: dict, node: dict, io: Node) -> list:
    installer = node.get("installer") or {}
    if agent_managed(installer) and (installer.get("kubelet") or {}).get("dropin"):
        kubelet = installer["kubelet"]
        dropins = kubelet.get("dropin_dir") or ""
        paths = [kubelet.get("config") or "", *sorted(io.glob(f"{dropins}/*.yaml") + io.glob(f"{dropins}/*.yml"))]
        files = [(path, io.read(path)) for path in paths if path and io.lstat(path) is not None]
        rc, out, _err = io.run(main_start_argv(installer.get("service") or ""))
        started_us = main_start_us(rc, out)
        started = io.boot_time() + started_us / 1e6 if started_us else None
        dropin_mtime = io.mtime(kubelet["dropin"]) if io.lstat(kubelet["dropin"]) is not None else None
        return [kubelet_agent_row(p, node, files, dropin_mtime, started)]
    if installer.get("name") == "kubespray":
        dropin = io.lstat(f"{p['kubelet_config_dir']}/{p['kubelet_dropin_name']}") is not None
        env = ((installer.get("kubelet") or {}).get("files") or ["/etc/kubernetes/kubelet.env"])[0]
        return [kubelet_kubespray_row(p, node, dropin, io.read(env))]
    dropin = io.lstat(f"{p['kubelet_config_dir']}/{p['kubelet_dropin_name']}") is not None
    main = io.lstat(p["kubelet_main_config"]) is not None
    env_text = io.read(p["kubelet_env_file"]) if dropin else None
    return [kubelet_row(p, node, dropin, main, env_text)]


# ---- the module --------------------------------------------------------------------------------------------


def run_checks(p: dict, io: Node) -> dict:
    """The rows of the families in p["families"], in the doctor's order, and whether the toolkit is installed."""
    node = dict(p["node"] or {})
    if p.get("has_gpu") is not None:
        node["has_gpu"] = p["has_gpu"]
    families = set(p["families"])
    rows = []
    toolkit_installed = None
    confinement = None
    if "driver" in families:
        rows += check_driver(p, node, io)
    if "toolkit" in families:
        toolkit_rows, toolkit_installed = check_toolkit(p, node, io)
        rows += toolkit_rows
    known = toolkit_installed if toolkit_installed is not None else bool(p["toolkit_installed"])
    # The runtimes in the order asked (gpu_validate_runtimes, else as the facts list them).
    containerd = crio = None
    for runtime in p["runtimes"]:
        if runtime == "docker" and "docker" in families:
            rows += check_docker(p, node, io, known)
        elif runtime == "containerd" and "containerd" in families:
            containerd = containerd_state(p, node, io)
            rows += check_containerd(p, node, io, known, containerd)
        elif runtime == "crio" and "crio" in families:
            crio = crio_state(p, node, io)
            rows += check_crio(p, node, io, known, crio)
    if "isolation" in families:
        rows += check_docker_isolation(p, node, io)
        if "containerd" in p["runtimes"]:
            containerd = containerd or containerd_state(p, node, io)
            rows += check_containerd_isolation(p, node, io, containerd)
        if "crio" in p["runtimes"]:
            crio = crio or crio_state(p, node, io)
            rows += check_crio_isolation(p, node, io, crio)
        rows.append(device_plugin_row(p, node))
    if "doors" in families:
        if "containerd" in p["runtimes"]:
            containerd = containerd or containerd_state(p, node, io)
        if "crio" in p["runtimes"]:
            crio = crio or crio_state(p, node, io)
        rows += check_doors(
            p,
            node,
            io,
            known,
            containerd if "containerd" in p["runtimes"] else None,
            crio if "crio" in p["runtimes"] else None,
        )
    if "fuse" in families:
        rows += check_fuse(p, node, io)
    if "security" in families:
        rows += check_security(p, node, io)
    if "confinement" in families:
        confinement_rows, confinement = check_confinement(p, node, io)
        rows += confinement_rows
    if "kubelet" in families:
        rows += check_kubelet(p, node, io)
    return {"checks": rows, "toolkit_installed": toolkit_installed, "fuse_confinement": confinement}


ARGUMENT_SPEC = dict(
    families=dict(type="list", elements="str", choices=list(FAMILIES), required=True),
    node=dict(type="dict", required=True),
    has_gpu=dict(type="bool"),
    driver_version=dict(type="str", default=""),
    driver_branch=dict(type="str", default=""),
    peermem=dict(type="bool", default=False),
    peermem_file=dict(type="path", default="/etc/modules-load.d/nvidia-peermem.conf"),
    kernels_root=dict(type="path", default="/"),
    toolkit_version=dict(type="str", default=""),
    toolkit_package=dict(type="str", default="nvidia-container-toolkit"),
    package_version_argv=dict(type="list", elements="str", default=[]),
    runtimes=dict(type="list", elements="str", default=[]),
    runtime_name=dict(type="str", default="nvidia"),
    test_image=dict(type="str", default=""),
    docker_run_options=dict(type="list", elements="str", default=["--network", "none"]),
    container_timeout=dict(type="int", default=120),
    containerd_test_image=dict(type="str", default=""),
    containerd_namespace=dict(type="str", default="default"),
    containerd_run_options=dict(type="list", elements="str", default=[]),
    crio_test_image=dict(type="str", default=""),
    runtime_binary=dict(type="path", required=True),
    nvidia_default_allowed=dict(type="bool", default=False),
    toolkit_installed=dict(type="bool", default=False),
    toolkit_config=dict(type="path", default="/etc/nvidia-container-runtime/config.toml"),
    volume_mounts_allowed=dict(type="bool", default=False),
    fuse_device=dict(type="path", default="/dev/fuse"),
    apparmor_os=dict(type="bool", default=True),
    apparmor_profile=dict(type="str", default="fuse"),
    apparmor_dir=dict(type="path", default="/etc/apparmor.d"),
    apparmor_profiles_file=dict(type="path", default="/sys/kernel/security/apparmor/profiles"),
    seccomp_root=dict(type="path", default="/var/lib/kubelet/seccomp"),
    seccomp_profile=dict(type="str", default="fuse"),
    kubelet_config_dir=dict(type="path", default="/etc/kubernetes/kubelet.conf.d"),
    kubelet_dropin_name=dict(type="str", required=True),
    kubelet_main_config=dict(type="path", default="/var/lib/kubelet/config.yaml"),
    kubelet_env_file=dict(type="path", default="/etc/default/kubelet"),
    kubelet_config_mode=dict(type="str", default="auto"),
    kubelet_dropin_min=dict(type="str", required=True),
    command_timeout=dict(type="int", default=60),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = dict(module.params)
    for key in ("driver_version", "driver_branch", "toolkit_version"):
        params[key] = params[key] or ""
    module.exit_json(changed=False, **run_checks(params, Node(timeout=module.params["command_timeout"])))


if __name__ == "__main__":
    main()
