#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: docker_daemon_config
short_description: Merge settings into Docker's daemon.json without clobbering it
description:
  - Deep-merges O(settings) into Docker's C(daemon.json) and optionally removes key paths, keeping every
    key it is not told about, and the order of existing keys.
  - Nested objects are merged, not replaced. For example adding C(features.cdi) keeps C(features.buildkit)
    (unlike C(nvidia-ctk runtime configure), which replaces the whole C(features) object).
  - The file is written only when its parsed value changes; a file that differs only in formatting is left
    alone. When it is written it is formatted as JSON indented by O(indent) spaces, keeping key order,
    with a trailing newline.
  - Writes are atomic (temporary file in the same directory, then rename), validated with O(validate) before
    they replace the file, and a failure leaves the file byte for byte unchanged.
  - A missing file is created (with missing parent directories, mode C(0755)); an empty or whitespace-only
    file counts as an empty object.
  - A file with a key repeated in one object, with C(NaN) or C(Infinity), or nested more than 64 levels deep
    is refused with its line and key path, and left as it is (a rewrite would silently drop one of the
    repeated values). O(settings) holding NaN or Infinity are refused too.
  - Runs on the managed node with the Python standard library only.
version_added: "0.1.0"
author: gpu-node-provisioning contributors (!UNKNOWN)
options:
  path:
    description:
      - Path of the daemon configuration file.
    type: path
    default: /etc/docker/daemon.json
  settings:
    description:
      - Settings to deep-merge into the file.
      - Objects merge key by key at every depth; any other value replaces the current one.
      - Lists follow O(list_strategy).
    type: dict
    default: {}
  remove:
    description:
      - Key paths to delete before O(settings) is merged. Each path is a list of keys from the top
        (V([runtimes, nvidia])), or a string naming one top-level key (V(default-runtime)).
      - Paths that do not exist are ignored; objects left empty are kept.
      - Removing a path and setting it in O(settings) replaces that object exactly instead of merging into it.
    type: list
    elements: raw
    default: []
  list_strategy:
    description:
      - How a list in O(settings) combines with the list already in the file.
      - V(replace) uses the new list.
      - V(append_unique) keeps the current items in order and appends the new items that are missing.
      - V(prepend_unique) puts the new items that are missing in front, in their order.
    type: str
    choices: [replace, append_unique, prepend_unique]
    default: replace
  validate:
    description:
      - Command that checks the candidate file before it replaces O(path); C(%s) stands for the candidate's path
        and must be present. For example V(dockerd --validate --config-file %s) (Docker 23 and later).
      - The command is not run through a shell. A non-zero exit status fails the task and leaves the file unchanged.
    type: str
  indent:
    description:
      - Number of spaces per indentation level in the written file.
    type: int
    default: 2
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.files
  - gpunode.provisioning.gpunode_file_write
  - gpunode.provisioning.gpunode_file_write.module_lock
notes:
  - The file mode defaults to C(0644) when the module creates the file; an existing file keeps its attributes
    unless O(mode), O(owner) or O(group) say otherwise.
  - Docker must be restarted for daemon.json changes to take effect; notify a handler when RV(changed) is true.
  - dockerd refuses to start when an option is set both as a command-line flag and in daemon.json.
seealso:
  - name: Docker daemon configuration file
    description: Every daemon.json option.
    link: https://docs.docker.com/reference/cli/dockerd/#daemon-configuration-file
"""

EXAMPLES = r"""
- name: Register the nvidia runtime and enable CDI in Docker, keeping every other setting
  docker_daemon_config:
    settings:
      runtimes:
        nvidia:
          path: /usr/bin/nvidia-container-runtime
          args: []
      features:
        cdi: true
    backup: true
    validate: dockerd --validate --config-file %s
  notify: Restart docker

- name: Make runc the default runtime again and add a registry mirror to the existing ones
  docker_daemon_config:
    remove:
      - default-runtime
    settings:
      registry-mirrors:
        - https://mirror.example.com
    list_strategy: append_unique

