"""Verify FUSE without privileged mode: a real bindfs mount in a non-privileged nested container."""

from __future__ import annotations

import json
import sys
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
from fuse_probes import ESCAPE, MOUNT_AND_READ
from playbook_runner import folded, run_playbook

IMAGE = "gpunode-test/fuse:latest"
FUSE_PROFILE = "/etc/docker/seccomp/fuse.json"
NOMOUNT_PROFILE = "/etc/docker/seccomp/fuse-nomount.json"
# runc's masked and read-only paths (runc libcontainer/specconv defaults), and paths a FUSE pod unmounts.
RUNC_MASKED = [
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
]
RUNC_READ_ONLY = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
KERNEL_SETTINGS = [
    "kernel/threads-max",
    "kernel/softlockup_panic",
    "kernel/sched_rt_runtime_us",
    "kernel/numa_balancing",
    "kernel/sysrq",
    "kernel/timer_migration",
    "kernel/shmmax",
    "vm/overcommit_memory",
]


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
    for top in ("/proc", "/sys", "/dev"):
        assert f"deny umount {top}{{,/,/**}}," in rules, rules
    assert "deny @{PROC}/sys/** w," in [rule.split("#")[0].strip() for rule in rules]
    compiled = host.run("apparmor_parser -Q -K /etc/apparmor.d/fuse")
    assert compiled.rc == 0, compiled.stderr


def test_a_broken_extra_apparmor_profile_is_refused_and_not_written(host):
    before = host.check_output("ls -1 /etc/apparmor.d")
    broken = "profile gpunode-broken flags=(attach_disconnected) {\n  file\n  this is not a rule\n}\n"
    run = run_playbook(
        host, SCENARIO / "converge.yml", {"security_profiles_apparmor_extra": {"gpunode-broken": broken}}
    )
    assert run.returncode != 0
    said = folded(run)
    assert "AppArmor profile 'gpunode-broken' refused, nothing was written for it to /etc/apparmor.d" in said, said
    # This kernel has no AppArmor: the role says that SYS_ADMIN FUSE pods are not confined and points to user namespaces
    assert "so FUSE pods with CAP_SYS_ADMIN are NOT confined here" in said, said
    assert "Run FUSE pods in user namespaces (hostUsers: false" in said
    assert not host.file("/etc/apparmor.d/gpunode-broken").exists
    assert host.check_output("ls -1 /etc/apparmor.d") == before


def test_apparmor_umount_and_proc_sys_rules_match_as_intended(host):
    """AppArmor's own matcher (python3-apparmor on the node) over the rules of the installed profile."""
    queries = [
        {"kind": "umount", "path": p} for p in [*RUNC_MASKED, *RUNC_READ_ONLY, "/proc", "/sys", "/dev", "/dev/shm"]
    ]
    queries += [{"kind": "umount", "path": p} for p in ["/mnt/b", "/data/s3", "/tmp/fuse", "/var/lib/app/mnt"]]
    queries += [{"kind": "write", "path": f"/proc/sys/{k}"} for k in KERNEL_SETTINGS]
    queries += [{"kind": "write", "path": p} for p in ["/mnt/b/file", "/tmp/x", "/proc/1234/oom_score_adj"]]
    script = (SCENARIO / "tests" / "apparmor_match.py").read_text()
    host.run("mkdir -p /tmp/gpunode-test")
    host.run(f"cat > /tmp/gpunode-test/apparmor_match.py <<'EOF'\n{script}\nEOF")
    out = host.run(
        f"echo '{json.dumps(queries)}' | /usr/bin/python3 /tmp/gpunode-test/apparmor_match.py /etc/apparmor.d/fuse"
    )
    assert out.rc == 0, out.stderr
    allowed = {(r["kind"], r["path"]): r["allowed"] for r in json.loads(out.stdout)}
    refused = [k for k, ok in allowed.items() if ok is False]
    assert sorted(refused) == sorted(
        [("umount", p) for p in [*RUNC_MASKED, *RUNC_READ_ONLY, "/proc", "/sys", "/dev", "/dev/shm"]]
        + [("write", f"/proc/sys/{k}") for k in KERNEL_SETTINGS]
    ), refused


