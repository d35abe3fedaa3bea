"""The verify steps' re-runs of converge.yml, shared by the test files: two runs, each on several nodes
at once with their own variables and mutations, instead of one run per failure mode.

- first_rerun: drv-debian12-cuda without force, as a GPU-less node (skipped, says why, leaves its driver);
  drv-debian12 with a newer TEST STAND-IN kernel
  image without headers (fails before any reboot); drv-ubuntu2404-signed with the sysfs stand-in of a
  Pascal + Blackwell node (fails in the preflight); drv-ubuntu2604 with nvidia_driver_hold_kernel off
  (releases the kernel hold); drv-debian13 expecting another key than the stand-in CUDA repository's (refused,
  nothing written).
- second_rerun: drv-ubuntu2404-signed with the fabric manager apart from the driver and
  nvidia_driver_version_change refuse; drv-ubuntu2604 with Secure Boot on (EFI stand-in) and no MOK
  password, and IMEX apart from the driver with nvidia_driver_version_change refuse. Both fail in the
  preflight, so this run is short. drv-debian13 pointed at the stand-in CUDA repository signed by a rogue key
  (refused before anything is written).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import testinfra

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
from playbook_runner import folded, recap, run_playbook_on_nodes

NEW_KERNEL = "6.1.0-999-amd64"
FABRIC_MANAGER_APART = "580.95.05-0ubuntu1"
IMEX_APART = "580.95.05-0ubuntu1"
KERNEL_META = "linux-headers-generic"  # held on drv-ubuntu2604
# the branch of each node with Canonical's precompiled signed modules (molecule.yml)
SIGNED_BRANCH = {"drv-ubuntu2404-signed": "580", "drv-ubuntu2604-signed": "595"}
OTHER_KEY = "0123 4567 89AB CDEF 0123 4567 89AB CDEF 0123 4567"
CUDA_FILES = "/etc/apt/sources.list.d/nvidia-driver-cuda.list /usr/share/keyrings/nvidia-driver-cuda-keyring.gpg"


def cuda_files(host) -> str:
    """The CUDA repository's source and keyring on the node, by content (what a refused run must leave alone)."""
    return host.check_output(f"sha256sum {CUDA_FILES}")


@dataclass
class Rerun:
    returncode: int
    stdout: str
    said: str  # stdout with its whitespace collapsed: the callback may wrap long messages
    recap: dict
    before: dict = field(default_factory=dict)  # what the nodes showed before the run


def node(name: str):
    return testinfra.get_host(f"ansible://{name}", ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"])


def _set_dpkg_version(host, package: str, version: str) -> None:
    """Mutation: the package database says `package` is at `version` (restored from /root/dpkg-status.before)."""
    host.run_expect(
        [0],
        "cp /var/lib/dpkg/status /root/dpkg-status.before && awk '/^Package: /{p=($2==\"" + package + '")}'
        f' p && /^Version: /{{$0="Version: {version}"}} {{print}}\' /root/dpkg-status.before'
        " > /var/lib/dpkg/status",
    )


def _rerun(node_vars: dict, before: dict | None = None) -> Rerun:
    run = run_playbook_on_nodes(SCENARIO / "converge.yml", node_vars)
    return Rerun(run.returncode, run.stdout, folded(run), recap(run.stdout), before or {})


def dpkg_version(host, package: str) -> str:
    return host.check_output(f"dpkg-query -W -f '${{Version}}' {package}")


@pytest.fixture(scope="session")
def first_rerun() -> Rerun:
    debian, ubuntu = node("drv-debian12"), node("drv-ubuntu2604")
    before = {
        "kernel_meta_selection": ubuntu.check_output(f"dpkg --get-selections {KERNEL_META}").split(),
        "cuda_files": cuda_files(node("drv-debian13")),
    }
    # Mutation: an update installed a newer kernel image without its headers; the boot loader starts it next.
    debian.run_expect([0], f"echo 'TEST STAND-IN kernel image' > /boot/vmlinuz-{NEW_KERNEL}")
    try:
        return _rerun(
            {
                "drv-debian12-cuda": {"nvidia_driver_force": False},
                "drv-debian12": {},
                "drv-debian13": {"nvidia_driver_cuda_repo_key_fingerprint": OTHER_KEY},
                "drv-ubuntu2404-signed": {"drv_sysfs_standin": "/srv/mixed-pascal-blackwell-sysfs"},
                "drv-ubuntu2604": {"nvidia_driver_hold_kernel": False},
            },
            before,
        )
    finally:
        debian.run_expect([0], f"rm -f /boot/vmlinuz-{NEW_KERNEL}")


@pytest.fixture(scope="session")
def second_rerun() -> Rerun:
    signed, dkms = node("drv-ubuntu2404-signed"), node("drv-ubuntu2604")
    before = {"cuda_files": cuda_files(node("drv-debian13"))}
    # Mutation: the package database says the fabric manager is 580.95.05 (as after a driver update that left it
    # behind); the refusing run must fail before changing anything and name the fix. The same for IMEX on the
    # DKMS node (nvidia_driver_imex dra).
    _set_dpkg_version(signed, "nvidia-fabricmanager-580", FABRIC_MANAGER_APART)
    _set_dpkg_version(dkms, "nvidia-imex-580", IMEX_APART)
    try:
        before["fabric_manager"] = dpkg_version(signed, "nvidia-fabricmanager-580")
        before["imex"] = dpkg_version(dkms, "nvidia-imex-580")
        return _rerun(
            {
                "drv-ubuntu2404-signed": {"nvidia_driver_version_change": "refuse"},
                # Mutation: a repository that publishes the right key but is signed by another one
                "drv-debian13": {"nvidia_driver_cuda_repo_url": "http://127.0.0.1:8766/rogue"},
                "drv-ubuntu2604": {
                    "drv_secure_boot_standin": "/srv/secure-boot-sysfs",
                    "nvidia_driver_version_change": "refuse",
                },
            },
            before,
        )
    finally:
        signed.run_expect([0], "cp /root/dpkg-status.before /var/lib/dpkg/status")
        dkms.run_expect([0], "cp /root/dpkg-status.before /var/lib/dpkg/status")
