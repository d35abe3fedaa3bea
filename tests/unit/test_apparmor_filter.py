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
    "{{ ansible_failed_result | apparmor_refusal(__security_profiles_apparmor_parser,\n"
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
        "__security_profiles_apparmor_parser": "/sbin/apparmor_parser",
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
