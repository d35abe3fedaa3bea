"""Reading and writing a managed file the way ansible-core's own modules do.

Modules on the node import this as ``from ansible.module_utils.file_edit import ...``.
Standard library and ``ansible.module_utils`` only; Python 3.8 syntax.

A module builds the new text in memory, then hands it to ``apply_edit``, which

* puts the before/after text in the result in diff mode;
* writes only when the content changed and not in check mode: a temporary file
  in the target's directory, the validate command on it, a backup of the old
  file, ``atomic_move`` into place; any failure removes the temporary file (and
  the directories it created) and leaves the target byte for byte unchanged;
* applies owner, group, mode and the other file arguments, ``0644`` for a file
  it created when no mode was given.

Problems are raised as ``FileEditError``; its message names the file, the
problem and the fix, and ``details`` holds extra keys for ``fail_json``.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from contextlib import contextmanager
from typing import Callable, Union

from ansible.module_utils.common.text.converters import to_native

__all__ = ["NEW_FILE_MODE", "FileEditError", "apply_edit", "read_text", "write_file"]

NEW_FILE_MODE = "0644"

# A validate command with %s for the candidate's path, or a function that gets the candidate's path
# and raises FileEditError to reject it.
Validator = Union[str, Callable[[str], None], None]


class FileEditError(Exception):
    """A file could not be read or written; str() is the message, ``details`` more keys for fail_json."""

    def __init__(self, msg: str, **details):
        super().__init__(msg)
        self.details = details


def read_text(path: str, *, directory_fix: str, encoding: str = "utf-8", opener=open) -> str | None:
    """Return the text of ``path``, or None when it does not exist.

    ``directory_fix`` finishes the message when ``path`` is a directory (it says what ``path`` should name).
    ``opener`` opens the file; a module passes its own ``open`` so that its unit tests can replace it.
    """
    if os.path.isdir(path):
        raise FileEditError(f"{path} is a directory, not a file. {directory_fix}")
    try:
        with opener(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    except PermissionError as exc:
        raise FileEditError(
            f"cannot read {path}: {exc.strerror}. Run the task with become: true or fix the file's permissions."
        ) from exc
    except OSError as exc:
        raise FileEditError(f"cannot read {path}: {exc.strerror or exc}.") from exc
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise FileEditError(
            f"{path} is not UTF-8 text (byte {exc.start}: {exc.reason}). Fix the file's encoding, then run again."
        ) from exc


def _make_dirs(directory: str) -> list:
    """Create ``directory`` and its missing parents with mode 0755; return the created ones, outermost first."""
    missing = []
    while directory and not os.path.exists(directory):
        missing.append(directory)
        directory = os.path.dirname(directory)
    created = []
    for item in reversed(missing):
        os.mkdir(item)
        created.append(item)
        os.chmod(item, 0o755)
    return created


def _run_validate(module, path: str, candidate: str, validate: str, fix: str) -> None:
    """Run the validate command (not through a shell) on ``candidate``; raise FileEditError when it fails."""
    command = [arg.replace("%s", candidate) for arg in shlex.split(validate)]
    try:
        rc, out, err = module.run_command(command, handle_exceptions=False)
    except OSError as exc:
        raise FileEditError(
            f"cannot run the validate command '{validate}': {exc.strerror or exc}. "
            f"{path} was left unchanged; install the command or fix validate."
        ) from exc
    if rc != 0:
        output = (err or out).strip() or "(no output)"
        raise FileEditError(
            f"the new {path} failed validation: '{validate}' exited with status {rc}: {output}. "
            f"{path} was left unchanged; {fix}."
        )


@contextmanager
def _write_errors(path: str):
    """Turn any error but FileEditError into FileEditError (atomic_move and backup_local raise plain Exception)."""
    try:
        yield
    except FileEditError:
        raise
    except Exception as exc:
        raise FileEditError(f"cannot write {path}: {to_native(exc)}. {path} was left unchanged.") from exc


def write_file(
    module,
    path: str,
    content: str,
    *,
    validate: Validator = None,
    validate_fix: str = "fix the task's options or the validate command",
    backup: bool = False,
    backup_first: bool = False,
    create_dirs: bool = False,
    unsafe_writes: bool = False,
) -> str | None:
    """Write ``content`` (UTF-8) to ``path`` atomically; return the backup's path, or None.

    The content goes to a temporary file next to ``path`` and is checked with ``validate`` (see Validator;
    ``validate_fix`` ends the message of a failed command) before ``atomic_move`` puts it in place.
    ``backup`` keeps a copy of an existing file, made after validation, or before the temporary file with
    ``backup_first`` (then a failed validation leaves the backup behind). ``create_dirs`` creates missing
    directories (mode 0755, removed again on failure); without it a missing directory is an error.
    ``unsafe_writes`` is passed to ``atomic_move``. On any failure the temporary file is removed and
    FileEditError is raised; what a validate function raises is passed on as it is.
    """
    directory = os.path.dirname(os.path.abspath(path))
    if not create_dirs and not os.path.isdir(directory):
        raise FileEditError(f"cannot create {path}: the directory {directory} does not exist. Create it first.")
    created_dirs: list = []
    tmp_path = None
    backup_file = None
    done = False
    try:
        with _write_errors(path):
            if backup and backup_first and os.path.exists(path):
                backup_file = module.backup_local(path)
            if create_dirs:
                created_dirs = _make_dirs(directory)
            fd, tmp_path = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
            with os.fdopen(fd, "wb") as handle:
                handle.write(content.encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
            if validate and not callable(validate):
                _run_validate(module, path, tmp_path, validate, validate_fix)
        if callable(validate):
            validate(tmp_path)  # the caller's check: what it raises reaches the caller as it is
        with _write_errors(path):
            if backup and not backup_first and os.path.exists(path):
                backup_file = module.backup_local(path)
            module.atomic_move(tmp_path, path, unsafe_writes=unsafe_writes)
        done = True
        return backup_file
    finally:
        if not done:
            if tmp_path is not None and os.path.exists(tmp_path):
                os.unlink(tmp_path)
            for item in reversed(created_dirs):
                os.rmdir(item)


def apply_edit(
    module,
    path: str,
    before: str | None,
    after: str,
    changed: bool,
    *,
    diff_headers: tuple | None = None,
    **write_options,
) -> dict:
    """Finish an edit of ``path`` whose text goes from ``before`` (None: no file) to ``after``.

    ``changed`` says whether the content changes (the caller decides: a file that differs only in
    formatting may count as unchanged). Returns the keys for the module's result: ``changed`` (true
    also when only file attributes changed), ``diff`` in diff mode (headers ``<path> (before)`` and
    ``<path> (after)`` unless ``diff_headers`` gives them) and ``backup_file`` when a backup was made.
    ``write_options`` go to write_file. Raises FileEditError.
    """
    result: dict = {"changed": changed}
    if module._diff:
        before_header, after_header = diff_headers or (f"{path} (before)", f"{path} (after)")
        result["diff"] = dict(before=before or "", after=after, before_header=before_header, after_header=after_header)
    exists = before is not None
    if changed and not module.check_mode:
        backup_file = write_file(module, path, after, **write_options)
        if backup_file:
            result["backup_file"] = backup_file
    if exists or (changed and not module.check_mode):
        file_args = module.load_file_common_arguments(module.params, path=path)
        if not exists and file_args["mode"] is None:
            file_args["mode"] = NEW_FILE_MODE
        result["changed"] = module.set_fs_attributes_if_different(file_args, result["changed"])
    return result
