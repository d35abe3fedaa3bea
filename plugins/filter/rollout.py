# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Batches of a rollout: the ``serial:`` of playbooks/gpu_nodes.yml (a canary, then batches) and of
playbooks/upgrade_driver.yml (its batch size).

`gpu_rollout_serial(canary, batches, canary_name="gpu_nodes_canary", batches_name="gpu_nodes_batches")`
    The list for a play's ``serial:``: ``[canary, *batches]``. ``canary`` is a number of nodes (None, "" or 0:
    no canary). ``batches`` is one batch size or a list of them, each a number of nodes or a percentage of
    the play's nodes ("25%"); Ansible repeats the last one until every node had its turn. A canary without
    batches is followed by the rest of the nodes in one batch ("100%"). Neither: ``[]``, which Ansible reads
    as all nodes in one batch (no batching). Anything else is refused with a message that names the
    variable (the names given) and what to write.

Pure functions; the unit tests call them without Ansible.
"""

from __future__ import annotations

import re

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - Ansible is always there when the playbook runs

    class AnsibleFilterError(Exception):
        pass


PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def _unset(value) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _batch(value, name: str):
    """One batch size: a positive int, or 'N%' with 0 < N <= 100."""
    if isinstance(value, bool):
        raise AnsibleFilterError(
            f"{name}: {value!r} is no batch size; write a number of nodes (2) or a percentage ('25%')"
        )
    if isinstance(value, int):
        if value > 0:
            return value
    elif isinstance(value, str):
        text = value.strip()
        if text.isdigit() and int(text) > 0:
            return int(text)
        match = PERCENT.match(text)
        if match and 0 < float(match.group(1)) <= 100:
            return f"{match.group(1)}%"
    raise AnsibleFilterError(
        f"{name}: {value!r} is no batch size; write a number of nodes greater than 0 (2) or a percentage "
        "of the play's nodes from 1% to 100% ('25%')"
    )


def gpu_rollout_serial(canary, batches=None, canary_name="gpu_nodes_canary", batches_name="gpu_nodes_batches") -> list:
    """The ``serial:`` list of a rollout (module docstring)."""
    serial = []
    if not _unset(canary) and canary != 0:
        first = _batch(canary, canary_name)
        if isinstance(first, str):
            raise AnsibleFilterError(
                f"{canary_name}: {canary!r}: the canary is a number of nodes (1), not a percentage"
            )
        serial.append(first)
    if isinstance(batches, (list, tuple)):
        if not batches:
            raise AnsibleFilterError(f"{batches_name}: an empty list; leave it unset, or give batch sizes (['25%'])")
        serial += [_batch(item, f"{batches_name}[{index}]") for index, item in enumerate(batches)]
    elif not _unset(batches):
        serial.append(_batch(batches, batches_name))
    elif serial:
        serial.append("100%")
    return serial


class FilterModule:
    """Filters of the rollout playbooks."""

    def filters(self):
        return {"gpu_rollout_serial": gpu_rollout_serial}