def test_sys_admin_path_without_apparmor_is_not_confined(host):
    """Why the doctor says "seccomp only: not confined" here: under the FUSE seccomp profile alone a SYS_ADMIN
    container unmasks /proc/sys (this kernel has no AppArmor to stop it). Only its own /proc/sys mount is
    touched; the write goes to a value it reads first and writes back unchanged."""
    keep = ESCAPE
    out = host.run(
        "docker run --rm --network none --device /dev/fuse --cap-add SYS_ADMIN "
        f"--security-opt seccomp={FUSE_PROFILE} {IMAGE} sh -c '{keep}'"
    )
    assert "UNMASKED-PROC-SYS" in out.stdout, out.stdout + out.stderr
    assert "WROTE-THREADS-MAX" in out.stdout, out.stdout + out.stderr


def test_user_namespace_path_mounts_fuse_and_cannot_touch_kernel_settings(host):
    """The recommended path: the FUSE mount happens in a new user namespace (what hostUsers: false gives a pod).
    The outer nested container stands for the runtime that creates the namespace (runc 1.1 and containerd 1.6 of
    this node cannot do it for pods), so it runs unconfined; everything after unshare -Urm is the pod."""
    inner = f"{MOUNT_AND_READ}; grep /mnt/b /proc/mounts; {ESCAPE}; echo DONE"
    out = host.run(
        "docker run --rm --network none --device /dev/fuse --cap-add SYS_ADMIN --security-opt seccomp=unconfined "
        f"{IMAGE} unshare -Urm sh -c '{inner}'"
    )
    assert out.rc == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "hello-through-fuse", lines
    assert " fuse" in lines[1], lines
    assert lines[-1] == "DONE", lines
    assert "WROTE-THREADS-MAX" not in out.stdout, out.stdout
    assert "UNMASKED-PROC-SYS" not in out.stdout, out.stdout
    ids = host.run(
        "docker run --rm --network none --device /dev/fuse --cap-add SYS_ADMIN --security-opt seccomp=unconfined "
        f"{IMAGE} unshare -Urm cat /proc/self/uid_map"
    )
    assert ids.stdout.split()[:2] == ["0", "0"] and ids.stdout.split()[2] == "1", ids.stdout  # root only inside


def test_a_string_for_a_list_variable_is_refused_before_anything_is_written(host):
    before = host.check_output("sha256sum /etc/apparmor.d/fuse /etc/docker/seccomp/fuse.json")
    run = run_playbook(host, SCENARIO / "converge.yml", {"security_profiles_apparmor_mount_fstypes": "fuse.*"})
    assert run.returncode != 0
    said = folded(run)
    assert "security_profiles_apparmor_mount_fstypes must be a list of str" in said, said[-2000:]
    assert "changed=0" in said
    assert host.check_output("sha256sum /etc/apparmor.d/fuse /etc/docker/seccomp/fuse.json") == before


def test_the_doctor_says_seccomp_only_not_confined_on_this_kernel(host):
    report = json.loads(host.file("/var/lib/gpu-node-provisioning/validate.json").content_string)
    rows = {check["check"]: check for check in report["checks"]}
    row = rows["FUSE confinement"]
    assert row["status"] == "warn"
    assert row["detail"].startswith("seccomp only: not confined (the kernel has no AppArmor;"), row
    assert "containerd >= 2.0 or CRI-O >= 1.25 (has containerd 1.6" in row["detail"], row
    assert "runc >= 1.2 or crun >= 1.9 (has runc 1.1" in row["detail"], row
    assert "Linux >= 6.3" not in row["detail"], row  # the build machines' kernel is new enough
    assert rows["docker: GPU isolation (default, CAP_SYS_ADMIN)"]["status"] == "skipped"  # no GPU here
    table = host.file("/var/lib/gpu-node-provisioning/validate.txt").content_string
    assert "seccomp only: not confined" in table
