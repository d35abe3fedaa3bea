"""plugins/filter/apparmor.py: the message of a refused AppArmor install (roles/security_profiles/tasks/apparmor.yml).

The filter replaced a Jinja program in the task (issue 40); OLD_MSG is that program, kept here to prove the
filter says the same thing on the same results."""

from __future__ import annotations

import pytest
from conftest import ROOT, load_module, render_role_value

apparmor = load_module("apparmor", subdir="plugins/filter")

# The task's message before issue 40, as YAML folded it, and the failed items it looped over.
OLD_MSG = (
    "{% if not __security_profiles_apparmor_parser_stat.stat.exists %}{{ __security_profiles_apparmor.parser }} is "
    "missing on {{ inventory_hostname }}: the AppArmor profiles cannot be checked, so none is installed. Install the "
    "apparmor package (security_profiles_apparmor_install_packages: true) or set security_profiles_manage_apparmor: "
    "false.{% else %}{% for r in __security_profiles_failed %}AppArmor profile '{{ r.item.key | default('?') }}' "
    "refused, nothing was written for it to {{ __security_profiles_apparmor_dir }}: {{ (r.stderr_lines | default([]) "
    "| reject('search', 'Cache read/write disabled') | join(' ') | regex_replace('/[^ ]+/[.]source', r.item.key | "
    "default('?'))) or r.msg | default('') }}. {% endfor %}Fix the profile text (security_profiles_apparmor_extra, or "
    "the security_profiles_apparmor_* variables for the FUSE profile) and run again.{% endif %}"
)
OLD_FAILED = (
    "{{ ansible_failed_result.results | default([ansible_failed_result])\n"
    "   | selectattr('failed', 'defined') | selectattr('failed') | list }}"
)
NEW_MSG = (
    "{{ ansible_failed_result | gpunode.provisioning.apparmor_refusal(__gpu_node_facts_security_apparmor_parser,\n"
    "   __security_profiles_apparmor_parser_stat.stat.exists, __security_profiles_apparmor_dir, inventory_hostname) }}"
)

REFUSED = {
    "failed": True,
    "item": {"key": "gpu-fuse"},
    "msg": "failed to validate",
    "stderr_lines": [
        "Cache read/write disabled: interface file missing.",
        "AppArmor parser error for /etc/apparmor.d/.ansible_tmpab12/.source in profile /etc/apparmor.d/"
        ".ansible_tmpab12/.source at line 3: syntax error, unexpected TOK_END",
    ],
}
NO_STDERR = {"failed": True, "item": {"key": "extra"}, "msg": "apparmor_parser: not found"}
PASSED = {"failed": False, "changed": False, "item": {"key": "fine"}}
NOT_LOOPED = {"failed": True, "msg": "the loop itself failed"}
NO_KEY = {"failed": True, "item": "plain", "stderr_lines": ["Cache read/write disabled", "refused"]}

CASES = {
    "parser missing": ({"results": [REFUSED]}, False),
    "one refused": ({"results": [REFUSED, PASSED]}, True),
    "two refused": ({"results": [REFUSED, NO_STDERR, PASSED]}, True),
    "only the warning in stderr": ({"results": [{**REFUSED, "stderr_lines": ["Cache read/write disabled"]}]}, True),
    "not a loop": (NOT_LOOPED, True),
    "an item without a key": ({"results": [NO_KEY]}, True),
    "nothing failed": ({"results": [PASSED]}, True),
}


def _variables(result, parser_found):
    return {
        "ansible_failed_result": result,
        "inventory_hostname": "node-1",
        "__security_profiles_apparmor": {"parser": "/sbin/apparmor_parser"},  # the old program's platform dict
        "__gpu_node_facts_security_apparmor_parser": "/sbin/apparmor_parser",
        "__security_profiles_apparmor_parser_stat": {"stat": {"exists": parser_found}},
        "__security_profiles_apparmor_dir": "/etc/apparmor.d",
    }


@pytest.mark.parametrize("case", CASES)
def test_the_filter_says_what_the_jinja_program_said(case):
    variables = _variables(*CASES[case])
    old = render_role_value(OLD_MSG, {**variables, "__security_profiles_failed": OLD_FAILED})
    assert render_role_value(NEW_MSG, variables) == old


def test_the_task_uses_the_filter_as_tested_here():
    task = (ROOT / "roles/security_profiles/tasks/apparmor.yml").read_text()
    assert NEW_MSG.replace("\n   ", "\n" + " " * 17) in task


