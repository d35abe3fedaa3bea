# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The nvidia_driver role's package lists: which driver packages it installs and holds, which kernel headers.

Pure functions of the role's values (vars/main.yml passes them; the platform's names come from vars/<platform>.yml),
so the unit tests call them without Ansible, and tests/unit/test_nvidia_driver_filters.py proves each equal to the
Jinja expression it replaced on the same inputs.

- ``nvidia_driver_ubuntu_packages(name, open_suffix, precompiled, choice)``: Ubuntu's driver packages. ``name`` is
  "<branch>-server" (Ubuntu's archive) or "<branch>" (NVIDIA's CUDA repository), ``open_suffix`` "-open" or "".
  With Canonical's precompiled modules: nvidia-headless-no-dkms-<name><open> and nvidia-utils-<name> (the modules
  package comes beside them); else ``choice`` (nvidia_driver_ubuntu_packages) ``driver``: nvidia-driver-<name><open>,
  ``headless``: nvidia-headless-<name><open> and nvidia-utils-<name>.
- ``nvidia_driver_hold_packages(pinned, companions)``: what is held with the driver: the pinned packages, then each
  companion package (fabric manager, IMEX, nvlsm) given as ``[wanted, name]``, kept where wanted and named.
- ``nvidia_driver_kernel_headers_packages(requested, running, running_available, meta, builds_modules)``: the kernel
  headers to install: nvidia_driver_kernel_headers where the user named some (``requested``); else, where DKMS builds
  the modules, the running kernel's headers (where the package sources have them) and the headers metapackage;
  nothing where the modules come precompiled.
"""

from __future__ import annotations

from collections.abc import Sequence

from ansible.errors import AnsibleFilterError


def nvidia_driver_ubuntu_packages(name: str, open_suffix: str, precompiled: bool, choice: str) -> list[str]:
    """Ubuntu's NVIDIA driver packages for the branch name, the flavour suffix and the user's choice."""
    if precompiled:
        return [f"nvidia-headless-no-dkms-{name}{open_suffix}", f"nvidia-utils-{name}"]
    if choice == "driver":
        return [f"nvidia-driver-{name}{open_suffix}"]
    return [f"nvidia-headless-{name}{open_suffix}", f"nvidia-utils-{name}"]


def nvidia_driver_hold_packages(pinned, companions) -> list[str]:
    """The pinned packages, then each [wanted, name] companion that is wanted and has a name."""
    held = list(pinned)
    for companion in companions:
        if not isinstance(companion, Sequence) or isinstance(companion, str) or len(companion) != 2:
            raise AnsibleFilterError(f"nvidia_driver_hold_packages: a companion is [wanted, name], not {companion!r}")
        wanted, name = companion
        if wanted and name:
            held.append(name)
    return held


def nvidia_driver_kernel_headers_packages(
    requested, running: str, running_available: bool, meta: str, builds_modules: bool
) -> list[str]:
    """The user's headers, else (DKMS only) the running kernel's where available and the metapackage."""
    if len(requested) > 0:
        return requested
    if not builds_modules:
        return []
    return ([running] if running_available else []) + [meta]


class FilterModule:
    def filters(self):
        # nvidia_driver_ubuntu_packages, nvidia_driver_hold_packages: called by the role's plan
        # (plugins/filter/nvidia_driver_plan.py)
        return {
            "nvidia_driver_kernel_headers_packages": nvidia_driver_kernel_headers_packages,
        }
