#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Documentation of the containerd_config action; the work is done by plugins/action/containerd_config.py."""

from __future__ import annotations

DOCUMENTATION = r"""
module: containerd_config
short_description: Register a runtime, CDI and other settings in containerd's config.toml, keeping the rest
description:
  - Merges a runtime entry (for example the NVIDIA container runtime), the default runtime, CDI and any raw
    O(settings) into containerd's C(config.toml). Everything it is not told about stays as it is, comments and
    layout included. The file is edited with tomlkit on the controller, so the node needs nothing but Python.
  - The new runtime's table is a copy of the default runtime's whole table (C(runtime_type), C(options) with
    C(SystemdCgroup), C(base_runtime_spec), pod/container annotations, C(privileged_without_host_devices) and
    whatever else the node's containerd has), as NVIDIA's own tooling does; only C(options.BinaryName) is
    replaced by O(runtime.path) and O(runtime.options) merged over the options. The default runtime is the one
    C(default_runtime_name) names in containerd's B(effective) config (C(containerd --config <path> config dump)
    on the node, imports included), else C(runc); its table comes from that effective config, else from the
    file, else from C(containerd config default). Only a runtime with the same C(runtime_type) is copied.
  - Option keys are compared the way containerd decodes them, case-insensitively. kubespray 2.24 to 2.27
    render C(binaryName) and C(systemdCgroup); the copy keeps one spelling per option (O(runtime.options) and
    C(BinaryName) win), and any other spelling of those keys in the runtime's table is removed, so the table
    names ONE binary.
  - When the file has no table for the default runtime (Debian's packaged config.toml has no C(runtimes) at
    all), that runtime's effective table is written too; containerd 1.x replaces its built-in runtimes with the
    file's C(runtimes) table, and without a table for C(default_runtime_name) its CRI plugin does not load
    (C(ctr plugins ls) shows C(cri) C(error)), so no pod could run.
  - Refuses, changing nothing, when an imported file (the effective config differs from the file) makes
    O(runtime.name) the default runtime while O(default_runtime) does not ask for it, or gives O(runtime.name)
    another C(BinaryName); the message names the key and what to remove.
  - The tables follow the file's config version. Version 1 (no C(version) key) uses C(plugins.cri),
    version 2 C(plugins."io.containerd.grpc.v1.cri"), versions 3 (containerd 2.x) and 4 (containerd 2.3, the
    same CRI table names as 3) C(plugins."io.containerd.cri.v1.runtime"). Runtimes live under
    C(<that table>.containerd.runtimes), C(default_runtime_name) under C(<that table>.containerd), C(enable_cdi)
    and C(cdi_spec_dirs) in that table.
  - containerd 2.3 migrates every file to version 4 in memory, so C(config dump) prints version 4 with
    C(io.containerd.cri.v1.*) tables whatever the file says; the file keeps its own version and table names,
    and containerd's reading of the candidate is checked by the dump's version. A version 2 file kept through
    an upgrade to containerd 2.3 is edited as version 2.
  - An empty file counts as the version the node's containerd writes (2; 3 from containerd 2.0; 4 from 2.3)
    and gets a C(version) key written. Any other version fails and changes nothing.
  - The file is written only when its parsed value changes, never for formatting alone. It is written through
    M(gpunode.provisioning.config_file_write) (atomic replace, O(backup), owner/group/mode) after containerd
    parsed the candidate (O(validate)). C(--check) computes and reports the change and writes nothing;
    C(--diff) shows it.
  - This is an action plugin. It must run through plugins/action/containerd_config.py; the module file only
    documents it.
version_added: "0.1.0"
author: gpu-node-provisioning contributors (!UNKNOWN)
options:
  path:
    description:
      - Path of containerd's main configuration file on the node.
    type: str
    default: /etc/containerd/config.toml
  runtime:
    description:
      - Runtime to register under C(<CRI table>.containerd.runtimes.<name>).
    type: dict
    suboptions:
      name:
        description:
          - Name of the runtime (the key under C(runtimes), and what a RuntimeClass handler refers to).
        type: str
        required: true
      path:
        description:
          - Path of the runtime binary on the node; written as C(options.BinaryName).
        type: str
        required: true
      runtime_type:
        description:
          - containerd shim of the runtime.
        type: str
        default: io.containerd.runc.v2
      options:
        description:
          - >-
            Runtime options merged over the options copied from the default/runc runtime, for example
            V({SystemdCgroup: true}). Needed for C(SystemdCgroup) when the file has no runc runtime to copy from.
        type: dict
        default: {}
  default_runtime:
    description:
      - Runtime to make the default (C(default_runtime_name)). Leave unset to keep the current default.
      - Where the default is NVIDIA's runtime already under another name (an entry whose C(options.BinaryName) is
        C(nvidia-container-runtime), C(.cdi) or C(.legacy), such as AKS's C(nvidia-container-runtime) or the GPU
        Operator's C(nvidia-cdi)), and this names O(runtime.name), that entry stays the default
        (RV(nvidia_default_kept)).
      - Keep runc the default on GPU nodes and give GPUs to pods through CDI; with nvidia as the default,
        any pod that sets C(NVIDIA_VISIBLE_DEVICES) sees GPUs.
    type: str
  unset_default:
    description:
      - Remove C(default_runtime_name) from the file when it names NVIDIA's runtime, under O(runtime.name) or any
        other name (an entry whose C(options.BinaryName) is C(nvidia-container-runtime), C(.cdi) or C(.legacy)), and
        O(default_runtime) is not set, so containerd's own default (C(runc)) applies again, with the settings of the
        old default's table (all but the binary). The NVIDIA entry itself stays (RuntimeClasses name it). The role
        sets it when C(runtime_config_set_as_default) is false, so NVIDIA's runtime never silently stays the default.
    type: bool
    default: false
  enable_cdi:
    description:
      - Value of C(enable_cdi) in the CRI table. Leave unset to keep the current value
        (containerd's default is false in 1.7 and true from 2.0).
    type: bool
  cdi_spec_dirs:
    description:
      - Value of C(cdi_spec_dirs) in the CRI table, for example V([/etc/cdi, /var/run/cdi]). Combined with the
        current list according to O(list_strategy).
    type: list
    elements: str
  settings:
    description:
      - >-
        Raw settings deep-merged at the top level of the file (or of the drop-in), for example
        V({plugins: {io.containerd.grpc.v1.cri: {sandbox_image: registry.example/pause:3.9}}}).
      - Tables merge key by key at every depth; other values replace the current ones. The typed options above
        win where they name the same key.
    type: dict
    default: {}
  list_strategy:
    description:
      - How a list given here combines with the list already in the file.
      - V(replace) uses the new list; V(append_unique) keeps the current items and appends the missing new ones;
        V(prepend_unique) puts the missing new items in front.
    type: str
    choices: [replace, append_unique, prepend_unique]
    default: replace
  when_missing:
    description:
      - What to start from when O(path) does not exist.
      - V(default) starts from the output of C(containerd config default) run on the node (containerd must be
        installed); V(empty) starts from an empty file.
    type: str
    choices: [default, empty]
    default: default
  method:
    description:
      - V(inplace) merges into O(path) itself. Works with every containerd version.
      - V(dropin) writes the settings to O(dropin_path) (only our tables, with the same config version as O(path)
        on disk, never the version C(config dump) reports, because containerd 2.3 refuses to start with a drop-in
        whose version is above its root file's) and makes sure the top-level C(imports) of O(path) covers it.
        Allowed only for containerd 2.0 and later; containerd 1.x replaces a whole C(plugins.<id>) table with the
        imported one, so a drop-in that adds a runtime would wipe the CRI settings of O(path) (runc's
        C(SystemdCgroup) among them).
    type: str
    choices: [inplace, dropin]
    default: inplace
  dropin_path:
    description:
      - File written when O(method=dropin). The default is C(/etc/containerd/conf.d/99-<runtime name>.toml),
        or C(/etc/containerd/conf.d/99-gpu-node.toml) without O(runtime).
      - C(<its directory>/*.toml) is added to C(imports) unless an entry already covers the file.
    type: str
  containerd_version:
    description:
      - containerd version to assume, for example V(2.1.4). By default it is read from C(containerd --version)
        on the node. Decides whether O(method=dropin) is allowed and which version an empty file gets (4 from
        containerd 2.3).
    type: str
  validate:
    description:
      - Run C(containerd --config <candidate> config dump) on the node before the candidate replaces the file;
        a failure leaves the file unchanged and fails the task. Skipped where containerd is not installed.
    type: bool
    default: true
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
    O(group) or O(mode) say otherwise. A missing parent directory is created with mode C(0755).
  - containerd reads its configuration only at start; notify a handler that restarts it when RV(changed) is true.
  - In O(method=dropin) the drop-in is written before O(path), so the validation of O(path) sees it through
    C(imports). If writing O(path) then fails, the drop-in stays; the message says so.
  - Comments of the file are kept; new tables get the file's indentation. Strings this action adds use double
    quotes.
requirements:
  - tomlkit on the controller
seealso:
  - module: gpunode.provisioning.config_file_write
  - name: containerd configuration (config.toml)
    description: Every option of containerd's config file and its versions.
    link: https://github.com/containerd/containerd/blob/main/docs/man/containerd-config.toml.5.md
  - name: containerd CRI plugin configuration
    description: The CRI plugin's tables, runtimes and CDI settings.
    link: https://github.com/containerd/containerd/blob/main/docs/cri/config.md
"""

