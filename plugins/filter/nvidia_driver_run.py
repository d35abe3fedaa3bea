# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The nvidia_driver role's decisions about one run: a version change, what check mode cannot predict, reboot readiness.

Pure functions of the role's values and registered results (vars/main.yml and tasks/kernels.yml pass them), so the
unit tests call them without Ansible; tests/unit/test_nvidia_driver_filters.py proves each equal to the Jinja it
replaced on the same inputs. ``changed`` and ``failed`` read a task result as Ansible's tests of those names do.

- ``nvidia_driver_changes_version(current, version, branch)``: whether the run would replace the node's driver
  (``current``, '' = none) with another version: nvidia_driver_version set and neither equal to ``current`` nor a
  prefix of it ("580.95" of "580.95.05"), or, without a version, nvidia_driver_branch set and not ``current``'s branch.
- ``nvidia_driver_any_changed(results)``: whether any of the task results (an unset register: {}) changed.
- ``nvidia_driver_any_changed_or_failed(results)``: whether any of them changed or failed.
- ``nvidia_driver_kernels_not_ready(kernels, installed_version)``: the kernels (nvidia_driver_kernels' ``kernels``)
  that would boot without the installed driver's module: those without a module, then, where the installed version is
  known, those whose module has another version.
- ``nvidia_driver_kernel_problems(kernels, next_boot_rule, installed_version, package_prefix, builds_modules)``: one
  sentence per such kernel, "kernel <release>[ (the kernel the boot loader starts next, <rule>)] <why>; ", for the
  refusal of tasks/kernels.yml.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, MutableSequence

from ansible.errors import AnsibleFilterError

_ABSENT = object()  # a kernel without the key: Jinja's Undefined, which is not none


def _result(result) -> Mapping:
    if not isinstance(result, MutableMapping):
        raise AnsibleFilterError(f"nvidia_driver filters expect task results (mappings), not {type(result).__name__}")
    return result


def changed(result) -> bool:
    """Ansible's `changed` test: the result's changed, else (a loop's result) whether any of its results changed."""
    result = _result(result)
    if "changed" in result:
        return bool(result["changed"])
    results = result.get("results")
    if isinstance(results, MutableSequence) and results and isinstance(results[0], MutableMapping):
        return any(item.get("changed") for item in results)
    return False


def failed(result) -> bool:
    """Ansible's `failed` test."""
    return bool(_result(result).get("failed"))


def nvidia_driver_changes_version(current: str, version, branch) -> bool:
    """Whether the node's driver `current` would be replaced by another version (the requested version or branch)."""
    version, branch = str(version), str(branch)
    if current == "":
        return False
    if version != "":
        return current != version and not current.startswith(version + ".")
    return branch != "" and current.split(".")[0] != branch


def nvidia_driver_any_changed(results) -> bool:
    """Whether any of the task results changed."""
    return any(changed(result) for result in results)


def nvidia_driver_any_changed_or_failed(results) -> bool:
    """Whether any of the task results changed or failed."""
    return any(changed(result) or failed(result) for result in results)


def nvidia_driver_kernels_not_ready(kernels, installed_version: str) -> list:
    """The kernels without a module, then (installed version known) those with a module of another version."""
    missing = [kernel for kernel in kernels if kernel.get("module", _ABSENT) is None]
    if installed_version == "":
        return missing
    return missing + [
        kernel
        for kernel in kernels
        if kernel.get("module", _ABSENT) is not None
        and isinstance(kernel.get("module_version"), str)
        and kernel["module_version"] != installed_version
    ]


def nvidia_driver_kernel_problems(
    kernels, next_boot_rule: str, installed_version: str, package_prefix: str, builds_modules: bool
) -> str:
    """What is wrong with each kernel that is not ready, one "kernel <release> ...; " each."""
    said = []
    for kernel in kernels:
        release = kernel["release"]
        next_boot = f" (the kernel the boot loader starts next, {next_boot_rule})" if kernel.get("next_boot") else ""
        if kernel.get("module"):
            why = f"has NVIDIA module {kernel['module_version']}, not the installed driver {installed_version}"
        elif builds_modules:
            where = (
                " are installed (see /var/lib/dkms/*/*/build/make.log)"
                if kernel.get("headers")
                else " are not installed and not in the package sources"
            )
            why = f"has no NVIDIA module and DKMS could not build one: its headers {package_prefix}{release}{where}"
        else:
            why = (
                f"has no NVIDIA module and {package_prefix}{release} is not in the package sources"
                " (Canonical's precompiled modules for that kernel)"
            )
        said.append(f"kernel {release}{next_boot} {why}; ")
    return "".join(said)


class FilterModule:
    def filters(self):
        # nvidia_driver_changes_version: called by the role's plan (plugins/filter/nvidia_driver_plan.py)
        return {
            "nvidia_driver_any_changed": nvidia_driver_any_changed,
            "nvidia_driver_any_changed_or_failed": nvidia_driver_any_changed_or_failed,
            "nvidia_driver_kernels_not_ready": nvidia_driver_kernels_not_ready,
            "nvidia_driver_kernel_problems": nvidia_driver_kernel_problems,
        }
