# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Installed kernels, their NVIDIA kernel module and the kernel the boot loader starts next.

Shared by the nvidia_driver_kernels module (the nvidia_driver role's reboot readiness) and the
gpu_validate_checks module (the doctor's "driver after next reboot" row). Stdlib only, Python 3.9+.
"""

from __future__ import annotations

import os
import re

MODULE_FILE = re.compile(r"^nvidia(-current(-open)?)?\.ko(\.(xz|zst|gz))?$")
# Kernel images: Debian, Ubuntu and EL install /boot/vmlinuz-<release>; rescue images are no kernels to boot.
IMAGE_PREFIX = "vmlinuz-"


def version_key(release: str) -> list:
    """Sort key of a kernel release as GRUB's version_sort and linux-version sort it (numbers as numbers)."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", release) if part]


def installed_kernels(root: str) -> list[str]:
    """Releases with an image /boot/vmlinuz-<release>, newest first."""
    try:
        names = os.listdir(os.path.join(root, "boot"))
    except OSError:
        return []
    releases = [
        name[len(IMAGE_PREFIX) :]
        for name in names
        if name.startswith(IMAGE_PREFIX) and "rescue" not in name and os.path.isfile(os.path.join(root, "boot", name))
    ]
    return sorted(releases, key=version_key, reverse=True)


def find_module(root: str, release: str) -> str | None:
    """Path (as seen on the node) of the NVIDIA module installed for `release`, or null."""
    top = os.path.join(root, "lib", "modules", release)
    found = []
    for directory, subdirs, files in os.walk(top):
        subdirs[:] = sorted(d for d in subdirs if d not in ("build", "source"))
        found.extend(os.path.join(directory, name) for name in files if MODULE_FILE.match(name))
    if not found:
        return None
    # DKMS's updates/ directory wins over kernel/ for modprobe (depmod's default search order).
    found.sort(key=lambda path: (0 if "/updates/" in path else 1, path))
    return "/" + os.path.relpath(found[0], root) if root != "/" else found[0]


def next_boot_kernel(releases: list[str], grubby_default: str | None) -> tuple[str | None, str | None]:
    """(release the boot loader starts next, the rule that found it)."""
    if grubby_default:
        release = os.path.basename(grubby_default.strip())
        release = release[len(IMAGE_PREFIX) :] if release.startswith(IMAGE_PREFIX) else release
        if release in releases:
            return release, "grubby --default-kernel"
    if releases:
        return releases[0], "newest /boot/vmlinuz-*"
    return None, None


def inspect(root: str, grubby_default: str | None = None, module_version=None) -> dict:
    """Everything the module returns. module_version(path) -> version or None (modinfo on the live node)."""
    releases = installed_kernels(root)
    next_boot, rule = next_boot_kernel(releases, grubby_default)
    kernels = []
    for release in releases:
        module = find_module(root, release)
        kernels.append(
            {
                "release": release,
                "next_boot": release == next_boot,
                "headers": os.path.exists(os.path.join(root, "lib", "modules", release, "build", "Makefile")),
                "module": module,
                "module_version": module_version(module) if module and module_version else None,
            }
        )
    missing = [k["release"] for k in sorted(kernels, key=lambda k: not k["next_boot"]) if not k["module"]]
    return {"kernels": kernels, "next_boot": next_boot, "next_boot_rule": rule, "missing": missing}


def inspect_live(root: str, run, which) -> dict:
    """inspect() of the tree at `root`; on the live node (root "/") with grubby's default kernel and modinfo's
    module versions. run(argv) -> (rc, stdout, stderr); which(name, opt_dirs) -> path or None."""
    root = os.path.realpath(root)
    grubby_default = None
    module_version = None
    if root == "/":
        grubby = which("grubby", [])
        if grubby:
            rc, out, _err = run([grubby, "--default-kernel"])
            grubby_default = out.strip() if rc == 0 else None
        modinfo = which("modinfo", ["/usr/sbin", "/sbin"])
        if modinfo:

            def module_version(path: str) -> str | None:
                rc, out, _err = run([modinfo, "-F", "version", path])
                return out.strip() or None if rc == 0 else None

    return inspect(root, grubby_default, module_version)