EXAMPLES = r"""
- name: Register the NVIDIA runtime next to runc, with CDI, keeping runc the default
  containerd_config:
    runtime:
      name: nvidia
      path: /usr/bin/nvidia-container-runtime
    enable_cdi: true
    cdi_spec_dirs:
      - /etc/cdi
      - /var/run/cdi
    backup: true
  notify: Restart containerd

- name: On containerd 2.x, put the runtime in a drop-in instead of editing config.toml
  containerd_config:
    method: dropin
    runtime:
      name: nvidia
      path: /usr/bin/nvidia-container-runtime
  notify: Restart containerd

- name: Pin the pause image and add a registry config path (raw settings, config version 2)
  containerd_config:
    settings:
      plugins:
        io.containerd.grpc.v1.cri:
          sandbox_image: registry.example.com/pause:3.9
          registry:
            config_path: /etc/containerd/certs.d

- name: Register a runtime where the file has no runc entry to copy options from
  containerd_config:
    when_missing: empty
    runtime:
      name: nvidia
      path: /usr/bin/nvidia-container-runtime
      options:
        SystemdCgroup: true
"""

RETURN = r"""
changed:
  description: Whether a file (content or attributes) changed, or would change in check mode.
  returned: always
  type: bool
default_runtime_table_written:
  description: Name of the default runtime whose table was written too because the file had none (else null).
  type: str
  returned: always
path:
  description: The main configuration file.
  returned: always
  type: str
  sample: /etc/containerd/config.toml
method:
  description: The value of O(method).
  returned: always
  type: str
  sample: inplace
version:
  description: Config version of the main file (1, 2, 3 or 4) on disk; also the version of the drop-in.
  returned: success
  type: int
  sample: 2
runtime_table:
  description: Dotted key path of the runtime's table (in the drop-in for O(method=dropin)); null without O(runtime).
  returned: success
  type: str
  sample: plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia
options_copied_from:
  description: Name of the runtime whose options were copied; null when there was none.
  returned: success
  type: str
  sample: runc
nvidia_entries:
  description:
    - The runtimes of the file (and of containerd's effective config) besides O(runtime.name) that are NVIDIA's
      runtime, whatever their name (their C(options.BinaryName) is C(nvidia-container-runtime), C(.cdi) or
      C(.legacy) in any directory), each name with its BinaryName. They are kept, as RuntimeClasses name them;
      RV(msg) says so.
  returned: success
  type: dict
  sample: {nvidia-cdi: /usr/local/nvidia/toolkit/nvidia-container-runtime.cdi}
nvidia_default_moved_from:
  description:
    - The NVIDIA runtime entry that was the default and no longer is (O(unset_default)), under whatever name; the
      default runtime's table keeps its settings but the binary. Null when the default did not move.
  returned: success
  type: str
  sample: nvidia-container-runtime
nvidia_default_kept:
  description:
    - The NVIDIA runtime entry, under another name than O(runtime.name), that stays the default although
      O(default_runtime) names O(runtime.name) (no second, unused NVIDIA default is made). Null otherwise.
  returned: success
  type: str
  sample: nvidia-cdi
nvidia_note:
  description: What RV(nvidia_entries), RV(nvidia_default_moved_from) and RV(nvidia_default_kept) say, as a sentence
    (also at the end of RV(msg)); empty when they say nothing.
  returned: success
  type: str
  sample: "NVIDIA's runtime is also registered as nvidia-cdi (/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi)"
containerd_version:
  description: containerd version used for the decisions (from O(containerd_version) or the node); null if unknown.
  returned: success
  type: str
  sample: 1.7.24
dropin_path:
  description: The drop-in file.
  returned: O(method=dropin)
  type: str
  sample: /etc/containerd/conf.d/99-nvidia.toml
diff:
  description: Before and after text of each file that changes (or would change in check mode).
  returned: success
  type: list
  elements: dict
  sample: [{"before_header": "/etc/containerd/config.toml", "after_header": "/etc/containerd/config.toml",
            "before": "version = 2\n", "after": "version = 2\n\n[plugins...]\n"}]
backup_file:
  description: Path of the backup of the main file.
  returned: changed and O(backup) is true and the file existed
  type: str
  sample: /var/backups/gpu-node-provisioning/etc/containerd/config.toml.2025-01-31@12:00:00~
dropin_backup_file:
  description: Path of the backup of the drop-in.
  returned: changed and O(backup) is true and the drop-in existed
  type: str
  sample: /var/backups/gpu-node-provisioning/etc/containerd/conf.d/99-nvidia.toml.2025-01-31@12:00:00~
msg:
  description: What was done, or why nothing was.
  returned: always
  type: str
  sample: updated /etc/containerd/config.toml; restart containerd to apply
"""

