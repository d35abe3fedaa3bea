#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Documentation of the gpu_validate_outcome action; the work is done by plugins/action/gpu_validate_outcome.py."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_validate_outcome
short_description: The doctor's last task, write its reports that differ, show its table, fail a failed node
description:
  - The end of roles/gpu_validate in one task (a no-op re-run of C(site.yml) pays one task for it, not an include and
    a debug task).
  - Where O(node_pending) is true, creates O(report_dir) and writes each file of the variable O(node_files) names on
    the node, as the C(file) and C(copy) modules would (their check and diff modes included).
  - Where O(fleet) is true, writes the fleet report on the controller as C(fleet_report_write) does (its lock, its
    atomic writes), from the variables O(fleet_files) names, then adds the line O(fleet_message) names to the message.
    Never in check mode.
  - Shows O(table) (the node's rows) as the task's message, as a C(debug) task would; where O(fail) is true, adds
    O(failure) and fails the node, after its reports are written.
  - O(fleet_files) and O(fleet_message) name variables (not their values), rendered only where the fleet report is
    written, under its lock.
  - A write that fails (the node's report, the fleet report) fails the task, its message after the table; the fleet
    report is written even where the node's own report could not be.
version_added: "1.0.0"
author: gpu-node-provisioning contributors (!UNKNOWN)
options:
  table:
    description: The node's checks as the table to show.
    type: str
    required: true
  fail:
    description: Whether the node fails (a failed check, and the role fails on one).
    type: bool
    default: false
  failure:
    description: What to add to O(table) where O(fail) is true.
    type: str
    default: ""
  node_pending:
    description: Whether a report file on the node differs from what it should hold.
    type: bool
    default: false
  node_files:
    description: The name of a variable that holds the node's report files, a list of C({path, content}).
    type: str
  report_dir:
    description: The directory of the node's report files, created (C(root:root), C(0755)) where missing.
    type: path
  fleet:
    description: Whether this host writes the fleet report (one host a batch, where it differs; never in check mode).
    type: bool
    default: false
  fleet_files:
    description: The name of a variable that holds the fleet report's files, rendered under O(fleet_lock).
    type: str
  fleet_lock:
    description: The fleet report's lock file on the controller.
    type: path
  fleet_message:
    description: The name of a variable that holds the line saying where the fleet report is (rendered once written).
    type: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Write the reports that differ, show the checks, fail on a failed one
  gpunode.provisioning.gpu_validate_outcome:
    table: "{{ gpu_validate_results | gpunode.provisioning.gpu_validate_table(inventory_hostname) }}"
    node_pending: "{{ __gpu_validate_node_report_pending }}"
    node_files: __gpu_validate_report_files
    report_dir: "{{ gpu_validate_report_dir }}"
"""

RETURN = r"""
written:
  description: The node's report files written (in check mode, those that would be).
  returned: always
  type: list
  elements: str
fleet_written:
  description: The fleet report's files written on the controller.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.gpunode.provisioning.plugins.module_utils.plugins.action_only import fail_outside_action

# The options DOCUMENTATION lists (ansible-test's validate-modules compares them)
ARGUMENT_SPEC = {
    "table": {"type": "str", "required": True},
    "fail": {"type": "bool", "default": False},
    "failure": {"type": "str", "default": ""},
    "node_pending": {"type": "bool", "default": False},
    "node_files": {"type": "str"},
    "report_dir": {"type": "path"},
    "fleet": {"type": "bool", "default": False},
    "fleet_files": {"type": "str"},
    "fleet_lock": {"type": "path"},
    "fleet_message": {"type": "str"},
}


def main():
    fail_outside_action("gpu_validate_outcome", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
