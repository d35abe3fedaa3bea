# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Refuse role variables whose YAML type is not the one meta/argument_specs.yml declares.

Ansible's role argument validation converts before it checks: a string given for a ``type: list``
option passes (it is split at commas), but the role then sees the string, and a Jinja loop over it
walks its characters (``security_profiles_apparmor_mount_fstypes: "fuse.*"`` rendered ``mount fstype=*,``,
every file system). This action runs as the first task of a role, right after Ansible's own
validation, on the controller: for every option of the entry point that the play sets, a list must be a
YAML list (its elements of the declared ``elements`` type where that is str, dict, list or bool), a
dict a YAML mapping, a bool a YAML boolean (not "yes"), an int a YAML integer (not "30"), and none of
them null where the default is not (Ansible lets null through). It names
every variable that is wrong, the type expected and the type given, and the node is not touched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

_KINDS = {
    "list": ("a list", lambda v: isinstance(v, Sequence) and not isinstance(v, (str, bytes))),
    "dict": ("a mapping", lambda v: isinstance(v, Mapping)),
    "str": ("a string", lambda v: isinstance(v, (str, int, float)) and not isinstance(v, bool)),
    "bool": ("a boolean", lambda v: isinstance(v, bool)),
    "int": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
}
_EXAMPLES = {"bool": "true", "int": "30"}


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


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        spec_path = self._task.args.get("spec")
        entry_point = self._task.args.get("entry_point", "main")
        if not spec_path:
            raise AnsibleActionFail("argument_types needs spec: the path of the role's meta/argument_specs.yml")
        specs = self._loader.load_from_file(spec_path) or {}
        options = ((specs.get("argument_specs") or {}).get(entry_point) or {}).get("options") or {}
        # task_vars hold what the inventory and defaults wrote: a value may still be a template
        # ("{{ other_var | default([]) }}"), so judge what it renders to, as the role will see it.
        templar = self._templar.copy_with_new_env(available_variables=task_vars)
        values = {name: templar.template(task_vars[name]) for name in options if name in task_vars}
        problems = type_problems(options, values)
        result["changed"] = False
        result["checked"] = sorted(values)
        if problems:
            result["failed"] = True
            result["problems"] = problems
            result["msg"] = (
                "Variables of the wrong type, nothing was changed on the node: "
                + "; ".join(problems)
                + f". See {spec_path} for every variable and its type."
            )
        else:
            result["msg"] = f"{len(values)} variables have the types {spec_path} declares"
        return result
