"""Tests of modules/config_file_write.py, the writer behind the containerd_config and toml_merge action plugins."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import stat

from conftest import load_module, run_module

cfw = load_module("config_file_write")

SECRET = '[plugins."io.containerd.grpc.v1.cri".registry.configs."r.example".auth]\n  password = "s3cret"\n'
NEW = SECRET + "oom_score = -999\n"


def _sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _run(path, **args):
    return run_module(cfw, {"dest": str(path), **args})


def test_a_0600_config_with_passwords_stays_0600_and_so_does_its_backup(tmp_path, backup_root):
    path = tmp_path / "config.toml"
    path.write_text(SECRET)
    path.chmod(0o600)
    os.chown(path, 0, 4321)
    res = _run(path, content=NEW, backup=True, expected_sha1=_sha1(SECRET.encode()))
    assert not res.failed, res.result
    assert res.result["changed"] is True
    assert path.read_text() == NEW
    assert (_mode(path), path.stat().st_gid) == (0o600, 4321), "an existing file keeps its mode and owner"
    backup = res.result["backup_file"]
    assert backup.startswith(f"{backup_root}{tmp_path}/config.toml.")
    assert (_mode(backup), os.stat(backup).st_gid) == (0o600, 4321), "the backup is not world-readable"
    assert sorted(os.listdir(tmp_path)) == ["config.toml"]


def test_a_new_file_gets_0644_and_an_absent_expectation_is_met(tmp_path):
    path = tmp_path / "conf.d" / "99-nvidia.toml"
    res = _run(path, content=NEW, expected_sha1="", create_dirs=True)
    assert not res.failed, res.result
    assert _mode(path) == 0o644
    assert _run(path, content=NEW).result["changed"] is False


def test_a_file_changed_since_it_was_read_is_not_written(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("version = 2\n")
    res = _run(path, content=NEW, expected_sha1=_sha1(b"what the caller read\n"), backup=True)
    assert res.failed
    assert res.result["conflict"] is True
    assert res.result["msg"] == (
        f"{path} changed on the node after it was read (another run or a person wrote it in the meantime); "
        "nothing was written. Run again to merge into the new content."
    )
    assert path.read_bytes() == b"version = 2\n"
    assert sorted(os.listdir(tmp_path)) == ["config.toml"]
    created = tmp_path / "absent.toml"
    created.write_text("x = 1\n")
    assert _run(created, content=NEW, expected_sha1="").result["conflict"] is True
    assert created.read_text() == "x = 1\n"


def test_a_symlink_is_followed(tmp_path):
    real = tmp_path / "real.toml"
    real.write_text(SECRET)
    link = tmp_path / "config.toml"
    link.symlink_to(real)
    res = _run(link, content=NEW, expected_sha1=_sha1(SECRET.encode()))
    assert not res.failed, res.result
    assert res.result["path"] == str(real)
    assert link.is_symlink() and real.read_text() == NEW


def test_a_failed_validation_leaves_the_bytes_and_no_debris(tmp_path, backup_root):
    path = tmp_path / "config.toml"
    path.write_text(SECRET)
    res = _run(path, content=NEW, validate="/bin/sh -c 'echo bad toml >&2; exit 1' %s", backup=True)
    assert res.failed
    assert res.result["msg"].startswith(f"the new {path} failed validation: ")
    assert "bad toml" in res.result["msg"]
    assert path.read_text() == SECRET
    assert sorted(os.listdir(tmp_path)) == ["config.toml"]
    assert [n for n in os.listdir(f"{backup_root}{tmp_path}") if not n.endswith(".lock")] == []


def _write_expecting(path: str, content: str, expected: str, backup_root: str, queue) -> None:
    import time

    from ansible_collections.gpunode.provisioning.plugins.module_utils.files import edit as file_edit

    file_edit.BACKUP_ROOT = backup_root
    apply_edit = cfw.apply_edit

    def slow_apply_edit(*args, **kwargs):  # widen the window between the comparison and the write
        time.sleep(0.1)
        return apply_edit(*args, **kwargs)

    cfw.apply_edit = slow_apply_edit
    res = _run(path, content=content, expected_sha1=expected)
    queue.put((content, res.failed, res.result.get("conflict", False)))


def test_two_processes_that_read_the_same_bytes_never_both_succeed(tmp_path, backup_root):
    path = tmp_path / "config.toml"
    path.write_text("version = 2\n")
    expected = _sha1(b"version = 2\n")
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    contents = [f"version = 2\nwriter = {number}\n" for number in range(4)]
    children = [
        context.Process(target=_write_expecting, args=(str(path), content, expected, str(backup_root), queue))
        for content in contents
    ]
    for child in children:
        child.start()
    outcomes = [queue.get(timeout=60) for _ in children]
    for child in children:
        child.join(30)
    winners = [content for content, failed, _ in outcomes if not failed]
    assert len(winners) == 1, outcomes
    assert all(conflict for _, failed, conflict in outcomes if failed), outcomes
    assert path.read_text() == winners[0]
    assert sorted(os.listdir(tmp_path)) == ["config.toml"]


def test_the_diff_is_returned_only_when_asked_for(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("a: 1\n")
    hidden = run_module(cfw, {"dest": str(path), "content": "a: 2\n"}, check_mode=True, diff=True)
    assert "diff" not in hidden.result
    shown = run_module(cfw, {"dest": str(path), "content": "a: 2\n", "show_diff": True}, check_mode=True, diff=True)
    assert shown.result["diff"]["before"] == "a: 1\n" and shown.result["diff"]["after"] == "a: 2\n"
    assert shown.result["changed"] is True and path.read_text() == "a: 1\n"
