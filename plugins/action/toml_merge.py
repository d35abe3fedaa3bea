# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Action plugin behind ``toml_merge``: merges settings into any TOML file with tomlkit on the controller.

The file is read from the node (``stat`` + ``slurp``), merged here with the
project's one merge engine (plugins/module_utils/files/merge.py) on the
tomlkit document, so comments, order and layout of everything else survive,
and written back through the config_file_write module (the project's write
contract: atomic replace, backup in /var/backups/gpu-node-provisioning, validate,
owner/group/mode kept, the file compared under a lock with what was read). Nothing is written when the parsed value
does not change. Documentation: plugins/modules/toml_merge.py.
"""

from __future__ import annotations

from datetime import date, datetime, time
from typing import NamedTuple

from ansible.errors import AnsibleActionFail
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import config as containerd_config
from ansible_collections.gpunode.provisioning.plugins.module_utils.files import merge as config_merge
from ansible_collections.gpunode.provisioning.plugins.modules import toml_merge as _module_file
from ansible_collections.gpunode.provisioning.plugins.plugin_utils import controller_files
from ansible_collections.gpunode.provisioning.plugins.plugin_utils.payload_cache import ActionBase

ARGUMENT_SPEC = {**_module_file.ARGUMENT_SPEC, **controller_files.FILE_ARGUMENT_SPEC}


class TomlMergeError(Exception):
    """A request that cannot be applied; the message names the file, the problem and the fix."""


class Plan(NamedTuple):
    """What merging gives: the text before and after, and whether the file is to be written."""

    path: str
    before: str
    after: str
    existed: bool
    changed: bool


def plain(value, where: str = "settings"):
    """``value`` as plain Python types TOML can hold (Ansible hands over str/dict subclasses); None is refused."""
    if value is None:
        raise TomlMergeError(f"{where} is null, which TOML cannot hold: give it a value, or delete the key with remove")
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (datetime, date, time)):
        return value
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TomlMergeError(f"{where} has the key {key!r}, but TOML keys are strings: quote it")
            result[str(key)] = plain(item, f"{where}.{key}")
        return result
    if isinstance(value, (list, tuple)):
        return [plain(item, f"{where}[{index}]") for index, item in enumerate(value)]
    raise TomlMergeError(f"{where} is a {type(value).__name__}, which TOML cannot hold: use a string")


def plan(
    text: str | None,
    path: str,
    settings: dict,
    remove: list | None = None,
    list_strategy: str = "replace",
    create: bool = True,
) -> Plan:
    """Merge ``settings`` into the TOML ``text`` of ``path`` (None: the file is missing) after deleting ``remove``.

    Returns the before and after text; ``changed`` is true when the parsed value
    differs, or when a missing file is to be created. Layout-only differences
    never count.
    """
    tomlkit, parse_error = _tomlkit()
    cm = config_merge
    changes = plain(dict(settings or {}))
    try:
        paths = [cm.normalize_path(plain(item, "remove")) for item in remove or []]
    except ValueError as exc:
        raise TomlMergeError(
            f"{path}: remove must list key paths, each a list of keys or a top-level key ({exc})"
        ) from exc
    existed = text is not None
    if not existed and not create:
        raise TomlMergeError(f"{path} does not exist: install what provides it first, or set create: true")
    before = text or ""
    try:
        doc = tomlkit.parse(before)
        # dotted keys become tables first: tomlkit cannot add keys next to a dotted key and stay parseable
        containerd_config.undot_tables(doc)
    except parse_error as exc:
        raise TomlMergeError(
            f"{path} is not valid TOML ({exc}): fix the file by hand (or restore its backup); nothing was changed"
        ) from exc
    old_value = doc.unwrap()
    cm.remove_paths(doc, paths)
    try:
        cm.merge_into(doc, changes, list_strategy)
    except (TypeError, ValueError) as exc:  # tomlkit refuses a value where the file has an incompatible item
        raise TomlMergeError(f"{path}: the settings cannot be merged ({exc}); nothing was changed") from exc
    after = tomlkit.dumps(doc)
    try:
        tomlkit.parse(after)
    except parse_error as exc:  # keys that tomlkit cannot place (e.g. a value over an array of tables)
        raise TomlMergeError(f"{path}: merging the settings gives invalid TOML ({exc}); nothing was changed") from exc
    changed = not existed or not cm.values_equal(old_value, doc.unwrap())
    return Plan(path=path, before=before, after=after if changed else before, existed=existed, changed=changed)


def _tomlkit():
    try:
        import tomlkit
        from tomlkit.exceptions import ParseError
    except ImportError as exc:
        raise TomlMergeError(
            f"toml_merge needs the tomlkit Python library on the controller ({exc}): pip install tomlkit"
        ) from exc
    return tomlkit, ParseError


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            result.update(controller_files.retry_on_conflict(self, lambda: self._merge(args, task_vars)))
        except TomlMergeError as exc:
            result.update(failed=True, changed=False, msg=str(exc))
        except AnsibleActionFail as exc:
            result.update({"changed": False, **exc.result, "failed": True, "msg": exc.message})
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

    def _merge(self, args: dict, task_vars: dict) -> dict:
        cf = controller_files
        path = args["path"]
        text = cf.read_text(self, path, task_vars, hint="toml_merge edits TOML text files only")
        outcome = plan(text, path, args["settings"], args["remove"], args["list_strategy"], args["create"])
        result = {"changed": outcome.changed, "path": path}
        if not outcome.changed:
            result["msg"] = f"{path} already has these settings, nothing to change"
            return result
        if self._task.diff:
            result["diff"] = cf.text_diff(path, outcome.before, outcome.after)
        if self._task.check_mode:
            result["msg"] = f"would update {path} (check mode, nothing written)"
            return result
        if not outcome.existed:
            cf.ensure_directory(self, path, task_vars)
        copy_arguments = cf.copy_args(
            outcome.after, path, args, existed=outcome.existed, backup=args["backup"], validate=args["validate"]
        )
        res = cf.run_copy(self, copy_arguments, task_vars)
        if res.get("failed"):
            raise AnsibleActionFail(
                f"{path} was not changed: writing the merged file failed: {cf.copy_failure_detail(res)}"
                + (". The validate command rejected the candidate: fix the settings" if args["validate"] else ""),
                result={key: res[key] for key in ("stdout", "stderr", "exit_status") if key in res},
            )
        if res.get("backup_file"):
            result["backup_file"] = res["backup_file"]
        result["msg"] = f"{'updated' if outcome.existed else 'created'} {path}"
        return result
