"""Tests of the security_profiles role's data and code.

- plugins/filter/seccomp.py: the OCI structural check (`seccomp_profile_errors`) and the
  profile builder (`seccomp_oci_profile`).
- The FUSE seccomp profile, built from the role's vars/main.yml the way the role builds it
  (its own Jinja expressions, evaluated with the filter above).
- The AppArmor template, rendered with Jinja as Ansible's template module does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.plugins.filter.core import comment
from conftest import ROOT, load_module
from jinja2.nativetypes import NativeEnvironment

seccomp = load_module("seccomp", subdir="plugins/filter")

ROLE = ROOT / "roles" / "security_profiles"
ROLE_VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
ROLE_DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
BASE_RULES = ROLE_VARS["__security_profiles_seccomp_base_rules"]
MOUNT_RULES = ROLE_VARS["__security_profiles_seccomp_mount_rules"]
ARCHES = ROLE_VARS["__security_profiles_seccomp_arches"]
DOCKER_ONLY_KEYS = {"archMap", "includes", "excludes", "name", "comment", "defaultErrno"}
NEW_MOUNT_API = {"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr"}
ENOSYS = 38


def build_role_profiles(architecture: str) -> dict:
    """Evaluate the role's own expressions in vars/main.yml, as Ansible does at run time."""
    env = NativeEnvironment(undefined=jinja2.StrictUndefined)
    env.filters["seccomp_oci_profile"] = seccomp.seccomp_oci_profile
    context = dict(ROLE_VARS)
    context["ansible_facts"] = {"architecture": architecture}
    for name in (
        "__security_profiles_seccomp_node_arch",
        "__security_profiles_seccomp_nomount_profile",
        "__security_profiles_seccomp_fuse_profile",
    ):
        context[name] = env.from_string(ROLE_VARS[name].strip()).render(context)
    return {
        "fuse": context["__security_profiles_seccomp_fuse_profile"],
        "nomount": context["__security_profiles_seccomp_nomount_profile"],
    }


@pytest.fixture(scope="module")
def fuse_profile() -> dict:
    return build_role_profiles("x86_64")["fuse"]


@pytest.fixture(scope="module")
def nomount_profile() -> dict:
    return build_role_profiles("x86_64")["nomount"]


def allowed_names(profile: dict) -> set[str]:
    """Names an ALLOW rule lets through without argument conditions."""
    names = set()
    for rule in profile["syscalls"]:
        if rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("args"):
            names.update(rule["names"])
    return names


def all_keys(value) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in all_keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in all_keys(v)}
    return set()


def arg_matches(arg: dict, value: int) -> bool:
    op = arg["op"]
    if op == "SCMP_CMP_MASKED_EQ":
        return value & arg["value"] == arg.get("valueTwo", 0)
    return {
        "SCMP_CMP_EQ": value == arg["value"],
        "SCMP_CMP_NE": value != arg["value"],
        "SCMP_CMP_LT": value < arg["value"],
        "SCMP_CMP_LE": value <= arg["value"],
        "SCMP_CMP_GT": value > arg["value"],
        "SCMP_CMP_GE": value >= arg["value"],
    }[op]


def action_for(profile: dict, syscall: str, args: tuple[int, ...] = ()) -> tuple[str, int | None]:
    """What the profile does for `syscall(args)`: the first matching rule, else the default (libseccomp
    gives a matching argument-less rule and a matching conditional one the same priority; the profiles
    here never mix actions for one syscall except on disjoint conditions)."""
    for rule in profile["syscalls"]:
        if syscall not in rule["names"]:
            continue
        if all(arg_matches(arg, args[arg["index"]]) for arg in rule.get("args", [])):
            return rule["action"], rule.get("errnoRet")
    return profile["defaultAction"], profile.get("defaultErrnoRet")


# --- the FUSE profile the role installs --------------------------------------------------------


