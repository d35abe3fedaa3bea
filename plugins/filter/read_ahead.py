# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Whether a role reads the node itself, or gpu_node_facts' read ahead decided it (plugins/plugin_utils/read_ahead.py).

`read_ahead_pending(node, role_uuid, host)`
    True where the role instance ``role_uuid`` must read the node itself (its tasks/main.yml include runs):
    unless the read ahead of this play (``node``: gpu_node_facts' registered result, ``__gpu_node_facts_node``)
    found nothing to change for that instance and ``host`` has reported no change since. A role's one task says:

        when: >-
          __gpu_node_facts_node | default({})
          | gpunode.provisioning.read_ahead_pending(role_uuid, inventory_hostname)
"""

from __future__ import annotations

from ansible_collections.gpunode.provisioning.plugins.plugin_utils.read_ahead import pending


def read_ahead_pending(node, role_uuid, host) -> bool:
    return pending(node, str(role_uuid), str(host))


class FilterModule:
    """The read ahead's filter."""

    def filters(self):
        return {"read_ahead_pending": read_ahead_pending}
