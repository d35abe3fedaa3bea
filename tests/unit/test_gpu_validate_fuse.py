"""The doctor's fuse, security and confinement families (plugins/module_utils/gpu_validate/fuse.py).

Each check is a function of its inputs (parameters, node facts, command results, files); the tables give each
row a passing case and the failing cases. FakeNode (conftest.py) answers the commands and file reads."""

from __future__ import annotations

import pytest
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.fuse import (
    check_confinement,
    check_fuse,
    check_security,
    confinement_row,
    seccomp_row,
)
from conftest import GPU_NODE, FakeNode, node, params, row, stack_facts
from test_gpu_validate_kubelet import DROPIN, MAIN

# ---- fuse --------------------------------------------------------------------------------------------------

FUSE_FIX = "Run site.yml --tags fuse (loads the fuse module)"


@pytest.mark.parametrize(
    ("fake", "expected"),
    [
        (FakeNode(devices=["/dev/fuse"]), row("/dev/fuse", "ok", "character device, mode 0666")),
        (FakeNode(files={"/dev/fuse": ""}), row("/dev/fuse", "fail", "exists but is not a character device", FUSE_FIX)),
        (
            FakeNode(),
            row(
                "/dev/fuse",
                "fail",
                "missing: FUSE pods (device plugin resource github.com/fuse) cannot mount",
                FUSE_FIX,
            ),
        ),
    ],
)
def test_fuse(fake, expected):
    assert check_fuse(params(), GPU_NODE, fake) == [expected]


# ---- security ----------------------------------------------------------------------------------------------

PROFILES = "/sys/kernel/security/apparmor/profiles"
SECCOMP = "/var/lib/kubelet/seccomp/profiles/fuse.json"
SECCOMP_OK = row("seccomp profile fuse", "ok", f"{SECCOMP} (localhostProfile: profiles/fuse.json)")
AA = "AppArmor profile fuse"


@pytest.mark.parametrize(
    ("p", "facts", "files", "expected"),
    [
        (
            {},
            GPU_NODE,
            {"/etc/apparmor.d/fuse": "", PROFILES: "docker-default (enforce)\nfuse (complain)\n"},
            row(AA, "ok", "installed and loaded (complain)"),
        ),
        (
            {},
            GPU_NODE,
            {"/etc/apparmor.d/fuse": "", PROFILES: "docker-default (enforce)\nfuse-other (enforce)\n"},
            row(
                AA,
                "fail",
                "installed in /etc/apparmor.d but not loaded",
                "apparmor_parser -r /etc/apparmor.d/fuse (or run site.yml --tags apparmor)",
            ),
        ),
        (
            {},
            GPU_NODE,
            {PROFILES: "fuse (enforce)\n"},
            row(AA, "fail", "/etc/apparmor.d/fuse is missing", "Run site.yml --tags apparmor"),
        ),
        (
            {},
            node(apparmor_enabled=False, apparmor={"kernel_enabled": False}),
            {"/etc/apparmor.d/fuse": ""},
            row(
                AA,
                "warn",
                "installed, not loaded: the kernel has AppArmor disabled; pods that reference it do not start here",
                "Boot with AppArmor enabled (apparmor=1 security=apparmor), or do not schedule"
                " AppArmor-confined FUSE pods here",
            ),
        ),
        (
            {},
            node(apparmor_enabled=False, apparmor={"kernel_enabled": True}),
            {"/etc/apparmor.d/fuse": ""},
            row(
                AA,
                "warn",
                "installed, not loaded: the kernel has AppArmor enabled but no securityfs;"
                " pods that reference it do not start here",
                "Boot with AppArmor enabled (apparmor=1 security=apparmor), or do not schedule"
                " AppArmor-confined FUSE pods here",
            ),
        ),
        (
            {"apparmor_os": False},
            GPU_NODE,
            {},
            row(AA, "skipped", "this OS has no AppArmor (SELinux confines containers)"),
        ),
    ],
)
def test_apparmor(p, facts, files, expected):
    rows = check_security(params(**p), facts, FakeNode(files={**files, SECCOMP: "{}"}))
    assert rows == [expected, SECCOMP_OK]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"defaultAction": "SCMP_ACT_ERRNO"}', SECCOMP_OK),
        (None, row("seccomp profile fuse", "fail", f"{SECCOMP} is missing", "Run site.yml --tags seccomp")),
        (
            "[]",
            row(
                "seccomp profile fuse",
                "fail",
                f"{SECCOMP} is a JSON list, not an object",
                "Run site.yml --tags seccomp",
            ),
        ),
        (
            "",
            row(
                "seccomp profile fuse",
                "fail",
                f"{SECCOMP} is not valid JSON (Expecting value: line 1 column 1 (char 0))",
                "Run site.yml --tags seccomp",
            ),
        ),
    ],
)
def test_seccomp(text, expected):
    assert seccomp_row(params(), text) == expected


