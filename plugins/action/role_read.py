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
- ``plan``: the name of a variable rendered once all reads are done, with ``role_read_reads`` set to the reads'
  results (in order) and the task's result so far (its ``reads``, and with one read that read's keys) under the
  task's ``register`` name, so that a role's variables that read its registered read render in it: a role's plan
  filter over its variables, facts and the read (the kubelet's ``__kubelet_plan_after_read``,
  plugins/filter/kubelet_plan.py), or a mapping of the values its later tasks decide on (fuse, security_profiles,
  the toolkit: whether to change, what to report). Its value is the result's ``plan``, registered with
  the read, so the role's later tasks read one value instead of rendering a program of lazy variables again in each
  task (issue 47). A filter that fails fails the task with its message.
- ``probes``: the name of a variable holding a list of probes (reads in check mode), rendered after ``plan`` with the
  task's registered result so far (its ``reads`` and ``plan``) under the task's ``register`` name, so that probes
  built from the plan need no task of their own (the kubelet's, issue 47). A probe of config_file_write, kubelet_flags
  or ``file`` with ``state: absent`` whose file this task's stat and slurp reads have read is answered on the
  controller from those bytes and that stat (plugins/plugin_utils/probes.py); any other probe runs its module in
  check mode. Their results are the result's ``probes``, in order.
- ``report``: the name of a variable rendered last (after ``plan`` and ``probes``, the same way): a message (a
  sentence or a list of them, none where empty) that the task shows as warnings (a debug task's verbose result would
  show the reads' whole results with it), and that AWX records with the task's result. A role
  whose read finds nothing to change but something to say (what it leaves out on this node) says it here instead of
  in an include and a debug task of its own: two tasks less on such a node's re-run (issue 47).
- The task's result: ``reads``, the reads' results in order (a probe's ``changed`` among them); with one read, also
  that read's result itself (so a role that registered its read task keeps the names it reads: ``stdout``,
  ``results``). The task itself never reports a change. ``checked`` lists the variables
  checked.

The ``stat`` and ``slurp`` reads of a task (``ansible.legacy.``/``ansible.builtin.`` or bare, with no arguments but
the path and stat's follow/checksum/mime/attributes switches) run together as one run of the node_files module
(plugins/modules/node_files.py) instead of one module run per file: each such read still gets what its module would have
registered (stat's ``stat``, slurp's ``content``/``encoding``/``source`` or its "file not found" failure), so the
roles that read them change nothing. A no-op re-run's reads of the kubelet and security_profiles roles were 19 module
runs; they are 2 (issue 47).

A ``command`` read (``ansible.legacy.``/``ansible.builtin.`` or bare) that gives only ``argv`` (and ``stdin``,
``stdin_add_newline``, ``strip_empty_ends``), one run, no probe, runs its argv through the task's connection itself
(the way ``raw`` does, with the task's become and environment) instead of as the command module: no module payload to
build on the controller and no Python to start on the node for a shell read (issue 47: the toolkit's and the fuse
role's reads were three module runs and one payload build on every re-run). Only where the connection pipelines
modules (pipelining on, and a become method that allows it): the command then gets its input the way a pipelined
module does, never a terminal (ssh would give a command without input one with ``-tt``, merging stderr into stdout);
a command without ``stdin`` reads /dev/null. Without pipelining the command module runs as before. Its result is what
the command module registers: ``rc``, ``stdout`` and ``stderr`` (trailing newlines stripped unless
``strip_empty_ends`` is false) with their ``_lines``, ``cmd``, ``changed`` true, ``failed`` and "non-zero return
code" where ``rc`` is not 0. Two differences the project's reads never meet: the words of argv are passed as they
are (the command module expands ``$VAR`` and ``~`` of the node's environment in each one), and a missing program
is the shell's rc 127 (the module's: rc 2 and its message).

Where gpu_node_facts' task read a role ahead (plugins/plugin_utils/read_ahead.py), found something to change, and the
host reported no change since, the role's own read task (same role instance, register and arguments) returns that
read's result instead of reading the node again (with ``from_read_ahead: true``).

Give the task ``check_mode: false``: a read changes nothing and must run in check mode too (the role's include that
follows decides from it what ``--check`` shows). A read whose module fails fails the task, as the read task did.
A role used on its own runs the same task: the check is never skipped.
"""

from __future__ import annotations

import datetime
import shlex
from collections.abc import Mapping, Sequence

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.utils.vars import merge_hash
from ansible_collections.gpunode.provisioning.plugins.plugin_utils import probes as _probes
from ansible_collections.gpunode.provisioning.plugins.plugin_utils import read_ahead
from ansible_collections.gpunode.provisioning.plugins.plugin_utils.actions import ActionBase
from ansible_collections.gpunode.provisioning.plugins.plugin_utils.controller_files import NODE_FILES_MODULE

CHECK_ARGS = ("spec", "checks", "entry_point")
# The command reads the action runs through the connection itself (direct_command), and the arguments they may give.
COMMAND_MODULES = _probes.builtin_names("command")
DIRECT_COMMAND_ARGS = {"argv", "stdin", "stdin_add_newline", "strip_empty_ends"}
# the variable that holds the reads' results while the plan variable renders
PLAN_READS = "role_read_reads"
# The modules whose reads node_files does, and the arguments it takes from them. stat's get_mime and get_attributes
# are accepted and left out (node_files returns neither: no role reads them).
BATCHED = {
    "stat": {
        "path": "path",
        "follow": "follow",
        "get_checksum": "get_checksum",
        "checksum_algorithm": "checksum_algorithm",
        "checksum": "checksum_algorithm",
        "checksum_algo": "checksum_algorithm",
        "get_mime": None,
        "get_attributes": None,
    },
    "slurp": {"src": "path", "path": "path"},
}
# What each module does where its task does not say: stat looks at a link itself and checksums; slurp reads the target.
BATCH_DEFAULTS = {
    "stat": {"follow": False, "get_checksum": True, "content": False},
    "slurp": {"follow": True, "get_checksum": False, "content": True},
}


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


def batched_kind(read) -> str | None:
    """``stat`` or ``slurp`` where node_files can do this read (no probe, no skip, only its arguments), else None."""
    name = str(read.get("module") or "")
    kind = name.rsplit(".", 1)[-1]
    if read.get("action") or kind not in BATCHED or name not in _probes.builtin_names(kind):
        return None
    if read.get("skip") or read.get("check_mode"):
        return None
    for arguments in argument_sets(read):
        if not set(arguments) <= set(BATCHED[kind]) or not any(BATCHED[kind][key] == "path" for key in arguments):
            return None
    return kind


def direct_command(read: Mapping) -> list[str] | None:
    """The argv of a command read the action runs through the connection itself (no module), else None."""
    name = str(read.get("module") or "")
    if read.get("action") or name not in COMMAND_MODULES:
        return None
    if "items" in read or read.get("skip") or read.get("check_mode"):
        return None
    args = read.get("args") or {}
    argv = args.get("argv")
    if not set(args) <= DIRECT_COMMAND_ARGS or not isinstance(argv, Sequence) or isinstance(argv, str) or not argv:
        return None
    return [str(word) for word in argv]


def command_result(argv: list[str], rc: int, out: str, err: str, strip: bool, started, ended) -> dict:
    """What the command module registers for one run of ``argv``."""
    if strip:
        out, err = out.rstrip("\r\n"), err.rstrip("\r\n")
    result = {
        "changed": True,
        "cmd": argv,
        "rc": rc,
        "stdout": out,
        "stderr": err,
        "stdout_lines": out.splitlines(),
        "stderr_lines": err.splitlines(),
        "start": str(started),
        "end": str(ended),
        "delta": str(ended - started),
        "msg": "",
    }
    if rc != 0:
        result["failed"] = True
        result["msg"] = "non-zero return code"
    return result


def argument_sets(read: Mapping) -> list[dict]:
    """The module arguments of each run of ``read``: one, or one per item."""
    args = dict(read.get("args") or {})
    if "items" not in read:
        return [args]
    return [{**args, read["item_arg"]: item} if read.get("item_arg") else {**args, **item} for item in read["items"]]


def batch_request(kind: str, arguments: Mapping) -> dict:
    """node_files' entry for one stat or slurp module run."""
    request = dict(BATCH_DEFAULTS[kind])
    for key, value in arguments.items():
        target = BATCHED[kind][key]
        if target:
            request[target] = value
    return request


def batch_result(kind: str, found: Mapping) -> dict:
    """What the stat or slurp module registers, from node_files' entry."""
    if kind == "stat":
        return {"changed": False, "stat": found["stat"]}
    if found.get("failed"):
        return {"changed": False, "failed": True, "msg": found["msg"]}
    return {"changed": False, "content": found["content"], "encoding": found["encoding"], "source": found["source"]}


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

    def run_one(self, read: Mapping, args: dict, task_vars: dict) -> dict:
        """One module (or action) run, in check mode where the read is a probe."""
        probe = bool(read.get("check_mode", False))
        if read.get("action"):
            return self.run_action(read["action"], task_vars, args=args, check_mode=probe, diff=False)
        mode = self._task.check_mode
        self._task.check_mode = probe  # _execute_module passes the task's check mode to the module
        try:
            return self._execute_module(read["module"], module_args=args, task_vars=task_vars)
        finally:
            self._task.check_mode = mode

    def run_command(self, argv: list[str], args: Mapping) -> dict:
        """A command read through the task's connection (become and environment as a module run gets them)."""
        stdin = args.get("stdin") or None  # the command module sends no input for an empty stdin either
        if stdin is not None and boolean(args.get("stdin_add_newline", True), strict=False):
            stdin = f"{stdin}\n"
        command = shlex.join(argv)
        if stdin is None:
            # input all the same (the shell does not read it), so that no connection gives the command a terminal
            command, stdin = f"{command} </dev/null", "\n"
        environment = self._compute_environment_string()
        if environment:
            command = f"{environment} {command}"
        started = datetime.datetime.now()
        done = self._low_level_execute_command(command, in_data=stdin.encode("utf-8"))
        ended = datetime.datetime.now()
        return command_result(
            argv,
            done["rc"],
            done.get("stdout", ""),
            done.get("stderr", ""),
            boolean(args.get("strip_empty_ends", True), strict=False),
            started,
            ended,
        )

    def run_batch(self, reads: Sequence, task_vars: dict) -> dict[int, list[dict]]:
        """The stat and slurp reads among ``reads`` in one node_files run: {read's index: its module results}."""
        planned: dict[int, tuple[str, list[dict]]] = {}
        for index, read in enumerate(reads):
            kind = batched_kind(read)
            if kind:
                planned[index] = (kind, [batch_request(kind, arguments) for arguments in argument_sets(read)])
        if not planned:
            return {}
        requests = [request for _kind, requests in planned.values() for request in requests]
        mode = self._task.check_mode
        self._task.check_mode = False  # a read: the same in check mode
        try:
            found = self._execute_module(NODE_FILES_MODULE, module_args={"files": requests}, task_vars=task_vars)
        finally:
            self._task.check_mode = mode
        if found.get("failed"):
            raise AnsibleActionFail(f"role_read: reading the node's files failed: {found.get('msg', found)}")
        entries = iter(found["files"])
        return {
            index: [batch_result(kind, next(entries)) for _request in requests]
            for index, (kind, requests) in planned.items()
        }

    def read(self, read: Mapping, task_vars: dict, batched: list[dict] | None = None, runner=None) -> dict:
        if read.get("skip"):
            return {"skipped": True, "changed": False}
        if runner is None:

            def runner(args):
                return self.run_one(read, args, task_vars)

            argv = direct_command(read)
            args = read.get("args") or {}
            if argv and self._connection.is_pipelining_enabled():
                return self.run_command(argv, args)
        if "items" not in read:
            return batched[0] if batched is not None else runner(argument_sets(read)[0])
        results = []
        for position, (item, item_args) in enumerate(zip(read["items"], argument_sets(read), strict=True)):
            one = dict(batched[position]) if batched is not None else runner(item_args)
            if read.get("missing_ok") and one.get("failed") and "not found" in str(one.get("msg", "")).lower():
                one["failed"] = False
            results.append({**one, "item": item, "ansible_loop_var": "item"})
        return loop_result(results)

    def after_reads(self, option: str, name, done: list[dict], so_far: dict, task_vars: dict):
        """The variable ``name`` (the value of the task's ``option``) rendered with the reads' results as
        ``role_read_reads`` and the task's result so far under its register name."""
        if not isinstance(name, str) or name not in task_vars:
            raise AnsibleActionFail(f"role_read: {option} names {name!r}, which is not a defined variable")
        available = {**task_vars, PLAN_READS: done}
        if self._task.register:
            available[self._task.register] = so_far
        return self._templar.copy_with_new_env(available_variables=available).template(task_vars[name])

    def probe(self, name, reads: Sequence, done: list[dict], so_far: dict, task_vars: dict) -> list[dict]:
        """The ``probes`` variable rendered after the plan, each probe answered here where the reads allow."""
        probes = self.after_reads("probes", name, done, so_far, task_vars)
        if not isinstance(probes, Sequence) or isinstance(probes, (str, Mapping)):
            raise AnsibleActionFail("role_read: probes must be a list of {module, args}")
        files = _probes.known_files(
            (batched_kind(read), arguments, one)
            for read, result in zip(reads, done, strict=False)
            if batched_kind(read) and not result.get("skipped")
            for arguments, one in zip(
                argument_sets(read), result["results"] if "items" in read else [result], strict=False
            )
        )
        found = []
        for probe in probes:
            problem = read_problem(probe)
            if problem:
                raise AnsibleActionFail(f"role_read: {problem}")
            probe = {**probe, "check_mode": True}

            def runner(args, probe=probe):
                answered = None if probe.get("action") else _probes.answer(str(probe["module"]), args, files)
                return answered if answered is not None else self.run_one(probe, args, task_vars)

            one = self.read(probe, task_vars, runner=runner)
            found.append(one)
            if one.get("failed"):
                break
        return found

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        # the role's read, run ahead by gpu_node_facts' task in this play with the same arguments, found something to
        # change and nothing changed since: its result, not a second read (plugins/plugin_utils/read_ahead.py)
        stored = read_ahead.stored_read(task_vars, self._task.register, self._task.args)
        if stored is not None:
            return merge_hash(result, {**stored, "from_read_ahead": True})
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
        batched = self.run_batch(reads, task_vars)
        done = []
        for index, read in enumerate(reads):
            one = self.read(read, task_vars, batched.get(index))
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
        plan = self._task.args.get("plan")
        if plan and not result.get("failed"):
            result["plan"] = self.after_reads("plan", plan, done, {**result, "changed": False}, task_vars)
        probes = self._task.args.get("probes")
        if probes and not result.get("failed"):
            result["probes"] = self.probe(probes, reads, done, {**result, "changed": False}, task_vars)
            failed = [one for one in result["probes"] if one.get("failed")]
            if failed:
                result["failed"] = True
                result["msg"] = failed[0].get("msg", "a probe failed")
        report = self._task.args.get("report")
        if report and not result.get("failed"):
            shown = self.after_reads("report", report, done, {**result, "changed": False}, task_vars)
            # as the run's warnings: a verbose result would show the reads' whole results with them
            result.setdefault("warnings", []).extend([shown] if isinstance(shown, str) else list(shown or []))
        # a probe's changed is what its task would do: the reads themselves change nothing
        result["changed"] = False
        if checked:
            result["checked"] = checked.get("checked", [])
        return result
