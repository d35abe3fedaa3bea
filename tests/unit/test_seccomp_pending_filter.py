"""plugins/filter/seccomp.py seccomp_profiles_pending: whether security_profiles has seccomp profiles left to install,
from one stat of the node (tasks/read.yml), which was a Jinja program in tasks/seccomp.yml. The expected answers are
what that program rendered for the same stats (checked with Ansible's Templar when the filter replaced it); the last
test renders the role's own expression."""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml
from conftest import ROOT, load_module, render_role_value

seccomp = load_module("seccomp", subdir="plugins/filter")
DIR = "/var/lib/kubelet/seccomp/profiles"
FILE = f"{DIR}/fuse.json"
PROFILES = {"fuse": {"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["mount"], "action": "SCMP_ACT_ALLOW"}]}}
# what the role writes (tasks/seccomp_install.yml: to_nice_json(indent=2) and a newline): sorted keys, 2 spaces
TEXT = json.dumps(PROFILES["fuse"], indent=2, sort_keys=True, separators=(",", ": ")) + "\n"
DIR_STAT = {"exists": True, "pw_name": "root", "gr_name": "root", "mode": "0755", "isdir": True}
FILE_STAT = {
    "exists": True,
    "pw_name": "root",
    "gr_name": "root",
    "mode": "0644",
    "isdir": False,
    "checksum": hashlib.sha1(TEXT.encode()).hexdigest(),
}


def stats(dir_stat=None, file_stat=None) -> list:
    return [{"item": DIR, "stat": dir_stat or DIR_STAT}, {"item": FILE, "stat": file_stat or FILE_STAT}]


def test_the_profile_text_is_what_the_role_writes():
    assert seccomp.profile_text(PROFILES["fuse"]) == TEXT


def test_a_node_with_every_profile_as_wanted_has_nothing_pending():
    assert seccomp.seccomp_profiles_pending(stats(), PROFILES, [FILE]) is False


@pytest.mark.parametrize(
    ("dir_stat", "file_stat"),
    [
        (None, {**FILE_STAT, "checksum": "0" * 40}),  # other content
        (None, {"exists": False}),
        (None, {**FILE_STAT, "pw_name": "nobody"}),
        (None, {**FILE_STAT, "gr_name": "adm"}),
        (None, {**FILE_STAT, "mode": "0600"}),
        (None, {**FILE_STAT, "isdir": True}),
        ({**DIR_STAT, "mode": "0700"}, None),
        ({**DIR_STAT, "isdir": False, "mode": "0755"}, None),  # a file where the directory goes
        ({"exists": False}, None),
    ],
)
def test_anything_else_is_pending(dir_stat, file_stat):
    assert seccomp.seccomp_profiles_pending(stats(dir_stat, file_stat), PROFILES, [FILE]) is True


def test_the_roles_expression_reads_the_seccomp_part_of_the_stat_loop():
    """tasks/read.yml's one read also holds the AppArmor paths: the seccomp verdict reads its own paths only (the
    include of tasks/apply.yml decides with it)."""
    tasks = yaml.safe_load((ROOT / "roles" / "security_profiles" / "tasks" / "apply.yml").read_text())
    install = next(t for t in tasks if t.get("name") == "Install the seccomp profiles")
    loaded = yaml.safe_load((ROOT / "roles" / "security_profiles" / "vars" / "main.yml").read_text())
    expression = loaded["__security_profiles_seccomp_pending"]
    # the include decides with the read task's plan (role_read renders it after the read)
    assert install["when"] == "__security_profiles_plan.seccomp | bool"
    verdict = loaded["__security_profiles_plan_after_read"]["seccomp"]
    variables = {
        "security_profiles_manage_seccomp": True,
        "__security_profiles_seccomp_pending": expression,
        "__security_profiles_seccomp_profiles": PROFILES,
        "__security_profiles_seccomp_dirs": [DIR],
        "__security_profiles_seccomp_files": [FILE],
    }
    apparmor = {"item": "/etc/apparmor.d/fuse", "stat": {"exists": False}}
    for node, pending in ((stats(), False), (stats(None, {"exists": False}), True), ([*stats(), apparmor], False)):
        variables["__security_profiles_stat"] = {"results": node}
        assert render_role_value(verdict, variables) is pending


# --- why the profiles are not tried in a container (seccomp_untried) ----------------------------------------

# The report of tasks/seccomp_install.yml before issue 40 (the YAML value as loaded): a {% if %} program.
OLD_UNTRIED = (
    "{% if security_profiles_seccomp_test_image | length == 0 %}The seccomp profiles are installed without trying "
    "them in a container: security_profiles_seccomp_test_image is empty. Set it to an image present on the node (it "
    "is never pulled) to start a container with each profile before it is installed.{% else %}The seccomp profiles "
    "are not tried in a container on {{ inventory_hostname }}: {{ 'docker does not run there' if "
    "__security_profiles_seccomp_image is skipped else ('docker has no image ' ~ security_profiles_seccomp_test_image "
    "~ ' there (it is never pulled): ' ~ ((__security_profiles_seccomp_image.stderr | default('') | trim) or "
    "__security_profiles_seccomp_image.msg | default(''))) }}.{% endif %}"
)


@pytest.mark.parametrize("image", ["", "gpunode-test/busybox:latest"])
@pytest.mark.parametrize(
    "lookup",
    [
        {"skipped": True, "changed": False},
        {"rc": 1, "stderr": "Error: No such image: gpunode-test/busybox:latest\n", "msg": "non-zero return code"},
        {"rc": 1, "stderr": "", "msg": "non-zero return code"},
        {"rc": 2, "msg": "[Errno 2] No such file or directory: b'docker'"},
    ],
)
def test_the_untried_report_says_what_the_jinja_program_said(image, lookup):
    tasks = yaml.safe_load((ROOT / "roles" / "security_profiles" / "tasks" / "seccomp_install.yml").read_text())
    report = next(t for t in tasks if t.get("name") == "Report that the seccomp profiles are not tried in a container")
    variables = {
        "inventory_hostname": "node-1",
        "security_profiles_seccomp_test_image": image,
        "__security_profiles_seccomp_image": lookup,
    }
    old = render_role_value(OLD_UNTRIED, variables)
    assert render_role_value(report["ansible.builtin.debug"]["msg"], variables) == old