def test_fuse_profile_passes_the_oci_check(fuse_profile):
    assert seccomp.seccomp_profile_errors(fuse_profile) == []


def test_fuse_profile_denies_by_default_with_eperm(fuse_profile):
    assert fuse_profile["defaultAction"] == "SCMP_ACT_ERRNO"
    assert fuse_profile["defaultErrnoRet"] == 1
    assert action_for(fuse_profile, "kexec_load") == ("SCMP_ACT_ERRNO", 1)


def test_fuse_profile_allows_the_mount_family(fuse_profile):
    for name in ("mount", "umount2", "umount"):
        assert action_for(fuse_profile, name) == ("SCMP_ACT_ALLOW", None), name


def test_fuse_profile_answers_enosys_to_the_new_mount_api(fuse_profile):
    for name in sorted(NEW_MOUNT_API):
        assert action_for(fuse_profile, name) == ("SCMP_ACT_ERRNO", ENOSYS), name


def test_fuse_profile_contains_the_whole_base_set(fuse_profile):
    for rule in BASE_RULES:
        assert rule in fuse_profile["syscalls"], rule
    assert set(BASE_RULES[0]["names"]) <= allowed_names(fuse_profile)
    # The runtime default's everyday syscalls, spot-checked by name.
    assert {"read", "write", "openat", "execve", "futex", "epoll_pwait", "statx", "ptrace"} <= allowed_names(
        fuse_profile
    )


def test_fuse_profile_is_base_plus_arch_plus_mount_family_only(fuse_profile):
    expected = BASE_RULES + ARCHES["x86_64"]["rules"] + MOUNT_RULES
    assert fuse_profile["syscalls"] == expected


def test_fuse_profile_has_no_docker_only_keys(fuse_profile):
    assert all_keys(fuse_profile) & DOCKER_ONLY_KEYS == set()
    assert set(fuse_profile) == {"defaultAction", "defaultErrnoRet", "architectures", "syscalls"}


def test_fuse_profile_survives_json(fuse_profile):
    assert json.loads(json.dumps(fuse_profile)) == fuse_profile


def test_sys_admin_buys_the_mount_and_nothing_else(fuse_profile):
    # docker allows these with CAP_SYS_ADMIN; the FUSE profile does not.
    for name in ("bpf", "perf_event_open", "setns", "unshare", "quotactl", "syslog", "sethostname", "lookup_dcookie"):
        assert action_for(fuse_profile, name) == ("SCMP_ACT_ERRNO", 1), name
    for name in ("add_key", "keyctl", "request_key"):
        assert action_for(fuse_profile, name) == ("SCMP_ACT_ERRNO", 1), name


def test_clone_creates_threads_but_no_namespaces(fuse_profile):
    clone_thread = 0x3D0F00  # CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID
    assert action_for(fuse_profile, "clone", (clone_thread,)) == ("SCMP_ACT_ALLOW", None)
    for flag in (0x00020000, 0x10000000, 0x20000000, 0x40000000):  # NEWNS, NEWUSER, NEWPID, NEWNET
        assert action_for(fuse_profile, "clone", (clone_thread | flag,)) == ("SCMP_ACT_ERRNO", 1), hex(flag)
    assert action_for(fuse_profile, "clone3") == ("SCMP_ACT_ERRNO", ENOSYS)


@pytest.mark.parametrize(
    ("family", "allowed"),
    [(1, True), (2, True), (10, True), (16, True), (17, True), (37, True), (38, False), (39, True), (40, False)],
)
def test_socket_families_af_alg_and_af_vsock_denied(fuse_profile, family, allowed):
    expected = ("SCMP_ACT_ALLOW", None) if allowed else ("SCMP_ACT_ERRNO", 1)
    assert action_for(fuse_profile, "socket", (family,)) == expected


