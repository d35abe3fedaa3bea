#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Documentation of the role_variables action; the work is done by plugins/action/role_variables.py."""

from __future__ import annotations

DOCUMENTATION = r"""
module: role_variables
short_description: The one check of a role's variables, their YAML types and choices and then the role's own rules
description:
  - Runs on the controller as a role's first task that can refuse anything, before anything on the node changes.
    Every problem is reported at once, each naming the variable and the fix; the node is not touched.
  - Types first. Ansible's role argument validation converts before it checks. A string given for a list option
    (C(type) V(list)) passes (it is split at commas), but the role then sees the string, and a loop over it walks
    its characters. For every option of O(entry_point) that the play sets, a list option's value must be a YAML
    list (its items of the declared C(elements) type where that is C(str), C(dict), C(list) or C(bool)), a dict
    option's value a YAML mapping, a bool a YAML boolean, an int a YAML integer, and none of them null where the
    default is not. An option with C(choices) must hold one of them (a list option only them); the message names
    the variable, what it got and the values it takes.
  - Ansible's own validation does not run besides, as it is prepended to a role only for an entry point named
    C(main), and the roles name theirs V(variables) (C(ansible-doc -t role) shows it).
  - Then, when the types are right, the role's rules (O(checks)).
version_added: "1.0.0"
author: gpu-node-provisioning contributors (!UNKNOWN)
options:
  spec:
    description: Path of the role's C(meta/argument_specs.yml) on the controller.
    type: path
    required: true
  checks:
    description:
      - The name of the role variable (in its C(vars/main.yml)) that holds its rules, a mapping of rule name to
        C({ok, msg}). A rule fails when its C(ok) renders false, and its C(msg) (a sentence or a list of them)
        is reported. A rule with C(loop) (a list) is checked for each item, as C(item) in its C(ok) and C(msg).
      - Rendered one rule at a time, after the types passed. Without it only the types are checked.
    type: str
  entry_point:
    description: The entry point whose options are checked; the task fails when the spec has none of that name.
    type: str
    default: variables
  report:
    description:
      - A message (a sentence or a list of them) shown as the task's C(msg) once the variables hold, as
        M(ansible.builtin.debug) shows its message; empty shows none. Its result then leaves RV(checked) out.
      - A role that leaves a node alone says so in its check instead of in a task of its own.
    type: raw
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: all
"""

EXAMPLES = r"""
# vars/main.yml:
#   __fuse_variable_checks:
#     device_mode:
#       ok: "{{ fuse_device_mode is string and fuse_device_mode is regex('0?[0-7]{3}', match_type='fullmatch') }}"
#       msg: fuse_device_mode must be a quoted octal mode such as "0666" (got {{ fuse_device_mode }}).
- name: Check the fuse variables
  role_variables:
    spec: "{{ role_path }}/meta/argument_specs.yml"
    checks: __fuse_variable_checks
"""

RETURN = r"""
checked:
  description: The variables of the entry point that the play sets and whose types were checked.
  returned: always
  type: list
  elements: str
  sample: [security_profiles_apparmor_mount_fstypes]
problems:
  description: One sentence per problem (a variable of the wrong type, or a rule that does not hold); also the msg.
  returned: failed
  type: list
  elements: str
  sample: ["security_profiles_apparmor_mount_fstypes must be a list of str (got a string ('fuse.*'))"]
"""

from ansible_collections.gpunode.provisioning.plugins.module_utils.plugins.action_only import fail_outside_action

# The options DOCUMENTATION lists (ansible-test's validate-modules compares them)
ARGUMENT_SPEC = {
    "spec": {"type": "path", "required": True},
    "checks": {"type": "str"},
    "entry_point": {"type": "str", "default": "variables"},
    "report": {"type": "raw"},
}


def main():
    fail_outside_action("role_variables", ARGUMENT_SPEC)


if __name__ == "__main__":
    main()
