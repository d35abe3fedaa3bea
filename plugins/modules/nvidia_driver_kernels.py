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
  - gpu-node-provisioning contributors (!UNKNOWN)
extends_documentation_fragment:
  - gpunode.provisioning.gpunode_read_only
options:
  root:
    description:
      - Top of the filesystem tree to inspect. Any other value than V(/) is meant for tests; no command runs then.
    type: path
    default: /
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

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.kernels import inspect_live


def main():
    module = AnsibleModule(argument_spec=dict(root=dict(type="path", default="/")), supports_check_mode=True)
    result = inspect_live(
        module.params["root"],
        module.run_command,
        lambda name, opt_dirs: module.get_bin_path(name, opt_dirs=opt_dirs),
    )
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