def test_a_refusal_names_the_profile_not_the_temporary_copy():
    message = apparmor.apparmor_refusal({"results": [REFUSED]}, "/sbin/apparmor_parser", True, "/etc/apparmor.d", "n")
    assert message == (
        "AppArmor profile 'gpu-fuse' refused, nothing was written for it to /etc/apparmor.d: AppArmor parser error "
        "for gpu-fuse in profile gpu-fuse at line 3: syntax error, unexpected TOK_END. Fix the profile text "
        "(security_profiles_apparmor_extra, or the security_profiles_apparmor_* variables for the FUSE profile) and "
        "run again."
    )


def test_a_missing_parser_says_how_to_get_it_or_turn_apparmor_off():
    message = apparmor.apparmor_refusal({"results": [REFUSED]}, "/sbin/apparmor_parser", False, "/etc/apparmor.d", "n")
    assert message.startswith("/sbin/apparmor_parser is missing on n: the AppArmor profiles cannot be checked")
    assert "security_profiles_apparmor_install_packages: true" in message


# The two reports of the role before issue 40 (the YAML values as loaded): the unconfined FUSE pods (tasks/checks.yml)
# and the AppArmor part's (tasks/apparmor.yml, a {% if %} program); one task reports both now (tasks/read.yml).
OLD_UNCONFINED = (
    "{{ inventory_hostname }}: {{ 'the kernel has no AppArmor' if __gpu_node_facts_apparmor_os | bool else "
    "ansible_facts.distribution ~ ' has no AppArmor' }}, so FUSE pods with CAP_SYS_ADMIN are NOT confined here: the "
    "seccomp profile {{ security_profiles_seccomp_profile_name }}.json cannot see a mount's file system type or path, "
    "and such a pod can unmount /proc/sys and write host-wide kernel settings. Run FUSE pods in user namespaces "
    '(hostUsers: false, roles/security_profiles/README.md) where the node can (the gpu_validate row "FUSE '
    'confinement" names what is missing), or boot a kernel with AppArmor; until then schedule no SYS_ADMIN FUSE pods '
    "on this node."
)
OLD_UNCONFINED_WHEN = "not __security_profiles_apparmor_loadable | bool"
OLD_UNLOADED = (
    "{% if not __gpu_node_facts_apparmor_os | bool %}{{ ansible_facts.distribution }} "
    "{{ ansible_facts.distribution_major_version }} has no AppArmor (containers are confined by SELinux there): no "
    "AppArmor profile is installed on {{ inventory_hostname }}. Pods scheduled on it must not set "
    "securityContext.appArmorProfile.{% elif ansible_check_mode and __security_profiles_apparmor_tools is changed "
    "%}Check mode: the AppArmor tools are not installed on {{ inventory_hostname }} yet, so the profiles "
    "({{ __security_profiles_apparmor_profiles | list | join(', ') }}) are parsed, installed and loaded by a real run "
    "only.{% else %}{{ ('AppArmor is enabled in the kernel of ' ~ inventory_hostname ~ ' but its interface' ~ ' "
    "/sys/kernel/security/apparmor is not there (a container without securityfs?)') if "
    "ansible_facts.gpu_node.apparmor.kernel_enabled | default(false) else ('The kernel of ' ~ inventory_hostname ~ "
    "' has AppArmor disabled') }}: AppArmor profile(s) {{ __security_profiles_apparmor_profiles | list | join(', ') "
    "}} are installed in {{ __security_profiles_apparmor_dir }} but not loaded. apparmor.service loads them at the "
    "next boot with AppArmor enabled; until they are loaded, pods that reference them do not start on this node."
    "{% endif %}"
)
OLD_UNLOADED_WHEN = (
    "not __gpu_node_facts_apparmor_os | bool or (ansible_check_mode and __security_profiles_apparmor_tools "
    "is changed) or not __security_profiles_apparmor_loadable | bool"
)


def _report_vars():
    """The report's values: role vars (vars/main.yml), which tasks/report.yml's one task shows."""
    import yaml

    values = yaml.safe_load((ROOT / "roles/security_profiles/vars/main.yml").read_text())
    return {name: values[name] for name in ("__security_profiles_check_without_tools", "__security_profiles_reports")}


