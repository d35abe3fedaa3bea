# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Documentation shared by the modules and actions of library/ that write a configuration file.

DOCUMENTATION: the backup and validate options and the attributes of a safe file write.
MODULE_LOCK: the write contract of a module that reads, merges and writes on the node.
ACTION_LOCK: the write contract of an action that merges on the controller and writes on the node.
A module's own text for an option or attribute wins over the fragment's.
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  backup:
    description:
      - Keep a timestamped copy of the file before it is replaced, in the project's backup tree, which mirrors
        the file's absolute path, for example
        C(/var/backups/gpu-node-provisioning/etc/containerd/config.toml.2025-01-31@12:00:00~).
        Never beside the file, so a daemon that reads a whole directory (crio.conf.d, conf.d, sources.list.d)
        never reads a backup. The copy keeps the file's mode and owner. No backup is made when nothing changes
        or validation fails.
    type: bool
    default: false
  validate:
    description:
      - Command run (not through a shell) on the candidate file before it replaces O(path); C(%s) stands for the
        candidate's path and must be present. A non-zero exit status fails the task and leaves O(path) unchanged.
    type: str
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
  safe_file_operations:
    description: Writes a temporary file beside the target and renames it over the target, keeping the mode and
      owner, so a reader never sees a partial file.
    support: full
  vault:
    description: Decrypting vault-encrypted source files. No source file is read from the controller.
    support: none
"""

    MODULE_LOCK = r"""
options: {}
notes:
  - "Write contract: a symlink is followed (the link stays, its target gets the change). An existing file keeps
    its mode and owner; a new file gets C(0644) unless O(mode) is given. The whole read-merge-write holds an
    exclusive lock on C(/var/backups/gpu-node-provisioning/<file's path>.lock), so two runs at once never lose a
    change. A failed write leaves no temporary file and no partial backup; temporary files of a killed run
    (C(.<name>.XXXXXXXX.tmp) beside the file) are removed by the next run."
"""

    ACTION_LOCK = r"""
options: {}
notes:
  - "Write contract: a symlink is followed (the link stays, its target gets the change). An existing file keeps
    its mode and owner; a new file gets C(0644) unless O(mode) is given. The node holds an exclusive lock,
    C(/var/backups/gpu-node-provisioning/<file's path>.lock), while the file is compared with
    the bytes read on the controller and written; when another run wrote it in between, the action reads and
    merges again (3 attempts), so two runs at once never lose a change. A failed write leaves no temporary
    file and no partial backup; temporary files of a killed run
    (C(.<name>.XXXXXXXX.tmp) beside the file) are removed by the next run."
"""
