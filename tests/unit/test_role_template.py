"""role_template (plugins/lookup/role_template.py): a role's template rendered as ansible.builtin.template's lookup
renders it, without its copy of every variable. The oracle is the builtin lookup, on the same files, in one play."""

from __future__ import annotations

import json

import yaml
from conftest import local_play, run_local_playbook

TEMPLATE = """{{ ansible_managed | comment }}
# {{ template_path }} for {{ inventory_hostname }}
{% for name in names %}
line {{ name }} \\n {{ loop.index }}
{% endfor %}
{% include 'part.j2' %}
trailing: {{ value | default('none') }}
"""


def _play(tmp_path, extra_vars: dict) -> dict:
    role = tmp_path / "roles" / "demo"
    (role / "templates" / "etc").mkdir(parents=True)
    (role / "templates" / "etc" / "demo.conf.j2").write_text(TEMPLATE)
    (role / "templates" / "part.j2").write_text("included {{ names | length }}\n")
    (role / "tasks").mkdir()
    out = tmp_path / "out.json"
    (role / "tasks" / "main.yml").write_text(
        yaml.safe_dump(
            [
                {
                    "ansible.builtin.copy": {
                        "dest": str(out),
                        "content": "{{ {'mine': lookup('gpunode.provisioning.role_template', 'etc/demo.conf.j2'),"
                        " 'theirs': lookup('ansible.builtin.template', 'etc/demo.conf.j2')} | to_json }}",
                    }
                }
            ]
        )
    )
    playbook = local_play(tmp_path / "play.yml", vars={"names": ["a", "b"], **extra_vars}, roles=["demo"])
    run = run_local_playbook(playbook, "-e", json.dumps({"ansible_roles_path": str(tmp_path / "roles")}))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    return json.loads(out.read_text())


def test_renders_what_the_template_lookup_renders(tmp_path):
    shown = _play(tmp_path, {"value": "x"})
    assert shown["mine"] == shown["theirs"]
    assert "line b \\n 2" in shown["mine"] and "included 2" in shown["mine"] and "etc/demo.conf.j2" in shown["mine"]


def test_a_users_ansible_managed_wins_as_with_the_template_lookup(tmp_path):
    shown = _play(tmp_path, {"ansible_managed": "managed by the platform team"})
    assert shown["mine"] == shown["theirs"]
    assert shown["mine"].startswith("#\n# managed by the platform team")
