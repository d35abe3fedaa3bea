# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's fuse, security and confinement families: /dev/fuse, the FUSE AppArmor and seccomp profiles, and
how FUSE pods are confined on this node.

The node-side module gpu_validate_checks imports this file as module_utils.gpu_validate.fuse.
Stdlib only, Python 3.8+ (the node's python3).
"""

from __future__ import annotations

import re
import stat

from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import Node, table_row, truthy
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.logic import (
    feature_gates,
    json_problem,
    userns_missing,
)


def fuse_row(device) -> dict:
    """device: os.lstat of the FUSE device, or None when it is missing."""
    if device is not None and stat.S_ISCHR(device.st_mode):
        return table_row("/dev/fuse", "ok", f"character device, mode {stat.S_IMODE(device.st_mode):04o}")
    detail = (
        "exists but is not a character device"
        if device is not None
        else "missing: FUSE pods (device plugin resource github.com/fuse) cannot mount"
    )
    return table_row("/dev/fuse", "fail", detail, "Run site.yml --tags fuse (loads the fuse module)")


def check_fuse(params: dict, node: dict, host: Node) -> list:
    return [fuse_row(host.lstat(params["fuse_device"]))]


def apparmor_row(params: dict, node: dict, file_exists: bool, loaded_text) -> dict:
    """loaded_text: the kernel's list of loaded profiles ("<name> (<mode>)" per line), None when unread."""
    name = params["apparmor_profile"]
    check = f"AppArmor profile {name}"
    path = f"{params['apparmor_dir']}/{name}"
    if not params["apparmor_os"]:
        return table_row(check, "skipped", "this OS has no AppArmor (SELinux confines containers)")
    if not file_exists:
        return table_row(check, "fail", f"{path} is missing", "Run site.yml --tags apparmor")
    if not truthy(node.get("apparmor_enabled")):
        kernel = (
            "enabled but no securityfs" if truthy((node.get("apparmor") or {}).get("kernel_enabled")) else "disabled"
        )
        return table_row(
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
        return table_row(check, "ok", "installed and loaded " + (mode.group(0) if mode else ""))
    return table_row(
        check,
        "fail",
        f"installed in {params['apparmor_dir']} but not loaded",
        f"apparmor_parser -r {path} (or run site.yml --tags apparmor)",
    )


def seccomp_row(params: dict, text) -> dict:
    """text: the profile's text, None when it cannot be read."""
    name = params["seccomp_profile"]
    path = f"{params['seccomp_root']}/profiles/{name}.json"
    check = f"seccomp profile {name}"
    if text is None:
        return table_row(check, "fail", f"{path} is missing", "Run site.yml --tags seccomp")
    problem = json_problem(text)
    if problem:
        return table_row(check, "fail", f"{path} is {problem}", "Run site.yml --tags seccomp")
    return table_row(check, "ok", f"{path} (localhostProfile: profiles/{name}.json)")


def check_security(params: dict, node: dict, host: Node) -> list:
    file_exists = (
        params["apparmor_os"] and host.lstat(f"{params['apparmor_dir']}/{params['apparmor_profile']}") is not None
    )
    loaded = None
    if params["apparmor_os"] and truthy(node.get("apparmor_enabled")):
        loaded = host.read(params["apparmor_profiles_file"])
    seccomp = host.read(f"{params['seccomp_root']}/profiles/{params['seccomp_profile']}.json")
    return [apparmor_row(params, node, file_exists, loaded), seccomp_row(params, seccomp)]


# How FUSE pods are confined on this node, in the order of preference:
#   user namespaces     pods with hostUsers: false get CAP_SYS_ADMIN in their own user namespace only;
#   AppArmor + seccomp  SYS_ADMIN pods under the FUSE AppArmor profile (FUSE mounts only, no umount
#                       in /proc, /sys, /dev) and the FUSE seccomp profile;
#   seccomp only        the kernel has no AppArmor: seccomp cannot see a mount's type or path, so a
#                       SYS_ADMIN pod can unmount /proc/sys and write host-wide kernel settings;
#   not possible        no /dev/fuse, or neither of the above can be set up.


def confinement_row(params: dict, node: dict, gates: dict, apparmor_text, seccomp_exists: bool) -> tuple:
    """gates: the kubelet's featureGates as its files set them; apparmor_text: the kernel's loaded profiles
    (None when unread). (row, state)."""
    missing_list = userns_missing(node, gates)
    missing = "; ".join(missing_list)
    profile, seccomp = params["apparmor_profile"], params["seccomp_profile"]
    pattern = re.compile(re.escape(profile) + " [(]enforce[)]")
    apparmor_loaded = any(pattern.match(line) for line in (apparmor_text or "").splitlines())
    seccomp_ok = seccomp_exists and truthy((node.get("kernel") or {}).get("seccomp", True))
    fuse = truthy((node.get("fuse") or {}).get("device"))
    check = "FUSE confinement"
    if fuse and not missing_list:
        detail = (
            "user namespaces: pods with hostUsers: false mount FUSE with CAP_SYS_ADMIN in their own user namespace only"
        )
        return table_row(check, "ok", detail), "user_namespaces"
    if fuse and apparmor_loaded and seccomp_ok:
        detail = (
            f"AppArmor + seccomp: SYS_ADMIN pods under AppArmor profile {profile} and seccomp profile {seccomp}.json;"
            f" user namespaces not possible: {missing}"
        )
        return table_row(check, "ok", detail), "apparmor"
    fix = (
        "Meet what user namespaces need (above) and run FUSE pods with hostUsers: false (security_profiles"
        " README), or boot a kernel with AppArmor; until then schedule no SYS_ADMIN FUSE pods here"
    )
    if fuse and seccomp_ok:
        why = (
            "the kernel has no AppArmor"
            if not truthy(node.get("apparmor_enabled"))
            else f"AppArmor profile {profile} is not loaded"
        )
        detail = (
            f"seccomp only: not confined ({why}; seccomp cannot see mount types or paths, so a SYS_ADMIN pod can"
            f" unmount /proc/sys and write host-wide kernel settings); user namespaces not possible: {missing}"
        )
        return table_row(check, "warn", detail, fix), "seccomp_only"
    if not fuse:
        return table_row(
            check, "fail", "not possible: /dev/fuse is missing", "Run site.yml --tags fuse"
        ), "not_possible"
    detail = f"not possible: no seccomp profile {seccomp}.json and user namespaces need {missing}"
    return table_row(check, "fail", detail, fix), "not_possible"


def check_confinement(params: dict, node: dict, host: Node) -> tuple:
    gates: dict = {}
    # The kubelet's featureGates as its files set them; later files win (the drop-in over the main file).
    for path in (params["kubelet_main_config"], f"{params['kubelet_config_dir']}/{params['kubelet_dropin_name']}"):
        gates.update(feature_gates(host.read(path)))
    apparmor = host.read(params["apparmor_profiles_file"]) if truthy(node.get("apparmor_enabled")) else None
    seccomp = host.lstat(f"{params['seccomp_root']}/profiles/{params['seccomp_profile']}.json") is not None
    row, state = confinement_row(params, node, gates, apparmor, seccomp)
    return [row], state
