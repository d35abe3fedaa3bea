#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Documentation of the argument_types action; the work is done by plugins/action/argument_types.py."""

from __future__ import annotations

DOCUMENTATION = r"""
module: argument_types
short_description: Refuse role variables that are not of the YAML type their argument_specs declare
description:
  - Ansible's role argument validation converts before it checks. A string given for a list option (C(type) V(list))
    passes (it is split at commas), but the role then sees the string, and a loop over it walks its characters.
  - This action runs on the controller as the first task of a role. For every option of O(entry_point) that the
    play sets, a list option's value must be a YAML list (its items of the declared C(elements) type where that
    is C(str), C(dict), C(list) or C(bool)), and a dict option's value a YAML mapping.
  - It fails naming every variable that is wrong, the type expected and the type given; the node is not touched.
version_added: "1.0.0"
author: gpu-node-provisioning
options:
  spec:
    description: Path of the role's C(meta/argument_specs.yml) on the controller.
    type: path
    required: true
  entry_point:
    description: The entry point whose options are checked.
    type: str
    default: main
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
- name: Refuse variables of the wrong type before anything changes (a string where a list belongs)
  argument_types:
    spec: "{{ role_path }}/meta/argument_specs.yml"
"""

RETURN = r"""
checked:
  description: The variables of the entry point that the play sets and that were checked.
  returned: always
  type: list
  elements: str
  sample: [security_profiles_apparmor_mount_fstypes]
problems:
  description: One sentence per variable of the wrong type.
  returned: failed
  type: list
  elements: str
  sample: ["security_profiles_apparmor_mount_fstypes must be a list of str (got a string ('fuse.*'))"]
"""

from ansible.module_utils.basic import AnsibleModule, _load_params


def main():
    # This file only documents the action; accept whatever was passed so the message below is what users see.
    spec = {name: {"type": "raw"} for name in _load_params() if not name.startswith("_ansible_")}
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    module.fail_json(
        msg="argument_types must run through its action plugin (plugins/action/argument_types.py) on the "
        "controller. Run it from the repository root (ansible.cfg sets action_plugins)."
    )


if __name__ == "__main__":
    main()
