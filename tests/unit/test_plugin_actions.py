"""The base of the actions that run another action inside their one task (plugins/plugin_utils/actions.py): the task
itself or a copy with other arguments, check and diff mode, and the role variable check, in one home for role_read,
gpu_node_facts, gpu_settings and gpu_validate_outcome."""

from __future__ import annotations

import pytest
from ansible.playbook.task import Task
from ansible_collections.gpunode.provisioning.plugins.plugin_utils import actions
from conftest import load_module


class Loaded:
    """An action plugin the loader hands out: it records the task it was given and what it ran."""

    def __init__(self, name: str, task: Task, seen: list):
        self.name, self.task, self.seen = name, task, seen

    def run(self, task_vars=None):
        self.seen.append((self.name, self.task, dict(self.task.args), self.task.check_mode, self.task.diff))
        return {"ran": self.name, "vars": sorted(task_vars)}


class Loader:
    def __init__(self):
        self.seen: list = []
        self.action_loader = self

    def get(self, name, task, connection, play_context, loader, templar, shared_loader_obj):
        assert shared_loader_obj is self and connection == "the connection" and templar == "the templar"
        return Loaded(name, task, self.seen)


class Action(actions.ActionBase):
    def run(self, tmp=None, task_vars=None):
        raise AssertionError("not run here")


def action(args: dict) -> actions.ActionBase:
    task = Task()
    task.args = args
    task.check_mode = False
    task.diff = True
    plugin = object.__new__(Action)
    plugin._task = task
    plugin._shared_loader_obj = Loader()
    plugin._connection, plugin._play_context = "the connection", "the play context"
    plugin._loader, plugin._templar = "the loader", "the templar"
    return plugin


def test_another_action_runs_on_a_copy_with_its_own_arguments_and_modes():
    plugin = action({"spec": "s", "reads": []})
    assert plugin.run_action("x.y.z", {"a": 1}, args={"path": "/p"}, check_mode=True, diff=False) == {
        "ran": "x.y.z",
        "vars": ["a"],
    }
    ((name, task, args, check_mode, diff),) = plugin._shared_loader_obj.seen
    assert (name, args, check_mode, diff) == ("x.y.z", {"path": "/p"}, True, False)
    assert task is not plugin._task
    # the task of the action that ran it is as it was
    assert (plugin._task.args, plugin._task.check_mode, plugin._task.diff) == ({"spec": "s", "reads": []}, False, True)


def test_without_arguments_or_modes_it_runs_on_the_task_itself():
    plugin = action({"spec": "s"})
    plugin.run_action("x.y.z", {})
    ((_name, task, args, check_mode, diff),) = plugin._shared_loader_obj.seen
    assert task is plugin._task and (args, check_mode, diff) == ({"spec": "s"}, False, True)


@pytest.mark.parametrize("spec, ran", [("roles/x/meta/argument_specs.yml", True), ("", False)])
def test_the_variable_check_is_role_variables_on_the_task_where_it_names_a_spec(spec, ran):
    plugin = action({"spec": spec, "checks": "__x_checks"})
    result = plugin.check_variables({"v": 1})
    assert (result is not None) is ran
    assert [seen[0] for seen in plugin._shared_loader_obj.seen] == (["gpunode.provisioning.role_variables"] * ran)


@pytest.mark.parametrize("name", ["role_read", "gpu_node_facts", "gpu_settings", "gpu_validate_outcome"])
def test_the_actions_that_run_another_action_share_the_base(name):
    assert issubclass(load_module(name, subdir="plugins/action").ActionModule, actions.ActionBase)