def test_nomount_profile_is_the_base_without_the_mount_family(nomount_profile):
    assert seccomp.seccomp_profile_errors(nomount_profile) == []
    names = {n for rule in nomount_profile["syscalls"] for n in rule["names"]}
    assert names.isdisjoint({"mount", "umount", "umount2"} | NEW_MOUNT_API)
    assert action_for(nomount_profile, "mount") == ("SCMP_ACT_ERRNO", 1)
    assert nomount_profile["syscalls"] == BASE_RULES + ARCHES["x86_64"]["rules"]


@pytest.mark.parametrize(
    ("architecture", "arches", "has", "lacks"),
    [
        ("x86_64", ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"], "arch_prctl", "set_tls"),
        ("aarch64", ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"], "set_tls", "arch_prctl"),
    ],
)
def test_profile_architectures_follow_the_node(architecture, arches, has, lacks):
    profile = build_role_profiles(architecture)["fuse"]
    assert profile["architectures"] == arches
    assert has in allowed_names(profile)
    assert lacks not in allowed_names(profile)
    assert seccomp.seccomp_profile_errors(profile) == []


def test_base_allowlist_has_no_duplicates_and_no_mount_family():
    names = BASE_RULES[0]["names"]
    assert len(names) == len(set(names))
    all_base_names = {n for rule in BASE_RULES for n in rule["names"]}
    assert all_base_names.isdisjoint({"mount", "umount", "umount2"} | NEW_MOUNT_API)


# --- seccomp_profile_errors: what it refuses, and how it says so -------------------------------

VALID = {
    "defaultAction": "SCMP_ACT_ERRNO",
    "defaultErrnoRet": 1,
    "architectures": ["SCMP_ARCH_X86_64"],
    "syscalls": [
        {"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
        {"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 40, "op": "SCMP_CMP_NE"}]},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38},
    ],
}


def with_changes(**changes) -> dict:
    profile = json.loads(json.dumps(VALID))
    profile.update(changes)
    return profile


def with_rule(rule: dict) -> dict:
    return with_changes(syscalls=[rule])


def test_accepts_a_valid_profile():
    assert seccomp.seccomp_profile_errors(VALID) == []


def test_accepts_a_profile_without_syscalls_or_architectures():
    assert seccomp.seccomp_profile_errors({"defaultAction": "SCMP_ACT_ALLOW"}) == []


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        (
            with_changes(archMap=[{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86"]}]),
            "profile: key 'archMap' is docker-only (not OCI); containerd ignores it, so the profile would apply "
            "to the native architecture only",
        ),
        (
            with_rule({"names": ["mount"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}}),
            "syscalls[0]: key 'includes' is docker-only (not OCI); containerd ignores it, so the rule would apply "
            "unconditionally. Write the profile in plain OCI form.",
        ),
        (
            with_rule({"names": ["clone"], "action": "SCMP_ACT_ALLOW", "excludes": {"caps": ["CAP_SYS_ADMIN"]}}),
            "syscalls[0]: key 'excludes' is docker-only (not OCI); containerd ignores it, so the rule would apply "
            "unconditionally",
        ),
        (
            with_rule({"name": "read", "names": ["read"], "action": "SCMP_ACT_ALLOW"}),
            "syscalls[0]: key 'name' is docker-only (not OCI); containerd ignores it; use 'names' (a list)",
        ),
        (
            with_rule({"names": ["read"], "action": "SCMP_ACT_ALLOW", "comment": "x"}),
            "syscalls[0]: key 'comment' is docker-only (not OCI)",
        ),
        (
            with_changes(defaultErrno="EPERM"),
            "profile: key 'defaultErrno' is docker-only (not OCI); containerd ignores it; the OCI key is "
            "'defaultErrnoRet' (a number)",
        ),
        (
            with_changes(seccomp="x"),
            "profile: unknown key 'seccomp'; an OCI seccomp profile has only architectures, defaultAction",
        ),
    ],
    ids=["archMap", "includes", "excludes", "name", "comment", "defaultErrno", "unknown-top-key"],
)
def test_rejects_keys_outside_the_oci_form(profile, message):
    errors = seccomp.seccomp_profile_errors(profile)
    assert any(message in error for error in errors), errors


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        (
            with_changes(defaultAction="SCMP_ACT_DENY"),
            "defaultAction: unknown action 'SCMP_ACT_DENY'; known actions are SCMP_ACT_ALLOW, SCMP_ACT_ERRNO",
        ),
        (
            with_rule({"names": ["read"], "action": "SCMP_ACT_ALLOWED"}),
            "syscalls[0].action: unknown action 'SCMP_ACT_ALLOWED'",
        ),
        (
            with_rule({"names": ["read"], "action": "allow"}),
            "syscalls[0].action: unknown action 'allow'",
        ),
        (
            with_rule({"names": ["read"]}),
            "syscalls[0]: 'action' is missing.",
        ),
        (
            with_changes(architectures=["SCMP_ARCH_AMD64"]),
            "architectures[0]: unknown value 'SCMP_ARCH_AMD64'; known architectures are",
        ),
        (
            with_changes(flags=["SECCOMP_FILTER_FLAG_NOPE"]),
            "flags[0]: unknown value 'SECCOMP_FILTER_FLAG_NOPE'",
        ),
        (
            with_rule(
                {"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "value": 1, "op": "EQ"}]}
            ),
            "syscalls[0].args[0].op: unknown operator 'EQ'",
        ),
        (
            with_rule(
                {
                    "names": ["socket"],
                    "action": "SCMP_ACT_ALLOW",
                    "args": [{"index": 6, "value": 1, "op": "SCMP_CMP_EQ"}],
                }
            ),
            "syscalls[0].args[0].index: must be a number from 0 to 5",
        ),
        (
            with_rule({"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [{"index": 0, "op": "SCMP_CMP_EQ"}]}),
            "syscalls[0].args[0]: 'value' is missing.",
        ),
        (
            with_rule({"names": ["read"], "action": "SCMP_ACT_ALLOW", "errnoRet": 1}),
            "syscalls[0].errnoRet: only applies to SCMP_ACT_ERRNO and SCMP_ACT_TRACE, not SCMP_ACT_ALLOW.",
        ),
        (
            with_rule({"names": ["read"], "action": "SCMP_ACT_ERRNO", "errnoRet": 0}),
            "syscalls[0].errnoRet: 0 is not an errno",
        ),
        (
            with_rule({"names": ["read"], "action": "SCMP_ACT_NOTIFY"}),
            "profile: SCMP_ACT_NOTIFY needs 'listenerPath'",
        ),
    ],
    ids=[
        "default-action",
        "action-typo",
        "action-lowercase",
        "action-missing",
        "architecture",
        "flag",
        "operator",
        "arg-index",
        "arg-value-missing",
        "errno-with-allow",
        "errno-zero",
        "notify-without-listener",
    ],
)
def test_rejects_unknown_values(profile, message):
    errors = seccomp.seccomp_profile_errors(profile)
    assert any(message in error for error in errors), errors


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        (with_rule({"names": [], "action": "SCMP_ACT_ALLOW"}), "syscalls[0].names: is empty; a rule must name"),
        (with_rule({"names": ["read", ""], "action": "SCMP_ACT_ALLOW"}), "syscalls[0].names[1]: is an empty name."),
        (with_rule({"names": ["read", "  "], "action": "SCMP_ACT_ALLOW"}), "syscalls[0].names[1]: is an empty name."),
        (with_rule({"action": "SCMP_ACT_ALLOW"}), "syscalls[0]: 'names' is missing"),
        (
            with_rule({"names": ["Read-Write"], "action": "SCMP_ACT_ALLOW"}),
            "syscalls[0].names[0]: 'Read-Write' is not a syscall name",
        ),
        (
            with_rule({"names": ["read\n"], "action": "SCMP_ACT_ALLOW"}),
            "syscalls[0].names[0]: 'read\n' is not a syscall name",
        ),
    ],
    ids=["empty-list", "empty-string", "blank-string", "missing", "not-a-syscall-name", "trailing-newline"],
)
def test_rejects_empty_names(profile, message):
    errors = seccomp.seccomp_profile_errors(profile)
    assert any(message in error for error in errors), errors


@pytest.mark.parametrize(
    ("profile", "message"),
    [
        (["SCMP_ACT_ERRNO"], "the profile must be a mapping (a JSON object), not a list."),
        ("{}", "the profile must be a mapping (a JSON object), not a string."),
        (with_changes(defaultAction=1), "defaultAction: must be a string"),
        (
            with_changes(defaultErrnoRet="1"),
            "defaultErrnoRet: must be a number (an errno such as 1 for EPERM), not a string.",
        ),
        (
            with_changes(defaultErrnoRet=True),
            "defaultErrnoRet: must be a number (an errno such as 1 for EPERM), not a boolean.",
        ),
        (
            with_changes(architectures="SCMP_ARCH_X86_64"),
            "architectures: must be a list of architectures, not a string.",
        ),
        (with_changes(architectures=[64]), "architectures[0]: must be a string, not a number."),
        (with_changes(syscalls={"names": ["read"]}), "syscalls: must be a list of rules, not a mapping."),
        (with_changes(syscalls=["read"]), "syscalls[0]: must be a mapping with names and action, not a string."),
        (
            with_rule({"names": "read", "action": "SCMP_ACT_ALLOW"}),
            "syscalls[0].names: must be a list of syscall names, not a string.",
        ),
        (
            with_rule({"names": [0], "action": "SCMP_ACT_ALLOW"}),
            "syscalls[0].names[0]: must be a string, not a number.",
        ),
        (
            with_rule({"names": ["read"], "action": "SCMP_ACT_ERRNO", "errnoRet": "EPERM"}),
            "syscalls[0].errnoRet: must be a number",
        ),
        (
            with_rule({"names": ["read"], "action": "SCMP_ACT_ALLOW", "args": {"index": 0}}),
            "syscalls[0].args: must be a list, not a mapping.",
        ),
        (
            with_rule({"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [[0, 1]]}),
            "syscalls[0].args[0]: must be a mapping",
        ),
        (
            with_rule(
                {
                    "names": ["socket"],
                    "action": "SCMP_ACT_ALLOW",
                    "args": [{"index": 0, "value": -1, "op": "SCMP_CMP_EQ"}],
                }
            ),
            "syscalls[0].args[0].value: must be a number from 0 to 2^64-1, not -1.",
        ),
        (
            with_rule(
                {
                    "names": ["socket"],
                    "action": "SCMP_ACT_ALLOW",
                    "args": [{"index": "0", "value": 1, "op": "SCMP_CMP_EQ"}],
                }
            ),
            "syscalls[0].args[0].index: must be a number from 0 to 5 (the syscall argument), not '0'.",
        ),
        (with_changes(listenerPath=5), "listenerPath: must be a string, not a number."),
    ],
    ids=[
        "profile-list",
        "profile-string",
        "default-action-number",
        "errno-string",
        "errno-bool",
        "architectures-string",
        "architecture-number",
        "syscalls-mapping",
        "rule-string",
        "names-string",
        "name-number",
        "rule-errno-string",
        "args-mapping",
        "arg-list",
        "arg-negative",
        "arg-index-string",
        "listener-path-number",
    ],
)
def test_rejects_wrong_types(profile, message):
    errors = seccomp.seccomp_profile_errors(profile)
    assert any(message in error for error in errors), errors


def test_reports_every_problem_of_a_docker_profile_with_its_place():
    docker_style = {
        "defaultAction": "SCMP_ACT_ERRNO",
        "archMap": [{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86"]}],
        "syscalls": [
            {"names": ["read"], "action": "SCMP_ACT_ALLOW"},
            {"names": ["mount"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
            {"names": ["clone"], "action": "SCMP_ACT_ALLOW", "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
        ],
    }
    errors = seccomp.seccomp_profile_errors(docker_style)
    assert [e.split(":")[0] for e in errors] == ["profile", "syscalls[1]", "syscalls[2]"]


def test_oci_profile_builder_shape():
    rules = [{"names": ["read"], "action": "SCMP_ACT_ALLOW"}]
    profile = seccomp.seccomp_oci_profile(rules, ("SCMP_ARCH_AARCH64",), default_errno_ret=13)
    assert profile == {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": 13,
        "architectures": ["SCMP_ARCH_AARCH64"],
        "syscalls": rules,
    }
    assert profile["syscalls"][0] is not rules[0]  # copies, so callers' data stays untouched


@pytest.mark.parametrize(
    ("rules", "architectures", "message"),
    [
        ({"names": ["read"]}, [], "seccomp_oci_profile: rules must be a list, not a mapping"),
        ([], "SCMP_ARCH_X86_64", "seccomp_oci_profile: architectures must be a list, not a string"),
    ],
)
def test_oci_profile_builder_refuses_wrong_types(rules, architectures, message):
    with pytest.raises(AnsibleFilterError, match=re.escape(message)):
        seccomp.seccomp_oci_profile(rules, architectures)


def test_filter_plugin_exposes_both_filters():
    filters = seccomp.FilterModule().filters()
    assert filters == {
        "seccomp_profile_errors": seccomp.seccomp_profile_errors,
        "seccomp_oci_profile": seccomp.seccomp_oci_profile,
    }


# --- the AppArmor template ------------------------------------------------------------------

ANSIBLE_MANAGED = "Ansible managed: test stub"


def render_apparmor(**overrides) -> str:
    """Render the template as the template module does (trim_blocks, trailing newline kept)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(ROLE / "templates")),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["comment"] = comment
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    variables = dict(ROLE_DEFAULTS, ansible_managed=ANSIBLE_MANAGED)
    variables["__security_profiles_apparmor_umount_denied"] = role_vars["__security_profiles_apparmor_umount_denied"]
    variables.update(overrides)
    return env.get_template("etc/apparmor.d/fuse.j2").render(variables)


def rule_lines(text: str) -> list[str]:
    """The profile's lines without comments (AppArmor's #include is a rule) and blank lines."""
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and (not stripped.startswith("#") or stripped.startswith("#include")):
            lines.append(re.sub(r"\s+#\s.*$", "", stripped))
    return lines


def test_apparmor_profile_allows_fuse_mounts_only():
    rules = rule_lines(render_apparmor())
    assert not [r for r in rules if re.match(r"(audit\s+)?deny\s+mount\b", r)]
    assert "mount fstype=fuse," in rules
    assert "mount fstype=fuse.*," in rules
    assert "umount," in rules
    mount_rules = [r for r in rules if re.match(r"(re)?mount\b", r)]
    assert mount_rules == ["mount fstype=fuse,", "mount fstype=fuse.*,"]


def test_apparmor_profile_unmounts_nothing_in_proc_sys_dev_and_writes_no_kernel_setting():
    rules = rule_lines(render_apparmor())
    umount_rules = [r for r in rules if re.match(r"(deny\s+)?umount\b", r)]
    assert umount_rules == [
        "umount,",
        "deny umount /proc{,/,/**},",
        "deny umount /sys{,/,/**},",
        "deny umount /dev{,/,/**},",
    ]
    # docker-default's globs spared /proc/sys/kernel/* (threads-max, sysrq, numa_balancing, ...)
    assert not [r for r in rules if r.startswith("deny @{PROC}/sys/") and r != "deny @{PROC}/sys/** w,"]
    assert "deny @{PROC}/sys/** w," in rules


def test_apparmor_profile_keeps_the_runtime_default_rules():
    rules = rule_lines(render_apparmor())
    for expected in (
        "abi <abi/3.0>,",
        "#include <tunables/global>",
        "#include <abstractions/base>",
        "network,",
        "deny network alg,",
        "deny network vsock,",
        "capability,",
        "file,",
        "signal (receive) peer=unconfined,",
        "signal (receive) peer=runc,",
        "signal (receive) peer=crun,",
        "deny @{PROC}/* w,",
        "deny @{PROC}/{[^1-9/],[^1-9/][^0-9/],[^1-9s/][^0-9y/][^0-9s/],[^1-9/][^0-9/][^0-9/][^0-9/]*}/** w,",
        "deny @{PROC}/sys/** w,",
        "deny @{PROC}/sysrq-trigger rwklx,",
        "deny @{PROC}/kcore rwklx,",
        "deny /sys/[^f]*/** wklx,",
        "deny /sys/f[^s]*/** wklx,",
        "deny /sys/fs/[^c]*/** wklx,",
        "deny /sys/fs/c[^g]*/** wklx,",
        "deny /sys/fs/cg[^r]*/** wklx,",
        "deny /sys/firmware/** rwklx,",
        "deny /sys/devices/virtual/powercap/** rwklx,",
        "deny /sys/kernel/security/** rwklx,",
    ):
        assert expected in rules, expected
    assert rules[-1] == "}"


def test_apparmor_profile_uses_the_profile_name_everywhere():
    text = render_apparmor(security_profiles_apparmor_profile_name="fuse-gpu")
    rules = rule_lines(text)
    assert "profile fuse-gpu flags=(attach_disconnected,mediate_deleted) {" in rules
    assert "signal (send,receive) peer=fuse-gpu," in rules
    assert "ptrace (trace,read,tracedby,readby) peer=fuse-gpu," in rules
    assert not [r for r in rules if re.search(r"\bfuse\b(?![-.*])", r) and "fstype" not in r]


def test_apparmor_profile_starts_with_the_ansible_managed_comment():
    text = render_apparmor()
    assert text.startswith(f"#\n# {ANSIBLE_MANAGED}\n#\n")
    assert text.endswith("}\n")


def test_apparmor_profile_lists_come_from_the_variables():
    rules = rule_lines(
        render_apparmor(
            security_profiles_apparmor_mount_fstypes=["fuse.sshfs"],
            security_profiles_apparmor_denied_network_families=["alg"],
            security_profiles_apparmor_signal_peers=["snap.docker.dockerd"],
        )
    )
    assert [r for r in rules if r.startswith("mount ")] == ["mount fstype=fuse.sshfs,"]
    assert [r for r in rules if r.startswith("deny network")] == ["deny network alg,"]
    assert [r for r in rules if r.startswith("signal (receive)")] == ["signal (receive) peer=snap.docker.dockerd,"]


# --- role interface ---------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["security_profiles", "fuse"])
def test_argument_specs_match_the_defaults(role):
    role_dir = ROOT / "roles" / role
    defaults = yaml.safe_load((role_dir / "defaults" / "main.yml").read_text())
    options = yaml.safe_load((role_dir / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"][
        "options"
    ]
    assert set(options) == set(defaults)
    for name, spec in options.items():
        assert spec["default"] == defaults[name], name
        assert spec.get("description"), name


def test_readme_documents_every_variable():
    readme = (ROLE / "README.md").read_text()
    for name in ROLE_DEFAULTS:
        assert f"`{name}`" in readme, name
    fuse_readme = (ROOT / "roles" / "fuse" / "README.md").read_text()
    for name in yaml.safe_load((ROOT / "roles" / "fuse" / "defaults" / "main.yml").read_text()):
        assert f"`{name}`" in fuse_readme, name


def test_template_path_mirrors_the_target():
    assert Path(ROLE / "templates" / "etc" / "apparmor.d" / "fuse.j2").is_file()
