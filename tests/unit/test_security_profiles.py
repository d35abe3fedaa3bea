"""Tests of the security_profiles role's data and code.

- plugins/filter/seccomp.py: the docker-only key check (`seccomp_docker_keys`).
- The FUSE seccomp profile, built from the role's vars/main.yml: by Ansible itself, byte for byte
  as the role writes it, and with Jinja for the checks of what it allows.
- The AppArmor template, rendered with Jinja as Ansible's template module does.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible.plugins.filter.core import comment
from conftest import ROOT, load_module, run_local_playbook
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


def _render(env, value, context):
    if isinstance(value, str):
        return env.from_string(value.strip()).render(context) if "{{" in value else value
    if isinstance(value, dict):
        return {k: _render(env, v, context) for k, v in value.items()}
    return value


def build_role_profiles(architecture: str) -> dict:
    """Evaluate the role's own expressions in vars/main.yml, as Ansible does at run time."""
    env = NativeEnvironment(undefined=jinja2.StrictUndefined)
    env.filters["combine"] = lambda a, b: {**a, **b}
    context = dict(ROLE_VARS)
    context["ansible_facts"] = {"architecture": architecture}
    for name in (
        "__security_profiles_seccomp_node_arch",
        "__security_profiles_seccomp_nomount_profile",
        "__security_profiles_seccomp_fuse_profile",
    ):
        context[name] = _render(env, ROLE_VARS[name], context)
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


# sha256 of the files the role wrote before the profile became data (vars/main.yml as one name per line
# and the seccomp_oci_profile filter): `<profile> | to_nice_json(indent=2)` plus a newline.
RENDERED_SHA256 = {
    ("x86_64", "fuse"): "59318a6dad03aab9d526ab035e5f7500cd03e2356772250e371b665c890f4ecd",
    ("x86_64", "nomount"): "47d6df66108b637f9ecb48fe17bd5c497bd9548e4ef30d0d22232781970ce799",
    ("aarch64", "fuse"): "26ad8c1d2c884dfbee53f821821afacc37eff079d5b0ae17c943c4cc1912d6eb",
    ("aarch64", "nomount"): "76261358407f3c3a3553122bb389c99fe0fc77606ef7e7de01468591d837c332",
}


PROFILE_TO_JSON = "_profile | to_nice_json(indent=2) }}\n"  # as tasks/seccomp_install.yml writes a profile


def test_ansible_renders_each_architectures_profiles_byte_for_byte_as_before(tmp_path):
    """Ansible itself evaluates vars/main.yml and writes the files the way tasks/seccomp_install.yml does."""
    playbook = tmp_path / "render.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "localhost",
                    "connection": "local",
                    "gather_facts": False,
                    "vars_files": [str(ROLE / "vars" / "main.yml")],
                    "tasks": [
                        {
                            "name": f"Write the {arch} {name} profile",
                            "ansible.builtin.copy": {
                                "content": "{{ __security_profiles_seccomp_" + name + PROFILE_TO_JSON,
                                "dest": str(tmp_path / f"{arch}-{name}.json"),
                                "mode": "0644",
                            },
                            "vars": {
                                "__security_profiles_seccomp_node_arch": "{{ __security_profiles_seccomp_arches."
                                + arch
                                + " }}"
                            },
                        }
                        for arch, name in RENDERED_SHA256
                    ],
                }
            ]
        )
    )
    result = run_local_playbook(playbook)
    assert result.returncode == 0, result.stdout + result.stderr
    digests = {
        (arch, name): hashlib.sha256((tmp_path / f"{arch}-{name}.json").read_bytes()).hexdigest()
        for arch, name in RENDERED_SHA256
    }
    assert digests == RENDERED_SHA256


def test_fuse_profile_has_no_docker_only_keys_by_the_filter(fuse_profile, nomount_profile):
    assert seccomp.seccomp_docker_keys({"fuse": fuse_profile, "nomount": nomount_profile}) == []


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


def test_base_allowlist_has_no_duplicates_and_no_mount_family():
    names = BASE_RULES[0]["names"]
    assert len(names) == len(set(names))
    all_base_names = {n for rule in BASE_RULES for n in rule["names"]}
    assert all_base_names.isdisjoint({"mount", "umount", "umount2"} | NEW_MOUNT_API)


