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
(``ansible_connection: docker``, ``ssh``, ``local``); ``community.docker.docker`` and
other fully qualified names keep ansible-core's own connection under either branch.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: gpunode_mitogen
short_description: Linear strategy through mitogen, with a fallback to plain linear
description:
  - Runs mitogen's C(mitogen_linear) strategy when the C(mitogen) package is installed on the controller and
    accepts this ansible-core; otherwise runs ansible-core's C(linear) strategy and warns why.
  - mitogen replaces the connections it knows by short name (C(docker), C(ssh), C(local)) with one persistent
    Python interpreter per node.
author: gpu-node-provisioning contributors (!UNKNOWN)
"""

from ansible.plugins.loader import strategy_loader
from ansible.utils.display import Display

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

if MITOGEN_ERROR is None:

    class StrategyModule(ansible_mitogen.strategy.StrategyMixin, _Linear):
        """mitogen_linear."""

        uses_mitogen = True

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
