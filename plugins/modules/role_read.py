#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Documentation of the role_read action; the work is done by plugins/action/role_read.py."""

from __future__ import annotations

DOCUMENTATION = r"""
module: role_read
short_description: A role's variable check and its read of the node in one task, the read that decides its path
description:
  - Runs the role_variables check (O(spec), O(checks), O(entry_point), the same arguments and messages) on the
    controller first; only when the variables hold, the reads, each a module run on the node. One task where a role
    had a variable check task and a read task (the no-op re-run of site.yml counts every task it starts).
  - A read that is a probe (C(check_mode) true) runs its module, or a controller-side action of this project
    (C(action) instead of C(module)), in check mode and says whether the role's task with the same arguments would
    change anything, without changing anything. The role includes its changing tasks only where a read or a probe
    says there is something to do.
  - Give the task C(check_mode) false where its reads must run in check mode too; a probe is in check mode always.
version_added: "1.0.0"
author: gpu-node-provisioning contributors (!UNKNOWN)
options:
  spec:
    description: Path of the role's C(meta/argument_specs.yml) on the controller; without it no variable is checked.
    type: path
  checks:
    description: The name of the role variable that holds its rules (as for role_variables).
    type: str
  entry_point:
    description: The entry point whose options are checked.
    type: str
    default: variables
  reads:
    description:
      - The reads, in order. Each is a mapping with C(module) (or C(action)), C(args) (a mapping), and optionally
        C(items) (the module runs once per item, the result has the shape a loop task registers), C(item_arg) (the
        argument each item goes to; without it each item is a mapping merged over C(args)), C(missing_ok) (an item
        whose path is not there is no failure), C(check_mode) (a probe) and C(skip) (the read does not run).
      - Or the name of a variable that holds that list, rendered only after the variable check (reads built from a
        variable the check refuses would fail to render before it).
    type: raw
    default: []
  plan:
    description:
      - The name of a variable rendered once, after the reads, with C(role_read_reads) set to the reads' results in
        order (the role's plan filter over its variables, facts and what was read). Its value is returned as C(plan),
        so the role's later tasks read it from the registered result instead of rendering the plan again.
      - Not rendered when the check or a read failed.
    type: str
  probes:
    description:
      - The name of a variable holding a list of probes (reads in check mode), rendered after O(plan) with the
        task's result so far under its register name. Their results are returned as C(probes).
    type: str
  report:
    description:
      - The name of a variable rendered last, the same way, to a message (a sentence or a list of them) that the task
        shows as warnings, where it is not empty.
    type: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Check the fuse variables and read what FUSE needs on the node
  role_read:
    spec: "{{ role_path }}/meta/argument_specs.yml"
    checks: __fuse_variable_checks
    reads:
      - module: ansible.legacy.stat
        args: {get_checksum: false}
        items: [/etc/fuse.conf, /dev/fuse]
        item_arg: path
  register: __fuse_node
  check_mode: false
"""

RETURN = r"""
reads:
  description: The result of each read in order (a loop-shaped result for a read with items; a probe's changed).
  returned: always
  type: list
  elements: dict
plan:
  description: The value of the O(plan) variable, rendered after the reads.
  returned: when plan is given and the reads succeeded
  type: raw
probes:
  description: The result of each probe in order (its changed says whether its task would change anything).
  returned: when probes is given and the reads succeeded
  type: list
  elements: dict
warnings:
  description: The O(report) message, a warning for each sentence.
  returned: when report is given and its message is not empty
  type: list
  elements: str
checked:
  description: The variables of the entry point that the play sets and whose types were checked.
  returned: when spec is given
  type: list
  elements: str
"""

from ansible_collections.gpunode.provisioning.plugins.module_utils.plugins.action_only import fail_outside_action

# The options DOCUMENTATION lists (ansible-test's validate-modules compares them)
ARGUMENT_SPEC = {
    "spec": {"type": "path"},
    "checks": {"type": "str"},
    "entry_point": {"type": "str", "default": "variables"},
    "reads": {"type": "raw", "default": []},
    "plan": {"type": "str"},
    "probes": {"type": "str"},
    "report": {"type": "str"},
}


def main():
    fail_outside_action("role_read", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
