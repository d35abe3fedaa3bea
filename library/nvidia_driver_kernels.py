#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Which installed kernels have an NVIDIA kernel module, and which kernel the boot loader starts next."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_driver_kernels
short_description: Find the installed kernels that would boot without an NVIDIA kernel module
description:
  - Lists the installed kernels (C(/boot/vmlinuz-<release>)) and, for each, whether an NVIDIA kernel module is
    installed for it (a file C(nvidia.ko), C(nvidia-current.ko) or C(nvidia-current-open.ko), possibly compressed,
    anywhere below C(/lib/modules/<release>), where DKMS, Ubuntu's precompiled packages and EL's kmod packages put
    it), its version (C(modinfo -F version)), and whether the kernel's headers are installed
    (C(/lib/modules/<release>/build)).
  - The kernel the boot loader starts next is C(grubby --default-kernel) where grubby exists (EL's boot loader
    specification entries); otherwise the newest C(/boot/vmlinuz-*) in version order, the first entry of GRUB's
    menu on Debian and Ubuntu (C(/etc/grub.d/10_linux) sorts kernels newest first and C(GRUB_DEFAULT=0) starts the
    first). A GRUB_DEFAULT that names another entry is not followed; every kernel is checked anyway.
  - The module is read-only and never reports a change.
version_added: "0.2.0"
author:
  - gpu-node-provisioning contributors
options:
  root:
    description:
      - Top of the filesystem tree to inspect. Any other value than V(/) is meant for tests; no command runs then.
    type: path
    default: /
attributes:
  check_mode:
    support: full
    description: Reads only, so it reports the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing.
"""

EXAMPLES = r"""
- name: Find the kernels that would boot without an NVIDIA module
  nvidia_driver_kernels:
  register: kernels

- name: Show the kernel the boot loader starts next
  ansible.builtin.debug:
    msg: "{{ kernels.next_boot }} has an NVIDIA module: {{ kernels.next_boot not in kernels.missing }}"
"""

RETURN = r"""
kernels:
  description: One entry per installed kernel, newest first, with C(release), C(next_boot) (bool), C(headers)
    (bool), C(module) (path of the NVIDIA module or null) and C(module_version) (null when unknown).
  returned: always
  type: list
  elements: dict
  sample:
    - {release: 6.8.0-149-generic, next_boot: true, headers: false,
       module: /lib/modules/6.8.0-149-generic/kernel/nvidia-580srv-open/nvidia.ko, module_version: 580.95.05}
next_boot:
  description: Release of the kernel the boot loader starts next; null when no kernel is installed in /boot.
  returned: always
  type: str
  sample: 6.8.0-149-generic
next_boot_rule:
  description: How RV(next_boot) was found (V(grubby --default-kernel) or V(newest /boot/vmlinuz-*)); null without one.
  returned: always
  type: str
  sample: newest /boot/vmlinuz-*
missing:
  description: Releases of the installed kernels without an NVIDIA module, next boot first.
  returned: always
  type: list
  elements: str
  sample: [6.8.0-151-generic]
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule

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


def main():
    module = AnsibleModule(argument_spec=dict(root=dict(type="path", default="/")), supports_check_mode=True)
    root = os.path.realpath(module.params["root"])
    grubby_default = None
    module_version = None
    if root == "/":
        grubby = module.get_bin_path("grubby")
        if grubby:
            rc, out, _err = module.run_command([grubby, "--default-kernel"])
            grubby_default = out.strip() if rc == 0 else None
        modinfo = module.get_bin_path("modinfo", opt_dirs=["/usr/sbin", "/sbin"])
        if modinfo:

            def module_version(path: str) -> str | None:
                rc, out, _err = module.run_command([modinfo, "-F", "version", path])
                return out.strip() or None if rc == 0 else None

    module.exit_json(changed=False, **inspect(root, grubby_default, module_version))


if __name__ == "__main__":
    main()
