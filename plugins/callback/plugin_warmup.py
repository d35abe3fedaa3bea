# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Loads a play's connection, shell and become plugins in the controller's main process, before its workers fork
(Ansible does so for its own; a collection's were loaded by each worker), and installs the compiled-template cache
there (plugins/plugin_utils/template_cache.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: plugin_warmup
type: aggregate
short_description: Load the play's plugins and keep compiled templates, before Ansible forks its workers
description:
  - Ansible runs every task of every host in a worker process forked from its main process. A configurable plugin's
    first load parses its documentation (its option definitions). Ansible does that in the main process, at start, for
    its own connection, shell and become plugins (C(ssh), C(sh), C(sudo) ...), so their workers inherit them. A
    collection's plugin (the C(community.docker.docker) connection of this project's tests and benchmark, a
    collection's become method) was loaded first in each worker, once per task and host (the community.docker
    connection's first load costs about 5 ms of CPU on the build machine; bench/README.md).
  - At the start of each play this callback loads the plugins that the play's first host uses (its
    C(ansible_connection), C(ansible_shell_type) and C(ansible_become_method), else the play's and Ansible's defaults),
    so that every worker forked after it inherits them as it inherits Ansible's own. It changes nothing else and never
    fails a run; a name it cannot resolve is left to the worker, which reports it as it always did.
  - Under the C(gpunode_mitogen) strategy the workers use mitogen's own connections instead, so it saves nothing there.
  - When it is loaded (in the controller's main process, before any play) it also installs the compiled-template
    cache of this collection (plugins/plugin_utils/template_cache.py), so that a template a task compiled is not
    compiled again by the next task's worker nor by the next run. C(GPUNODE_TEMPLATE_CACHE=off) turns that off;
    C(GPUNODE_TEMPLATE_CACHE) can also name its directory (default C(<ANSIBLE_HOME>/gpunode/templates)). Only with
    ansible-core 2.19, whose templating it wraps.
  - It counts, per host, the task results that report a change, and apart those that refreshed the package index
    (apt's C(cache_updated)), for the read ahead of the roles (gpu_node_facts' task reads the later roles of the play;
    a role whose read ahead found nothing to change runs one task, unless the host reported a change since;
    plugins/plugin_utils/read_ahead.py). Without this callback every role reads the node in its own task.
  - Enabled in this project's ansible.cfg (C(callbacks_enabled)).
requirements:
  - enabled in C(callbacks_enabled)
"""

from ansible import constants as C
from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import become_loader, connection_loader, shell_loader
from ansible_collections.gpunode.provisioning.plugins.plugin_utils import read_ahead, template_cache


def _plain(value) -> str:
    """A plugin name as given, "" where it is unset or a template (the worker resolves those)."""
    return value if isinstance(value, str) and value and "{" not in value else ""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpunode.provisioning.plugin_warmup"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loaded: list[str] = []
        try:
            self.template_cache = template_cache.install()
        except Exception as ex:  # an optimisation: never the reason a run fails
            self.template_cache = False
            self._display.vvvv(f"plugin_warmup: no template cache: {ex}")
        read_ahead.track()

    def note(self, result) -> None:
        """A task's result: the read ahead counts the host's changes (plugins/plugin_utils/read_ahead.py)."""
        data = result.result
        refreshed = isinstance(data, dict) and bool(data.get("cache_updated"))
        read_ahead.note_result(result.host.get_name(), {"changed": result.is_changed(), "cache_updated": refreshed})

    def v2_runner_on_ok(self, result):
        self.note(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self.note(result)

    def v2_playbook_on_play_start(self, play):
        try:
            names = self.plugin_names(play)
        except Exception as ex:  # an optimisation: never the reason a run fails
            self._display.vvvv(f"plugin_warmup: no plugin names for play {play.get_name()!r}: {ex}")
            return
        for loader, name in names:
            try:
                plugin = loader.get(name, class_only=True)
            except Exception as ex:  # as above: the worker reports it
                plugin = None
                self._display.vvvv(f"plugin_warmup: {loader.type} {name} not loaded: {ex}")
            if plugin is not None and f"{loader.type} {name}" not in self.loaded:
                self.loaded.append(f"{loader.type} {name}")

    @staticmethod
    def plugin_names(play) -> list:
        """(loader, name) of the connection, shell and become plugins of the play's first host."""
        manager = play.get_variable_manager()
        hosts = manager._inventory.get_hosts(play.hosts) if manager is not None else []
        host_vars = manager.get_vars(play=play, host=hosts[0], include_hostvars=False) if hosts else {}
        connection = (
            _plain(host_vars.get("ansible_connection")) or _plain(play.connection) or _plain(C.DEFAULT_TRANSPORT)
        )
        names = [(connection_loader, connection)] if connection else []
        shell = _plain(host_vars.get("ansible_shell_type")) or "sh"
        names.append((shell_loader, shell))
        become = _plain(host_vars.get("ansible_become_method")) or _plain(play.become_method)
        if become:
            names.append((become_loader, become))
        return names
