# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The driver branches the project supports, read against the month: which are supported, and what to say of a node's.

The list itself (branch -> ``{designation, end_of_life}``, end of life as ``YYYY-MM``, supported through that month)
has one home, ``__nvidia_driver_branches`` in roles/nvidia_driver/vars/main.yml; these filters only read it.

- ``nvidia_driver_supported_branches(branches, month)`` (a function, not a registered filter): the branches whose
  end of life is not before ``month`` (``YYYY-MM``), in the list's order.
- ``nvidia_driver_branch_warning(branch, branches, month)``: '' when ``branch`` is '' or supported in ``month``;
  else one sentence, starting "WARNING:", that says the branch is past its end of life (or not one the project
  supports) and names the supported ones. The preflight's report of tasks/preflight.yml carries it.

Callers: plugins/filter/nvidia_driver_plan.py (the role's plan), tests/unit/test_example_inventory.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

_MONTH = re.compile(r"\A[0-9]{4}-(0[1-9]|1[0-2])\Z")


def _month(value, what: str) -> str:
    value = str(value)
    if not _MONTH.match(value):
        raise AnsibleFilterError(f"{what} must be a year and month (YYYY-MM), not {value!r}")
    return value


def nvidia_driver_supported_branches(branches, month) -> list[str]:
    """The branches of `branches` whose end of life is `month` or later."""
    if not isinstance(branches, Mapping):
        raise AnsibleFilterError("nvidia_driver_supported_branches expects the mapping of branches")
    month = _month(month, "the month")
    return [
        str(branch)
        for branch, data in branches.items()
        if _month(data["end_of_life"], f"the end of life of branch {branch}") >= month
    ]


def nvidia_driver_branch_warning(branch, branches, month) -> str:
    """What the role says of a node on `branch` in `month` ('' = nothing: no branch, or a supported one)."""
    branch = str(branch or "")
    supported = nvidia_driver_supported_branches(branches, month)
    if branch == "" or branch in supported:
        return ""
    data = branches.get(branch)
    why = (
        f"reached its end of life in {data['end_of_life']} ({data['designation']} branch) and gets no more fixes"
        " from NVIDIA"
        if data
        else "is not a branch this project supports"
    )
    return (
        f"WARNING: NVIDIA driver branch {branch} {why}: pin one of {', '.join(supported)} (nvidia_driver_branch; "
        "roles/nvidia_driver/vars/main.yml lists the branches with their end of life) and roll it out with "
        "playbooks/upgrade_driver.yml."
    )


class FilterModule:
    def filters(self):
        # nvidia_driver_branch_warning: called by the role's plan (plugins/filter/nvidia_driver_plan.py)
        return {}
