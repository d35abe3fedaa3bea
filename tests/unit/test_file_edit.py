"""Tests of plugins/module_utils/files/edit.py with a real AnsibleModule writing under tmp_path."""

from __future__ import annotations

import errno
import multiprocessing
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpunode.provisioning.plugins.module_utils.files import edit as fe

OLD = "old = 1\n"
NEW = "new = 2\n"


def _module(path, check_mode=False, diff=False, **params) -> AnsibleModule:
    """An AnsibleModule with a path option and the file arguments, as the project's file modules have."""
    args = {
        "path": str(path),
        "_ansible_check_mode": check_mode,
        "_ansible_diff": diff,
        "_ansible_remote_tmp": "/tmp",
        "_ansible_keep_remote_files": False,
        **params,
    }
    with patch_module_args(args):
        return AnsibleModule(
            argument_spec={"path": {"type": "path", "required": True}},
            add_file_common_args=True,
            supports_check_mode=True,
        )


def _names(directory):
    return sorted(entry.name for entry in directory.iterdir())


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def _checker(tmp_path, code: str) -> str:
    """A validate command that runs ``code`` with sys.argv[1] = the candidate; outside tmp_path."""
    script = tmp_path.parent / f"{tmp_path.name}-check.py"
    script.write_text(code)
    return f"{sys.executable} {script} %s"


@pytest.fixture
def strict_umask():
    """umask 077, so that a mode of 0644 or 0755 can only come from the helper, not from the umask."""
    previous = os.umask(0o077)
    yield
    os.umask(previous)


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "app.conf"
    path.write_text(OLD)
    path.chmod(0o640)
    return path


# ---------------------------------------------------------------- read_text


def test_read_text_returns_none_for_a_missing_file(tmp_path):
    assert fe.read_text(str(tmp_path / "missing"), directory_fix="Fix it.") is None


def test_read_text_returns_the_text_and_honours_the_encoding(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"\xef\xbb\xbf{}\n")
    assert fe.read_text(str(path), directory_fix="x") == "\ufeff{}\n"
    assert fe.read_text(str(path), directory_fix="x", encoding="utf-8-sig") == "{}\n"


def test_read_text_of_a_directory_names_it_and_the_fix(tmp_path):
    with pytest.raises(fe.FileEditError) as exc:
        fe.read_text(str(tmp_path), directory_fix="Set path to the file itself.")
    assert str(exc.value) == f"{tmp_path} is a directory, not a file. Set path to the file itself."


def test_read_text_of_non_utf8_bytes_says_where(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"ab\xff")
    with pytest.raises(fe.FileEditError) as exc:
        fe.read_text(str(path), directory_fix="x")
    assert str(exc.value) == (
        f"{path} is not UTF-8 text (byte 2: invalid start byte). Fix the file's encoding, then run again."
    )


def test_read_text_permission_error_tells_to_become(tmp_path):
    def denied(name, *args, **kwargs):
        raise PermissionError(13, "Permission denied", name)

    with pytest.raises(fe.FileEditError) as exc:
        fe.read_text(str(tmp_path / "f"), directory_fix="x", opener=denied)
    assert str(exc.value) == (
        f"cannot read {tmp_path / 'f'}: Permission denied. "
        "Run the task with become: true or fix the file's permissions."
    )


# ---------------------------------------------------------------- apply_edit


def test_equal_content_is_not_written(target):
    before_stat = os.stat(target)
    module = _module(target, diff=True)
    result = fe.apply_edit(module, str(target), OLD, OLD, False, backup=True, validate="false %s")
    assert result == {
        "changed": False,
        "diff": {
            "before": OLD,
            "after": OLD,
            "before_header": f"{target} (before)",
            "after_header": f"{target} (after)",
        },
    }
    after_stat = os.stat(target)
    assert (after_stat.st_ino, after_stat.st_mtime_ns) == (before_stat.st_ino, before_stat.st_mtime_ns)
    assert _names(target.parent) == ["app.conf"]


def test_equal_content_still_gets_the_requested_mode(target):
    result = fe.apply_edit(_module(target, mode="0600"), str(target), OLD, OLD, False)
    assert result == {"changed": True}
    assert target.read_text() == OLD
    assert _mode(target) == 0o600


def test_changed_content_is_written_and_keeps_the_files_mode(target):
    result = fe.apply_edit(_module(target), str(target), OLD, NEW, True)
    assert result == {"changed": True}
    assert target.read_text() == NEW
    assert _mode(target) == 0o640
    assert _names(target.parent) == ["app.conf"]


