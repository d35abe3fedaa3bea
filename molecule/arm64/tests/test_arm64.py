"""The arm64 node (NVIDIA Grace: GH200 and GB200 are aarch64) under qemu-user: the roles ran for real on it in
converge (molecule/arm64/molecule.yml says which), with arm64 binaries throughout (NVIDIA's toolkit: where its arm64
build is at hand, else the labelled script stand-ins, molecule/arm64/prepare.yml)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.upstream import upstream_dir

testinfra_hosts = ["ansible://arm-debian12"]

REPORT = "/var/lib/gpu-node-provisioning/validate.json"
# NVIDIA's toolkit cross-built for arm64 (scripts/build-upstream.sh nvidia-container-toolkit-arm64), where it is: in
# the upstream builds' directory as .config/molecule/config.yml finds it (gpunode_upstream_dir)
ARM64_BUILD = upstream_dir() / "nvidia-container-toolkit" / "bin-arm64" / "nvidia-container-runtime"
TOOLS = ["nvidia-ctk", "nvidia-container-runtime", "nvidia-container-runtime-hook", "nvidia-cdi-hook"]


def _checks(host) -> dict[str, dict]:
    report = json.loads(host.file(REPORT).content_string)
    assert report["host"] == "arm-debian12"
    return {c["check"]: c for c in report["checks"]}


def test_the_node_is_arm64(host):
    assert host.check_output("uname -m") == "aarch64"
    assert host.check_output("dpkg --print-architecture") == "arm64"
    # every binary is arm64, the Python that runs the modules included (ELF machine 0xb7: AArch64)
    assert host.check_output("od -An -j18 -N2 -tx2 $(readlink -f /usr/bin/python3)").strip() == "00b7"


def test_node_facts_on_arm64(host):
    facts = host.ansible("gpu_node_facts", check=False)["ansible_facts"]["gpu_node"]
    assert facts["has_gpu"] is False
    gathered = host.ansible("setup", "gather_subset=min", check=False)["ansible_facts"]
    assert gathered["ansible_architecture"] == "aarch64"


def test_toolkit_packages_are_arm64_and_say_what_they_carry(host):
    """arm64 packages from the signed stand-in repository, carrying NVIDIA's arm64 build where the upstream builds'
    directory has it, else the labelled script stand-ins (molecule/arm64/prepare.yml): the STAND-IN file says which."""
    for package in ("nvidia-container-toolkit", "nvidia-container-toolkit-base"):
        assert host.package(package).is_installed, package
        assert host.check_output(f"dpkg-query -W -f '${{Architecture}}' {package}") == "arm64", package
    said = host.file("/usr/share/doc/nvidia-container-toolkit-base/STAND-IN").content_string.splitlines()[0]
    scripts = "script" in said.lower()
    assert scripts is not ARM64_BUILD.is_file(), (said, ARM64_BUILD)
    if scripts:
        for tool in TOOLS:
            assert "TEST STAND-IN" in host.file(host.check_output(f"command -v {tool}")).content_string, tool


def test_nvidia_runtime_is_the_arm64_build_in_arm64_packages(host):
    if not ARM64_BUILD.is_file():
        pytest.skip(
            f"no arm64 build of NVIDIA's toolkit in {ARM64_BUILD.parent} (the packages carry the labelled script "
            "stand-ins): scripts/build-upstream.sh nvidia-container-toolkit-arm64 cross-builds it where its source "
            "can be fetched"
        )
    for tool in TOOLS:
        path = host.check_output(f"command -v {tool}")
        assert host.check_output(f"od -An -j18 -N2 -tx2 {path}").strip() == "00b7", tool
    version = host.check_output("nvidia-ctk --version")
    assert "1.20.0" in version, version


def test_containerd_registers_nvidia_and_keeps_runc_the_default(host):
    dump = host.check_output("containerd config dump")
    assert "runtimes.nvidia" in dump
    assert "/usr/bin/nvidia-container-runtime" in dump
    assert "default_runtime_name = 'runc'" in dump or 'default_runtime_name = "runc"' in dump
    assert host.service("containerd").is_running


def test_the_doctor_passes_on_arm64(host):
    report = json.loads(host.file(REPORT).content_string)
    assert report["summary"]["fail"] == 0, json.dumps(report, indent=1)
    checks = _checks(host)
    for check in ("nvidia runtime", "default runtime"):
        assert checks[f"containerd: {check}"]["status"] == "ok", checks[f"containerd: {check}"]
    for name in ("NVIDIA driver", "nvidia-smi"):
        assert checks[name]["status"] == "skipped" and checks[name]["detail"].startswith("no GPU"), checks[name]
