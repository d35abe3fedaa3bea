"""Verify the nvidia_driver role on the node where installation is forced: a real DKMS build."""

from __future__ import annotations

from conftest import NEW_KERNEL

testinfra_hosts = ["ansible://drv-debian12"]

DRIVER_PACKAGES = ("nvidia-driver", "nvidia-kernel-dkms")
MOK_CN = "drv-debian12 MOK (molecule)"  # nvidia_driver_mok_common_name in molecule.yml
MOK_KEY, MOK_CERT = "/var/lib/dkms/mok.key", "/var/lib/dkms/mok.pub"  # where Debian's dkms 3.0.10 reads them


def test_apt_sources_gained_the_components_and_kept_the_comment(host):
    sources = host.file("/etc/apt/sources.list").content_string
    assert sources.startswith("# Admin note: local mirror switch planned, keep this comment.\n")
    for line in (entry for entry in sources.splitlines() if entry.startswith("deb ")):
        assert line.split()[3:] == ["main", "contrib", "non-free", "non-free-firmware"], line


def test_dkms_built_and_installed_the_module(host):
    status = host.check_output("dkms status")
    lines = [line for line in status.splitlines() if line.startswith("nvidia")]
    assert lines, status
    assert all(line.rstrip().endswith("installed") for line in lines), status
    kernel = host.check_output("ls /lib/modules | grep -- -amd64 | sort -V | tail -1")
    assert kernel in status
    modules = host.check_output(f"find /lib/modules/{kernel}/updates -name 'nvidia*.ko*'")
    assert "nvidia-current.ko" in modules or "nvidia.ko" in modules, modules


def test_driver_packages_are_installed_and_held(host):
    selections = host.check_output("dpkg --get-selections " + " ".join(DRIVER_PACKAGES))
    for package in DRIVER_PACKAGES:
        assert [package, "hold"] in [line.split() for line in selections.splitlines()], selections
        assert host.package(package).is_installed


def test_the_installed_kernel_meta_package_is_held_with_the_driver(host):
    """nvidia_driver_hold_kernel on Debian: linux-headers-amd64 (installed; linux-image-amd64 is not, in a container) is
    held, and the role recorded what it held so that turning the variable off releases only that (shown on Ubuntu)."""
    selections = host.check_output("dpkg --get-selections linux-headers-amd64")
    assert selections.split() == ["linux-headers-amd64", "hold"], selections
    record = host.file("/var/lib/gpu-node-provisioning/nvidia_driver-kernel-hold.json")
    assert record.exists and record.mode == 0o644, record
    assert "linux-headers-amd64" in record.content_string, record.content_string


def test_nouveau_is_blacklisted(host):
    blacklist = host.file("/etc/modprobe.d/blacklist-nouveau.conf").content_string
    assert "blacklist nouveau" in blacklist
    assert "options nouveau modeset=0" in blacklist


def test_persistenced_is_enabled(host):
    assert host.service("nvidia-persistenced").is_enabled


def _standin_kernel(host) -> str:
    images = host.check_output("ls /boot | sed -n 's/^vmlinuz-//p'").split()
    assert len(images) == 1, images
    return images[0]


def test_the_installed_kernel_boots_with_the_installed_drivers_module(host):
    kernel = _standin_kernel(host)  # the stand-in image of the kernel whose headers DKMS built against
    module = host.check_output(f"find /lib/modules/{kernel}/updates -name 'nvidia-current.ko*' | head -1")
    assert module, f"no NVIDIA module for the installed kernel {kernel}"
    driver = host.check_output("dpkg-query -W -f '${Version}' nvidia-kernel-dkms").split("-")[0]
    assert host.check_output(f"modinfo -F version {module}") == driver


def test_nvidia_peermem_loads_at_boot_from_the_module_dkms_built_and_signed(host):
    """nvidia_driver_peermem: the boot-time load names nvidia-peermem. Debian renames the module nvidia-current-peermem;
    its modprobe config (nvidia-kernel-support) turns the name into that module, which DKMS built and signed with the
    MOK for the kernel the node boots."""
    assert "nvidia-peermem" in host.file("/etc/modules-load.d/nvidia-peermem.conf").content_string.split()
    kernel = _standin_kernel(host)
    resolved = host.run(f"modprobe --set-version {kernel} --show-depends nvidia-peermem")
    assert resolved.rc == 0, resolved.stderr
    assert "nvidia-current-peermem" in resolved.stdout, resolved.stdout
    module = host.check_output(f"modinfo -k {kernel} -F filename nvidia-current-peermem")
    assert module.startswith(f"/lib/modules/{kernel}/updates/"), module
    assert host.check_output(f"modinfo -F signer {module}") == MOK_CN


