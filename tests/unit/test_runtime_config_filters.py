"""runtime_config's Jinja programs made filters (plugins/filter/runtime_config.py, issue 40): each filter gives what
the Jinja it replaced (kept below as OLD_*, from tasks/main.yml, installer.yml and transaction.yml at 233085d)
rendered on the same inputs."""

from __future__ import annotations

import re

import pytest
import yaml
from conftest import load_module, render_role_value

rc = load_module("runtime_config", subdir="plugins/filter")

# The old Jinja, as tasks/main.yml (the report's vars), installer.yml and transaction.yml had it at 233085d.
OLD = yaml.safe_load(
    r"""
vars:
  __docker_entries: >-
    {% for entry in (__runtime_config_state.docker_nvidia_entries | default({}) | dict2items
                     | rejectattr('key', 'equalto', runtime_config_name))
       if 'docker' in __runtime_config_targets %}{{ ', ' if not loop.first }}{{ entry.key }} ({{ entry.value
       }}){% endfor %}
  __docker_default: "{{ __runtime_config_state.docker_default_runtime | default(none) }}"
  __docker_other_default: >-
    {{ 'docker' in __runtime_config_targets and __docker_default not in [none, '', runtime_config_name]
       and __runtime_config_state.docker_default_nvidia | default(false) | bool }}
  __containerd: "{{ __runtime_config_containerd if 'containerd' in __runtime_config_targets else {} }}"
  __notes: >-
    {{ ([runtime_config_docker_daemon_json ~ " also registers NVIDIA's runtime as " ~ __docker_entries ~ ": kept"]
        if __docker_entries | default('', true) | length > 0 else [])
       + ([runtime_config_docker_daemon_json ~ ": NVIDIA's runtime " ~ __docker_default ~ " stays the default"
           ~ " (no second default named " ~ runtime_config_name ~ ")"]
          if __docker_other_default | bool and runtime_config_set_as_default | bool else [])
       + ([runtime_config_docker_daemon_json ~ ": the default was NVIDIA's runtime " ~ __docker_default
           ~ ", it is no longer (docker's own runc is)"]
          if __docker_other_default | bool and not runtime_config_set_as_default | bool else [])
       + ([runtime_config_containerd_config ~ ": " ~ __containerd.nvidia_note]
          if __containerd.nvidia_note | default('') | length > 0 else []) }}
__runtime_config_installer_undo: >-
  {%- set changed = [] -%}
  {%- for key, result in [('template', __runtime_config_installer_tmpl | default({})),
                          ('dropin', __runtime_config_installer_agent | default({}))] -%}
  {%-   if result is changed -%}
  {%-     set path = __runtime_config_installer_template if key == 'template' else __runtime_config_installer_dropin -%}
  {%-     set _ = changed.append({'path': path, 'backup_file': result.backup_file | default(''),
                                  'existed': result.backup_file | default('') | length > 0}) -%}
  {%-   endif -%}
  {%- endfor -%}
  {%- for removed in __runtime_config_installer_removed | default([]) -%}
  {%-   set _ = changed.append(removed) -%}
  {%- endfor -%}
  {%- if changed -%}
  {{ {__runtime_config_installer.service: {'path': changed[0].path, 'existed': changed[0].existed,
      'backup_file': changed[0].backup_file, 'mode': '', 'owner': '', 'group': '',
      'dropin_path': (changed[1].path if changed | length > 1 else ''),
      'dropin_backup_file': (changed[1].backup_file if changed | length > 1 else '')}} }}
  {%- else -%}
  {{ {} }}
  {%- endif -%}
__runtime_config_failure: >-
  {{ (ansible_failed_result.msg | default('')).splitlines() | first | default('') }}
  {{ ansible_failed_result.stderr | default('') }}
  {%- set errors = __runtime_config_journal.stdout_lines | default([])
        | select('search', '(?i)level=(fatal|error)|unable to|failed to|error:')
        | reject('search', '^(Failed to start|Stopped|Started|Starting|Stopping|[a-z.-]+\\.service:)') | list %}
  {{ ('its log says: ' ~ errors[-1] | truncate(300)) if errors else '' }}
"""
)
OLD_NOTES_VARS = OLD["vars"]
OLD_INSTALLER_UNDO = OLD["__runtime_config_installer_undo"]
OLD_FAILURE = OLD["__runtime_config_failure"]