def test_check_mode_writes_nothing_and_reports_the_diff(tmp_path, target):
    module = _module(target, check_mode=True, diff=True)
    result = fe.apply_edit(module, str(target), OLD, NEW, True, backup=True, diff_headers=("a", "b"))
    assert result == {"changed": True, "diff": {"before": OLD, "after": NEW, "before_header": "a", "after_header": "b"}}
    assert target.read_text() == OLD
    missing = tmp_path / "new.conf"
    result = fe.apply_edit(_module(missing, check_mode=True), str(missing), None, NEW, True, create_dirs=True)
    assert result == {"changed": True}
    assert _names(tmp_path) == ["app.conf"]


def test_backup_keeps_the_old_content_in_the_backup_tree_never_beside_the_file(target, backup_root):
    result = fe.apply_edit(_module(target), str(target), OLD, NEW, True, backup=True)
    backup = result["backup_file"]
    assert os.path.dirname(backup) == f"{backup_root}{target.parent}", "the tree mirrors the absolute path"
    assert re.fullmatch(r"app\.conf\.\d{4}-\d\d-\d\d@\d\d:\d\d:\d\d~", os.path.basename(backup))
    with open(backup) as handle:
        assert handle.read() == OLD
    assert target.read_text() == NEW
    assert _names(target.parent) == ["app.conf"], "nothing beside the file: a daemon reading the directory sees none"


def test_no_backup_of_a_file_that_did_not_exist(tmp_path):
    path = tmp_path / "new.conf"
    result = fe.apply_edit(_module(path), str(path), None, NEW, True, backup=True)
    assert result == {"changed": True}
    assert _names(tmp_path) == ["new.conf"]


def test_new_file_gets_mode_0644_unless_mode_is_given(tmp_path, strict_umask):
    default = tmp_path / "default.conf"
    fe.apply_edit(_module(default), str(default), None, NEW, True)
    assert default.read_text() == NEW
    assert _mode(default) == 0o644
    explicit = tmp_path / "explicit.conf"
    fe.apply_edit(_module(explicit, mode="0600"), str(explicit), None, NEW, True)
    assert _mode(explicit) == 0o600


def test_existing_file_keeps_its_mode_when_written(target):
    fe.apply_edit(_module(target), str(target), OLD, NEW, True)
    assert _mode(target) == 0o640


# ---------------------------------------------------------------- validation


def test_failed_validation_leaves_the_file_byte_identical_and_no_temp_file(target):
    target.write_bytes(b"old = 1\r\n\xe2\x82\xac\n")
    original = target.read_bytes()
    module = _module(target)
    with pytest.raises(fe.FileEditError) as exc:
        fe.apply_edit(module, str(target), original.decode(), NEW, True, backup=True, validate="false %s")
    assert str(exc.value) == (
        f"the new {target} failed validation: 'false %s' exited with status 1: (no output). "
        f"{target} was left unchanged; fix the task's options or the validate command."
    )
    assert target.read_bytes() == original
    assert _names(target.parent) == ["app.conf"], "no temporary file and no backup is left behind"


def test_validation_message_has_the_output_and_the_callers_fix(tmp_path, target):
    validate = _checker(tmp_path, "import sys\nsys.exit('bad value in ' + sys.argv[1])\n")
    with pytest.raises(fe.FileEditError) as exc:
        fe.write_file(_module(target), str(target), NEW, validate=validate, validate_fix="fix settings")
    message = str(exc.value)
    assert message.startswith(f"the new {target} failed validation: '{validate}' exited with status 1: bad value in ")
    assert f"{tmp_path}/.app.conf." in message, "the candidate is a temporary file next to the target"
    assert message.endswith(f". {target} was left unchanged; fix settings.")
    assert target.read_text() == OLD
    assert _names(tmp_path) == ["app.conf"]


def test_validation_sees_the_new_content(tmp_path, target):
    validate = _checker(tmp_path, f"import sys\nsys.exit(open(sys.argv[1]).read() != {NEW!r})\n")
    assert fe.write_file(_module(target), str(target), NEW, validate=validate) is None
    assert target.read_text() == NEW


def test_a_validate_command_that_cannot_run_fails_cleanly(target):
    with pytest.raises(fe.FileEditError) as exc:
        fe.write_file(_module(target), str(target), NEW, validate="/nonexistent/check %s")
    assert str(exc.value) == (
        f"cannot run the validate command '/nonexistent/check %s': No such file or directory. "
        f"{target} was left unchanged; install the command or fix validate."
    )
    assert target.read_text() == OLD
    assert _names(target.parent) == ["app.conf"]


def test_a_validate_function_gets_the_candidate_and_its_error_passes_through(target):
    seen = []

    def reject(candidate):
        seen.append((candidate, Path(candidate).read_text()))
        raise fe.FileEditError("rejected", stdout="out", stderr="err")

    with pytest.raises(fe.FileEditError) as exc:
        fe.write_file(_module(target), str(target), NEW, validate=reject)
    assert (str(exc.value), exc.value.details) == ("rejected", {"stdout": "out", "stderr": "err"})
    assert [content for _, content in seen] == [NEW]
    assert os.path.dirname(seen[0][0]) == str(target.parent)
    assert target.read_text() == OLD
    assert _names(target.parent) == ["app.conf"]


