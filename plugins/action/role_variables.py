# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The one check of a role's variables: their YAML types and choices, then the role's own rules, in one task.

Every role runs this action as its first task that can refuse anything, on the controller, before the node
changes. Ansible's own role argument validation does not run: it is prepended only for an entry point named
``main``, and the roles' meta/argument_specs.yml name theirs ``ENTRY_POINT`` (below), so this check is the one
that reads them (``ansible-doc -t role`` renders them all the same). Two steps, every problem of a step reported
at once, each naming the variable and the fix:

1. Types. Ansible's role argument validation converts before it checks: a string given for a ``type: list``
   option passes (it is split at commas), but the role then sees the string, and a Jinja loop over it walks
   its characters (``security_profiles_apparmor_mount_fstypes: "fuse.*"`` rendered ``mount fstype=*,``,
   every file system). For every option of the entry point that the play sets, a list must be a YAML list
   (its elements of the declared ``elements`` type where that is str, dict, list or bool), a dict a YAML
   mapping, a bool a YAML boolean (not "yes"), an int a YAML integer (not "30"), and none of them null where
   the default is not (Ansible lets null through). An option with ``choices`` must hold one of them (a list
   option: only them), as Ansible's validation would check.
2. Rules (only when the types are right, so a rule never sees a string for a list): ``checks`` names the
   role variable (vars/main.yml) that holds the role's rules, a mapping of rule name to ``{ok, msg}``;
   ``msg`` (a sentence or a list of them) is reported for every rule whose ``ok`` is false; a rule with
   ``loop`` (a list) is checked for each item (``item`` in ok and msg), as an assert loop would. A rule's
   ``ok`` and ``msg`` are templates rendered here, one rule at a time, so a rule can guard itself
   (``not applies or ...``) and a message is rendered only when its rule fails.

The task's ``msg`` is the list of problems (``problems`` holds the same list).

``report``: a message (a sentence or a list of them) that the task shows once the variables hold, as a debug task
would show its ``msg``; empty: none. A role that leaves a node alone says so in its check instead of a task of its
own (issue 47: the driver role on a node without a GPU). The shown result leaves ``checked`` out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.gpunode.provisioning.plugins.modules import role_variables as _module_file

_KINDS = {
    "list": ("a list", lambda v: isinstance(v, Sequence) and not isinstance(v, (str, bytes))),
    "dict": ("a mapping", lambda v: isinstance(v, Mapping)),
    "str": ("a string", lambda v: isinstance(v, (str, int, float)) and not isinstance(v, bool)),
    "bool": ("a boolean", lambda v: isinstance(v, bool)),
    "int": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
}
_EXAMPLES = {"bool": "true", "int": "30"}
# The entry point of every role's meta/argument_specs.yml: not "main", for which Ansible would prepend its own
# validation task to the role (ansible.playbook.role.Role._prepend_validation_task), a second, looser type check.
ENTRY_POINT = "variables"


def _kind_of(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (str, bytes)):
        return f"a string ({str(value)[:60]!r})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, Sequence):
        return "a list"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    return type(value).__name__


def type_problems(options: Mapping, values: Mapping) -> list[str]:
    """One sentence per variable in `values` whose type does not fit its option in `options`."""
    problems = []
    for name, option in options.items():
        if name not in values:
            continue
        value = values[name]
        declared = (option or {}).get("type", "str")
        if value is None:
            # Ansible's validation lets null through; an option whose default is not null has no null meaning
            default = (option or {}).get("default")
            if default is not None and declared in ("list", "dict", *_EXAMPLES):
                problems.append(
                    f"{name} is null (an empty value in YAML); give it a value or leave it out for the default "
                    f"({json.dumps(default)})"
                )
            continue
        if declared == "list":
            elements = (option or {}).get("elements")
            expected = "a list" + (f" of {elements}" if elements else "")
            if not _KINDS["list"][1](value):
                example = f"[{value!r}]" if isinstance(value, str) else "[...]"
                problems.append(
                    f"{name} must be {expected} (got {_kind_of(value)}); write it as a YAML list, "
                    f"e.g. {name}: {example}"
                )
                continue
            if elements in _KINDS:
                bad = [i for i, item in enumerate(value) if not _KINDS[elements][1](item)]
                if bad:
                    problems.append(f"{name} must be {expected}, but item {bad[0]} is {_kind_of(value[bad[0]])}")
        elif declared == "dict" and not _KINDS["dict"][1](value):
            problems.append(f"{name} must be a mapping (got {_kind_of(value)}); write it as YAML key: value pairs")
        elif declared in _EXAMPLES and not _KINDS[declared][1](value):
            # Ansible's validation converts "yes" or "30" and passes, but the role would see the string
            problems.append(
                f"{name} must be {_KINDS[declared][0]} (got {_kind_of(value)}); write it unquoted, "
                f"e.g. {name}: {_EXAMPLES[declared]} (with -e, as JSON: -e '{{\"{name}\": {_EXAMPLES[declared]}}}')"
            )
    return problems


def _shown(value) -> str:
    return "null" if value is None else repr(value) if isinstance(value, str) else json.dumps(value, default=str)


