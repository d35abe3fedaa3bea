# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The restart transaction's files (roles/gpu_node_facts/tasks/restart_transaction.yml).

A file to put back is `{path, existed, owner, group, mode}` and, where it existed, either `backup_file` (a copy the
run left on the node: runtime_config) or `content` (the text read before the change: the kubelet).

- `restart_files_to_restore(files, how)`: the files that existed and are put back from a `backup_file` or from
  their `content` (a file with both is restored from its backup).
- `restart_rollback_summary(files)`: what the rollback did, as the failure message says it:
  "restored P from B", "restored P", "removed P, which did not exist before".
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

_SOURCES = ("backup_file", "content")


def _files(files) -> list[Mapping]:
    if not isinstance(files, list) or not all(isinstance(entry, Mapping) and "path" in entry for entry in files):
        raise AnsibleFilterError(f"the restart transaction's files are a list of mappings with a path, not {files!r}")
    return files


def _source(entry: Mapping) -> str:
    """How an existing file is put back: from its backup, else from its content; '' when it cannot be."""
    if entry.get("backup_file"):
        return "backup_file"
    return "content" if entry.get("content") is not None else ""


def restart_files_to_restore(files, how: str) -> list[Mapping]:
    """The files that existed and are put back `how` ("backup_file" or "content")."""
    if how not in _SOURCES:
        raise AnsibleFilterError(f"restart_files_to_restore: how is one of {_SOURCES}, not {how!r}")
    return [entry for entry in _files(files) if entry.get("existed") and _source(entry) == how]


def restart_rollback_summary(files) -> str:
    """What the rollback did to each file, in the files' order."""
    done = []
    for entry in _files(files):
        path = entry["path"]
        if not entry.get("existed"):
            done.append(f"removed {path}, which did not exist before")
        elif _source(entry) == "backup_file":
            done.append(f"restored {path} from {entry['backup_file']}")
        elif _source(entry) == "content":
            done.append(f"restored {path}")
        else:
            done.append(f"NOT restored {path} (no backup)")
    return ", ".join(done) if done else "nothing"


class FilterModule:
    """The restart transaction's files (see the module docstring)."""

    def filters(self):
        return {
            "restart_files_to_restore": restart_files_to_restore,
            "restart_rollback_summary": restart_rollback_summary,
        }
