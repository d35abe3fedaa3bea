# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""gpu_settings on the controller: the role's variables checked, then the node-side module, in one task.

The role gpu_settings costs one task on every run (the no-op run of site.yml counts them): its task gives ``spec`` and
``checks`` as a role_variables task would, this action runs the role_variables action (plugins/action/role_variables.py)
on the same task first, with the same messages, and a refusal fails the task before the module runs (the node stays as
it was). ``spec`` and ``checks`` are not passed to the module.

With nothing declared (plugins/module_utils/nvidia/settings.py ``declared``) the module only removes the files an
earlier declaration left (the boot unit, the record, the modprobe.d file) and asks nothing of the GPUs. Where the
gpu_node facts say that none of those files exists (``ansible_facts.gpu_node.path_exists``: the facts role's task
tests the paths of roles/gpu_node_facts/vars/main.yml), the module would change nothing: this action returns its
unchanged result without running it, sparing the no-op re-run a module payload and a module run (issue 47). Where
the facts do not answer for each of the task's three paths (no gpu_node facts, an older shape, the facts of another
``root``), the module runs as before. The facts are those the play read last (the role's dependency runs once per
play): a second gpu_settings task in the same play, after one that wrote the files, still sees them absent unless
the facts were read again in between.
"""

from __future__ import annotations

from ansible.utils.vars import merge_hash
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.settings import declared
from ansible_collections.gpunode.provisioning.plugins.plugin_utils.actions import ActionBase
from ansible_collections.gpunode.provisioning.plugins.plugin_utils.controller_files import COLLECTION

MODULE = f"{COLLECTION}.gpu_settings"
CHECK_ARGS = ("spec", "checks", "entry_point")
# The module's parameters that name the files a declaration leaves on the node.
FILE_ARGS = ("unit_path", "record_path", "modprobe_path")


def nothing_to_do(args: dict, facts: dict | None) -> bool:
    """Whether the module would change nothing and read nothing of the GPUs: nothing declared in ``args`` (the
    module's), and ``facts`` (the play's ansible_facts) say that none of its files exists. False where they cannot
    tell."""
    settings = args.get("settings")
    if not isinstance(settings, dict) or declared(settings):
        return False
    exists = ((facts or {}).get("gpu_node") or {}).get("path_exists")
    if not isinstance(exists, dict):
        return False
    return all(exists.get(args.get(name)) is False for name in FILE_ARGS)


def unchanged(diff: bool) -> dict:
    """The module's result where nothing is declared and none of its files exists."""
    result = {"changed": False, "changes": [], "pending": [], "reboot_required": False}
    if diff:
        result["diff"] = []
    return result


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        checked = self.check_variables(task_vars)
        if checked and checked.get("failed"):
            return merge_hash(result, checked)
        args = {name: value for name, value in self._task.args.items() if name not in CHECK_ARGS}
        if nothing_to_do(args, task_vars.get("ansible_facts")):
            return merge_hash(result, unchanged(bool(self._task.diff)))
        return merge_hash(result, self._execute_module(MODULE, module_args=args, task_vars=task_vars))
