# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""A role's variable check and its read of the node in one task: the one read that decides the role's path.

A no-op re-run of site.yml costs what its tasks cost (each task: a worker process on the controller, a connection
to the node, a result through the callbacks; bench/README.md). A role whose first task checked its variables
(plugins/action/role_variables.py) and whose next task read the node paid two tasks for what one can do: this action
runs the role_variables action on the same task first (``spec``, ``checks``, ``entry_point``: the same arguments,
the same messages), and only when the variables hold, the reads, each a module run on the node:

- ``reads``: a list of ``{module, args}``, or ``{module, args, items, item_arg}``: the module runs once per item with
  ``args[item_arg]`` set to the item (as a ``loop:`` task would, without a task per item) and its result is
  ``{results: [{item, ...module's result}], ...}``, the shape a loop task registers.
  Items that are mappings and no ``item_arg``: each item is merged over ``args`` (a loop over whole argument sets).
  ``missing_ok: true``: an item whose module fails because its path is not there ("not found" in its msg) is no
  failure (a slurp of a file that may be missing, as ``failed_when`` on a read task would say).
  ``skip: true``: the read does not run (its result is ``{skipped: true, changed: false}``), as ``when`` would.
- A read with ``check_mode: true`` is a probe: the module (or with ``action:`` instead of ``module:``, a
  controller-side action of this project, such as containerd_config) runs in check mode and says whether the task
  that runs it for real would change anything (its ``changed``), without changing anything. The role's real task takes
  the same arguments from the same variable, so the probe and the change cannot drift apart.
- ``reads`` may also name a variable holding that list: it is rendered only after the variable check, so that reads
  built from a variable the check refuses do not fail to render first.
- The task's result: ``reads``, the reads' results in order (a probe's ``changed`` among them); with one read, also
  that read's result itself (so a role that registered its read task keeps the names it reads: ``stdout``,
  ``results``). The task itself never reports a change. ``checked`` lists the variables
  checked.

Give the task ``check_mode: false``: a read changes nothing and must run in check mode too (the role's include that
follows decides from it what ``--check`` shows). A read whose module fails fails the task, as the read task did.
A role used on its own runs the same task: the check is never skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash

CHECKER = "ansible.legacy.role_variables"
CHECK_ARGS = ("spec", "checks", "entry_point")


def read_problem(read) -> str | None:
    """Why one entry of ``reads`` is not a read, or None."""
    if not isinstance(read, Mapping) or not (read.get("module") or read.get("action")):
        return f"each read needs module or action (and args): got {read!r}"
    name = read.get("module") or read.get("action")
    if read.get("module") and read.get("action"):
        return f"read {name} names both a module and an action"
    if not isinstance(read.get("args") or {}, Mapping):
        return f"the args of read {name} must be a mapping"
    if "items" in read:
        if not isinstance(read["items"], Sequence) or isinstance(read["items"], str):
            return f"the items of read {name} must be a list"
        if not read.get("item_arg") and not all(isinstance(item, Mapping) for item in read["items"]):
            return f"read {name} has items but no item_arg naming the argument each item goes to"
    return None


def loop_result(results: list[dict]) -> dict:
    """The shape a loop task registers: results, changed/failed if any item was, the first failure's msg."""
    combined = {"results": results, "changed": any(r.get("changed") for r in results), "skipped": False}
    failed = [r for r in results if r.get("failed")]
    if failed:
        combined["failed"] = True
        combined["msg"] = failed[0].get("msg", "One or more items failed")
    return combined


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def check_variables(self, task_vars: dict) -> dict | None:
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

    def run_one(self, read: Mapping, args: dict, task_vars: dict) -> dict:
        """One module (or action) run, in check mode where the read is a probe."""
        probe = bool(read.get("check_mode", False))
        if read.get("action"):
            task = self._task.copy(exclude_tasks=True)
            task.args = args
            task.check_mode = probe
            task.diff = False
            plugin = self._shared_loader_obj.action_loader.get(
                read["action"],
                task=task,
                connection=self._connection,
                play_context=self._play_context,
                loader=self._loader,
                templar=self._templar,
                shared_loader_obj=self._shared_loader_obj,
            )
            return plugin.run(task_vars=task_vars)
        mode = self._task.check_mode
        self._task.check_mode = probe  # _execute_module passes the task's check mode to the module
        try:
            return self._execute_module(read["module"], module_args=args, task_vars=task_vars)
        finally:
            self._task.check_mode = mode

    def read(self, read: Mapping, task_vars: dict) -> dict:
        if read.get("skip"):
            return {"skipped": True, "changed": False}
        args = dict(read.get("args") or {})
        if "items" not in read:
            return self.run_one(read, args, task_vars)
        results = []
        for item in read["items"]:
            item_args = {**args, read["item_arg"]: item} if read.get("item_arg") else {**args, **item}
            one = self.run_one(read, item_args, task_vars)
            if read.get("missing_ok") and one.get("failed") and "not found" in str(one.get("msg", "")).lower():
                one["failed"] = False
            results.append({**one, "item": item, "ansible_loop_var": "item"})
        return loop_result(results)

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        reads = self._task.args.get("reads") or []
        checked = self.check_variables(task_vars)
        if checked and checked.get("failed"):
            return merge_hash(result, checked)
        if isinstance(reads, str):
            # the name of a variable: rendered only now, after the check (reads built from a variable the check
            # refuses would fail to render before it)
            if reads not in task_vars:
                raise AnsibleActionFail(f"role_read: reads names {reads}, which is not defined")
            reads = self._templar.copy_with_new_env(available_variables=task_vars).template(task_vars[reads])
        if not isinstance(reads, Sequence) or isinstance(reads, (str, Mapping)):
            raise AnsibleActionFail("role_read: reads must be a list of {module, args}")
        for read in reads:
            problem = read_problem(read)
            if problem:
                raise AnsibleActionFail(f"role_read: {problem}")
        done = []
        for read in reads:
            one = self.read(read, task_vars)
            done.append(one)
            if one.get("failed"):
                break
        if len(reads) == 1:
            result = merge_hash(result, done[0])
        result["reads"] = done
        if len(reads) > 1:
            failed = [one for one in done if one.get("failed")]
            if failed:
                result["failed"] = True
                result["msg"] = failed[0].get("msg", "a read failed")
        # a probe's changed is what its task would do: the reads themselves change nothing
        result["changed"] = False
        if checked:
            result["checked"] = checked.get("checked", [])
        return result
