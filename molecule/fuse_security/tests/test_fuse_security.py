"""Verify FUSE without privileged mode: a real bindfs mount in a non-privileged nested container."""

from __future__ import annotations

import json
import sys
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
from playbook_runner import run_playbook

IMAGE = "gpunode-test/fuse:latest"
FUSE_PROFILE = "/etc/docker/seccomp/fuse.json"
NOMOUNT_PROFILE = "/etc/docker/seccomp/fuse-nomount.json"
MOUNT_AND_READ = "mkdir -p /src /mnt/b && echo hello-through-fuse > /src/file && bindfs /src /mnt/b && cat /mnt/b/file"


def _nested(host, *options: str):
    return host.run(
        "docker run --rm --network none "
        + " ".join(options)
        + f" {IMAGE} sh -c '{MOUNT_AND_READ}; grep /mnt/b /proc/mounts'"
    )


def test_fuse_module_is_persisted_for_boot(host):
    conf = host.file("/etc/modules-load.d/fuse.conf")
    assert conf.exists
    assert "fuse" in conf.content_string.split()


def test_dev_fuse_is_present(host):
    assert host.run("test -c /dev/fuse").rc == 0, "/dev/fuse is not a character device"


def test_seccomp_profile_is_plain_oci_with_the_mount_family(host):
    for path in (FUSE_PROFILE, "/var/lib/kubelet/seccomp/profiles/fuse.json"):
        profile = json.loads(host.file(path).content_string)
        assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
        assert not {"archMap", "includes", "excludes"} & set(profile), path
        allowed = {n for rule in profile["syscalls"] if rule["action"] == "SCMP_ACT_ALLOW" for n in rule["names"]}
        assert {"mount", "umount2", "read", "openat"} <= allowed, path


def test_non_privileged_container_mounts_fuse_with_the_profile(host):
    out = _nested(host, "--device /dev/fuse", "--cap-add SYS_ADMIN", f"--security-opt seccomp={FUSE_PROFILE}")
    assert out.rc == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "hello-through-fuse"
    assert " fuse" in lines[1], lines  # /proc/mounts shows a fuse mount at /mnt/b
    privileged = host.run(f"docker inspect --format '{{{{.HostConfig.Privileged}}}}' {IMAGE}")
    assert privileged.rc != 0 or "true" not in privileged.stdout


def test_without_dev_fuse_the_mount_fails(host):
    out = _nested(host, "--cap-add SYS_ADMIN", f"--security-opt seccomp={FUSE_PROFILE}")
    assert out.rc != 0
    assert "hello-through-fuse" not in out.stdout
    assert "fuse" in (out.stdout + out.stderr).lower()


def test_a_profile_without_the_mount_family_blocks_the_mount(host):
    out = _nested(host, "--device /dev/fuse", "--cap-add SYS_ADMIN", f"--security-opt seccomp={NOMOUNT_PROFILE}")
    assert out.rc != 0
    assert "hello-through-fuse" not in out.stdout
    # libfuse falls back to fusermount when mount(2) is refused; a plain mount(2)
    # shows that the profile is what refuses it (and allows it with the fuse profile)
    plain = (
        "docker run --rm --network none --cap-add SYS_ADMIN --security-opt seccomp={} "
        + IMAGE
        + (" sh -c 'mkdir -p /mnt/t && mount -t tmpfs none /mnt/t && echo mounted'")
    )
    refused = host.run(plain.format(NOMOUNT_PROFILE))
    assert refused.rc != 0
    assert "permission denied" in refused.stderr.lower(), refused.stderr  # busybox's words for EPERM
    allowed = host.run(plain.format(FUSE_PROFILE))
    assert allowed.rc == 0, allowed.stderr
    assert allowed.stdout.strip() == "mounted"


def test_apparmor_profile_compiles_in_the_node(host):
    profile = host.file("/etc/apparmor.d/fuse")
    assert profile.exists
    rules = [line.strip() for line in profile.content_string.splitlines() if not line.strip().startswith("#")]
    assert "deny mount," not in rules
    assert "mount fstype=fuse," in rules and "mount fstype=fuse.*," in rules
    assert "umount," in rules
    compiled = host.run("apparmor_parser -Q -K /etc/apparmor.d/fuse")
    assert compiled.rc == 0, compiled.stderr


def test_a_broken_extra_apparmor_profile_is_refused_and_not_written(host):
    before = host.check_output("ls -1 /etc/apparmor.d")
    broken = "profile gpunode-broken flags=(attach_disconnected) {\n  file\n  this is not a rule\n}\n"
    run = run_playbook(
        host, SCENARIO / "converge.yml", {"security_profiles_apparmor_extra": {"gpunode-broken": broken}}
    )
    assert run.returncode != 0
    said = " ".join(run.stdout.split())  # the callback may wrap long messages
    assert "AppArmor profile 'gpunode-broken' refused, nothing was written for it to /etc/apparmor.d" in said, said
    assert not host.file("/etc/apparmor.d/gpunode-broken").exists
    assert host.check_output("ls -1 /etc/apparmor.d") == before