# ---- confinement -------------------------------------------------------------------------------------------


OLD_STACK_NEEDS = (
    "Linux >= 6.3 (has 6.1.0-28-amd64); containerd >= 2.0 or CRI-O >= 1.25 (has containerd 1.6.20);"
    " runc >= 1.2 or crun >= 1.9 (has runc 1.1.5); a kubelet >= 1.30 (none installed)"
)
NO_CONFINEMENT_FIX = (
    "Meet what user namespaces need (above) and run FUSE pods with hostUsers: false (security_profiles"
    " README), or boot a kernel with AppArmor; until then schedule no SYS_ADMIN FUSE pods here"
)
NEW_STACK = {"kernel": "6.12.48", "containerd": "2.1.4", "runc": "1.3.0"}


@pytest.mark.parametrize(
    ("facts", "gates", "apparmor", "seccomp", "expected", "state"),
    [
        (
            stack_facts(**NEW_STACK, kubelet="1.33.1"),
            {},
            None,
            True,
            row(
                "FUSE confinement",
                "ok",
                "user namespaces: pods with hostUsers: false mount FUSE with CAP_SYS_ADMIN in their own user"
                " namespace only",
            ),
            "user_namespaces",
        ),
        (
            stack_facts(**NEW_STACK, kubelet="1.31.2"),
            {"UserNamespacesSupport": True},
            None,
            True,
            row(
                "FUSE confinement",
                "ok",
                "user namespaces: pods with hostUsers: false mount FUSE with CAP_SYS_ADMIN in their own user"
                " namespace only",
            ),
            "user_namespaces",
        ),
        (
            stack_facts(apparmor=True),
            {},
            "docker-default (enforce)\nfuse (enforce)\n",
            True,
            row(
                "FUSE confinement",
                "ok",
                "AppArmor + seccomp: SYS_ADMIN pods under AppArmor profile fuse and seccomp profile fuse.json;"
                f" user namespaces not possible: {OLD_STACK_NEEDS}",
            ),
            "apparmor",
        ),
        (
            stack_facts(apparmor=True),
            {},
            "fuse (complain)\n",  # loaded, but not enforcing
            True,
            row(
                "FUSE confinement",
                "warn",
                "seccomp only: not confined (AppArmor profile fuse is not loaded; seccomp cannot see mount types or"
                " paths, so a SYS_ADMIN pod can unmount /proc/sys and write host-wide kernel settings); user"
                f" namespaces not possible: {OLD_STACK_NEEDS}",
                NO_CONFINEMENT_FIX,
            ),
            "seccomp_only",
        ),
        (
            stack_facts(),
            {},
            None,
            True,
            row(
                "FUSE confinement",
                "warn",
                "seccomp only: not confined (the kernel has no AppArmor; seccomp cannot see mount types or"
                " paths, so a SYS_ADMIN pod can unmount /proc/sys and write host-wide kernel settings); user"
                f" namespaces not possible: {OLD_STACK_NEEDS}",
                NO_CONFINEMENT_FIX,
            ),
            "seccomp_only",
        ),
        (
            stack_facts(),
            {},
            None,
            False,
            row(
                "FUSE confinement",
                "fail",
                f"not possible: no seccomp profile fuse.json and user namespaces need {OLD_STACK_NEEDS}",
                NO_CONFINEMENT_FIX,
            ),
            "not_possible",
        ),
        (
            stack_facts(fuse=False),
            {},
            None,
            True,
            row("FUSE confinement", "fail", "not possible: /dev/fuse is missing", "Run site.yml --tags fuse"),
            "not_possible",
        ),
    ],
)
def test_confinement(facts, gates, apparmor, seccomp, expected, state):
    assert confinement_row(params(), facts, gates, apparmor, seccomp) == (expected, state)


def test_the_confinement_family_reads_the_gate_from_the_drop_in_over_the_main_file():
    facts = stack_facts(**NEW_STACK, kubelet="1.31.2")
    files = {
        MAIN: "kind: KubeletConfiguration\nfeatureGates:\n  UserNamespacesSupport: false\n",
        DROPIN: "featureGates:\n  UserNamespacesSupport: true  # on for FUSE pods\n",
        SECCOMP: "{}",
    }
    rows, state = check_confinement(params(), facts, FakeNode(files=files))
    assert state == "user_namespaces", rows
    files[DROPIN] = "featureGates: {}\n"
    rows, state = check_confinement(params(), facts, FakeNode(files=files))
    assert state == "seccomp_only", rows
    assert "UserNamespacesSupport: true (off by default in kubelet 1.31.2)" in rows[0]["detail"]
