"""Verify the nvidia_driver role on Debian 13 with NVIDIA's CUDA repository (its TEST STAND-IN, prepare.yml)."""

from __future__ import annotations

from conftest import cuda_files

testinfra_hosts = ["ansible://drv-debian13"]

PACKAGES = ("nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-persistenced")
SOURCE = "/etc/apt/sources.list.d/nvidia-driver-cuda.list"
KEYRING = "/usr/share/keyrings/nvidia-driver-cuda-keyring.gpg"


def test_the_branch_pin_takes_the_newest_580_not_the_newer_branch(host):
    """The suite has 580.95.05, 580.105.08 and 595.58.03: without nvidia_driver_version the role stays on 580."""
    for package in PACKAGES:
        assert host.check_output(f"dpkg-query -W -f '${{Version}}' {package}") == "580.105.08-1", package
    assert not host.package("nvidia-kernel-dkms").is_installed  # the open flavour's package, not both


def test_the_driver_packages_are_held(host):
    listing = host.check_output("dpkg --get-selections " + " ".join(PACKAGES))
    selections = [line.split() for line in listing.splitlines()]
    for package in PACKAGES:
        assert [package, "hold"] in selections, selections


def test_they_are_the_stand_ins_and_say_so(host):
    assert host.file("/usr/share/doc/nvidia-driver-cuda/STAND-IN").content_string.startswith("TEST STAND-IN package")


def test_the_source_is_signed_by_the_checked_key_only(host):
    source = host.file(SOURCE).content_string
    entries = [line for line in source.splitlines() if line.startswith("deb ")]
    assert entries == [f"deb [signed-by={KEYRING}] http://127.0.0.1:8766/cuda/debian13/x86_64/ /"], source
    expected = host.file("/srv/cuda-standin/fingerprint").content_string.strip()
    listed = host.check_output(
        f"gpg --batch --show-keys --with-colons {KEYRING} | awk -F: '$1 == \"fpr\" {{print $10; exit}}'"
    )
    assert listed == expected
    assert host.file(KEYRING).mode == 0o644
    # the key went into no global keyring
    global_keys = host.run("gpg --batch --show-keys /etc/apt/trusted.gpg.d/* 2>&1").stdout
    assert "CUDA repository TEST STAND-IN" not in global_keys


def test_persistenced_is_enabled(host):
    assert host.service("nvidia-persistenced").is_enabled


def test_a_key_with_another_fingerprint_is_refused_and_nothing_written(host, first_rerun):
    assert first_rerun.recap["drv-debian13"]["failed"] == 1, first_rerun.stdout
    expects = "nvidia_driver_cuda_repo_key_fingerprint expects exactly 0123456789ABCDEF"
    assert expects in first_rerun.said, first_rerun.stdout
    assert "Nothing was written and the repository is not trusted" in first_rerun.said
    assert cuda_files(host) == first_rerun.before["cuda_files"]


def test_a_repository_signed_by_another_key_is_refused_and_nothing_written(host, second_rerun):
    assert second_rerun.recap["drv-debian13"]["failed"] == 1, second_rerun.stdout
    assert "apt refused NVIDIA's CUDA repository http://127.0.0.1:8766/rogue/debian13/x86_64/" in second_rerun.said, (
        second_rerun.stdout
    )
    assert cuda_files(host) == second_rerun.before["cuda_files"]
    assert "/cuda/debian13/" in host.file(SOURCE).content_string