def choice_problems(options: Mapping, values: Mapping) -> list[str]:
    """One sentence per variable in `values` whose value (a list's items) is not among its option's choices."""
    problems = []
    for name, option in options.items():
        choices = (option or {}).get("choices")
        if choices is None or name not in values:
            continue
        allowed = ", ".join(_shown(choice) if not isinstance(choice, str) else choice for choice in choices)
        value = values[name]
        secret = (option or {}).get("no_log")
        if (option or {}).get("type") == "list" and _KINDS["list"][1](value):
            bad = [i for i, item in enumerate(value) if item not in choices]
            if bad:
                got = "a value not shown (no_log)" if secret else _shown(value[bad[0]])
                problems.append(f"{name} may list only {allowed}, but item {bad[0]} is {got}")
        elif value not in choices and not (isinstance(value, (int, float)) and str(value) in choices):
            got = "a value not shown (no_log)" if secret else _shown(value)
            problems.append(f"{name} must be one of {allowed} (got {got})")
    return problems


def _is_true(value) -> bool:
    """A rule's rendered ok: a boolean, or the text of one ("False" where a template rendered to text)."""
    if isinstance(value, str):
        return value.strip().lower() not in ("", "false", "no", "0", "none")
    return bool(value)


def rule_problems(rules, render, render_with_item=None) -> list[str]:
    """The messages of the rules that are not ok, in their order. `rules` is a mapping of rule name to
    {ok, msg} (or a list of such mappings); `render` renders one template (a rule's ok or msg). A rule with
    `loop` (a list) is checked for each of its items: `render_with_item(template, item)` renders its ok and
    msg with `item` set, and each item that is not ok gives its own message."""
    rules = render(rules) if isinstance(rules, str) else rules
    if isinstance(rules, Mapping):
        items = list(rules.items())
    elif isinstance(rules, Sequence):
        items = list(enumerate(rules))
    else:
        raise AnsibleActionFail(f"the rules must be a mapping of name to {{ok, msg}}, got {_kind_of(rules)}")
    problems = []
    for name, rule in items:
        rule = render(rule) if isinstance(rule, str) else rule
        if not isinstance(rule, Mapping) or "ok" not in rule or "msg" not in rule:
            raise AnsibleActionFail(f"rule {name!r} must be a mapping with ok and msg, got {_kind_of(rule)}")
        if "loop" in rule:
            loop = render(rule["loop"])
            if not isinstance(loop, Sequence) or isinstance(loop, str) or render_with_item is None:
                raise AnsibleActionFail(f"rule {name!r}: loop must render to a list, got {_kind_of(loop)}")
            cases = [lambda template, item=item: render_with_item(template, item) for item in loop]
        else:
            cases = [render]
        for case in cases:
            if _is_true(case(rule["ok"])):
                continue
            said = case(rule["msg"])
            said = [said] if isinstance(said, str) else list(said)
            problems += [str(line).strip() for line in said if str(line).strip()]
    return problems


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        if (self._task.resolved_action or self._task.action or "").rsplit(".", 1)[-1] == "role_variables":
            # its own task: its arguments as documented (an unknown one, a wrong type: Ansible's message); as the
            # check inside role_read, gpu_node_facts or gpu_settings, those actions check their task's arguments
            self.validate_argument_spec(argument_spec=_module_file.ARGUMENT_SPEC)
        spec_path = self._task.args.get("spec")
        checks = self._task.args.get("checks")
        entry_point = self._task.args.get("entry_point", ENTRY_POINT)
        if not spec_path:
            raise AnsibleActionFail("role_variables needs spec: the path of the role's meta/argument_specs.yml")
        # read only: the loader's cached parse without its deep copy (Ansible parsed the file when it loaded the role,
        # before forking this worker; the copy of a whole argument_specs.yml was most of this check's cost, issue 47)
        specs = (self._loader.load_from_file(spec_path, unsafe=True) or {}).get("argument_specs") or {}
        if entry_point not in specs:
            raise AnsibleActionFail(f"{spec_path} has no entry point {entry_point!r} (it has {', '.join(specs)})")
        options = (specs[entry_point] or {}).get("options") or {}
        # task_vars hold what the inventory and defaults wrote: a value may still be a template
        # ("{{ other_var | default([]) }}"), so judge what it renders to, as the role will see it.
        templar = self._templar.copy_with_new_env(available_variables=task_vars)
        values = {name: templar.template(task_vars[name]) for name in options if name in task_vars}
        problems = type_problems(options, values)
        # the choices of the variables whose type is right (a list's items are compared, not its text)
        problems += choice_problems({n: o for n, o in options.items() if not type_problems({n: o}, values)}, values)
        rules = 0
        if not problems and checks:
            if checks not in task_vars:
                raise AnsibleActionFail(f"role_variables: checks names {checks}, which is not defined")
            raw = task_vars[checks]
            rules = len(raw) if isinstance(raw, (Mapping, Sequence)) and not isinstance(raw, str) else 0
            problems = rule_problems(
                raw,
                templar.template,
                lambda template, item: self._templar.copy_with_new_env(
                    available_variables={**task_vars, "item": item}
                ).template(template),
            )
        result["changed"] = False
        result["checked"] = sorted(values)
        if problems:
            result["failed"] = True
            result["problems"] = problems
            result["msg"] = problems
        elif self._task.args.get("report"):
            result.pop("checked")
            result["msg"] = self._task.args["report"]
            result["_ansible_verbose_always"] = True  # shown as a debug task shows its msg
        else:
            result["msg"] = (
                f"{len(values)} variables have the types and choices {spec_path} declares; {rules} rules hold"
            )
        return result
