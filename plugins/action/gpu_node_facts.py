# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""gpu_node_facts on the controller: the variables checked, then one module run, the minimal facts with it where the
play has none.

The roles decide on ``ansible_facts.os_family`` and the distribution, which a play with ``gather_facts: false``
has not gathered. Where ``ansible_facts.os_family`` is missing this action sets the module's ``gather_minimal``, and
the gpu_node_facts module gathers setup's ``min`` subset in the same run: the task sets both kinds of facts, with one
module payload and one module run on the node (the no-op re-run pays for each; a separate setup run cost a payload
build on the controller and a run on the node, issue 47), where the role once had a conditional setup task.

The role's variables are checked here too, before anything is read: the role's task gives ``spec`` and ``checks``
as a role_variables task would, and this action runs the role_variables action (plugins/action/role_variables.py)
on the same task first, with the same messages; a refusal fails the task before the module runs.
One task per play where the role had a role_variables task before this one (the no-op run counts every task).
``spec`` and ``checks`` are not passed to the module.

The node's distribution is checked here too, once the action knows it (from the play's facts, else from the module's
run, which only reads): the roles support the Debian and the RHEL families, and a node of another family fails this
task with the sentence the playbook's own assert task said before (playbooks/gpu_nodes.yml had one; the no-op re-run
counts every task), before any role changes anything.

The module's ``toolkit_config`` parameter has no default of its own: the role's task passes
``__gpu_node_facts_toolkit_config``, and a task that names none (a playbook's own, an ad-hoc run) gets that value from
its one home, ``roles/gpu_node_facts/vars/main.yml``, read here.

Then, once the facts are in, the read ahead (plugins/plugin_utils/read_ahead.py): each later role of the play with a
``tasks/read.yml`` (nvidia_container_toolkit, fuse, security_profiles, kubelet) has its variables checked and the
node read here, in that role's own variables, with the platform data tasks/set_vars.yml is about to load (the same
file, found the same way); the result registered (``read_ahead``) tells each role's one task whether to read and
change anything (issue 47: a role with nothing to change costs one task). Never the reason this task fails: a role
the read ahead cannot decide reads for itself, in its own task.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from ansible.errors import AnsibleActionFail
from ansible.utils.vars import merge_hash
from ansible.vars.clean import namespace_facts
from ansible_collections.gpunode.provisioning.plugins.plugin_utils.actions import ActionBase
from ansible_collections.gpunode.provisioning.plugins.plugin_utils.controller_files import COLLECTION
from ansible_collections.gpunode.provisioning.plugins.plugin_utils.read_ahead import ReadAhead

MODULE = f"{COLLECTION}.gpu_node_facts"
# The task's arguments that belong to the variable check (role_variables), not to the module.
CHECK_ARGS = ("spec", "checks", "entry_point")
SHARED_VARS = Path(__file__).resolve().parents[2] / "roles" / "gpu_node_facts" / "vars" / "main.yml"
# the task file that loads the platform data (its include_vars argument says which file: the read ahead loads it too)
SET_VARS = SHARED_VARS.parents[1] / "tasks" / "set_vars.yml"


def module_args(args: dict, gather_minimal: bool = False) -> dict:
    """The task's arguments, with the toolkit config path from the shared values where the task gives none, and
    ``gather_minimal`` set where the play has not gathered the minimal facts."""
    args = {name: value for name, value in args.items() if name not in CHECK_ARGS}
    if gather_minimal:
        args["gather_minimal"] = True
    if args.get("toolkit_config"):
        return args
    shared = yaml.safe_load(SHARED_VARS.read_text())
    return {**args, "toolkit_config": shared["__gpu_node_facts_toolkit_config"]}


def gather_runtimes_problem(value) -> str | None:
    """The refusal of a gather_runtimes that is not a YAML boolean, naming the role variable that sets it (the role
    has this one variable and no role_variables task: the action checks it, as role_variables would)."""
    if isinstance(value, bool):
        return None
    return (
        f"gpu_node_facts_gather_runtimes must be a boolean (got {value!r}); write it unquoted, "
        "e.g. gpu_node_facts_gather_runtimes: true (with -e, as JSON: -e '{\"gpu_node_facts_gather_runtimes\": true}')"
    )


SUPPORTED_FAMILIES = ("Debian", "RedHat")


def unsupported_distribution(host: str, facts: dict) -> str | None:
    """The refusal of a node whose OS family no role supports, or None. ``facts`` as the play has them
    (``os_family``) or as a module returns them (``ansible_os_family``: the module's ``gather_minimal``)."""

    def fact(name: str):
        return facts.get(name, facts.get(f"ansible_{name}"))

    if fact("os_family") in SUPPORTED_FAMILIES:
        return None
    return (
        f"{host} runs {fact('distribution')} {fact('distribution_version')}: supported are the Debian, "
        'Ubuntu and RHEL/Rocky/Alma families (README.md, "Supported platforms", says which releases each role is '
        "proven on)."
    )


def refuse_unsupported(host: str, facts: dict) -> None:
    """Fails the task with unsupported_distribution's refusal, where there is one."""
    refusal = unsupported_distribution(host, facts)
    if refusal:
        raise AnsibleActionFail(refusal)


def needs_minimal_facts(task_vars: dict) -> bool:
    """Whether the play has not gathered the facts the roles decide on (the OS family)."""
    return "os_family" not in (task_vars.get("ansible_facts") or {})


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def platform_data(self, task_vars: dict, facts: dict) -> dict:
        """The platform data tasks/set_vars.yml loads next: its include_vars argument rendered with the facts."""
        task = self._loader.load_from_file(str(SET_VARS), trusted_as_template=True)[0]
        term = task["ansible.builtin.include_vars"]
        known = {**(task_vars.get("ansible_facts") or {}), **namespace_facts(facts)["ansible_facts"]}
        path = self._templar.copy_with_new_env(available_variables={**task_vars, "ansible_facts": known}).template(term)
        return dict(self._loader.load_from_file(path, trusted_as_template=True) or {})

    def read_ahead(self, task_vars: dict, facts: dict) -> dict:
        """The read ahead of the play's later roles (plugins/plugin_utils/read_ahead.py); never a failure."""
        return ReadAhead(self, task_vars, facts).run(platform=lambda: self.platform_data(task_vars, facts))

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        checked = self.check_variables(task_vars)
        if checked and checked.get("failed"):
            return merge_hash(result, checked)
        problem = gather_runtimes_problem(self._task.args.get("gather_runtimes", False))
        if problem:
            raise AnsibleActionFail(problem)
        host = task_vars.get("inventory_hostname", "this node")
        minimal = needs_minimal_facts(task_vars)
        if not minimal:
            refuse_unsupported(host, task_vars.get("ansible_facts") or {})
        node = self._execute_module(MODULE, module_args=module_args(self._task.args, minimal), task_vars=task_vars)
        if node.get("failed"):
            return merge_hash(result, node)
        if minimal:
            # the distribution came with the module's facts: it only read the node, so the refusal still comes before
            # any role changes anything
            refuse_unsupported(host, node.get("ansible_facts") or {})
        result = merge_hash(result, node)
        if checked:
            result["checked"] = checked.get("checked", [])
        ahead = self.read_ahead(task_vars, node.get("ansible_facts") or {})
        warnings = ahead.pop("warnings", [])
        result.update(ahead)
        if warnings:
            result["warnings"] = list(result.get("warnings") or []) + warnings
        return result
