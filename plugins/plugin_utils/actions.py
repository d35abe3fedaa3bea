# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The base of this project's actions that run another action plugin inside their one task (issue 47: one task where
there were two or three).

``run_action`` runs an action plugin on the task's connection, with the task's loader, templar and play context, as
a task of its own would: the task itself, or a copy with other arguments, check mode or diff mode.
``check_variables`` is the variable check every role's first task makes (the role_variables action, with the task's
``spec``, ``checks`` and ``entry_point``): role_read, gpu_node_facts and gpu_settings check a role's variables before
they read or change anything; gpu_validate_outcome writes the doctor's reports through the ``copy`` and
``fleet_report_write`` actions.

The module payloads of the actions built on it come from the payload cache (plugins/plugin_utils/payload_cache.py).
Controller plugins import it as ``ansible_collections.gpunode.provisioning.plugins.plugin_utils.actions``.
"""

from __future__ import annotations

from ansible_collections.gpunode.provisioning.plugins.plugin_utils.controller_files import COLLECTION
from ansible_collections.gpunode.provisioning.plugins.plugin_utils.payload_cache import ActionBase as _CachedBase

# The action that checks a role's variables (plugins/action/role_variables.py).
CHECKER = f"{COLLECTION}.role_variables"


class ActionBase(_CachedBase):
    """The project's ActionBase (its payloads cached) that can run another action inside its task."""

    def run_action(
        self,
        name: str,
        task_vars: dict,
        args: dict | None = None,
        check_mode: bool | None = None,
        diff: bool | None = None,
        register: str | None = None,
        templar=None,
    ) -> dict:
        """The action plugin ``name`` run on this task's connection: on the task itself, or where ``args``,
        ``check_mode``, ``diff`` or ``register`` are given, on a copy of the task with them; with ``templar`` (its
        variables: another role's, plugins/plugin_utils/read_ahead.py) instead of this task's."""
        task = self._task
        if args is not None or check_mode is not None or diff is not None or register is not None:
            task = task.copy(exclude_tasks=True)
            if register is not None:
                task.register = register
            if args is not None:
                task.args = args
            if check_mode is not None:
                task.check_mode = check_mode
            if diff is not None:
                task.diff = diff
        plugin = self._shared_loader_obj.action_loader.get(
            name,
            task=task,
            connection=self._connection,
            play_context=self._play_context,
            loader=self._loader,
            templar=self._templar if templar is None else templar,
            shared_loader_obj=self._shared_loader_obj,
        )
        return plugin.run(task_vars=task_vars)

    def check_variables(self, task_vars: dict) -> dict | None:
        """The role_variables action's result for this task's ``spec`` and ``checks``; None where it names no spec."""
        if not self._task.args.get("spec"):
            return None
        return self.run_action(CHECKER, task_vars)