# --- seccomp_docker_keys: the docker-only keys containerd and CRI-O would silently drop ----------


def test_docker_keys_reports_each_docker_only_key_with_its_profile_and_place():
    docker_style = {
        "defaultAction": "SCMP_ACT_ERRNO",
        "archMap": [{"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86"]}],
        "syscalls": [
            {"names": ["read"], "action": "SCMP_ACT_ALLOW"},
            {"names": ["mount"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
            {"name": "clone", "action": "SCMP_ACT_ALLOW", "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
        ],
    }
    errors = seccomp.seccomp_docker_keys({"gpu": docker_style})
    assert [e.split(": ")[0] for e in errors] == [
        "'gpu'",
        "'gpu' syscalls[1]",
        "'gpu' syscalls[2]",
        "'gpu' syscalls[2]",
    ]
    assert "key 'archMap' is docker-only (not OCI)" in errors[0]
    assert "key 'includes' is docker-only" in errors[1]
    assert "key 'excludes'" in errors[2] and "key 'name'" in errors[3] and "use 'names'" in errors[3]


def test_docker_keys_accepts_oci_profiles_and_an_empty_mapping():
    oci = {"defaultAction": "SCMP_ACT_ALLOW", "defaultErrnoRet": 1, "syscalls": [{"names": ["x"], "action": "y"}]}
    assert seccomp.seccomp_docker_keys({"a": oci, "b": {"defaultAction": "SCMP_ACT_ALLOW"}}) == []
    assert seccomp.seccomp_docker_keys({}) == []


def test_docker_keys_refuses_a_profile_that_is_no_mapping():
    assert seccomp.seccomp_docker_keys({"a": ["SCMP_ACT_ALLOW"]}) == [
        "'a': a profile is a mapping (a JSON object), not list."
    ]
    with pytest.raises(AnsibleFilterError, match="expects a mapping of name to profile"):
        seccomp.seccomp_docker_keys([{"defaultAction": "SCMP_ACT_ALLOW"}])


def test_filter_plugin_exposes_the_docker_key_check():
    assert seccomp.FilterModule().filters()["seccomp_docker_keys"] is seccomp.seccomp_docker_keys


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
    options = yaml.safe_load((role_dir / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    options = options[load_module("role_variables", subdir="plugins/action").ENTRY_POINT]["options"]
    assert set(options) == set(defaults)
    for name, spec in options.items():
        assert spec["default"] == defaults[name], name
        assert spec.get("description"), name


def test_template_path_mirrors_the_target():
    assert Path(ROLE / "templates" / "etc" / "apparmor.d" / "fuse.j2").is_file()


# --- the no-op path of the seccomp part ------------------------------------------------------


def test_seccomp_install_runs_only_when_a_profile_is_missing_or_differs(tmp_path):
    """tasks/read.yml stats the profiles and skips seccomp_install.yml as a whole on an unchanged node;
    a missing, edited or re-moded profile brings the install back (and the install makes it right again).
    One ansible-playbook run: install, re-run, then break the files one way at a time and re-run."""
    root = tmp_path / "seccomp"
    profiles = root / "profiles"
    run_role = {
        "ansible.builtin.include_role": {"name": "security_profiles"},
        "vars": {
            "security_profiles_manage_apparmor": False,
            "security_profiles_seccomp_kubelet_root": str(root),
            "security_profiles_seccomp_docker_dir": "",
            "security_profiles_seccomp_install_nomount": True,
            "gpu_node_facts_gather_runtimes": False,
        },
    }
    tasks = [{"name": "RUN-1 on an empty directory", **run_role}, {"name": "RUN-2 on an unchanged node", **run_role}]
    for number, (what, breaking) in enumerate(
        [
            ("Edit a profile", f"printf ' ' >> {profiles}/fuse.json"),
            ("Re-mode a profile", f"chmod 0600 {profiles}/fuse.json"),
            ("Remove a profile, re-mode the directory", f"rm {profiles}/fuse-nomount.json; chmod 0700 {profiles}"),
        ],
        start=3,
    ):
        tasks += [
            {"name": what, "ansible.builtin.shell": breaking},
            {"name": f"RUN-{number} after: {what}", **run_role},
        ]
    playbook = tmp_path / "seccomp.yml"
    # the role's variable check and its platform data read the node's facts
    playbook.write_text(
        yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": True, "tasks": tasks}])
    )
    result = run_local_playbook(playbook)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    runs = re.split(r"TASK \[RUN-\d", result.stdout)[1:]
    install_task = "TASK [security_profiles : Install the seccomp profiles for kubelet and docker]"
    assert [install_task in run for run in runs] == [True, False, True, True, True], result.stdout
    assert "TASK [security_profiles : Check the security_profiles variables and look up the profiles]" in runs[1]
    written = (profiles / "fuse.json").read_bytes()
    assert hashlib.sha256(written).hexdigest() == RENDERED_SHA256[(platform_arch(), "fuse")]
    assert (profiles / "fuse-nomount.json").is_file()
    assert oct(profiles.stat().st_mode & 0o777) == "0o755"


def platform_arch() -> str:
    import platform

    return {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine())


# --- the fuse role: whether crun is installed, decided by lazily evaluated vars --------------------

FUSE_ROLE = ROOT / "roles" / "fuse"

# (installed runc, installed crun, fuse_oci_runtime, the archive's answer) -> (crun installed, version offered)
CRUN_CASES = [
    ("1.1.5", None, "auto", "crun:\n  Installed: (none)\n  Candidate: 1.8.1-1+deb12u1\n", False, "1.8.1"),
    ("1.1.5", None, "auto", "crun:\n  Installed: (none)\n  Candidate: 1:1.14.1-1\n", True, "1.14.1"),
    (None, None, "auto", "crun:\n  Installed: (none)\n  Candidate: (none)\n", False, ""),
    ("1.2.5", None, "auto", None, False, ""),
    ("1.1.5", None, "none", "crun:\n  Candidate: 1.19-1\n", False, "1.19"),
    ("1.2.5", None, "crun", None, True, ""),
    (None, "1.9", "auto", None, False, ""),
]


def test_fuse_installs_crun_only_where_runc_is_too_old_and_the_archive_offers_crun_1_9():
    cases = []
    for runc, crun, mode, answer, install, offered in CRUN_CASES:
        case_vars = {
            "fuse_oci_runtime": mode,
            "fuse_install_packages": True,
            "ansible_facts": {
                "pkg_mgr": "apt",
                "gpu_node": {"oci_runtimes": {"runc": {"version": runc}, "crun": {"version": crun}}},
            },
            # what the node read ran (the archive asked last, when it was) and printed: the answer, then the udev line
            "__fuse_node": {
                "cmd": ["/bin/sh", "-c", "fuse-read", "/etc/udev/rules.d"]
                + (["apt-cache", "policy", "crun"] if answer else []),
                "stdout": (answer or "") + "udev-rules-dir",
                "stdout_lines": ["udev-rules-dir"],
            },
        }
        cases.append((case_vars, install, offered))
    playbook = yaml.safe_dump(
        [
            {
                "hosts": "localhost",
                "connection": "local",
                "gather_facts": False,
                "vars_files": [str(FUSE_ROLE / "vars" / "main.yml")],
                "tasks": [
                    {
                        "name": f"Case {number}",
                        "ansible.builtin.assert": {
                            "that": [
                                f"__fuse_install_crun | bool == {install}",
                                f"__fuse_crun_offered == {offered!r}",
                                f"__fuse_package_names == {['fuse3'] + (['crun'] if install else [])!r}",
                                "__fuse_udev | bool",
                            ]
                        },
                        "vars": case_vars,
                    }
                    for number, (case_vars, install, offered) in enumerate(cases)
                ],
            }
        ]
    )
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".yml") as handle:
        handle.write(playbook)
        handle.flush()
        result = run_local_playbook(handle.name)
    assert result.returncode == 0, result.stdout[-3000:]
    assert result.stdout.count("ok: [localhost]") == len(cases)
