# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Helpers for controller-side action plugins that edit one text file on the node.

Such a plugin reads the file with ``stat`` + ``slurp``, computes the new text
on the controller (tomlkit, the merge engine) and writes it back through the
project's ``config_file_write`` module (plugins/modules/config_file_write.py), which
follows the write contract of every editor here (plugins/module_utils/files/edit.py):
backups in /var/backups/gpu-node-provisioning, symlinks followed, mode and
owner kept, no debris, and a lock on the node under which the file is compared
with the bytes this plugin read. When another run changed the file in between,
the write fails with ``WriteConflict`` and ``retry_on_conflict`` reads and merges
again.

Controller plugins import it as ``ansible_collections.gpunode.provisioning.plugins.plugin_utils.controller_files``;
it runs on the controller only: no module imports it.
"""

from __future__ import annotations

import base64
import hashlib
import posixpath
from collections.abc import Mapping

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text

# This collection's name: its modules are run as COLLECTION.<module>.
COLLECTION = "gpunode.provisioning"

# The node-side module that reads files in one run (plugins/modules/node_files.py).
NODE_FILES_MODULE = f"{COLLECTION}.node_files"

# The node-side module every write goes through (plugins/modules/config_file_write.py).
WRITE_MODULE = f"{COLLECTION}.config_file_write"

# How often retry_on_conflict reads, merges and writes before it gives up.
WRITE_ATTEMPTS = 3

# Attribute of the running ActionBase that holds {path: SHA-1 of the bytes read} for this task.
_READ_ATTR = "_gpu_node_provisioning_read_sha1"


class WriteConflict(AnsibleActionFail):
    """The file changed on the node between our read and our write; nothing was written."""


# Checked with isinstance, in this order (bool is an int): Ansible hands filters
# subclasses of these types (_AnsibleTaggedStr, _AnsibleTaggedDict, ...).
TYPE_NAMES = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number"),
    (str, "a string"),
    (list, "a list"),
    (Mapping, "a dict"),
)


def type_name(value) -> str:
    """How a variable's value is named in messages: \"a string\", \"a list\", \"null\"."""
    if value is None:
        return "null"
    return next((name for kind, name in TYPE_NAMES if isinstance(value, kind)), f"a {type(value).__name__}")


# File attributes passed on to the copy action unchanged.
FILE_ARGS = ("owner", "group", "mode", "seuser", "serole", "setype", "selevel", "unsafe_writes", "attributes")

# argument_spec entries of those attributes, for ActionBase.validate_argument_spec().
FILE_ARGUMENT_SPEC = {
    "owner": {"type": "str"},
    "group": {"type": "str"},
    "mode": {"type": "raw"},
    "seuser": {"type": "str"},
    "serole": {"type": "str"},
    "setype": {"type": "str"},
    "selevel": {"type": "str"},
    "unsafe_writes": {"type": "bool", "default": False},
    "attributes": {"type": "str", "aliases": ["attr"]},
}


def read_text(action, path: str, task_vars: dict, hint: str = "") -> str | None:
    """Return the UTF-8 text of ``path`` on the node, or None when it does not exist.

    ``action`` is the running ActionBase. Raises AnsibleActionFail for a directory,
    a read error or bytes that are not UTF-8 (``hint`` is appended to that message).
    """
    seen = _read_sha1(action)
    # one module run looks at the file and reads it (plugins/modules/node_files.py; a stat and a slurp run before)
    res = action._execute_module(
        module_name=NODE_FILES_MODULE,
        module_args={"files": [{"path": path, "follow": True, "get_checksum": False, "content": True}]},
        task_vars=task_vars,
        wrap_async=False,
    )
    if res.get("failed"):
        raise AnsibleActionFail(f"could not read {path}: {res.get('msg', res)}")
    found = res["files"][0]
    if not found["stat"].get("exists"):
        seen[path] = ""
        return None
    if found["stat"].get("isdir"):
        raise AnsibleActionFail(f"{path} is a directory; point the path at a file")
    if found.get("failed"):
        raise AnsibleActionFail(f"could not read {path}: {found.get('msg')}")
    data = base64.b64decode(found["content"])
    seen[path] = hashlib.sha1(data).hexdigest()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # from None: AnsibleError would append the cause's text, which the message already holds
        raise AnsibleActionFail(f"{path} is not UTF-8 text ({exc}){'; ' + hint if hint else ''}") from None