def test_other_errors_of_a_validate_function_are_not_wrapped(target):
    def broken(candidate):
        raise KeyError("boom")

    with pytest.raises(KeyError):
        fe.write_file(_module(target), str(target), NEW, validate=broken)
    assert _names(target.parent) == ["app.conf"]


def test_backup_first_is_made_before_validation(target, backup_root):
    with pytest.raises(fe.FileEditError):
        fe.write_file(_module(target), str(target), NEW, validate="false %s", backup=True, backup_first=True)
    assert _names(target.parent) == ["app.conf"]
    [backup] = [name for name in _names(Path(f"{backup_root}{target.parent}")) if not name.endswith(".lock")]
    assert backup.startswith("app.conf.") and backup.endswith("~")
    assert Path(f"{backup_root}{target.parent}", backup).read_text() == OLD
    assert target.read_text() == OLD


# ---------------------------------------------------------------- directories and move


def test_missing_directories_are_created_with_mode_0755(tmp_path, strict_umask):
    path = tmp_path / "etc" / "app" / "app.conf"
    fe.apply_edit(_module(path), str(path), None, NEW, True, create_dirs=True)
    assert path.read_text() == NEW
    assert _mode(tmp_path / "etc") == 0o755
    assert _mode(tmp_path / "etc" / "app") == 0o755


def test_directories_created_for_a_file_that_failed_validation_are_removed(tmp_path):
    path = tmp_path / "etc" / "app" / "app.conf"
    with pytest.raises(fe.FileEditError):
        fe.write_file(_module(path), str(path), NEW, validate="false %s", create_dirs=True)
    assert _names(tmp_path) == []


def test_a_missing_directory_is_an_error_without_create_dirs(tmp_path):
    path = tmp_path / "etc" / "app.conf"
    with pytest.raises(fe.FileEditError) as exc:
        fe.write_file(_module(path), str(path), NEW)
    assert str(exc.value) == (
        f"cannot create {path}: the directory {tmp_path / 'etc'} does not exist. Create it first."
    )
    assert _names(tmp_path) == []


def test_a_failed_move_is_reported_and_cleaned_up(target, monkeypatch):
    module = _module(target)
    calls = []

    def failing_move(src, dest, unsafe_writes=False, keep_dest_attrs=True):
        calls.append(unsafe_writes)
        raise Exception("Could not replace file")

    monkeypatch.setattr(module, "atomic_move", failing_move)
    with pytest.raises(fe.FileEditError) as exc:
        fe.write_file(module, str(target), NEW, unsafe_writes=True)
    assert str(exc.value) == f"cannot write {target}: Could not replace file. {target} was left unchanged."
    assert calls == [True], "unsafe_writes reaches atomic_move"
    assert target.read_text() == OLD
    assert _names(target.parent) == ["app.conf"]


# ---------------------------------------------------------------- the write contract


def _tree(backup_root, path) -> Path:
    """The backup tree's directory for ``path``."""
    return Path(f"{backup_root}{Path(path).parent}")


def test_a_0600_file_and_its_backup_keep_mode_and_owner(target, backup_root):
    target.chmod(0o600)
    os.chown(target, 1234, 5678)
    result = fe.apply_edit(_module(target), str(target), OLD, NEW, True, backup=True)
    assert target.read_text() == NEW
    assert (_mode(target), os.stat(target).st_uid, os.stat(target).st_gid) == (0o600, 1234, 5678)
    backup = result["backup_file"]
    assert (_mode(backup), os.stat(backup).st_uid, os.stat(backup).st_gid) == (0o600, 1234, 5678), (
        "a backup of a 0600 file must not be world-readable"
    )
    assert _mode(backup_root) == 0o700 and _mode(_tree(backup_root, target)) == 0o700


def test_a_symlink_stays_and_its_target_gets_the_change(tmp_path, backup_root):
    real = tmp_path / "real" / "daemon.json"
    real.parent.mkdir()
    real.write_text(OLD)
    real.chmod(0o640)
    link = tmp_path / "daemon.json"
    link.symlink_to(real)
    result = fe.apply_edit(_module(link), str(link), OLD, NEW, True, backup=True)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == NEW
    assert _mode(real) == 0o640
    assert Path(result["backup_file"]).parent == _tree(backup_root, real)
    assert _names(tmp_path) == ["daemon.json", "real"]
    assert _names(real.parent) == ["daemon.json"]


