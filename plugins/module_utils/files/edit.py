"""Reading and writing a managed file the way ansible-core's own modules do.

Modules on the node import this as by its package path (module_utils.files.edit).
Standard library and ``ansible.module_utils`` only; Python 3.8 syntax.

A module builds the new text in memory, then hands it to ``apply_edit``, which

* puts the before/after text in the result in diff mode;
* writes only when the content changed and not in check mode: a temporary file
  in the target's directory, the validate command on it, a backup of the old
  file, ``atomic_move`` into place; any failure removes the temporary file, a
  partial backup (and the directories it created) and leaves the target byte for
  byte unchanged;
* applies owner, group, mode and the other file arguments, ``0644`` for a file
  it created when no mode was given.

The write contract every editor of this project follows (these helpers on the
node; the controller-side action plugins write through the config_file_write
module, which uses them):

* **Backups** go to one tree, ``BACKUP_ROOT`` (/var/backups/gpu-node-provisioning),
  never beside the file: a daemon that reads a whole directory (crio.conf.d,
  containerd's conf.d, the kubelet's conf.d, apparmor.d, modprobe.d,
  sources.list.d) would read a backup left there. The backup of
  /etc/crio/crio.conf.d/99-nvidia.conf is
  /var/backups/gpu-node-provisioning/etc/crio/crio.conf.d/99-nvidia.conf.<timestamp>~
  and keeps the original's mode, owner and times (the tree's directories are 0700).
* **Symlinks** are followed: the link stays, its target gets the change
  (``locked`` yields the resolved path; read and write that).
* **One writer at a time**: ``locked`` holds an exclusive ``flock`` on
  ``<BACKUP_ROOT>/<resolved path>.lock`` for the whole read-merge-write, so two
  runs never lose a change while both report success.
* **Mode and owner** of an existing file are kept (``atomic_move``); a new file gets
  ``NEW_FILE_MODE`` unless the task gives a mode.
* **No debris**: a failed write removes its temporary file and partial backup;
  ``locked`` removes what a killed run left (``.<name>.XXXXXXXX.tmp`` beside the
  file, ``*.part`` in the backup tree).

Problems are raised as ``FileEditError``; its message names the file, the
problem and the fix, and ``details`` holds extra keys for ``fail_json``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shlex
import tempfile
import time
from contextlib import contextmanager, suppress
from typing import Callable, Union

from ansible.module_utils.common.text.converters import to_native

__all__ = [
    "BACKUP_ROOT",
    "NEW_FILE_MODE",
    "FileEditError",
    "apply_edit",
    "backup_path",
    "locked",
    "make_backup",
    "read_text",
    "resolve_path",
    "write_file",
]

NEW_FILE_MODE = "0644"

# Every backup and lock file of this project lives under this tree, mirroring the file's absolute path.
BACKUP_ROOT = "/var/backups/gpu-node-provisioning"

# How long ``locked`` waits for another run that holds the lock, in seconds.
LOCK_TIMEOUT = 300

# Lock files this process holds: path -> [fd, depth] (``locked`` is re-entrant within one process).
_HELD: dict = {}

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


def resolve_path(path: str) -> str:
    """The file that ``path`` names once every symlink is followed (the link itself is never replaced)."""
    return os.path.realpath(os.path.abspath(path))


def _tree_path(path: str) -> str:
    """Where ``path`` (absolute, resolved) is mirrored in the backup tree."""
    return os.path.join(BACKUP_ROOT, path.lstrip("/"))


def _tree_dir(path: str) -> str:
    """Create the backup tree's directory for ``path`` (mode 0700, missing parents too); return it."""
    directory = os.path.dirname(_tree_path(path))
    missing = []
    current = directory
    while current and not os.path.isdir(current):
        missing.append(current)
        current = os.path.dirname(current)
    for item in reversed(missing):
        try:
            os.mkdir(item, 0o700)
        except FileExistsError:
            continue
        os.chmod(item, 0o700)
    return directory


