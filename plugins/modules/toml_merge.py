#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Documentation of the toml_merge action; the work is done by plugins/action/toml_merge.py."""

from __future__ import annotations

DOCUMENTATION = r"""
module: toml_merge
short_description: Merge settings into a TOML file, keeping everything else as it is
description:
  - Deep-merges O(settings) into a TOML file on the node. Keys, tables, comments and layout it is not told about
    stay as they are, so files that a package or another tool also writes (for example
    C(/etc/nvidia-container-runtime/config.toml), which the toolkit's package rewrites on upgrade) can be
    managed key by key instead of templated.
  - The file is read from the node and edited with tomlkit on the controller, with the same merge engine as the
    other config modules of this project. Tables merge key by key at every depth; other values replace the
    current ones; lists follow O(list_strategy). O(remove) deletes keys first.
  - The file is written only when its parsed value changes, never for formatting alone. It is written through
    M(gpunode.provisioning.config_file_write) (atomic replace, O(backup), O(validate), owner/group/mode).
    C(--check) computes and reports the change and writes nothing; C(--diff) shows it.
  - This is an action plugin. It must run through plugins/action/toml_merge.py; the module file only
    documents it.
version_added: "0.1.0"
author: gpu-node-provisioning contributors (!UNKNOWN)
options:
  path:
    description:
      - Path of the TOML file on the node.
    type: str
    required: true
  settings:
    description:
      - Keys to set, as a nested dict; a nested dict is a TOML table. Values are strings, integers, floats,
        booleans, dates, lists or dicts; TOML has no null, so a null value fails the task.
    type: dict
    default: {}
  remove:
    description:
      - Keys to delete before O(settings) is merged. Each entry is a key path, a list of keys from the top of the
        file (V([nvidia-container-runtime, debug])), or a string for a top-level key. Missing keys are fine.
    type: list
    elements: raw
    default: []
  list_strategy:
    description:
      - How a list given in O(settings) combines with the list already in the file.
      - V(replace) uses the new list; V(append_unique) keeps the current items and appends the missing new ones;
        V(prepend_unique) puts the missing new items in front.
    type: str
    choices: [replace, append_unique, prepend_unique]
    default: replace
  create:
    description:
      - Create the file (and a missing parent directory, mode C(0755)) when it does not exist. With V(false) a
        missing file fails the task.
    type: bool
    default: true
  validate:
    description:
      - Command run on the node with the candidate file in place of C(%s) before it replaces O(path), for example
        V(containerd --config %s config dump). A failure leaves the file unchanged and fails the task.
    type: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
  - ansible.builtin.files
  - gpunode.provisioning.gpunode_file_write
  - gpunode.provisioning.gpunode_file_write.action_lock
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
notes:
  - A new file gets mode C(0644) unless O(mode) is given; an existing file keeps its attributes unless O(owner),
    O(group) or O(mode) say otherwise.
  - Keys this action adds go to the end of their table; new top-level keys go before the first table, as TOML
    requires. Strings it adds use double quotes.
  - The file must be UTF-8 text and valid TOML; otherwise the task fails and nothing is written.
requirements:
  - tomlkit on the controller
seealso:
  - module: gpunode.provisioning.config_file_write
  - name: TOML specification
    description: Tables, keys and value types.
    link: https://toml.io/en/v1.0.0
"""

EXAMPLES = r"""
- name: Keep the NVIDIA runtime from honouring NVIDIA_VISIBLE_DEVICES in unprivileged containers
  toml_merge:
    path: /etc/nvidia-container-runtime/config.toml
    settings:
      accept-nvidia-visible-devices-envvar-when-unprivileged: false
      accept-nvidia-visible-devices-as-volume-mounts: true
    backup: true

- name: Switch the NVIDIA runtime to CDI mode and drop its debug log
  toml_merge:
    path: /etc/nvidia-container-runtime/config.toml
    settings:
      nvidia-container-runtime:
        mode: cdi
    remove:
      - [nvidia-container-runtime, debug]

- name: Add a CDI spec directory, keeping the ones already listed
  toml_merge:
    path: /etc/nvidia-container-runtime/config.toml
    settings:
      nvidia-container-runtime:
        modes:
          cdi:
            spec-dirs: [/opt/cdi]
    list_strategy: append_unique
"""

RETURN = r"""
path:
  description: The TOML file.
  returned: always
  type: str
  sample: /etc/nvidia-container-runtime/config.toml
backup_file:
  description: Path of the backup of the file.
  returned: changed and O(backup) is true and the file existed
  type: str
  sample: /var/backups/gpu-node-provisioning/etc/nvidia-container-runtime/config.toml.2025-01-31@12:00:00~
msg:
  description: What was done, or why nothing was.
  returned: always
  type: str
  sample: updated /etc/nvidia-container-runtime/config.toml
"""

from ansible_collections.gpunode.provisioning.plugins.module_utils.plugins.action_only import fail_outside_action

# The options DOCUMENTATION lists (ansible-test's validate-modules compares them); plugins/action/toml_merge.py
# takes its arguments from here, with the file attributes (add_file_common_args)
ARGUMENT_SPEC = {
    "path": {"type": "str", "required": True},
    "settings": {"type": "dict", "default": {}},
    "remove": {"type": "list", "elements": "raw", "default": []},
    "list_strategy": {"type": "str", "choices": ["replace", "append_unique", "prepend_unique"], "default": "replace"},
    "create": {"type": "bool", "default": True},
    "backup": {"type": "bool", "default": False},
    "validate": {"type": "str"},
}


def main():
    fail_outside_action("toml_merge", ARGUMENT_SPEC, add_file_common_args=True)


if __name__ == "__main__":
    main()
