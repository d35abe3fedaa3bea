# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Action plugin behind ``containerd_config``: edits containerd's config.toml with tomlkit on the controller.

The node needs nothing beyond Ansible's own modules: the file is read with
``ansible.builtin.slurp`` (after ``stat``), merged here (comments and layout
survive), and written back through the ``ansible.builtin.copy`` action (atomic,
backup, ``validate``, owner/group/mode), as ``ansible.builtin.template`` does.
Documentation: library/containerd_config.py. Logic: plugins/module_utils/containerd_toml.py.
"""

from __future__ import annotations

import base64
import importlib.util
import posixpath
import shlex
import sys
from pathlib import Path

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

FILE_ARGS = ("owner", "group", "mode", "seuser", "serole", "setype", "selevel", "unsafe_writes", "attributes")

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


def _load_module_util(name: str):
    """Load plugins/module_utils/<name>.py by path (controller plugins cannot import it as ansible.module_utils)."""
    module_name = f"gpu_node_provisioning_{name}"
    if module_name not in sys.modules:
        path = Path(__file__).resolve().parent.parent / "module_utils" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
    return sys.modules[module_name]


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        ct = _load_module_util("containerd_toml")
        try:
            result.update(self._configure(ct, args, task_vars))
        except ct.ContainerdConfigError as exc:
            result.update(failed=True, changed=False, msg=str(exc))
        except AnsibleActionFail as exc:
            result.update({"changed": False, **exc.result, "failed": True, "msg": exc.message})
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

    # ------------------------------------------------------------------ node access

    def _probe_containerd(self) -> tuple[str | None, str | None]:
        """(binary path, ``containerd --version`` output) on the node; (None, None) when not installed."""
        res = self._low_level_execute_command("command -v containerd && containerd --version", sudoable=True)
        lines = to_text(res.get("stdout", "")).strip().splitlines()
        if res.get("rc") != 0 or len(lines) < 2:
            return None, None
        return lines[0].strip(), lines[-1].strip()

    def _read(self, path: str, task_vars: dict) -> str | None:
        """Text of ``path`` on the node, or None when it does not exist."""
        stat = self._execute_remote_stat(path, all_vars=task_vars, follow=True, checksum=False)
        if not stat.get("exists"):
            return None
        if stat.get("isdir"):
            raise AnsibleActionFail(f"{path} is a directory; point path (or dropin_path) at a file")
        res = self._execute_module(
            module_name="ansible.legacy.slurp", module_args={"src": path}, task_vars=task_vars, wrap_async=False
        )
        if res.get("failed"):
            raise AnsibleActionFail(f"could not read {path}: {res.get('msg', res)}")
        try:
            return base64.b64decode(res["content"]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AnsibleActionFail(f"{path} is not UTF-8 text ({exc}); containerd's config must be TOML") from exc

    def _config_default(self, binary: str | None, path: str) -> str:
        if binary is None:
            raise AnsibleActionFail(
                f"{path} does not exist and containerd is not installed, so `containerd config default` cannot "
                "provide a starting point: install containerd first, or set when_missing=empty."
            )
        res = self._low_level_execute_command(f"{shlex.quote(binary)} config default", sudoable=True)
        if res.get("rc") != 0:
            raise AnsibleActionFail(
                f"{path} does not exist and `{binary} config default` failed (rc={res.get('rc')}): "
                f"{to_text(res.get('stderr', '')).strip()}; set when_missing=empty to start from an empty file."
            )
        return to_text(res.get("stdout", ""))

    def _ensure_directory(self, path: str, task_vars: dict) -> None:
        directory = posixpath.dirname(path)
        if self._execute_remote_stat(directory, all_vars=task_vars, follow=True, checksum=False).get("exists"):
            return
        res = self._execute_module(
            module_name="ansible.legacy.file",
            module_args={"path": directory, "state": "directory", "mode": "0755"},
            task_vars=task_vars,
            wrap_async=False,
        )
        if res.get("failed"):
            raise AnsibleActionFail(f"could not create {directory} for {path}: {res.get('msg')}")

    def _write(self, outcome, args: dict, binary: str | None, task_vars: dict) -> dict:
        """Write ``outcome.after`` through the copy action (atomic, backup, validate, file attributes)."""
        if not outcome.existed:
            self._ensure_directory(outcome.path, task_vars)
        copy_args = {
            "content": outcome.after,
            "dest": outcome.path,
            "follow": True,
            "backup": args["backup"],
            "force": True,
        }
        for name in FILE_ARGS:
            if args.get(name) is not None:
                copy_args[name] = args[name]
        if not outcome.existed and args.get("mode") is None:
            copy_args["mode"] = "0644"
        if args["validate"] and binary is not None:
            copy_args["validate"] = f"{shlex.quote(binary)} --config %s config dump"
        new_task = self._task.copy()
        new_task.args = copy_args
        new_task.diff = False  # our own diff is returned; copy's would read the file again
        copy_action = self._shared_loader_obj.action_loader.get(
            "ansible.legacy.copy",
            task=new_task,
            connection=self._connection,
            play_context=self._play_context,
            loader=self._loader,
            templar=self._templar,
            shared_loader_obj=self._shared_loader_obj,
        )
        res = copy_action.run(task_vars=task_vars)
        if res.get("failed"):
            detail = to_text(res.get("stderr") or "").strip()
            raise AnsibleActionFail(
                f"{outcome.path} was not changed: writing the new config failed: {res.get('msg')}"
                + (f" ({detail})" if detail else "")
                + (
                    ". containerd rejected the candidate: fix the offending settings"
                    if "validate" in to_text(res.get("msg", ""))
                    else ""
                ),
                result={key: res[key] for key in ("stdout", "stderr", "exit_status") if key in res},
            )
        return res

    # ------------------------------------------------------------------ main flow

    def _configure(self, ct, args: dict, task_vars: dict) -> dict:
        request = ct.Request(
            runtime=args["runtime"],
            default_runtime=args["default_runtime"],
            enable_cdi=args["enable_cdi"],
            cdi_spec_dirs=args["cdi_spec_dirs"],
            settings=args["settings"] or {},
            list_strategy=args["list_strategy"],
        )
        path = args["path"]
        binary, probed = self._probe_containerd()
        version_text = args["containerd_version"] or probed
        containerd_version = ct.parse_containerd_version(version_text)
        if args["containerd_version"] and containerd_version is None:
            raise AnsibleActionFail(f"containerd_version {args['containerd_version']!r} is not a version like 2.1.4")
        empty_version = 3 if containerd_version and containerd_version[0] >= 2 else 2
        if args["method"] == "dropin":
            ct.check_dropin_allowed(containerd_version, path)

        text = self._read(path, task_vars)
        existed = text is not None
        label = None
        if not existed:
            if args["when_missing"] == "default":
                text = self._config_default(binary, path)
                label = f"{path} (missing; output of `containerd config default`)"
            else:
                text = ""

        if args["method"] == "dropin":
            dropin_path = args["dropin_path"] or ct.default_dropin_path(args["runtime"])
            dropin_text = self._read(dropin_path, task_vars)
            root, dropin = ct.plan_dropin(
                text, path, dropin_text, dropin_path, request, empty_version, root_existed=existed, root_label=label
            )
            outcomes = [dropin, root]  # the drop-in first: the root's validation then sees it through imports
            main = dropin
        else:
            root = ct.plan_inplace(text, path, request, empty_version, existed=existed, source_label=label)
            outcomes = [root]
            main = root
            dropin_path = None

        changed = [outcome for outcome in outcomes if outcome.changed]
        result = {
            "changed": bool(changed),
            "path": path,
            "method": args["method"],
            "version": root.version,
            "runtime_table": main.runtime_table,
            "options_copied_from": main.options_copied_from,
            "containerd_version": ".".join(str(part) for part in containerd_version) if containerd_version else None,
            "diff": [outcome.diff() for outcome in changed],
        }
        if dropin_path:
            result["dropin_path"] = dropin_path
        if not changed:
            result["msg"] = f"{', '.join(o.path for o in outcomes)}: already as requested, nothing to change"
            return result
        if self._task.check_mode:
            result["msg"] = f"would update {', '.join(o.path for o in changed)} (check mode, nothing written)"
            return result

        written = []
        for outcome in changed:
            try:
                res = self._write(outcome, args, binary, task_vars)
            except AnsibleActionFail as exc:
                if written:
                    raise AnsibleActionFail(
                        f"{exc.message} (already written: {', '.join(written)})",
                        result={**exc.result, "changed": True},
                    ) from exc
                raise
            written.append(outcome.path)
            if res.get("backup_file") and outcome is root:
                result["backup_file"] = res["backup_file"]
            elif res.get("backup_file"):
                result["dropin_backup_file"] = res["backup_file"]
        result["msg"] = f"updated {', '.join(written)}; restart containerd to apply"
        return result
