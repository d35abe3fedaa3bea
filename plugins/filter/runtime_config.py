# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""runtime_config's reports and records that used to be Jinja programs in its tasks (issue 40):

- `runtime_config_notes(state, targets, name, set_as_default, containerd_result, docker_file, containerd_file)`:
  what the role says about NVIDIA runtime entries under other names and about the default runtime (tasks/main.yml).
- `runtime_config_installer_undo(service, changes, removed)`: what the RKE2/k3s agent's restart rolls back to
  (tasks/installer.yml, then plugins/filter/runtime_rollback.py adds it to the plan).
- `runtime_config_failure_reason(failed_result, journal_lines)`: why a runtime did not come back after its restart,
  from the failed task and the runtime's journal (tasks/transaction.yml).
- `docker_daemon_json_changes(file, settings, remove, list_strategy)`: whether docker_daemon_config would change the
  daemon.json that runtime_config_state read (``file``: its ``files.docker``, with the text), worked out here with the
  module's own parser and merge: true also where the file is missing, was not read whole or does not parse (the
  module then runs and says why). The merge task runs only where this is true (issue 47: its payload build and its
  module run on every re-run).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

# Journal lines that say why a runtime failed, and systemd's own lines about the unit, which do not.
_ERROR_LINE = re.compile(r"(?i)level=(fatal|error)|unable to|failed to|error:")
_SYSTEMD_LINE = re.compile(r"^(Failed to start|Stopped|Started|Starting|Stopping|[a-z.-]+\.service:)")


def _truncate(text, length=300, end="...", leeway=5):
    """Jinja's `truncate` filter with its defaults (at a word boundary, 5 characters of leeway), which the old
    template used: the text whole when it is at most length + leeway long, else cut before the last word that ends
    before length - len(end), and end appended."""
    if len(text) <= length + leeway:
        return text
    return text[: length - len(end)].rsplit(" ", 1)[0] + end


def runtime_config_notes(state, targets, name, set_as_default, containerd_result, docker_file, containerd_file):
    """The notes of tasks/main.yml's report, a list of strings (empty: nothing to say).

    `state` is runtime_config_state's result (docker_nvidia_entries: the names under which daemon.json registers
    NVIDIA's runtime, name -> path; docker_default_runtime and docker_default_nvidia: docker's default runtime and
    whether it is NVIDIA's); `containerd_result` the containerd merge's result (its nvidia_note). Entries of
    docker's named `name` are this role's own and not reported; a docker default that is NVIDIA's runtime under
    another name stays the default (set_as_default) or stopped being it (not set_as_default).
    """
    if not isinstance(state, Mapping):
        raise AnsibleFilterError(f"runtime_config_notes: the node state is a mapping, not {type(state).__name__}")
    targets = list(targets or [])
    notes = []
    entries = state.get("docker_nvidia_entries") or {}
    if "docker" in targets:
        listed = ", ".join(f"{key} ({value})" for key, value in entries.items() if key != name)
        if listed:
            notes.append(f"{docker_file} also registers NVIDIA's runtime as {listed}: kept")
    default = state.get("docker_default_runtime")
    other_default = (
        "docker" in targets and default not in (None, "", name) and bool(state.get("docker_default_nvidia", False))
    )
    if other_default and set_as_default:
        notes.append(f"{docker_file}: NVIDIA's runtime {default} stays the default (no second default named {name})")
    if other_default and not set_as_default:
        notes.append(
            f"{docker_file}: the default was NVIDIA's runtime {default}, it is no longer (docker's own runc is)"
        )
    containerd_note = (containerd_result or {}).get("nvidia_note", "") if "containerd" in targets else ""
    if containerd_note:
        notes.append(f"{containerd_file}: {containerd_note}")
    return notes


def runtime_config_installer_undo(service, changes, removed=None) -> dict:
    """{agent unit: what its restart rolls back to}, or {} when nothing changed.

    `changes` are [path, registered result] pairs of the installer's files in order (the containerd template, then
    the agent config drop-in): a changed one is recorded with its backup (no backup: the file did not exist);
    `removed` are the records of files tasks/installer_remove.yml took away ({path, existed, backup_file}). The
    first changed file is the entry's file, a second its drop-in.
    """
    changed = [
        {
            "path": path,
            "backup_file": (result or {}).get("backup_file", ""),
            "existed": len((result or {}).get("backup_file", "")) > 0,
        }
        for path, result in changes
        if (result or {}).get("changed", False)
    ]
    changed += list(removed or [])
    if not changed:
        return {}
    second = changed[1] if len(changed) > 1 else {}
    return {
        service: {
            "path": changed[0]["path"],
            "existed": changed[0]["existed"],
            "backup_file": changed[0]["backup_file"],
            "mode": "",
            "owner": "",
            "group": "",
            "dropin_path": second.get("path", ""),
            "dropin_backup_file": second.get("backup_file", ""),
        }
    }


def runtime_config_failure_reason(failed_result, journal_lines=None) -> str:
    """Why the runtime did not come back: the failed task's first message line and its stderr, then the last line
    of the runtime's journal that reads as an error (systemd's own lines about the unit left out), cut to 300
    characters as Jinja's truncate does. tasks/transaction.yml trims and cuts the whole to 400 characters."""
    failed_result = failed_result or {}
    first = next(iter(str(failed_result.get("msg", "")).splitlines()), "")
    errors = [line for line in (journal_lines or []) if _ERROR_LINE.search(line) and not _SYSTEMD_LINE.search(line)]
    log = ("its log says: " + _truncate(errors[-1])) if errors else ""
    text = f"{first} {failed_result.get('stderr', '')}"
    # the Jinja this replaces joined the log's line to stderr with no space ("...did not loadits log says")
    return f"{text.rstrip()} {log}" if log else text


def docker_daemon_json_changes(file, settings, remove=None, list_strategy="replace") -> bool:
    """Whether docker_daemon_config with ``settings`` and ``remove`` would change the file read as ``file``."""
    from ansible_collections.gpunode.provisioning.plugins.modules import docker_daemon_config as module

    file = file or {}
    if not file.get("exists") or not isinstance(file.get("content"), str):
        return True
    text = file["content"]
    text = text[1:] if text.startswith("\ufeff") else text  # the module reads it as utf-8-sig
    try:
        current = module.parse_daemon_json(text, str(file.get("path", "daemon.json")))
        config = module.build_config(current, dict(settings or {}), list(remove or []), list_strategy)
    except Exception:  # the module refuses the file or the settings with its own message: it runs
        return True
    return not module.values_equal(current, config)


class FilterModule:
    """runtime_config's reports and rollback records (see the module docstring)."""

    def filters(self):
        return {
            "runtime_config_notes": runtime_config_notes,
            "runtime_config_installer_undo": runtime_config_installer_undo,
            "runtime_config_failure_reason": runtime_config_failure_reason,
            "docker_daemon_json_changes": docker_daemon_json_changes,
        }
