# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""`runtime_rollback_plan(results, runtimes, targets, files, state, installer_undo)`: what each changed runtime's
transaction rolls back to (roles/runtime_config/tasks/transaction.yml and restart.yml), and
`runtime_rollback_files(entry)`: one entry as the files of the shared restart transaction.

From the merge tasks' registered results (`results`: runtime -> result, {} for a runtime whose task did not run),
the node state read before them (`state`, runtime_config_state: each config file's existence, mode, owner and group
before the change, and the pending markers of changes an earlier run wrote but did not apply) and the config file
of each runtime (`files`). A runtime is in the plan when it is one of `targets` and its merge changed something;
its entry says which file to restore from which backup (containerd's also its drop-in). `installer_undo`
(RKE2/k3s: the agent's template and drop-in, tasks/installer.yml) is added as is. A pending marker wins over this
run's entry, since its backup holds the config the runtime runs.

The plan's order is the restart order: `runtimes` reversed (crio, containerd, docker), whatever order the targets
were given in, so that docker's containerd comes back first.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError


def _changed(result: Mapping) -> bool:
    """Ansible's `changed` test: the result's `changed`, else whether any of a loop's results changed."""
    if not isinstance(result, Mapping):
        raise AnsibleFilterError(f"runtime_rollback_plan: a registered result is a mapping, not {type(result)}")
    if "changed" in result:
        return bool(result["changed"])
    loop = result.get("results")
    return (
        isinstance(loop, list) and bool(loop) and isinstance(loop[0], Mapping) and any(r.get("changed") for r in loop)
    )


def runtime_rollback_plan(results, runtimes, targets, files, state, installer_undo=None) -> dict:
    """runtime -> what its transaction restores (see the module docstring)."""
    if not isinstance(results, Mapping) or not isinstance(state, Mapping):
        raise AnsibleFilterError("runtime_rollback_plan: expects the merge results and the node state as mappings")
    plan = {}
    for name in reversed(list(runtimes)):
        result = results.get(name, {})
        if name not in targets or not _changed(result):
            continue
        before = state["files"][name]
        entry = {
            "path": files[name],
            "existed": before["exists"],
            "backup_file": result.get("backup_file", ""),
            "mode": before.get("mode", ""),
            "owner": before.get("owner", ""),
            "group": before.get("group", ""),
        }
        if name == "containerd":
            entry.update(
                dropin_path=result.get("dropin_path", ""), dropin_backup_file=result.get("dropin_backup_file", "")
            )
        plan[name] = entry
    plan.update(installer_undo or {})
    for name, entry in state.get("pending", {}).items():
        plan[name] = {**entry, "pending_since_earlier_run": True}
    return plan


def runtime_rollback_files(entry) -> list[dict]:
    """One plan entry (or a pending marker's, written by an earlier run in the same form) as the restart
    transaction's files (plugins/filter/restart_transaction.py): the config file, then containerd's or the agent's
    drop-in where the change wrote or removed one (no drop-in backup: the drop-in is new, and is removed)."""
    if not isinstance(entry, Mapping) or "path" not in entry:
        raise AnsibleFilterError(f"runtime_rollback_files: expects one entry of the rollback plan, not {entry!r}")
    files = [
        {
            "path": entry["path"],
            "existed": bool(entry.get("existed")),
            "backup_file": entry.get("backup_file", ""),
            "owner": entry.get("owner", ""),
            "group": entry.get("group", ""),
            "mode": entry.get("mode", ""),
        }
    ]
    if entry.get("dropin_path"):
        backup = entry.get("dropin_backup_file", "")
        files.append({"path": entry["dropin_path"], "existed": bool(backup), "backup_file": backup})
    return files


class FilterModule:
    """runtime_config's rollback plan (see the module docstring)."""

    def filters(self):
        return {"runtime_rollback_plan": runtime_rollback_plan, "runtime_rollback_files": runtime_rollback_files}