def backup_path(path: str, timestamp: str | None = None) -> str:
    """The backup name of ``path`` (resolved): ``<BACKUP_ROOT><path>.<timestamp>~``."""
    stamp = timestamp or time.strftime("%Y-%m-%d@%H:%M:%S")
    return f"{_tree_path(path)}.{stamp}~"


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (one place, so that tests can make the disk full)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def make_backup(path: str) -> str:
    """Copy ``path`` (resolved) into the backup tree, keeping its mode, owner and times; return the copy's path.

    The copy is written as ``<backup>.part`` and renamed when complete; on any error the part is removed
    and FileEditError is raised.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read()
            info = os.fstat(handle.fileno())
        _tree_dir(path)
    except OSError as exc:
        raise FileEditError(f"cannot back up {path}: {exc.strerror or exc}. {path} was left unchanged.") from exc
    base = backup_path(path)
    backup = base
    counter = 0
    while os.path.lexists(backup):
        counter += 1
        backup = f"{base[:-1]}.{counter}~"
    part = f"{backup}.part"
    fd = None
    try:
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        _write_all(fd, data)
        os.fsync(fd)
        with suppress(PermissionError):  # not root: the copy stays ours, with the original's mode below
            os.fchown(fd, info.st_uid, info.st_gid)
        os.fchmod(fd, info.st_mode & 0o7777)
        os.close(fd)
        fd = None
        os.utime(part, ns=(info.st_atime_ns, info.st_mtime_ns))
        os.rename(part, backup)
    except OSError as exc:
        if fd is not None:
            os.close(fd)
        if os.path.lexists(part):
            os.unlink(part)
        raise FileEditError(
            f"cannot back up {path} to {backup}: {exc.strerror or exc}. {path} was left unchanged."
        ) from exc
    return backup


def _stale_names(path: str) -> re.Pattern:
    return re.compile(re.escape(f".{os.path.basename(path)}.") + r"[a-z0-9_]{8}\.tmp\Z")


def _remove_stale(path: str) -> None:
    """Remove what a killed run of ours left for ``path``: temporary files beside it, partial backups."""
    places = ((os.path.dirname(path), _stale_names(path)), (os.path.dirname(_tree_path(path)), None))
    for directory, keep in places:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        prefix = os.path.basename(path) + "."
        for name in names:
            stale = keep.match(name) if keep else (name.startswith(prefix) and name.endswith("~.part"))
            if stale:
                with suppress(FileNotFoundError):
                    os.unlink(os.path.join(directory, name))


@contextmanager
def locked(path: str, check_mode: bool = False):
    """Hold the lock of ``path`` for a whole read-merge-write; yield the resolved path to read and write.

    The lock is an exclusive flock on ``<BACKUP_ROOT>/<resolved path>.lock``, re-entrant within one
    process. Once held, temporary files and partial backups a killed run left are removed. In check mode
    nothing is created or locked: only the resolved path is yielded.
    """
    real = resolve_path(path)
    if check_mode:
        yield real
        return
    lock_path = _tree_path(real) + ".lock"
    held = _HELD.get(lock_path)
    if held is not None:
        held[1] += 1
        try:
            yield real
        finally:
            held[1] -= 1
        return
    try:
        _tree_dir(real)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise FileEditError(
            f"cannot create the lock file {lock_path} for {real}: {exc.strerror or exc}. "
            "Run the task with become: true."
        ) from exc
    try:
        deadline = time.monotonic() + LOCK_TIMEOUT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() > deadline:
                    raise FileEditError(
                        f"cannot lock {real}: another run has held {lock_path} for {LOCK_TIMEOUT} s. "
                        "Wait for it to finish, then run again."
                    ) from exc
                time.sleep(0.05)
        _HELD[lock_path] = [fd, 1]
        try:
            _remove_stale(real)
            yield real
        finally:
            del _HELD[lock_path]
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


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
    ``backup`` keeps a copy of an existing file in the backup tree (see ``make_backup``), made after
    validation, or before the temporary file with ``backup_first`` (then a failed validation leaves the
    complete backup in the tree). A symlink is followed: its target is written. The write holds ``locked``.
    ``create_dirs`` creates missing directories (mode 0755, removed again on failure); without it a missing
    directory is an error.
    ``unsafe_writes`` is passed to ``atomic_move``. On any failure the temporary file is removed and
    FileEditError is raised; what a validate function raises is passed on as it is.
    """
    real = resolve_path(path)
    directory = os.path.dirname(real)
    if not create_dirs and not os.path.isdir(directory):
        raise FileEditError(f"cannot create {path}: the directory {directory} does not exist. Create it first.")
    with locked(real):
        return _write_locked(
            module,
            path,
            real,
            directory,
            content,
            validate,
            validate_fix,
            backup,
            backup_first,
            create_dirs,
            unsafe_writes,
        )


def _write_locked(
    module, path, real, directory, content, validate, validate_fix, backup, backup_first, create_dirs, unsafe_writes
):
    """write_file's work once the lock is held; ``real`` is the resolved ``path``."""
    created_dirs: list = []
    tmp_path = None
    backup_file = None
    done = False
    try:
        with _write_errors(path):
            if backup and backup_first and os.path.exists(real):
                backup_file = make_backup(real)
            if create_dirs:
                created_dirs = _make_dirs(directory)
            fd, tmp_path = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(real)}.", suffix=".tmp")
            try:
                _write_all(fd, content.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            if validate and not callable(validate):
                _run_validate(module, path, tmp_path, validate, validate_fix)
        if callable(validate):
            validate(tmp_path)  # the caller's check: what it raises reaches the caller as it is
        with _write_errors(path):
            if backup and not backup_first and os.path.exists(real):
                backup_file = make_backup(real)
            module.atomic_move(tmp_path, real, unsafe_writes=unsafe_writes)
        done = True
        return backup_file
    finally:
        if not done:
            if tmp_path is not None and os.path.exists(tmp_path):
                os.unlink(tmp_path)
            if backup_file is not None and not backup_first and os.path.exists(backup_file):
                os.unlink(backup_file)  # the target was left unchanged: its backup is no use
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
        file_args = module.load_file_common_arguments(module.params, path=resolve_path(path))
        if not exists and file_args["mode"] is None:
            file_args["mode"] = NEW_FILE_MODE
        result["changed"] = module.set_fs_attributes_if_different(file_args, result["changed"])
    return result