def test_a_full_disk_while_backing_up_leaves_no_partial_backup(target, backup_root, monkeypatch):
    target.write_bytes(b"x" * 10000)
    original = target.read_bytes()
    real_write_all = fe._write_all

    def disk_full(fd, data):
        if data != original:  # the new content fits, the backup does not
            return real_write_all(fd, data)
        real_write_all(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fe, "_write_all", disk_full)
    with pytest.raises(fe.FileEditError) as exc:
        fe.write_file(_module(target), str(target), NEW, backup=True)
    message = str(exc.value)
    assert re.fullmatch(
        re.escape(f"cannot back up {target} to {_tree(backup_root, target)}/app.conf.")
        + r"\S+~: "
        + re.escape(f"No space left on device. {target} was left unchanged."),
        message,
    ), message
    assert target.read_bytes() == original
    assert _names(target.parent) == ["app.conf"], "no temporary file left"
    assert [n for n in _names(_tree(backup_root, target)) if not n.endswith(".lock")] == [], "no partial backup"


def test_a_full_disk_after_the_backup_removes_the_backup_and_the_temporary_file(target, backup_root, monkeypatch):
    module = _module(target)

    def disk_full(src, dest, unsafe_writes=False, keep_dest_attrs=True):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(module, "atomic_move", disk_full)
    with pytest.raises(fe.FileEditError) as exc:
        fe.write_file(module, str(target), NEW, backup=True)
    assert str(exc.value) == f"cannot write {target}: [Errno 28] No space left on device. {target} was left unchanged."
    assert target.read_text() == OLD
    assert _names(target.parent) == ["app.conf"]
    assert [n for n in _names(_tree(backup_root, target)) if not n.endswith(".lock")] == []


def test_a_real_full_disk_leaves_the_file_intact_and_no_debris(tmp_path, backup_root, monkeypatch):
    """A 64 KiB tmpfs holds the file and the backup tree: the backup of a 40 KB file fits, the new 40 KB not."""
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], check=True)
    try:
        monkeypatch.setattr(fe, "BACKUP_ROOT", str(mount / "backups"))
        path = mount / "config.toml"
        original = b"# old\n" + b"a" * 40000
        path.write_bytes(original)
        path.chmod(0o600)
        with pytest.raises(fe.FileEditError) as exc:
            fe.write_file(_module(path), str(path), "b" * 40000, backup=True)
        assert "No space left on device" in str(exc.value)
        assert path.read_bytes() == original and _mode(path) == 0o600
        assert _names(mount) == ["backups", "config.toml"]
        assert [n for n in _names(_tree(mount / "backups", path)) if not n.endswith(".lock")] == []
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_stale_temporary_files_and_partial_backups_of_ours_are_removed_on_the_next_run(target, backup_root):
    stale = target.parent / ".app.conf.k3x9_a0q.tmp"
    stale.write_text("half")
    others = [target.parent / ".app.conf.swp", target.parent / ".other.conf.k3x9_a0q.tmp", target.parent / "x.tmp"]
    for other in others:
        other.write_text("not ours")
    tree = _tree(backup_root, target)
    tree.mkdir(parents=True)
    part = tree / "app.conf.2026-01-01@00:00:00~.part"
    part.write_text("half")
    fe.apply_edit(_module(target), str(target), OLD, NEW, True)
    assert not stale.exists() and not part.exists()
    assert all(other.read_text() == "not ours" for other in others)
    assert target.read_text() == NEW


def _add_line_locked(path: str, line: str, backup_root: str) -> None:
    """In a child process: read the file, wait, write it back with one more line, all under the lock."""
    fe.BACKUP_ROOT = backup_root
    with fe.locked(path) as real:
        with open(real) as handle:
            before = handle.read()
        import time

        time.sleep(0.05)
        fe.write_file(_module(real), real, before + line + "\n")


def test_concurrent_processes_never_lose_a_change(target, backup_root):
    target.write_text("")
    context = multiprocessing.get_context("fork")
    lines = [f"line {number}" for number in range(8)]
    children = [context.Process(target=_add_line_locked, args=(str(target), line, str(backup_root))) for line in lines]
    for child in children:
        child.start()
    for child in children:
        child.join(30)
    assert [child.exitcode for child in children] == [0] * len(children)
    assert sorted(target.read_text().splitlines()) == sorted(lines)
    assert _names(target.parent) == ["app.conf"]


def test_the_lock_is_reentrant_and_check_mode_creates_nothing(tmp_path, backup_root):
    path = tmp_path / "a.conf"
    with fe.locked(str(path), check_mode=True) as real:
        assert real == str(path)
    assert _names(backup_root) == []
    with fe.locked(str(path)) as real, fe.locked(real):
        fe.write_file(_module(path), real, NEW)
    assert path.read_text() == NEW
