# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The linear strategy run through mitogen when it can be, plain linear otherwise.

Opt-in (ansible.cfg ``strategy = gpunode_mitogen``, ``ANSIBLE_STRATEGY=gpunode_mitogen``
or the play keyword). With mitogen installed and importable into this ansible-core
(``ansible_mitogen`` refuses versions it does not support), this is mitogen's
``mitogen_linear``: one persistent Python per node instead of one per task. Without it,
or when it refuses this ansible-core, the run goes on with ansible-core's ``linear``
strategy and a warning that says why, so an inventory that opts in still works on a
controller without mitogen.

mitogen takes over the connections it knows by their short names only
(``ansible_connection: docker``, ``ssh``, ``local``). This strategy hands it a host's
fully qualified ``ansible_connection`` (``community.docker.docker``, ``ansible.builtin.ssh``,
``ansible.builtin.local``, ..., what ansible-lint asks inventories to write) by its short
name, so that such an inventory gets mitogen too (not for ``meta: reset_connection``, which
ansible-core resolves from the host's variables itself: with a fully qualified name it resets
ansible-core's connection, not mitogen's context); any other name keeps its own connection
(ansible_mitogen/strategy.py, REDIRECTED_CONNECTION_PLUGINS and
wrap_connection_loader__get_with_context, mitogen 0.3.54).
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: gpunode_mitogen
short_description: Linear strategy through mitogen, with a fallback to plain linear
description:
  - Runs mitogen's C(mitogen_linear) strategy when the C(mitogen) package is installed on the controller and
    accepts this ansible-core; otherwise runs ansible-core's C(linear) strategy and warns why.
  - mitogen replaces the connections it knows by short name (C(docker), C(ssh), C(local)) with one persistent
    Python interpreter per node. A host whose C(ansible_connection) is the fully qualified name of one of them
    (C(community.docker.docker), C(ansible.builtin.ssh), C(ansible.builtin.local), ...) gets the same.
author: gpu-node-provisioning contributors (!UNKNOWN)
"""

from ansible.plugins.loader import strategy_loader
from ansible.utils.display import Display
from ansible_collections.gpunode.provisioning.plugins.module_utils.plugins.connection_names import short_connection_name

display = Display()
_Linear = strategy_loader.get("linear", class_only=True)

try:
    # ansible_mitogen.loaders raises AnsibleError for an ansible-core it does not support.
    import ansible_mitogen.loaders
    import ansible_mitogen.strategy
except Exception as exc:  # ImportError, AnsibleError or whatever a broken install raises
    MITOGEN_ERROR: str | None = f"{type(exc).__name__}: {exc}"
else:
    MITOGEN_ERROR = None


def short_connection_vars(task_vars: dict) -> dict:
    """The task's variables with a fully qualified ``ansible_connection`` that mitogen knows by its short name
    replaced by that name; the same dict when there is nothing to replace."""
    name = str(task_vars.get("ansible_connection", ""))
    short = short_connection_name(name)
    return task_vars if short == name else {**task_vars, "ansible_connection": short}


if MITOGEN_ERROR is None:

    class StrategyModule(ansible_mitogen.strategy.StrategyMixin, _Linear):
        """mitogen_linear, for short and fully qualified connection names alike."""

        uses_mitogen = True

        def _queue_task(self, host, task, task_vars, play_context):
            # the worker derives the connection from ansible_connection: the short name is what mitogen redirects
            return super()._queue_task(host, task, short_connection_vars(task_vars), play_context)

else:

    class StrategyModule(_Linear):
        """ansible-core's linear, with a warning that mitogen is not in use."""

        uses_mitogen = False

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            display.warning(
                "gpunode_mitogen: mitogen is not usable on this controller "
                f"({MITOGEN_ERROR}); running the plain linear strategy. Install the mitogen "
                "version pinned in requirements.txt, or drop the strategy setting."
            )
