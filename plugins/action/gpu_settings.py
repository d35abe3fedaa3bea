# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""gpu_settings on the controller: the role's variables checked, then the node-side module, in one task.

The role gpu_settings costs one task on every run (the no-op run of site.yml counts them): its task gives ``spec`` and
``checks`` as a role_variables task would, this action runs the role_variables action (plugins/action/role_variables.py)
on the same task first, with the same messages, and a refusal fails the task before the module runs (the node stays as
it was). ``spec`` and ``checks`` are not passed to the module.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash
from ansible_collections.gpunode.provisioning.plugins.plugin_utils.controller_files import COLLECTION

MODULE = f"{COLLECTION}.gpu_settings"
CHECKER = f"{COLLECTION}.role_variables"
CHECK_ARGS = ("spec", "checks", "entry_point")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def check_variables(self, task_vars: dict) -> dict | None:
        """The role_variables action's result for this task's ``spec`` and ``checks``; None where it names no spec."""
        if not self._task.args.get("spec"):
            return None
        checker = self._shared_loader_obj.action_loader.get(
            CHECKER,
            task=self._task,
            connection=self._connection,
            play_context=self._play_context,
            loader=self._loader,
            templar=self._templar,
            shared_loader_obj=self._shared_loader_obj,
        )
        return checker.run(task_vars=task_vars)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        checked = self.check_variables(task_vars)
        if checked and checked.get("failed"):
            return merge_hash(result, checked)
        args = {name: value for name, value in self._task.args.items() if name not in CHECK_ARGS}
        return merge_hash(result, self._execute_module(MODULE, module_args=args, task_vars=task_vars))
