# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's last task (roles/gpu_validate, tasks/report.yml): its reports that differ written, its table shown,
the node failed on a failed check, in one task.

The doctor's end was an include of the report writes (run only where a report differed) and a debug task that showed
the table and failed the node: two task headers on every re-run of site.yml, where issue 47 gives the doctor three in
all (the checks, the facts later plays read, and this). This action does what those tasks did, in their order:

- where ``node_pending``, the node's report directory as the ``file`` module makes it and each file of the variable
  ``node_files`` names as the ``copy`` action writes it (``root:root``, ``0644``), in the task's check and diff mode;
  a write that fails fails the task, its message after the table (the fleet report is written all the same: it holds
  the batch's other nodes);
- where ``fleet`` (the batch's first host, where the fleet report differs; the role never asks in check mode), the
  fleet report through the ``fleet_report_write`` action (its lock, its atomic writes: one home for both), then the
  line the variable ``fleet_message`` names;
- ``table`` as the task's message, shown as a debug task shows one; where ``fail``, ``failure`` after it and the
  task fails: the reports are written first, so a failed node's report says why.

The written files make the task's change (the fleet report is a report of the run, not a change of the fleet, as its
own task's ``changed_when: false`` said).
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible_collections.gpunode.provisioning.plugins.modules.gpu_validate_outcome import ARGUMENT_SPEC
from ansible_collections.gpunode.provisioning.plugins.plugin_utils.actions import ActionBase
from ansible_collections.gpunode.provisioning.plugins.plugin_utils.controller_files import COLLECTION

FLEET_WRITER = f"{COLLECTION}.fleet_report_write"
# The node's report files' owner and modes (the file and copy tasks that wrote them before gave them these).
OWNER = {"owner": "root", "group": "root"}
DIR_MODE = "0755"
FILE_MODE = "0644"


def outcome_message(table: str, fleet_line: str | None = None, failure: str | None = None) -> str:
    """The task's message: the table (it ends with a newline), the fleet report's line, the failure after them."""
    return table + (f"{fleet_line}\n" if fleet_line else "") + (failure or "")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False  # the copy action makes its own temporary directory, only where it writes
    _supports_check_mode = True
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def rendered(self, option: str, name, task_vars: dict):
        """The variable ``name`` (the value of ``option``) rendered now."""
        if not isinstance(name, str) or name not in task_vars:
            raise AnsibleActionFail(f"gpu_validate_outcome: {option} names {name!r}, which is not a defined variable")
        return self._templar.copy_with_new_env(available_variables=task_vars).template(task_vars[name])

    def write_node_files(self, args: dict, task_vars: dict) -> tuple[list[dict], dict | None]:
        """The report directory and files on the node: (the results, the first failed one or None)."""
        if not args["report_dir"]:
            raise AnsibleActionFail("gpu_validate_outcome: node_pending needs report_dir")
        files = self.rendered("node_files", args["node_files"], task_vars)
        done = [
            self._execute_module(
                "ansible.legacy.file",
                module_args={"path": args["report_dir"], "state": "directory", "mode": DIR_MODE, **OWNER},
                task_vars=task_vars,
            )
        ]
        if done[-1].get("failed"):
            return done, done[-1]
        for item in files:
            one = self.run_action(
                "ansible.legacy.copy",
                task_vars,
                args={"content": item["content"], "dest": item["path"], "mode": FILE_MODE, **OWNER},
            )
            done.append({**one, "dest": item["path"]})
            if one.get("failed"):
                return done, one
        return done, None

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result.update(changed=False, written=[], fleet_written=[])
        problems = []  # what failed in the writes: said after the table, and the task fails
        if args["node_pending"]:
            done, failed = self.write_node_files(args, task_vars)
            result["written"] = [one["dest"] for one in done[1:] if one.get("changed")]
            result["changed"] = any(one.get("changed") for one in done)
            diffs = [one["diff"] for one in done if one.get("diff")]
            if diffs:
                result["diff"] = [diff for one in diffs for diff in (one if isinstance(one, list) else [one])]
            if failed:
                problems.append(f"writing the doctor's report on the node failed: {failed.get('msg')}")
        fleet_line = None
        # the fleet report even where this node's own report could not be written: it holds the batch's other nodes
        if args["fleet"] and not self._task.check_mode:
            for name in ("fleet_files", "fleet_lock", "fleet_message"):
                if not args[name]:
                    raise AnsibleActionFail(f"gpu_validate_outcome: fleet needs {name}")
            try:
                wrote = self.run_action(
                    FLEET_WRITER, task_vars, args={"lock": args["fleet_lock"], "files": args["fleet_files"]}
                )
            except AnsibleActionFail as exc:
                wrote = {"failed": True, "msg": str(exc)}
            if wrote.get("failed"):
                problems.append(str(wrote.get("msg")))
            else:
                result["fleet_written"] = wrote.get("written", [])
                fleet_line = str(self.rendered("fleet_message", args["fleet_message"], task_vars))
        failures = ([args["failure"]] if args["fail"] else []) + problems
        result["failed"] = bool(failures)
        result["msg"] = outcome_message(args["table"], fleet_line, "\n".join(failures) or None)
        # shown as a debug task's message is, without -v
        result["_ansible_verbose_always"] = True
        return result
