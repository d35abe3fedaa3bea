# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Action plugin behind ``containerd_config``: edits containerd's config.toml with tomlkit on the controller.

The node needs nothing beyond Ansible's own modules: the file is read with
``ansible.builtin.slurp`` (after ``stat``), merged here (comments and layout
survive), and written back through the config_file_write module (the project's
write contract: atomic, backup in /var/backups/gpu-node-provisioning, ``validate``,
owner/group/mode kept, compared under a lock with what was read).
Documentation: plugins/modules/containerd_config.py. Logic: plugins/module_utils/containerd/config.py.
"""

from __future__ import annotations

import posixpath
import random
import shlex
import string

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import config as containerd_config
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import versions as containerd_versions
from ansible_collections.gpunode.provisioning.plugins.modules import containerd_config as _module_file
from ansible_collections.gpunode.provisioning.plugins.plugin_utils import controller_files, node_command
from ansible_collections.gpunode.provisioning.plugins.plugin_utils.payload_cache import ActionBase

ARGUMENT_SPEC = {**_module_file.ARGUMENT_SPEC, **controller_files.FILE_ARGUMENT_SPEC}


def _note(outcome) -> str:
    """What the file holds of NVIDIA's runtime under other names, and which default moved or was kept (issue 37)."""
    note = (outcome.nvidia or {}).get("note")
    return f". {note[0].upper()}{note[1:]}" if note else ""


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        ct = containerd_config
        try:
            result.update(controller_files.retry_on_conflict(self, lambda: self._configure(ct, args, task_vars)))
        except ct.ContainerdConfigError as exc:
            result.update(failed=True, changed=False, msg=str(exc))
        except AnsibleActionFail as exc:
            result.update({"changed": False, **exc.result, "failed": True, "msg": exc.message})
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

    # ------------------------------------------------------------------ node access

    def _on_node(self, command: str) -> dict:
        """``{"rc", "stdout", "stderr"}`` of a shell command run as root on the node, the streams apart whatever the
        connection (a terminal under ssh and mitogen merges them: plugin_utils/node_command.py)."""
        return node_command.run(self, command)

    def _probe_containerd(self) -> tuple[str | None, str | None]:
        """(binary path, ``containerd --version`` output) on the node; (None, None) when not installed."""
        res = self._on_node("command -v containerd && containerd --version")
        lines = to_text(res.get("stdout", "")).strip().splitlines()
        if res.get("rc") != 0 or len(lines) < 2:
            return None, None
        return lines[0].strip(), lines[-1].strip()

    def _read(self, path: str, task_vars: dict) -> str | None:
        """Text of ``path`` on the node, or None when it does not exist."""
        return controller_files.read_text(self, path, task_vars, hint="containerd's config must be TOML")

    def _config_default(self, binary: str | None, path: str) -> str:
        if binary is None:
            raise AnsibleActionFail(
                f"{path} does not exist and containerd is not installed, so `containerd config default` cannot "
                "provide a starting point: install containerd first, or set when_missing=empty."
            )
        res = self._on_node(f"{shlex.quote(binary)} config default")
        if res.get("rc") != 0:
            raise AnsibleActionFail(
                f"{path} does not exist and `{binary} config default` failed (rc={res.get('rc')}): "
                f"{to_text(res.get('stderr', '')).strip()}; set when_missing=empty to start from an empty file."
            )
        return to_text(res.get("stdout", ""))

    def _containerd_view(self, binary: str | None, path: str, existed: bool, ct) -> tuple[dict | None, dict | None]:
        """(effective config of ``path`` with its imports, ``containerd config default``), parsed; None each where
        containerd is not installed. The effective config is what containerd runs with once (re)started."""
        if binary is None:
            return None, None
        effective = None
        if existed:
            res = self._on_node(f"{shlex.quote(binary)} --config {shlex.quote(path)} config dump")
            if res.get("rc") != 0:
                stderr = to_text(res.get("stderr", "")).strip()
                hint = containerd_versions.dropin_refusal_hint(stderr)
                raise AnsibleActionFail(
                    f"containerd cannot read its current config: `{binary} --config {path} config dump` failed "
                    f"(rc={res.get('rc')}): {stderr[-500:]}. {hint + ' ' if hint else ''}Fix {path} (or the "
                    "files it imports) by hand or restore a backup, then run again. Nothing was changed."
                )
            effective = ct.parse_document(to_text(res.get("stdout", "")), f"`containerd --config {path} config dump`")
            effective = effective.unwrap()
        res = self._on_node(f"{shlex.quote(binary)} config default")
        defaults = None
        if res.get("rc") == 0:
            defaults = ct.parse_document(to_text(res.get("stdout", "")), "`containerd config default`").unwrap()
        return effective, defaults

    def _read_candidate(self, binary: str, path: str, text: str, ct) -> dict:
        """containerd's reading of ``text`` as ``path``: `containerd --config <candidate> config dump`, parsed.

        The candidate lies beside the file under a temporary name of the write contract's pattern (so that
        relative imports resolve as for the file, and a killed run's leftover is removed by the next write),
        readable by root only, and is removed again at once; where the file's directory does not exist yet, the
        copy in the remote temporary directory is read. Either name is read as ``path`` (ct.reading_as)."""
        tmp = self._connection._shell.tmpdir or self._make_tmp_path()
        source = self._connection._shell.join_path(tmp, "containerd-candidate.toml")
        self._transfer_data(source, text)
        self._fixup_perms2([tmp, source])
        stamp = "".join(random.choice(string.ascii_lowercase + string.digits) for _char in range(8))
        directory, name = posixpath.split(path)
        candidate = posixpath.join(directory, f".{name}.{stamp}.tmp")
        q = shlex.quote
        # where the file's directory does not exist yet (containerd packages without a config.toml, e.g.
        # Ubuntu 22.04's), nothing relative can resolve there: the copy in the remote temporary directory is read
        command = (
            f"umask 077; set -e; if [ ! -d {q(directory)} ]; then "
            f"exec {q(binary)} --config {q(source)} config dump; fi; "
            f'c={q(candidate)}; (set -C; : > "$c"); trap \'rm -f "$c"\' EXIT; '
            f'cat {q(source)} > "$c"; {q(binary)} --config "$c" config dump'
        )
        reading = self._config_dump(
            ct,
            command,
            f"{path} was not changed: containerd cannot read the config (`{binary} --config <candidate> config dump` "
            "failed",
            "`containerd config dump` of the candidate",
        )
        return ct.reading_as(ct.reading_as(reading, candidate, path), source, path)

    def _config_dump(self, ct, command: str, refusal: str, label: str) -> dict:
        """Run a `containerd ... config dump` shell command as root and parse its output; a failure raises the
        refusal with the rc and the end of stderr (nothing has been written at that point)."""
        res = self._on_node(f"/bin/sh -c {shlex.quote(command)}")
        if res.get("rc") != 0:
            stderr = to_text(res.get("stderr", "")).strip()
            hint = containerd_versions.dropin_refusal_hint(stderr)
            raise AnsibleActionFail(
                f"{refusal}, rc={res.get('rc')}): {stderr[-500:]}. {hint + ' ' if hint else ''}Fix the offending "
                "settings, then run again."
            )
        return ct.parse_document(to_text(res.get("stdout", "")), label).unwrap()

    def _verify(self, ct, outcome, request, binary: str) -> None:
        """Refuse (nothing written) when containerd reads the candidate otherwise than the request meant. The
        current text is read the same way (the bytes the plan started from, not whatever the file holds now)."""
        before = self._read_candidate(binary, outcome.path, outcome.before, ct) if outcome.existed else None
        after = self._read_candidate(binary, outcome.path, outcome.after, ct)
        written = ct.parse_document(outcome.after, outcome.path).unwrap()
        ct.verify_reading(outcome.path, before, after, request, written, outcome.runtime_table)

    def _read_pair(self, binary: str, root, dropin, candidate: bool, ct) -> dict:
        """containerd's reading of the root config with the drop-in (method=dropin), as the two would be on the node:
        the candidates (``candidate``) or the current texts. The root file is read from the remote temporary
        directory with its ``imports`` made absolute and the drop-in's directory replaced by a staged copy of it
        (readable by root only, removed at once) that holds the drop-in (none where it does not exist yet);
        other imports are read where they are. The dump is read as the files themselves (ct.unstage_reading)."""
        tmp = self._connection._shell.tmpdir or self._make_tmp_path()
        stamp = "".join(random.choice(string.ascii_lowercase + string.digits) for _char in range(8))
        stage = self._connection._shell.join_path(tmp, f"containerd-dropin-{stamp}")
        staged_root = self._connection._shell.join_path(tmp, f"containerd-root-{stamp}.toml")
        root_text = root.after if candidate else root.before
        self._transfer_data(staged_root, ct.stage_imports(root_text, root.path, dropin.path, stage))
        files = [tmp, staged_root]
        dropin_text = dropin.after if candidate else (dropin.before if dropin.existed else None)
        q = shlex.quote
        directory, name = posixpath.split(dropin.path)
        command = (
            f'umask 077; set -e; s={q(stage)}; mkdir "$s"; trap \'rm -rf "$s"\' EXIT; '
            f'if [ -d {q(directory)} ]; then cp -a {q(directory)}/. "$s"/; fi; rm -f "$s"/{q(name)}; '
        )
        if dropin_text is not None:
            source = self._connection._shell.join_path(tmp, f"containerd-dropin-{stamp}.toml")
            self._transfer_data(source, dropin_text)
            files.append(source)
            command += f'cat {q(source)} > "$s"/{q(name)}; '
        command += f"{q(binary)} --config {q(staged_root)} config dump"
        self._fixup_perms2(files)
        reading = self._config_dump(
            ct,
            command,
            f"{dropin.path} and {root.path} were not changed: containerd cannot read the config with the drop-in "
            f"(`{binary} --config <root> config dump` with the {'new' if candidate else 'current'} drop-in staged",
            "`containerd config dump` with the drop-in",
        )
        return ct.unstage_reading(reading, staged_root, root.path, stage, dropin.path)

    def _verify_dropin(self, ct, root, dropin, request, binary: str) -> None:
        """method=dropin: refuse (nothing written) when containerd reads the root config with the new drop-in
        otherwise than the request meant; the current pair is read the same way."""
        before = self._read_pair(binary, root, dropin, False, ct) if root.existed else None
        after = self._read_pair(binary, root, dropin, True, ct)
        written = ct.parse_document(dropin.after, dropin.path).unwrap()
        label = f"{dropin.path} (imported by {root.path})"
        ct.verify_reading(label, before, after, request, written, dropin.runtime_table, expected=(("imports",),))

    def _write(self, outcome, args: dict, binary: str | None, task_vars: dict) -> dict:
        """Write ``outcome.after`` through config_file_write (atomic, backup, validate, file attributes)."""
        cf = controller_files
        if not outcome.existed:
            cf.ensure_directory(self, outcome.path, task_vars)
        validate = f"{shlex.quote(binary)} --config %s config dump" if args["validate"] and binary is not None else None
        copy_arguments = cf.copy_args(
            outcome.after, outcome.path, args, existed=outcome.existed, backup=args["backup"], validate=validate
        )
        res = cf.run_copy(self, copy_arguments, task_vars)
        if res.get("failed"):
            raise AnsibleActionFail(
                f"{outcome.path} was not changed: writing the new config failed: {cf.copy_failure_detail(res)}"
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
            unset_default=args["unset_default"],
            enable_cdi=args["enable_cdi"],
            cdi_spec_dirs=args["cdi_spec_dirs"],
            settings=args["settings"] or {},
            list_strategy=args["list_strategy"],
        )
        path = args["path"]
        binary, probed = self._probe_containerd()
        version_text = args["containerd_version"] or probed
        containerd_version = containerd_versions.containerd_version_tuple(version_text)
        if args["containerd_version"] and containerd_version is None:
            raise AnsibleActionFail(f"containerd_version {args['containerd_version']!r} is not a version like 2.1.4")
        empty_version = ct.empty_version_for(containerd_version)
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

        request.effective, request.defaults = self._containerd_view(binary, path, existed, ct)

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
            "default_runtime_table_written": main.default_table_written,
            "nvidia_entries": main.nvidia.get("entries", {}),
            "nvidia_default_moved_from": main.nvidia.get("moved_from"),
            "nvidia_default_kept": main.nvidia.get("kept"),
            "nvidia_note": main.nvidia.get("note", ""),
            "containerd_version": ".".join(str(part) for part in containerd_version) if containerd_version else None,
            "diff": [outcome.diff() for outcome in changed],
        }
        if dropin_path:
            result["dropin_path"] = dropin_path
        if not changed:
            result["msg"] = f"{', '.join(o.path for o in outcomes)}: already as requested, nothing to change"
            result["msg"] += _note(main)
            return result
        if self._task.check_mode:
            result["msg"] = f"would update {', '.join(o.path for o in changed)} (check mode, nothing written)"
            result["msg"] += _note(main)
            return result

        # Ask containerd how it reads the new file before writing it (method=inplace: one file, read as a whole;
        # method=dropin: the root file with the drop-in in its imported directory).
        if args["validate"] and binary is not None and args["method"] == "inplace":
            self._verify(ct, root, request, binary)
        if args["validate"] and binary is not None and args["method"] == "dropin":
            self._verify_dropin(ct, root, main, request, binary)

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
        result["msg"] = f"updated {', '.join(written)}; restart containerd to apply" + _note(main)
        return result
