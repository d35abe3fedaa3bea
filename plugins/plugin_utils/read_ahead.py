# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Read ahead: the roles of a play whose one read decides their path, read by the play's first task (issue 47).

A role whose read (plugins/action/role_read.py) finds nothing to change cost two tasks on a no-op re-run: the read
and the include it skips. A role with a ``tasks/read.yml`` (one ``role_read`` task: the read's one home) costs one:

- its ``tasks/main.yml`` is one include, of ``tasks/run.yml`` (the read, then the include of ``tasks/apply.yml``
  where the read found something to change), taken where ``read_ahead_pending`` (plugins/filter/read_ahead.py) says
  so;
- gpu_node_facts' task (plugins/action/gpu_node_facts.py), the first of every play (each role's dependency), runs
  the read of each such role of the play that comes after it, in that role's own variables (those its include task
  would get: ``VariableManager.get_vars`` with that task, the role's search path, the facts and the platform data
  that task will have), and registers, per role instance (``role_uuid``), whether it found something to change and
  the run's count of changed results of the host at that moment;
- the role's include then runs only where the read ahead found something to change, or could not read ahead, or the
  host reported a change since (a role before it changed the node: what the read ahead saw may be stale).

So a no-op run reads each role once, in one task, and the role's variables are checked there before anything changes
(role_read checks first). Anything out of the ordinary makes the role read for itself, in its own task, as before:
its variables refused, a read that fails (the role's own read then fails with the same message, in its place), a role
the tags or its ``when`` leave out, a role run with other connection or privilege settings than this task, a role
brought in by ``include_role`` or ``import_role`` (its tasks run inside the including task's blocks), another role's
instance of gpu_node_facts (the doctor's),
a run without this collection's plugin_warmup callback (it counts the changes), an ansible-core whose internals this
does not know. What the read ahead could not do is in the task's ``read_ahead_left`` (-v shows it).

The changes are counted in the controller's main process (plugins/callback/plugin_warmup.py, ``note_result``): each
task's worker is forked from it after the results before it were counted, so the count it inherits is the one of its
start. Registered results are per host, and a role instance's ``role_uuid`` is its own in its play: a later play
reads ahead again or its roles read themselves.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.playbook.task import Task
from ansible.vars.clean import clean_facts, namespace_facts
from ansible_collections.gpunode.provisioning.plugins.plugin_utils.controller_files import COLLECTION

READ_FILE = "read.yml"
# gpu_node_facts' task registers its result (the read ahead in it) under this name (roles/gpu_node_facts/tasks/main.yml)
REGISTER = "__gpu_node_facts_node"
ROLE_READ = f"{COLLECTION}.role_read"
ROLE_READ_NAMES = (ROLE_READ, "role_read")
# the registered result of gpu_node_facts' task holds the roles read ahead under this key
RESULT_KEY = "read_ahead"
# the task keywords a read.yml task may have besides its action (anything else: the role reads for itself)
READ_TASK_KEYS = {"name", "register", "check_mode", "tags"}
# what the read ahead runs with, from this task: where the role's include task differs, the role reads for itself
SAME_SETTINGS = (
    "become",
    "become_user",
    "become_method",
    "become_flags",
    "become_exe",
    "connection",
    "remote_user",
    "port",
    "environment",
    "delegate_to",
    "no_log",
    "module_defaults",
)
# the connection variables a role's own variables could set for its tasks (where the role's differ from this task's,
# the role reads for itself)
CONNECTION_VARIABLES = (
    "ansible_become",
    "ansible_user",
    "ansible_ssh",
    "ansible_port",
    "ansible_host",
    "ansible_connection",
    "ansible_python_interpreter",
    "ansible_shell",
    "ansible_remote_tmp",
    "ansible_private_key",
    "ansible_password",
    "ansible_docker",
)
# what the task executor adds to the variables get_vars gives (the connection's magic variables, omit): taken from this
# task's variables, the rest from the role's own
EXECUTOR_VARIABLES = ("ansible_", "omit")

_changes: dict[str, int] = {}
_refreshes: dict[str, int] = {}
_tracking = False


def track() -> None:
    """Called in the controller's main process by the plugin_warmup callback: from now on changes are counted."""
    global _tracking
    _tracking = True


def note_result(host: str, result: Mapping) -> None:
    """One task result of ``host``: counted where it reports a change, and apart where it refreshed the package index
    (apt's ``cache_updated``; the roles' refreshes say changed=false: a fresher index changes no setting, but what a
    read of the index found, such as the crun fuse would install, may differ after it)."""
    if not isinstance(result, Mapping):
        return
    if result.get("changed"):
        _changes[host] = _changes.get(host, 0) + 1
    if result.get("cache_updated"):
        _refreshes[host] = _refreshes.get(host, 0) + 1


def changes_seen(host: str) -> int | None:
    """How many results of ``host`` reported a change in this run so far; None where nothing counts them."""
    return _changes.get(host, 0) if _tracking else None


def refreshes_seen(host: str) -> int | None:
    """How many results of ``host`` refreshed its package index in this run so far; None where nothing counts them."""
    return _refreshes.get(host, 0) if _tracking else None


def _fresh(entry: Mapping, host: str) -> bool:
    """Whether nothing the read ahead saw can have changed since: no change reported by the host, and where the read
    asked the package index, no refresh of it."""
    seen = changes_seen(host)
    if seen is None or seen != entry.get("seen"):
        return False
    return "index" not in entry or refreshes_seen(host) == entry["index"]


def stored_read(task_vars: Mapping, register: str | None, args: Mapping) -> dict | None:
    """The result the read ahead registered for the role read task now running (its role instance, its register and
    its arguments, rendered the same), where that read ahead found something to change and is still fresh: the role's
    own read (tasks/run.yml) then takes it instead of reading the node and rendering the role's plan again (a run
    that changes the node pays one read per role, as before the read ahead). None otherwise."""
    node = task_vars.get(REGISTER)
    entry = ((node.get(RESULT_KEY) or {}) if isinstance(node, Mapping) else {}).get(task_vars.get("role_uuid"))
    if not isinstance(entry, Mapping) or "result" not in entry or entry.get("register") != register:
        return None
    if entry.get("args") != dict(args) or not _fresh(entry, str(task_vars.get("inventory_hostname"))):
        return None
    return dict(entry["result"])


def pending(node, role_uuid: str, host: str) -> bool:
    """Whether the role instance ``role_uuid`` must read the node itself (its include runs): True unless the read
    ahead of this play (``node``: gpu_node_facts' registered result) found nothing to change for it and the host
    reported no change since."""
    entry = ((node or {}).get(RESULT_KEY) or {}).get(role_uuid) if isinstance(node, Mapping) else None
    if not isinstance(entry, Mapping) or entry.get("changes") is not False:
        return True
    return not _fresh(entry, host)


def read_task(loader, role_path: str) -> tuple[dict, str] | None:
    """(the arguments, the register name) of the role's one read in ``tasks/read.yml``, None where it has none."""
    path = os.path.join(role_path, "tasks", READ_FILE)
    if not os.path.isfile(path):
        return None
    tasks = loader.load_from_file(path, trusted_as_template=True)  # as Ansible loads a task file
    if not isinstance(tasks, list) or len(tasks) != 1 or not isinstance(tasks[0], Mapping):
        raise ValueError(f"{path} must hold one task")
    task = tasks[0]
    actions = [name for name in task if name in ROLE_READ_NAMES]
    if len(actions) != 1 or not task.get("register") or set(task) - READ_TASK_KEYS - set(actions):
        raise ValueError(f"{path}: its task must be one {ROLE_READ} with a register and no other keyword")
    return dict(task[actions[0]]), str(task["register"])


def _settings(task, templar=None) -> tuple:
    """The task's values of SAME_SETTINGS (inherited from its block, role and play as Ansible resolves them; an empty
    environment entry, which a role as another's dependency gets, is none), rendered with ``templar`` where given (a
    task Ansible has not templated yet)."""
    values = []
    for name in SAME_SETTINGS:
        value = getattr(task, name, None)
        if templar is not None and value is not None:
            value = templar.template(value)
        if name == "environment":
            value = [entry for entry in value or [] if entry]
        values.append(repr(value))
    return tuple(values)


class ReadAhead:
    """The read ahead of one task (an action of this collection's, ``action``) for the play's later roles."""

    def __init__(self, action, task_vars: dict, facts: Mapping | None = None):
        self.action = action
        self.task = action._task
        self.task_vars = task_vars
        self.facts = dict(facts or {})
        self.platform: dict = {}
        self.left: dict[str, str] = {}

    def roles(self) -> list:
        """The play's roles from this task's own on (the role it belongs to, or whose dependency it is). Not a role
        that ``include_role`` or ``import_role`` brought in (Ansible adds those to the play's roles too): their tasks
        run inside the including task's blocks, with its variables and conditions, which the read ahead does not see;
        and nothing where this task itself runs for such a role."""
        play = self.task.get_play()
        roles = play.get_roles()
        chain = self.task.get_dep_chain() or [self.task._role]
        top = chain[0]
        place = next((index for index, role in enumerate(roles) if role is top), None)
        if place is None or getattr(top, "from_include", False):
            return []
        return [
            role for role in roles[place:] if role is not self.task._role and not getattr(role, "from_include", False)
        ]

    def entry(self, role):
        """The first task of the role's tasks/main.yml (its include) as the play runs it: compiled with the role as
        its dependency chain (Role.compile), so that it has the role's tags, conditions and search path."""
        blocks = role.get_task_blocks()
        if not blocks or not blocks[0].block or not isinstance(blocks[0].block[0], Task):
            return None
        block = blocks[0].copy()
        block._dep_chain = [role]
        block._play = self.task.get_play()
        return block.block[0]

    def context(self, entry) -> tuple[dict, dict]:
        """(the variables the role's include task ``entry`` would get, those VariableManager.get_vars gives it)."""
        manager = self.task.get_variable_manager()
        host = manager._inventory.get_host(self.task_vars["inventory_hostname"])
        found = manager.get_vars(
            play=self.task.get_play(),
            host=host,
            task=entry,
            _hosts=self.task_vars.get("ansible_play_batch"),
            _hosts_all=self.task_vars.get("ansible_play_hosts_all"),
        )
        context = {name: value for name, value in self.task_vars.items() if name.startswith(EXECUTOR_VARIABLES)}
        context.update(found)
        search = entry.get_search_path()
        basedir = self.action._loader.get_basedir()
        context["ansible_search_path"] = search + ([basedir] if basedir not in search else [])
        if self.facts:
            merged = {**(context.get("ansible_facts") or {}), **namespace_facts(self.facts)["ansible_facts"]}
            context["ansible_facts"] = merged
            for name, value in clean_facts(self.facts).items():
                context.setdefault(name, value)
        extra = manager.extra_vars
        context.update({name: value for name, value in self.platform.items() if name not in extra})
        return context, found

    def differences(self, entry, found: dict, templar) -> list[str]:
        """What the role's tasks would run with that this task does not: its settings (rendered as Ansible renders
        this task's), the connection variables its own variables set."""
        pairs = zip(SAME_SETTINGS, _settings(self.task), _settings(entry, templar), strict=True)
        differ = [key for key, mine, its in pairs if mine != its]
        differ += sorted(
            name
            for name, value in found.items()
            if name.startswith(CONNECTION_VARIABLES) and value != self.task_vars.get(name)
        )
        return differ

    def read(self, role) -> tuple[dict | None, list[str]]:
        """(the entry registered for this role instance, the warnings its read reports), or (None, []) where the
        role reads for itself (why: ``self.left``)."""
        name = role.get_name(include_role_fqcn=False)
        found_read = read_task(self.action._loader, role._role_path)
        if found_read is None:
            return None, []
        args, register = found_read
        entry = self.entry(role)
        if entry is None:
            self.left[name] = "its tasks/main.yml has no first task"
            return None, []
        play = self.task.get_play()
        context, found = self.context(entry)
        templar = self.action._templar.copy_with_new_env(available_variables=context)
        differ = self.differences(entry, found, templar)
        if differ:
            self.left[name] = f"its tasks run with other settings than this task: {', '.join(differ)}"
            return None, []
        if not entry.evaluate_tags(play.only_tags, play.skip_tags, all_vars=context):
            self.left[name] = "the tags leave it out"
            return None, []
        if not entry._resolve_conditional(entry.when, context):
            self.left[name] = "its when is false"
            return None, []
        changes_var = f"__{name}_changes"
        if changes_var not in context:
            self.left[name] = f"it has no {changes_var}"
            return None, []
        host = self.task_vars["inventory_hostname"]
        seen, refreshed = changes_seen(host), refreshes_seen(host)
        if seen is None:
            self.left[name] = "nothing counts the run's changes (the plugin_warmup callback is not enabled)"
            return None, []
        # the read itself, not a stored one (the registered result of an earlier play's read ahead)
        context.pop(REGISTER, None)
        rendered = templar.template(args)
        result = self.action.run_action(
            ROLE_READ, context, args=rendered, check_mode=False, register=register, templar=templar
        )
        if result.get("failed"):
            self.left[name] = f"its read failed: {result.get('msg', '')}"
            return None, []
        after = templar.copy_with_new_env(available_variables={**context, register: result})
        try:
            changes = boolean(after.template(context[changes_var]), strict=True)
            # where the read asked the package index (a role's __<role>_read_ahead_index: true), a refresh of the
            # index before the role runs makes what it found stale
            index = f"__{name}_read_ahead_index"
            reads_index = index in context and boolean(after.template(context[index]), strict=True)
        except TypeError as ex:
            self.left[name] = f"{changes_var} or its read ahead index is not a boolean: {ex}"
            return None, []
        entry_found = {"role": name, "changes": changes, "seen": seen}
        if reads_index:
            entry_found["index"] = refreshed
        if changes:
            # for the role's own read task, where nothing changed before it (stored_read)
            entry_found.update(result=result, register=register, args=rendered)
        warnings = [] if changes else list(result.get("warnings") or [])
        return entry_found, warnings

    def run(self, platform=None) -> dict:
        """What gpu_node_facts' task adds to its result: ``read_ahead`` ({role_uuid: entry}), the warnings of the
        roles read, ``read_ahead_left`` ({role: why}) where a role reads for itself. ``platform``: a function that
        returns the platform data the roles' tasks will have (called only where a role is to be read)."""
        entries, warnings = {}, []
        try:
            roles = [role for role in self.roles() if os.path.isfile(os.path.join(role._role_path, "tasks", READ_FILE))]
            if roles and platform is not None:
                self.platform = dict(platform() or {})
        except Exception as ex:  # an optimisation: never the reason a run fails
            return {RESULT_KEY: {}, "read_ahead_left": {"*": f"no read ahead: {type(ex).__name__}: {ex}"}}
        for role in roles:
            try:
                entry, shown = self.read(role)
            except Exception as ex:  # the role reads for itself, and shows any error in its own task
                self.left[role.get_name(include_role_fqcn=False)] = f"{type(ex).__name__}: {ex}"
                continue
            if entry is not None:
                entries[str(role._uuid)] = entry
                warnings += shown
        result = {RESULT_KEY: entries}
        if self.left:
            result["read_ahead_left"] = dict(self.left)
        if warnings:
            result["warnings"] = warnings
        return result
