#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Documentation of the fleet_report_write action; the work is done by plugins/action/fleet_report_write.py."""

from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_report_write
short_description: Write the doctor's fleet report on the controller under a lock, merged with what is there
description:
  - The fleet report of roles/gpu_validate is a read-merge-write on the controller (the rows of nodes another run
    wrote are kept). This action makes it one critical section, so that runs that write one report at once (AWX job
    slices on one controller) never lose each other's rows.
  - Takes an exclusive C(flock) on O(lock) (created where missing, never removed). The kernel releases it when the
    process that holds it ends, however it ends, so a killed run leaves no stale lock. Where another run holds it, the
    action says so and waits at most O(timeout) seconds.
  - Holding the lock, renders the variable that O(files) names (its render reads the report and merges), then writes
    each file whose text differs through a temporary file in its directory renamed over it (a symlink is followed),
    and creates missing directories (mode C(0755)).
  - Runs on the controller only; in check mode nothing is locked or written.
version_added: "1.0.0"
author: gpu-node-provisioning contributors (!UNKNOWN)
options:
  lock:
    description: The lock file, C(<report>.lock) beside the report. Do not remove it while a run may hold it.
    type: path
    required: true
  files:
    description:
      - The name of a variable that holds a list of C({path, content}) (absolute paths), rendered under the lock.
      - The name, not the value (a value would be rendered before the lock is held).
    type: str
    required: true
  mode:
    description: The mode of each file written.
    type: str
    default: "0644"
  timeout:
    description: Seconds to wait for another run that holds O(lock), then fail naming the lock.
    type: int
    default: 300
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
- name: Write the fleet report as JSON and HTML
  gpunode.provisioning.fleet_report_write:
    lock: "{{ __gpu_validate_fleet_path }}.lock"
    files: __gpu_validate_fleet_files
  delegate_to: localhost
  run_once: true
  changed_when: false
"""

RETURN = r"""
lock:
  description: The lock file that was held.
  returned: always
  type: str
written:
  description: The files written (in check mode, the files that would be), in the order of O(files).
  returned: always
  type: list
  elements: str
"""

from ansible_collections.gpunode.provisioning.plugins.module_utils.plugins.action_only import fail_outside_action

# The options DOCUMENTATION lists (ansible-test's validate-modules compares them)
ARGUMENT_SPEC = {
    "lock": {"type": "path", "required": True},
    "files": {"type": "str", "required": True},
    "mode": {"type": "str", "default": "0644"},
    "timeout": {"type": "int", "default": 300},
}


def main():
    fail_outside_action("fleet_report_write", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