@pytest.mark.parametrize("supported", [True, False])
@pytest.mark.parametrize("loadable", [True, False])
@pytest.mark.parametrize("check_mode", [True, False])
@pytest.mark.parametrize("tools_changed", [True, False])
@pytest.mark.parametrize("kernel_enabled", [True, False])
def test_the_report_says_what_the_two_old_reports_said(supported, loadable, check_mode, tools_changed, kernel_enabled):
    variables = {
        "inventory_hostname": "node-1",
        "ansible_check_mode": check_mode,
        "ansible_facts": {
            "distribution": "Rocky",
            "distribution_major_version": "9",
            "gpu_node": {"apparmor": {"kernel_enabled": kernel_enabled}},
        },
        "security_profiles_manage_apparmor": True,
        "security_profiles_seccomp_profile_name": "fuse",
        "__gpu_node_facts_apparmor_os": supported,
        "__security_profiles_apparmor_loadable": loadable,
        # the old tasks read the tools' install; the task now reads the stat of apparmor_parser (installed by it)
        "__security_profiles_apparmor_tools": {"changed": tools_changed},
        "security_profiles_apparmor_install_packages": True,
        "__gpu_node_facts_security_apparmor_parser": "/sbin/apparmor_parser",
        "__security_profiles_stat": {
            "results": [{"item": "/sbin/apparmor_parser", "stat": {"exists": not tools_changed}}]
        },
        "__security_profiles_apparmor_profiles": {"fuse": "profile fuse {}", "extra": "profile extra {}"},
        "__security_profiles_apparmor_dir": "/etc/apparmor.d",
    }
    old = [
        render_role_value(msg, variables) if render_role_value("{{ " + when + " }}", variables) else ""
        for msg, when in ((OLD_UNCONFINED, OLD_UNCONFINED_WHEN), (OLD_UNLOADED, OLD_UNLOADED_WHEN))
    ]
    new = render_role_value("{{ __security_profiles_reports }}", {**variables, **_report_vars()})
    assert new == old


# --- whether the AppArmor tasks have anything to do (apparmor_pending) ----------------------------------------

AA_DIR = "/etc/apparmor.d"
AA_PROFILES = {"fuse": "profile fuse {}\n", "extra": "profile extra {}\n"}
PARSER = "/sbin/apparmor_parser"
LINK = "/etc/systemd/system/sysinit.target.wants/apparmor.service"


def _aa_stats(**changes):
    import hashlib

    def profile(name):
        return {"exists": True, "isreg": True, "pw_name": "root", "gr_name": "root", "mode": "0644",
                "checksum": hashlib.sha1(AA_PROFILES[name].encode()).hexdigest()}  # fmt: skip

    found = {PARSER: {"exists": True, "isreg": True}, LINK: {"exists": True, "islnk": True}}
    found.update({f"{AA_DIR}/{name}": profile(name) for name in AA_PROFILES})
    for path, stat in changes.items():
        found[path] = {**found.get(path, {}), **stat}
    return [{"item": path, "stat": stat} for path, stat in found.items()]


@pytest.mark.parametrize(
    ("stats", "link", "loadable", "pending"),
    [
        (_aa_stats(), LINK, False, False),
        (_aa_stats(), "", False, False),
        # each thing the AppArmor tasks would change, one at a time
        (_aa_stats(), LINK, True, True),
        (_aa_stats(**{PARSER: {"exists": False}}), LINK, False, True),
        (_aa_stats(**{LINK: {"exists": False}}), LINK, False, True),
        (_aa_stats(**{LINK: {"exists": False}}), "", False, False),
        (_aa_stats(**{f"{AA_DIR}/fuse": {"exists": False}}), LINK, False, True),
        (_aa_stats(**{f"{AA_DIR}/fuse": {"checksum": "0" * 40}}), LINK, False, True),
        (_aa_stats(**{f"{AA_DIR}/extra": {"mode": "0600"}}), LINK, False, True),
        (_aa_stats(**{f"{AA_DIR}/extra": {"pw_name": "nobody"}}), LINK, False, True),
        (_aa_stats(**{f"{AA_DIR}/extra": {"isreg": False}}), LINK, False, True),
        ([s for s in _aa_stats() if s["item"] != f"{AA_DIR}/extra"], LINK, False, True),
    ],
)
def test_the_apparmor_tasks_run_only_where_something_differs(stats, link, loadable, pending):
    assert apparmor.apparmor_pending(stats, AA_PROFILES, AA_DIR, PARSER, link, loadable) is pending