DOCKER = "/etc/docker/daemon.json"
CONTAINERD = "/etc/containerd/config.toml"
NOTE = "also registers NVIDIA's runtime as nvidia-cdi: kept"
STATES = [
    {},
    {"skipped": True, "changed": False},
    {"docker_nvidia_entries": {}, "docker_default_runtime": "", "docker_default_nvidia": False},
    {"docker_nvidia_entries": {"nvidia": "/usr/bin/nvidia-container-runtime"}, "docker_default_runtime": "nvidia"},
    {
        "docker_nvidia_entries": {"gpu": "/usr/bin/nvidia-container-runtime", "nvidia": "/usr/bin/ncr"},
        "docker_default_runtime": "gpu",
        "docker_default_nvidia": True,
    },
    {
        "docker_nvidia_entries": {"a": "/x", "b": "/y", "nvidia": "/z"},
        "docker_default_runtime": "runc",
        "docker_default_nvidia": False,
    },
    {"docker_nvidia_entries": {"gpu": "/x"}, "docker_default_runtime": "nvidia", "docker_default_nvidia": True},
]
TARGETS = [[], ["docker"], ["containerd"], ["docker", "containerd", "crio"]]
CONTAINERD_RESULTS = [{}, {"changed": True}, {"changed": False, "nvidia_note": NOTE}]


def _old_notes(state, targets, name, set_as_default, containerd_result):
    variables = {
        "__runtime_config_state": state,
        "__runtime_config_targets": targets,
        "runtime_config_name": name,
        "runtime_config_set_as_default": set_as_default,
        "__runtime_config_containerd": containerd_result,
        "runtime_config_docker_daemon_json": DOCKER,
        "runtime_config_containerd_config": CONTAINERD,
        **OLD_NOTES_VARS,
    }
    return render_role_value("{{ __notes }}", variables)


CASES = [
    (state, targets, name, set_as_default, result)
    for state in STATES
    for targets in TARGETS
    for name in ("nvidia", "gpu")
    for set_as_default in (True, False)
    for result in CONTAINERD_RESULTS
]


@pytest.mark.parametrize(("state", "targets", "name", "set_as_default", "result"), CASES)
def test_the_notes_are_what_the_old_jinja_said(state, targets, name, set_as_default, result):
    new = rc.runtime_config_notes(state, targets, name, set_as_default, result, DOCKER, CONTAINERD)
    assert new == _old_notes(state, targets, name, set_as_default, result)


def test_the_notes_name_the_other_entries_and_the_default_that_stays():
    state = STATES[4]
    assert rc.runtime_config_notes(state, ["docker"], "nvidia", True, {}, DOCKER, CONTAINERD) == [
        f"{DOCKER} also registers NVIDIA's runtime as gpu (/usr/bin/nvidia-container-runtime): kept",
        f"{DOCKER}: NVIDIA's runtime gpu stays the default (no second default named nvidia)",
    ]
    assert rc.runtime_config_notes({}, ["containerd"], "nvidia", True, CONTAINERD_RESULTS[2], DOCKER, CONTAINERD) == [
        f"{CONTAINERD}: {NOTE}"
    ]


TEMPLATE = "/var/lib/rancher/rke2/agent/etc/containerd/config.toml.tmpl"
DROPIN = "/etc/rancher/rke2/config.yaml.d/90-gpu-node-nvidia.yaml"
RESULTS = [
    {},
    {"skipped": True, "changed": False},
    {"changed": False, "backup_file": "/b/old~"},
    {"changed": True},
    {"changed": True, "backup_file": "/b/tmpl~"},
]
REMOVED = [[], [{"path": DROPIN, "backup_file": "/b/dropin~", "existed": True}]]
UNDO_CASES = [(tmpl, agent, removed) for tmpl in RESULTS for agent in RESULTS for removed in REMOVED]


@pytest.mark.parametrize(("tmpl", "agent", "removed"), UNDO_CASES)
def test_the_installer_undo_is_what_the_old_jinja_recorded(tmpl, agent, removed):
    variables = {
        "__runtime_config_installer": {"service": "rke2-agent"},
        "__runtime_config_installer_template": TEMPLATE,
        "__runtime_config_installer_dropin": DROPIN,
        "__runtime_config_installer_tmpl": tmpl,
        "__runtime_config_installer_agent": agent,
        "__runtime_config_installer_removed": removed,
    }
    new = rc.runtime_config_installer_undo("rke2-agent", [[TEMPLATE, tmpl], [DROPIN, agent]], removed)
    assert new == render_role_value(OLD_INSTALLER_UNDO, variables)


def test_the_installer_undo_records_a_new_template_and_a_changed_dropin():
    undo = rc.runtime_config_installer_undo("k3s-agent", [[TEMPLATE, {"changed": True}], [DROPIN, RESULTS[4]]])
    assert undo == {
        "k3s-agent": {
            "path": TEMPLATE,
            "existed": False,
            "backup_file": "",
            "mode": "",
            "owner": "",
            "group": "",
            "dropin_path": DROPIN,
            "dropin_backup_file": "/b/tmpl~",
        }
    }
    assert rc.runtime_config_installer_undo("k3s-agent", [[TEMPLATE, {}], [DROPIN, {"changed": False}]]) == {}