def test_a_newer_kernel_without_headers_fails_the_run_before_any_reboot(first_rerun):
    # Mutation (conftest.py): an update installed a newer kernel image (TEST STAND-IN) without its headers; the boot
    # loader starts it next and it has no NVIDIA module, and the archive has no headers for it.
    assert first_rerun.recap["drv-debian12"]["failed"] == 1, first_rerun.stdout
    assert (
        f"drv-debian12 would boot without its NVIDIA driver: kernel {NEW_KERNEL} (the kernel the boot loader starts "
        f"next, newest /boot/vmlinuz-*) has no NVIDIA module and DKMS could not build one: its headers "
        f"linux-headers-{NEW_KERNEL} are not installed and not in the package sources;" in first_rerun.said
    ), first_rerun.stdout
    assert "Do not reboot into such a kernel." in first_rerun.said, first_rerun.stdout
    assert first_rerun.recap["drv-debian12"]["changed"] == 0, first_rerun.stdout


def _cert(host, *options: str) -> str:
    return host.check_output(f"openssl x509 -inform DER -in {MOK_CERT} -noout " + " ".join(options))


def test_the_role_created_the_mok_where_dkms_reads_it(host):
    assert _cert(host, "-subject", "-nameopt", "RFC2253") == f"subject=CN={MOK_CN}"
    assert "Public-Key: (2048 bit)" in _cert(host, "-text")
    key = host.file(MOK_KEY)
    assert (key.user, key.group, key.mode) == ("root", "root", 0o600)
    host.run_expect([0], f"openssl rsa -in {MOK_KEY} -check -noout")
    dropin = host.file("/etc/dkms/framework.conf.d/nvidia_driver-mok.conf").content_string
    assert f'mok_signing_key="{MOK_KEY}"' in dropin and f'mok_certificate="{MOK_CERT}"' in dropin, dropin
    # merged, not clobbered: Debian's framework.conf is the package's own (dpkg --verify prints changed files)
    assert host.check_output("dpkg --verify dkms") == ""


def test_dkms_signed_the_built_module_with_that_mok(host):
    kernel = _standin_kernel(host)
    modules = host.check_output(f"find /lib/modules/{kernel}/updates -name 'nvidia-current*.ko*'").split()
    assert any(module.split("/")[-1].startswith("nvidia-current.ko") for module in modules), modules
    for module in modules:
        assert host.check_output(f"modinfo -F signer {module}") == MOK_CN, module


def test_the_stand_in_mokutil_was_asked_to_import_exactly_that_certificate_once(host):
    fingerprint = _cert(host, "-fingerprint", "-sha1").split("=", 1)[1].lower()
    imports = host.file("/var/lib/mokutil-standin/imports.log").content_string.splitlines()
    assert len(imports) == 1, imports  # queued once: the idempotence run and the re-runs found it queued
    assert imports[0].startswith(fingerprint + " ") and imports[0].endswith(" password-given"), imports
    assert MOK_CN in imports[0], imports
    host.run_expect([0], f"cmp {MOK_CERT} /var/lib/mokutil-standin/pending/{fingerprint}.der")
    calls = host.file("/var/lib/mokutil-standin/calls.log").content_string.splitlines()
    assert calls.count(f"--import {MOK_CERT}") == 1, calls


def test_the_report_warns_that_debians_535_is_past_its_end_of_life(first_rerun):
    """Debian 12's archive packages 535 only (nvidia_driver_debian_cuda_repo false here), whose support ended in June
    2026: the preflight's report says so, and names the supported branches."""
    assert (
        "drv-debian12 gets the proprietary kernel modules" in first_rerun.said
        or "drv-debian12 gets the open kernel modules" in first_rerun.said
    ), first_rerun.stdout
    warning = "WARNING: NVIDIA driver branch 535 reached its end of life in 2026-06"
    assert warning in first_rerun.said, first_rerun.stdout