- name: Replace the whole nvidia runtime entry instead of merging into it
  docker_daemon_config:
    remove:
      - [runtimes, nvidia]
    settings:
      runtimes:
        nvidia:
          path: nvidia-container-runtime
"""

RETURN = r"""
config:
  description: The configuration after the merge (what the file holds, or would hold in check mode).
  returned: success
  type: dict
  sample:
    features: {buildkit: true, cdi: true}
    runtimes: {nvidia: {path: nvidia-container-runtime, args: []}}
backup_file:
  description: Path of the backup copy of the previous file.
  returned: changed and O(backup) is true and the file existed
  type: str
  sample: /var/backups/gpu-node-provisioning/etc/docker/daemon.json.2025-01-31@12:00:00~
diff:
  description: The file's text before and after, in diff mode.
  returned: diff mode
  type: dict
  sample:
    before: ""
    after: "{\n  \"features\": {\n    \"cdi\": true\n  }\n}\n"
    before_header: /etc/docker/daemon.json (before)
    after_header: /etc/docker/daemon.json (after)
changed:
  description: Whether the file (content or attributes) changed, or would change in check mode.
  returned: always
  type: bool
"""

import copy
import json

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpunode.provisioning.plugins.module_utils.files.edit import (
    FileEditError,
    apply_edit,
    locked,
    read_text,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.files.merge import (
    LIST_STRATEGIES,
    merge_into,
    remove_paths,
    values_equal,
)

_JSON_TYPE_NAMES = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


class DaemonConfigError(Exception):
    """A problem with daemon.json or the task's arguments; the message is meant for the user."""


# daemon.json never nests deeper than a few levels; deeper text is refused before the parser recurses.
MAX_DEPTH = 64

_NON_FINITE = ("-Infinity", "Infinity", "NaN")


def _where(stack: list, key=None) -> str:
    """The key path of the current position, for example ``log-opts.max-size`` or ``runtimes.x.args[0]``."""
    parts = ""
    for kind, _keys, current in stack:
        if kind == "object" and current is not None:
            parts += f".{current}" if parts else str(current)
        elif kind == "array":
            parts += f"[{current}]"
    if key is not None:
        parts += f".{key}" if parts else str(key)
    return parts or "the top level"


def _scan_daemon_json(text: str, path: str) -> list:
    """Walk the JSON text once: refuse nesting deeper than MAX_DEPTH (raises DaemonConfigError) and return the
    problems json.loads lets through, as (line, message) pairs: repeated keys and NaN/Infinity."""
    stack: list = []  # [kind, keys seen (objects), current key or array index]
    problems = []
    line, i, size = 1, 0, len(text)
    while i < size:
        char = text[i]
        if char == "\n":
            line += 1
        elif char == '"':
            end = i + 1
            while end < size and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            after = end + 1
            while after < size and text[after] in " \t\r\n":
                after += 1
            if stack and stack[-1][0] == "object" and after < size and text[after] == ":":
                try:
                    key = json.loads(text[i : end + 1])
                except ValueError:
                    key = text[i + 1 : end]
                frame = stack[-1]
                if key in frame[1]:
                    problems.append(
                        (
                            line,
                            f"the key {_where(stack[:-1], key)!r} appears more than once in its object; which "
                            "one counts is unclear and a rewrite would keep only one. Keep one of them",
                        )
                    )
                frame[1].add(key)
                frame[2] = key
            line += text.count("\n", i, end)
            i = end
        elif char in "{[":
            if len(stack) >= MAX_DEPTH:
                raise DaemonConfigError(
                    f"{path} nests objects and arrays more than {MAX_DEPTH} levels deep (line {line}); "
                    "daemon.json never needs that. Fix the file, then run the task again."
                )
            stack.append(["object", set(), None] if char == "{" else ["array", None, 0])
        elif char in "}]":
            if stack:
                stack.pop()
        elif char == "," and stack and stack[-1][0] == "array":
            stack[-1][2] += 1
        else:
            for word in _NON_FINITE:
                if text.startswith(word, i):
                    problems.append(
                        (line, f"{_where(stack)} is {word}, which is not JSON and dockerd cannot read. Use a number")
                    )
                    i += len(word) - 1
                    break
        i += 1
    return problems