JOURNALS = [
    [],
    ["Started docker.service", "docker.service: Main process exited, code=exited"],
    [
        'time="2026" level=error msg="failed to start daemon: invalid runtime"',
        "Failed to start docker.service - Docker Application Container Engine.",
        "containerd: failed to load TOML: unable to read " + "x" * 400,
    ],
    ["level=fatal msg=boom", "ERROR: bad config " + "word " * 80],
    ["level=error msg=the real cause", "Failed to start docker.service - Docker.", "docker.service: failed to x"],
]
FAILED = [
    {},
    {"msg": "non-zero return code", "stderr": ""},
    {"msg": "first line\nsecond line", "stderr": "CRI plugin did not load"},
    {"msg": "", "stderr": "x"},
]


@pytest.mark.parametrize("journal", JOURNALS)
@pytest.mark.parametrize("failed", FAILED)
def test_the_failure_reason_is_what_the_old_jinja_said(failed, journal):
    variables = {"ansible_failed_result": failed, "__runtime_config_journal": {"stdout_lines": journal}}
    old = render_role_value(OLD_FAILURE, variables)
    # the one difference: the old Jinja put no space between stderr and the log's line
    assert rc.runtime_config_failure_reason(failed, journal) == re.sub(r"(?<=\S)its log says: ", " its log says: ", old)


def test_the_failure_reason_quotes_the_last_error_line_of_the_log():
    reason = rc.runtime_config_failure_reason({"msg": "rc 1"}, JOURNALS[2])
    assert reason.startswith("rc 1 its log says: containerd: failed to load TOML: unable to read")
    assert reason.endswith("...") and len(reason) < 340


def test_systemds_own_lines_are_not_the_reason():
    reason = rc.runtime_config_failure_reason({"msg": "rc 1"}, JOURNALS[4])
    assert reason == "rc 1 its log says: level=error msg=the real cause"


def test_docker_daemon_json_changes_says_what_the_module_in_check_mode_does(tmp_path):
    """The daemon.json task runs only where this filter says the file would change (issue 47): on every file the
    module would change it must say so, and where the module would not, it must not (else a re-run is not a no-op)."""
    import json as _json

    from conftest import local_play, run_local_playbook

    settings = {"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime", "args": []}}}
    registered = '{"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime", "args": []}}}'
    cases = {
        "registered": (registered, settings, []),
        "registered_bom_other_layout": ("\ufeff" + _json.dumps(_json.loads(registered), indent=8), settings, []),
        "empty_file": ("", settings, []),
        "other_path": (registered.replace("/usr/bin/", "/opt/bin/"), settings, []),
        "default_to_remove": (registered[:-1] + ', "default-runtime": "nvidia"}', settings, [["default-runtime"]]),
        "nothing_to_remove": (registered, settings, [["default-runtime"]]),
        "not_json": ("{runtimes:", settings, []),
        "missing": (None, settings, []),
    }
    tasks = []
    for name, (text, wanted, remove) in cases.items():
        path = tmp_path / f"{name}.json"
        if text is not None:
            path.write_text(text, encoding="utf-8")
        tasks.append(
            {
                "gpunode.provisioning.docker_daemon_config": {"path": str(path), "settings": wanted, "remove": remove},
                "register": name,
                "check_mode": True,
                "ignore_errors": True,
            }
        )
    out = tmp_path / "out.json"
    shown = {name: f"{{{{ {name}.changed or {name}.failed | default(false) }}}}" for name in cases}
    tasks.append(
        {"ansible.builtin.copy": {"content": "{{ shown | to_json }}", "dest": str(out)}, "vars": {"shown": shown}}
    )
    run = run_local_playbook(local_play(tmp_path / "play.yml", tasks=tasks))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    module_says = {name: value in (True, "True", "true") for name, value in _json.loads(out.read_text()).items()}
    filter_says = {}
    for name, (text, wanted, remove) in cases.items():
        file = {"path": str(tmp_path / f"{name}.json"), "exists": text is not None}
        if text is not None:
            file["content"] = text
        filter_says[name] = rc.docker_daemon_json_changes(file, wanted, remove)
    assert filter_says == module_says
    assert [name for name, changes in filter_says.items() if not changes] == [
        "registered",
        "registered_bom_other_layout",
        "nothing_to_remove",
    ]
    # a file not read whole (no text): the task runs
    assert rc.docker_daemon_json_changes({"path": "/x", "exists": True}, settings, [])