from ansible_collections.gpunode.provisioning.plugins.module_utils.plugins.action_only import fail_outside_action

# The options DOCUMENTATION lists (ansible-test's validate-modules compares them); plugins/action/containerd_config.py
# takes its arguments from here, with the file attributes (add_file_common_args)
ARGUMENT_SPEC = {
    "path": {"type": "str", "default": "/etc/containerd/config.toml"},
    "runtime": {
        "type": "dict",
        "options": {
            "name": {"type": "str", "required": True},
            "path": {"type": "str", "required": True},
            "runtime_type": {"type": "str", "default": "io.containerd.runc.v2"},
            "options": {"type": "dict", "default": {}},
        },
    },
    "default_runtime": {"type": "str"},
    "unset_default": {"type": "bool", "default": False},
    "enable_cdi": {"type": "bool"},
    "cdi_spec_dirs": {"type": "list", "elements": "str"},
    "settings": {"type": "dict", "default": {}},
    "list_strategy": {"type": "str", "choices": ["replace", "append_unique", "prepend_unique"], "default": "replace"},
    "when_missing": {"type": "str", "choices": ["default", "empty"], "default": "default"},
    "method": {"type": "str", "choices": ["inplace", "dropin"], "default": "inplace"},
    "dropin_path": {"type": "str"},
    "containerd_version": {"type": "str"},
    "backup": {"type": "bool", "default": False},
    "validate": {"type": "bool", "default": True},
}


def main():
    fail_outside_action("containerd_config", ARGUMENT_SPEC, add_file_common_args=True)


if __name__ == "__main__":
    main()
