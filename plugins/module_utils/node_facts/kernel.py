# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Kernel facts: AppArmor (kernel and securityfs), FUSE (module, /dev/fuse, built in or not), and the kernel's
release, user namespaces and seccomp: what pods that mount FUSE file systems are confined with.

Part of gpu_node_facts (plugins/modules/gpu_node_facts.py). Stdlib only, Python 3.8+.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.host import read_text, rooted


def apparmor_facts(root: str) -> dict:
    enabled = (read_text(rooted(root, "/sys/module/apparmor/parameters/enabled")) or "").strip()
    return {
        "kernel_enabled": enabled.upper().startswith("Y"),
        "securityfs": os.path.isdir(rooted(root, "/sys/kernel/security/apparmor")),
    }


def fuse_facts(root: str) -> dict:
    module_dir = rooted(root, "/sys/module/fuse")
    loaded = os.path.isdir(module_dir)
    return {
        "device": os.path.exists(rooted(root, "/dev/fuse")),
        "module_loaded": loaded,
        # Only a loadable module has an initstate file; a built-in one has just its parameters.
        "builtin": loaded and not os.path.exists(os.path.join(module_dir, "initstate")),
    }


def parse_kernel_release(text: str | None) -> tuple[str | None, str | None]:
    """A kernel release ("6.1.0-28-amd64", "6.12.48+deb13-amd64", "5.14.0-427.el9.x86_64") -> (numeric, as is)."""
    release = (text or "").strip()
    match = re.match(r"(\d+\.\d+(?:\.\d+)?)", release)
    return (match.group(1), release) if match else (None, release or None)


def kernel_facts(root: str) -> dict:
    release_text = read_text(rooted(root, "/proc/sys/kernel/osrelease"))
    if release_text is None and root == "/":
        release_text = os.uname().release
    version, release = parse_kernel_release(release_text)
    max_userns = (read_text(rooted(root, "/proc/sys/user/max_user_namespaces")) or "").strip()
    status = read_text(rooted(root, "/proc/self/status")) or ""
    return {
        "release": release,
        "version": version,
        "max_user_namespaces": int(max_userns) if max_userns.isdigit() else None,
        "seccomp": re.search(r"^Seccomp:", status, re.MULTILINE) is not None,
    }


def kernel_security_facts(root: str) -> dict:
    """The facts apparmor_enabled, apparmor, fuse and kernel."""
    apparmor = apparmor_facts(root)
    return {
        "apparmor_enabled": apparmor["kernel_enabled"] and apparmor["securityfs"],
        "apparmor": apparmor,
        "fuse": fuse_facts(root),
        "kernel": kernel_facts(root),
    }