def _read_sha1(action) -> dict:
    """{path: SHA-1 of the bytes read_text saw} for this task ('' for a missing file)."""
    if not isinstance(getattr(action, _READ_ATTR, None), dict):
        setattr(action, _READ_ATTR, {})
    return getattr(action, _READ_ATTR)


def retry_on_conflict(action, work):
    """Return ``work()``; when it raises WriteConflict, read, merge and write again, WRITE_ATTEMPTS times in all."""
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        setattr(action, _READ_ATTR, {})
        try:
            return work()
        except WriteConflict as exc:
            if attempt == WRITE_ATTEMPTS:
                raise WriteConflict(
                    f"{exc.message} Gave up after {WRITE_ATTEMPTS} attempts: something rewrites the file "
                    "continuously; stop it, then run again.",
                    result=exc.result,
                ) from None
    raise AssertionError("unreachable")


def ensure_directory(action, path: str, task_vars: dict, mode: str = "0755") -> None:
    """Create the parent directory of ``path`` on the node when it is missing."""
    directory = posixpath.dirname(path)
    if action._execute_remote_stat(directory, all_vars=task_vars, follow=True, checksum=False).get("exists"):
        return
    res = action._execute_module(
        module_name="ansible.legacy.file",
        module_args={"path": directory, "state": "directory", "mode": mode},
        task_vars=task_vars,
        wrap_async=False,
    )
    if res.get("failed"):
        raise AnsibleActionFail(f"could not create {directory} for {path}: {res.get('msg')}")


def copy_args(
    content: str,
    dest: str,
    args: dict,
    *,
    existed: bool,
    backup: bool = False,
    validate: str | None = None,
    new_file_mode: str = "0644",
) -> dict:
    """Arguments of the config_file_write module that writes ``content`` to ``dest``.

    File attributes come from ``args`` (the keys of FILE_ARGS that are set); a
    file that did not exist gets ``new_file_mode`` unless ``args`` has a mode.
    """
    result = {"content": content, "dest": dest, "backup": backup}
    for name in FILE_ARGS:
        if args.get(name) is not None:
            result[name] = args[name]
    if not existed and args.get("mode") is None:
        result["mode"] = new_file_mode
    if validate:
        result["validate"] = validate
    return result


def run_copy(action, copy_arguments: dict, task_vars: dict) -> dict:
    """Write with the config_file_write module (arguments from ``copy_args``); return its result.

    When read_text read the file in this task, the module gets the SHA-1 of those bytes and writes only
    when the file still holds them; otherwise WriteConflict is raised (nothing written). The module's
    diff is dropped: the calling plugin returns its own.
    """
    module_args = dict(copy_arguments)
    seen = _read_sha1(action)
    if module_args["dest"] in seen:
        module_args["expected_sha1"] = seen[module_args["dest"]]
    res = action._execute_module(
        module_name=WRITE_MODULE, module_args=module_args, task_vars=task_vars, wrap_async=False
    )
    res.pop("diff", None)
    if res.get("failed") and res.get("conflict"):
        raise WriteConflict(to_text(res.get("msg")))
    if not res.get("failed"):
        seen[module_args["dest"]] = hashlib.sha1(module_args["content"].encode("utf-8")).hexdigest()
    return res


def copy_failure_detail(res: dict) -> str:
    """The copy result's message plus its stderr (a failed ``validate`` puts the validator's output there)."""
    detail = to_text(res.get("stderr") or "").strip()
    return f"{res.get('msg')}" + (f" ({detail})" if detail else "")


def text_diff(path: str, before: str, after: str) -> dict:
    """An Ansible diff dict for one file."""
    return {"before_header": path, "after_header": path, "before": before, "after": after}
