#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Write one config file on the node by the project's write contract (the action plugins' writer)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: config_file_write
short_description: Write a whole config file on the node by the project's write contract
description:
  - Writes O(content) to O(path) the way every editor of this project writes, so that the controller-side
    action plugins (M(gpunode.provisioning.containerd_config), M(gpunode.provisioning.toml_merge)) write like
    the modules on the node do.
  - The project's action plugins call it; a task rarely needs it directly.
  - With O(expected_sha1) the file must still hold the bytes the caller read (checked under the lock, just
    before the write). Otherwise nothing is written and the module fails with RV(conflict) true, so that the
    caller reads, merges and tries again instead of overwriting another run's change.
  - When the file already holds O(content), nothing is written (file attributes are still applied).
options:
  path:
    description:
      - The file to write. A symlink is followed; the link stays and its target is written.
    type: path
    required: true
    aliases: [dest]
  content:
    description:
      - The new content of the file, UTF-8 text. Not logged.
    type: str
    required: true
  expected_sha1:
    description:
      - SHA-1 (hex) of the bytes the caller read; the empty string when the file did not exist.
      - When the file holds anything else at write time, nothing is written and RV(conflict) is true.
    type: str
  show_diff:
    description:
      - In diff mode, return the change as a diff. The content is then in the result, so leave it V(false) for
        files that hold secrets (the content is never logged otherwise).
    type: bool
    default: false
  create_dirs:
    description:
      - Create missing parent directories (mode C(0755)). Without it a missing directory is an error.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.files
  - gpunode.provisioning.gpunode_file_write
attributes:
  diff_mode:
    support: full
    details: Only with O(show_diff=true).
notes:
  - "Write contract: a symlink is followed (the link stays, its target gets the change). An existing file keeps
    its mode and owner; a new file gets C(0644) unless O(mode) is given. The check of O(expected_sha1) and the
    write hold an exclusive lock on C(/var/backups/gpu-node-provisioning/<file's path>.lock). A failed write
    leaves no temporary file and no partial backup; temporary files of a killed run (C(.<name>.XXXXXXXX.tmp)
    beside the file) are removed by the next run."
  - Runs on the managed node with the Python standard library only.
author:
  - gpu-node-provisioning contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Write the merged config.toml unless another run changed it since it was read
  config_file_write:
    path: /etc/containerd/config.toml
    content: "{{ merged_config }}"
    expected_sha1: "{{ read_checksum }}"
    backup: true
    validate: containerd --config %s config dump
"""

RETURN = r"""
path:
  description: The file written, symlinks followed.
  returned: always
  type: str
  sample: /etc/containerd/config.toml
backup_file:
  description: Path of the backup of the previous file.
  returned: changed and O(backup) is true and the file existed
  type: str
  sample: /var/backups/gpu-node-provisioning/etc/containerd/config.toml.2025-01-31@12:00:00~
conflict:
  description: True when the file no longer held the bytes of O(expected_sha1); nothing was written.
  returned: failed because of a conflict
  type: bool
  sample: true
"""

import hashlib

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpunode.provisioning.plugins.module_utils.files.edit import FileEditError, apply_edit, locked


def sha1_of(data: bytes | None) -> str:
    """The SHA-1 (hex) of ``data``; the empty string for a missing file (None)."""
    return "" if data is None else hashlib.sha1(data).hexdigest()


def _read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise FileEditError(f"{path} is a directory, not a file. Point path at the file itself.") from None
    except OSError as exc:
        raise FileEditError(f"cannot read {path}: {exc.strerror or exc}.") from exc


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True, aliases=["dest"]),
            content=dict(type="str", required=True, no_log=True),
            expected_sha1=dict(type="str"),
            backup=dict(type="bool", default=False),
            validate=dict(type="str"),
            create_dirs=dict(type="bool", default=False),
            show_diff=dict(type="bool", default=False),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    params = module.params
    if params["validate"] is not None and "%s" not in params["validate"]:
        module.fail_json(msg=f"validate must contain %s (the candidate file's path), got: {params['validate']}")
    try:
        with locked(params["path"], module.check_mode) as path:
            current = _read_bytes(path)
            expected = params["expected_sha1"]
            if expected is not None and sha1_of(current) != expected:
                module.fail_json(
                    msg=f"{path} changed on the node after it was read (another run or a person wrote it in the "
                    "meantime); nothing was written. Run again to merge into the new content.",
                    conflict=True,
                    path=path,
                )
            new = params["content"].encode("utf-8")
            before = None if current is None else current.decode("utf-8", errors="replace")
            result = apply_edit(
                module,
                path,
                before,
                params["content"],
                current != new,
                validate=params["validate"],
                validate_fix="fix the content or the validate command",
                backup=params["backup"],
                create_dirs=params["create_dirs"],
                unsafe_writes=params["unsafe_writes"],
            )
    except FileEditError as exc:
        module.fail_json(msg=str(exc), path=params["path"], **exc.details)
    if params["show_diff"] and "diff" in result:
        # the content is a no_log value, which exit_json would mask in the diff; the task asked to show it
        module.no_log_values.discard(params["content"])
    else:
        result.pop("diff", None)
    module.exit_json(path=path, **result)


if __name__ == "__main__":
    main()