def parse_daemon_json(text: str, path: str) -> dict:
    """Parse daemon.json text; empty or whitespace-only text is ``{}``.

    Refused, with the file, line and key named: repeated keys, NaN/Infinity, nesting deeper than MAX_DEPTH.
    """
    if not text.strip():
        return {}
    problems = _scan_daemon_json(text, path)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DaemonConfigError(
            f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}. "
            "Fix the file (or empty it to start from {}), then run the task again."
        ) from exc
    except RecursionError:
        raise DaemonConfigError(
            f"{path} nests objects and arrays too deep to read. Fix the file, then run the task again."
        ) from None
    if problems:
        line, message = problems[0]
        raise DaemonConfigError(f"{path} line {line}: {message}, then run the task again.")
    if not isinstance(value, dict):
        kind = "null" if value is None else _JSON_TYPE_NAMES.get(type(value), type(value).__name__)
        raise DaemonConfigError(
            f"{path} holds {kind} at the top level, but daemon.json must be a JSON object ({{...}}). "
            "Fix the file (or empty it to start from {}), then run the task again."
        )
    return value


def render_daemon_json(config: dict, indent: int) -> str:
    """Serialise the configuration the way this module writes it."""
    try:
        return json.dumps(config, indent=indent, allow_nan=False) + "\n"
    except ValueError as exc:  # a float('nan') or inf from the task's settings
        raise DaemonConfigError(
            f"settings hold NaN or Infinity ({exc}), which daemon.json cannot hold: use a number."
        ) from exc


def build_config(current: dict, settings: dict, remove: list, list_strategy: str) -> dict:
    """Return a new configuration: ``current`` minus the ``remove`` paths, with ``settings`` merged in."""
    config = copy.deepcopy(current)
    try:
        remove_paths(config, remove)
        merge_into(config, settings, list_strategy)
    except ValueError as exc:
        raise DaemonConfigError(f"invalid remove or settings option: {exc}.") from exc
    return config


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/etc/docker/daemon.json"),
            settings=dict(type="dict", default={}),
            remove=dict(type="list", elements="raw", default=[]),
            list_strategy=dict(type="str", choices=list(LIST_STRATEGIES), default="replace"),
            backup=dict(type="bool", default=False),
            validate=dict(type="str"),
            indent=dict(type="int", default=2),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    params = module.params
    path = params["path"]
    if params["validate"] is not None and "%s" not in params["validate"]:
        module.fail_json(msg=f"validate must contain %s (the candidate file's path), got: {params['validate']}")
    if params["indent"] < 0:
        module.fail_json(msg=f"indent must be 0 or more, got {params['indent']}")

    try:
        with locked(path, module.check_mode) as path:
            _edit(module, path)
    except FileEditError as exc:
        module.fail_json(msg=str(exc), **exc.details)


def _edit(module, path):
    """Read, merge and write ``path`` (resolved, its lock held); exit the module."""
    params = module.params
    try:
        # dockerd accepts a UTF-8 byte order mark, so do we. opener: this module's open(), which tests replace.
        before = read_text(
            path, directory_fix="Set path to the daemon.json file itself.", encoding="utf-8-sig", opener=open
        )
        current = parse_daemon_json(before or "", path)
        config = build_config(current, params["settings"], params["remove"], params["list_strategy"])
        changed = not values_equal(current, config)
        after = render_daemon_json(config, params["indent"]) if changed else before or ""
    except (DaemonConfigError, FileEditError) as exc:
        module.fail_json(msg=str(exc))

    result = dict(changed=changed, config=config)
    try:
        result.update(
            apply_edit(
                module,
                path,
                before,
                after,
                changed,
                validate=params["validate"],
                validate_fix="fix settings or the validate command",
                backup=params["backup"],
                create_dirs=True,
            )
        )
    except FileEditError as exc:
        module.fail_json(msg=str(exc))

    module.exit_json(**result)


if __name__ == "__main__":
    main()
