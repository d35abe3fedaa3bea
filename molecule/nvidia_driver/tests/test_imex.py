"""Verify NVIDIA IMEX with the driver (issue 39): Ubuntu's real nvidia-imex-<branch> from the archive at the
driver's exact version and held with it, run by the host on drv-ubuntu2404-signed (580) and drv-ubuntu2604-signed
(595) (nvidia_driver_imex host: unit enabled, the shipped config.cfg merged, nodes_config.cfg written) and masked
for NVIDIA's DRA driver on drv-ubuntu2604 (580; nvidia_driver_imex dra); and an IMEX package apart from the driver
refused with the fix."""

from __future__ import annotations

import pytest
from conftest import IMEX_APART, SIGNED_BRANCH, node

BRANCH = {**SIGNED_BRANCH, "drv-ubuntu2604": "580"}
testinfra_hosts = [f"ansible://{name}" for name in BRANCH]
CONFIG = "/etc/nvidia-imex/config.cfg"
NODES = "/etc/nvidia-imex/nodes_config.cfg"
BACKUPS = "/var/backups/gpu-node-provisioning"


def _version(host, package: str) -> str:
    return host.check_output(f"dpkg-query -W -f '${{Version}}' {package}")


def test_imex_has_the_drivers_exact_version_and_is_held(host):
    branch = BRANCH[host.backend.get_hostname()]
    assert _version(host, f"nvidia-imex-{branch}") == _version(host, f"nvidia-kernel-common-{branch}-server")
    assert host.check_output(f"dpkg --get-selections nvidia-imex-{branch}").split() == [f"nvidia-imex-{branch}", "hold"]


def test_host_imex_is_enabled_with_its_config_merged(host):
    if host.backend.get_hostname() not in SIGNED_BRANCH:
        pytest.skip("IMEX is run by the host on the signed nodes")
    assert host.check_output("systemctl is-enabled nvidia-imex.service") == "enabled"
    assert host.file(NODES).content_string == "192.0.2.11\n192.0.2.12\n"
    merged = host.file(CONFIG).content_string
    assert "\nSERVER_PORT=50010\n" in merged
    assert merged.count("\nIMEX_NODE_CONFIG_FILE=") == 1
    # merged, not overwritten: the package's file (the one backup the write made) differs in that one line only
    backups = host.check_output(f"find {BACKUPS}{CONFIG.rsplit('/', 1)[0]} -name 'config.cfg.*~'").split()
    assert len(backups) == 1, backups
    diff = host.run(f"diff {backups[0]} {CONFIG}")
    assert diff.rc == 1
    assert [line for line in diff.stdout.splitlines() if line[:1] in "<>"] == [
        "< SERVER_PORT=50000",
        "> SERVER_PORT=50010",
    ]


def test_dra_imex_is_masked(host):
    if host.backend.get_hostname() != "drv-ubuntu2604":
        pytest.skip("IMEX is masked for the DRA driver on drv-ubuntu2604")
    assert host.run("systemctl is-enabled nvidia-imex.service").stdout.strip() == "masked"
    assert host.run("systemctl is-active nvidia-imex.service").stdout.strip() == "inactive"
    # the host's config stays as the package shipped it: the DRA driver's daemons bring their own
    assert not host.file(NODES).exists


def test_imex_apart_from_the_driver_fails_the_refusing_run_with_the_fix(second_rerun):
    # Mutation (conftest.py): the package database said nvidia-imex-580 is 580.95.05 on drv-ubuntu2604 (as after a
    # driver update that left it behind); the refusing run fails before changing anything and names the fix.
    dkms = node("drv-ubuntu2604")
    assert second_rerun.before["imex"] == IMEX_APART
    driver = _version(dkms, "nvidia-kernel-common-580-server").split("-")[0]
    said = second_rerun.said
    assert second_rerun.recap["drv-ubuntu2604"]["failed"] == 1, second_rerun.stdout
    assert f"drv-ubuntu2604 has NVIDIA IMEX 580.95.05 (nvidia-imex-580) but NVIDIA driver {driver}." in said, said
    assert f"apt-get install --allow-change-held-packages --allow-downgrades nvidia-imex-580={driver}-*" in said
    assert second_rerun.recap["drv-ubuntu2604"]["changed"] == 0, second_rerun.stdout
    assert _version(dkms, "nvidia-imex-580").startswith(driver + "-")
