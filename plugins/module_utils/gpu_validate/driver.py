# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's driver and toolkit families: the NVIDIA driver at its pin, nvidia-smi, the driver after the next
reboot, nvidia-peermem, and the container toolkit at its pin.

The node-side module gpu_validate_checks imports this file as module_utils.gpu_validate.driver.
Stdlib only, Python 3.8+ (the node's python3).
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import (
    Node,
    table_row,
    truncate,
    truthy,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.kernels import inspect_live


def driver_row(params: dict, node: dict) -> dict:
    has_gpu = truthy(node.get("has_gpu"))
    driver = node.get("driver") or {}
    loaded = truthy(driver.get("loaded"))
    version = driver.get("version") or ""
    pin_version, pin_branch = params["driver_version"], params["driver_branch"]
    pin = f"version {pin_version}" if pin_version else f"branch {pin_branch}" if pin_branch else ""
    if not has_gpu:
        return table_row("NVIDIA driver", "skipped", "no GPU (no NVIDIA GPU on PCI)")
    if not loaded:
        nouveau = "; nouveau is loaded" if truthy(node.get("nouveau_loaded")) else ""
        return table_row(
            "NVIDIA driver",
            "fail",
            f"not loaded on a node with {node.get('gpu_count')} GPU(s){nouveau}",
            "Run site.yml --tags driver; when the driver is installed, reboot the node to load it",
        )
    # The branch pin is checked even when an exact version pin matched (the role always did).
    if (pin_version and version != pin_version and not version.startswith(pin_version + ".")) or (
        pin_branch and not version.startswith(pin_branch + ".")
    ):
        return table_row(
            "NVIDIA driver",
            "fail",
            f"{version} loaded, but the pin is {pin}",
            "Reboot to load the installed driver, or run playbooks/upgrade_driver.yml with the pin",
        )
    return table_row("NVIDIA driver", "ok", f"{version} loaded" + (f" (pin: {pin})" if pin else ""))


def smi_row(node: dict, smi) -> dict:
    """smi: (rc, stdout, stderr) of nvidia-smi, or None when it was not run (no nvidia-smi on the node)."""
    if not truthy(node.get("has_gpu")):
        return table_row("nvidia-smi", "skipped", "no GPU")
    if smi is None:
        return table_row(
            "nvidia-smi",
            "fail",
            "not installed",
            "Run site.yml --tags driver (nvidia-smi comes with the driver packages)",
        )
    rc, out, err = smi
    if rc != 0:
        return table_row(
            "nvidia-smi",
            "fail",
            f"exit code {rc}: " + truncate(f"{out} {err}".strip()),
            "Read the nvidia-smi message; a driver/library version mismatch needs a reboot",
        )
    lines = [line for line in out.splitlines() if line]
    count = int(node.get("gpu_count") or 0)
    if len(lines) < count:
        return table_row(
            "nvidia-smi",
            "warn",
            f"sees {len(lines)} of the {count} GPUs on PCI",
            "Look for fallen-off GPUs (dmesg | grep -i xid) and reset or reboot",
        )
    names = list(dict.fromkeys(line.split(",")[0].strip() for line in lines))
    return table_row("nvidia-smi", "ok", f"{len(lines)} GPU(s): " + ", ".join(names))


def reboot_row(params: dict, node: dict, kernels) -> dict:
    """kernels: what nvidia_kernels.inspect returns for the node (None without a GPU)."""
    name = "driver after next reboot"
    if not truthy(node.get("has_gpu")):
        return table_row(name, "skipped", "no GPU")
    entries = (kernels or {}).get("kernels") or []
    next_kernel = next((k for k in entries if k.get("next_boot")), None)
    if not next_kernel:
        return table_row(name, "skipped", "no kernel image in /boot (a container boots its host kernel)")
    release = next_kernel.get("release") or ""
    if not next_kernel.get("module"):
        return table_row(
            name,
            "fail",
            f"kernel {release} boots next ({kernels.get('next_boot_rule') or ''}) and has no NVIDIA module",
            "Run site.yml --tags driver: it builds or installs the module for every installed kernel,"
            " or names the missing headers; do not reboot before",
        )
    next_version = next_kernel.get("module_version") or ""
    pin = params["driver_version"]
    if pin and next_version and next_version != pin and not next_version.startswith(pin + "."):
        return table_row(
            name,
            "fail",
            f"kernel {release} boots next with NVIDIA module {next_version}, but the pin is version {pin}",
            "Run playbooks/upgrade_driver.yml with the pin, or rebuild the module (dkms autoinstall)",
        )
    others = [k["release"] for k in entries if not k.get("next_boot") and k.get("module") is None]
    if others:
        return table_row(
            name,
            "warn",
            f"kernel {release} boots next with the NVIDIA module; no module for {', '.join(others)}",
            "Run site.yml --tags driver, or remove the kernels without a module",
        )
    return table_row(
        name,
        "ok",
        f"kernel {release} boots next with NVIDIA module {next_version or os.path.basename(next_kernel['module'])}",
    )


def peermem_row(params: dict, node: dict, boot_file_exists: bool) -> dict:
    path = params["peermem_file"]
    if not params["peermem"]:
        return table_row("nvidia-peermem", "skipped", "not asked for (gpu_validate_peermem is false)")
    if not truthy(node.get("has_gpu")):
        return table_row("nvidia-peermem", "skipped", "no GPU")
    if not boot_file_exists:
        return table_row(
            "nvidia-peermem",
            "fail",
            f"{path} is missing: not loaded at boot",
            "Run site.yml --tags driver with nvidia_driver_peermem: true",
        )
    driver = node.get("driver") or {}
    if not truthy(driver.get("loaded")):
        return table_row(
            "nvidia-peermem",
            "warn",
            f"loads at boot ({path}); the NVIDIA driver is not loaded",
            "Reboot to load the driver (and nvidia-peermem with it)",
        )
    if "nvidia_peermem" not in (driver.get("modules") or []):
        return table_row(
            "nvidia-peermem",
            "fail",
            "not loaded next to the NVIDIA driver",
            "modprobe nvidia-peermem; it needs the InfiniBand core (ib_core) loaded",
        )
    return table_row("nvidia-peermem", "ok", f"loaded, and loaded at boot ({path})")


def check_driver(params: dict, node: dict, host: Node) -> list:
    has_gpu = truthy(node.get("has_gpu"))
    smi = None
    if has_gpu and node.get("nvidia_smi"):
        smi = host.run([node["nvidia_smi"], "--query-gpu=name,driver_version", "--format=csv,noheader"])
    kernels = inspect_live(params["kernels_root"], host.run, host.which) if has_gpu else None
    boot_file = has_gpu and params["peermem"] and host.lstat(params["peermem_file"]) is not None
    return [
        driver_row(params, node),
        smi_row(node, smi),
        reboot_row(params, node, kernels),
        peermem_row(params, node, boot_file),
    ]


# The file a TEST STAND-IN toolkit package carries (tests/fixtures/nvidia-container-toolkit-standin): its first line
# says what stands in. NVIDIA's packages have none.
STANDIN_MARKER = "/usr/share/doc/{package}/STAND-IN"


def toolkit_row(params: dict, node: dict, ctk, pkg, standin=None) -> tuple:
    """ctk: (rc, out, err) of nvidia-ctk --version; pkg: that of the package query or None; standin: the text of the
    package's STAND-IN marker or None. (row, installed)."""
    cli = ""
    if ctk[0] == 0:
        words = (ctk[1].splitlines() or [""])[0].split()
        cli = re.sub(r"^v", "", words[-1]) if words else ""
    pkg_version = pkg[1].strip() if pkg is not None and pkg[0] == 0 else ""
    installed = pkg_version or cli
    pin = params["toolkit_version"]
    package = params["toolkit_package"]
    matches = not pin or installed == pin or (not pkg_version and cli == pin.split("-")[0])
    said = (standin or "").strip().splitlines()
    if installed and matches and said and "script" in said[0]:
        # nothing of NVIDIA's runs: say so, as a warning (a test node's stand-in, never a real node's toolkit)
        row = table_row(
            "container toolkit",
            "warn",
            f"{package} {installed}" + (f" (pin {pin})" if pin else "") + f": {said[0]}",
            "Install NVIDIA's packages: nvidia_container_toolkit_repo_base_url at NVIDIA's repository or your mirror",
        )
    elif installed and matches:
        row = table_row(
            "container toolkit",
            "ok",
            f"{package} {installed}" + (f" (pin {pin})" if pin else "") + (f": {said[0]}" if said else ""),
        )
    elif installed:
        row = table_row(
            "container toolkit",
            "fail",
            f"{installed} installed, but the pin is {pin}",
            "Run site.yml --tags toolkit to install the pinned version",
        )
    elif truthy(node.get("has_gpu")):
        row = table_row(
            "container toolkit",
            "fail",
            f"nvidia-ctk not found and {package} not installed",
            "Run site.yml --tags toolkit",
        )
    else:
        row = table_row("container toolkit", "skipped", "no GPU (and no toolkit installed)")
    return row, bool(cli or pkg_version)


def check_toolkit(params: dict, node: dict, host: Node) -> tuple:
    ctk = host.run(["nvidia-ctk", "--version"])
    pkg = (
        host.run([*params["package_version_argv"], params["toolkit_package"]])
        if params["package_version_argv"]
        else None
    )
    standin = host.read(STANDIN_MARKER.format(package=params["toolkit_package"])) if pkg is not None else None
    row, installed = toolkit_row(params, node, ctk, pkg, standin)
    return [row], installed
