"""Tests of plugins/modules/docker_daemon_config.py: pure functions and the module run end to end on tmp_path."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest
from ansible_collections.gpunode.provisioning.plugins.module_utils.files import merge as config_merge
from conftest import load_module, run_module

ddc = load_module("docker_daemon_config")

EXISTING = {
    "log-driver": "json-file",
    "log-opts": {"max-size": "10m", "max-file": "3"},
    "features": {"buildkit": True},
    "registry-mirrors": ["https://mirror.a.example"],
    "runtimes": {"crun": {"path": "/usr/bin/crun"}},
}
NVIDIA = {
    "runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}},
    "features": {"cdi": True},
}


def _write(path, value):
    path.write_text(json.dumps(value, indent=2) + "\n")
    return path.read_bytes()


def _run(path, check_mode=False, diff=False, **args):
    return run_module(ddc, {"path": str(path), **args}, check_mode=check_mode, diff=diff)


def _files(directory):
    return sorted(p.name for p in directory.iterdir())


# ---------------------------------------------------------------- pure functions


@pytest.mark.parametrize("text", ["", "   \n\t\n"])
def test_empty_or_whitespace_text_is_an_empty_object(text):
    assert ddc.parse_daemon_json(text, "/x/daemon.json") == {}


def test_parse_error_names_file_line_column_and_fix():
    with pytest.raises(ddc.DaemonConfigError) as exc:
        ddc.parse_daemon_json('{\n  "a": 1\n  "b": 2\n}\n', "/x/daemon.json")
    assert str(exc.value) == (
        "/x/daemon.json is not valid JSON: Expecting ',' delimiter at line 3 column 3. "
        "Fix the file (or empty it to start from {}), then run the task again."
    )


@pytest.mark.parametrize(
    ("text", "kind"),
    [("[1]", "an array"), ('"x"', "a string"), ("3", "a number"), ("null", "null"), ("true", "a boolean")],
)
def test_non_object_top_level_is_rejected(text, kind):
    with pytest.raises(ddc.DaemonConfigError, match=rf"^/x/d.json holds {kind} at the top level, but daemon.json must"):
        ddc.parse_daemon_json(text, "/x/d.json")


def test_render_keeps_key_order_and_ends_with_newline():
    assert ddc.render_daemon_json({"b": 1, "a": {"d": [], "c": 2}}, 4) == (
        '{\n    "b": 1,\n    "a": {\n        "d": [],\n        "c": 2\n    }\n}\n'
    )


def test_build_config_removes_before_merging_and_leaves_input_alone():
    current = {"runtimes": {"nvidia": {"path": "old", "runtimeArgs": ["--debug"]}}, "default-runtime": "nvidia"}
    new = ddc.build_config(
        current, {"runtimes": {"nvidia": {"path": "new"}}}, [["runtimes", "nvidia"], "default-runtime"], "replace"
    )
    assert new == {"runtimes": {"nvidia": {"path": "new"}}}
    assert current["default-runtime"] == "nvidia"


# ---------------------------------------------------------------- module: create and merge


@pytest.fixture
def strict_umask():
    """A umask of 077, so modes 0644/0755 can only come from the module, not the umask."""
    old = os.umask(0o077)
    yield
    os.umask(old)


def test_creates_missing_file_and_directories(tmp_path, strict_umask):
    path = tmp_path / "etc" / "docker" / "daemon.json"
    res = _run(path, settings=NVIDIA)
    assert not res.failed, res.result
    assert res.result["changed"] is True
    assert res.result["config"] == NVIDIA
    assert path.read_text() == json.dumps(NVIDIA, indent=2) + "\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o755
    assert stat.S_IMODE(path.parent.parent.stat().st_mode) == 0o755
    assert _files(path.parent) == ["daemon.json"], "no temporary file left behind"
    assert "backup_file" not in res.result


def test_created_file_takes_the_requested_mode(tmp_path):
    path = tmp_path / "daemon.json"
    res = _run(path, settings={"debug": True}, mode="0600")
    assert res.result["changed"] is True
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_nothing_to_merge_into_a_missing_file_creates_nothing(tmp_path):
    path = tmp_path / "daemon.json"
    res = _run(path)
    assert res.result == {"changed": False, "config": {}}
    assert not path.exists()


def test_merge_keeps_existing_settings_and_features(tmp_path):
    path = tmp_path / "daemon.json"
    _write(path, EXISTING)
    res = _run(path, settings=NVIDIA)
    assert res.result["changed"] is True
    written = json.loads(path.read_text())
    assert written == res.result["config"]
    assert written["features"] == {"buildkit": True, "cdi": True}, "features.cdi must not drop features.buildkit"
    assert written["log-opts"] == {"max-size": "10m", "max-file": "3"}
    assert written["registry-mirrors"] == ["https://mirror.a.example"]
    assert written["runtimes"] == {
        "crun": {"path": "/usr/bin/crun"},
        "nvidia": {"path": "nvidia-container-runtime", "args": []},
    }
    assert list(written) == list(EXISTING), "existing key order kept"
    assert path.read_text() == json.dumps(written, indent=2) + "\n"


def test_rerun_changes_nothing(tmp_path):
    path = tmp_path / "daemon.json"
    _write(path, EXISTING)
    assert _run(path, settings=NVIDIA).result["changed"] is True
    before = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    res = _run(path, settings=NVIDIA, backup=True)
    assert res.result["changed"] is False
    assert "backup_file" not in res.result
    assert path.read_bytes() == before
    assert path.stat().st_mtime_ns == mtime
    assert _files(tmp_path) == ["daemon.json"]


def test_reformatted_equivalent_file_is_left_alone(tmp_path):
    path = tmp_path / "daemon.json"
    merged = config_merge.merge(EXISTING, NVIDIA)
    # same value, other key order, other whitespace, no trailing newline
    shuffled = dict(reversed(list(merged.items())))
    path.write_text(json.dumps(shuffled, separators=(",", ":")))
    original = path.read_bytes()
    res = _run(path, settings=NVIDIA, diff=True)
    assert res.result["changed"] is False
    assert path.read_bytes() == original
    assert res.result["diff"]["before"] == res.result["diff"]["after"] == original.decode()


@pytest.mark.parametrize("content", [b"", b"  \n\n"])
def test_empty_file_counts_as_empty_object(tmp_path, content):
    path = tmp_path / "daemon.json"
    path.write_bytes(content)
    res = _run(path, settings={"features": {"cdi": True}})
    assert res.result["changed"] is True
    assert path.read_text() == '{\n  "features": {\n    "cdi": true\n  }\n}\n'


def test_utf8_bom_is_accepted(tmp_path):
    path = tmp_path / "daemon.json"
    path.write_bytes(b'\xef\xbb\xbf{"debug": true}')
    res = _run(path, settings={"debug": True})
    assert not res.failed
    assert res.result["changed"] is False


def test_indent_option(tmp_path):
    path = tmp_path / "daemon.json"
    _run(path, settings={"a": {"b": 1}}, indent=4)
    assert path.read_text() == '{\n    "a": {\n        "b": 1\n    }\n}\n'


def test_existing_file_keeps_its_mode(tmp_path):
    path = tmp_path / "daemon.json"
    _write(path, {"debug": False})
    path.chmod(0o600)
    _run(path, settings={"debug": True})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_mode_only_change_is_reported(tmp_path):
    path = tmp_path / "daemon.json"
    original = _write(path, {"debug": False})
    path.chmod(0o600)
    res = _run(path, settings={"debug": False}, mode="0644")
    assert res.result["changed"] is True
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert path.read_bytes() == original


# ---------------------------------------------------------------- check mode, diff, backup


def test_check_mode_writes_nothing_but_reports_change_and_diff(tmp_path):
    path = tmp_path / "daemon.json"
    original = _write(path, EXISTING)
    res = _run(path, check_mode=True, diff=True, settings=NVIDIA, backup=True)
    assert res.result["changed"] is True
    assert path.read_bytes() == original
    assert _files(tmp_path) == ["daemon.json"], "no backup or temporary file in check mode"
    diff = res.result["diff"]
    assert diff["before"] == original.decode()
    assert json.loads(diff["after"])["features"] == {"buildkit": True, "cdi": True}
    assert diff["before_header"] == f"{path} (before)"
    assert diff["after_header"] == f"{path} (after)"


def test_check_mode_on_missing_file_creates_nothing(tmp_path):
    path = tmp_path / "new" / "daemon.json"
    res = _run(path, check_mode=True, diff=True, settings={"debug": True})
    assert res.result["changed"] is True
    assert res.result["diff"]["before"] == ""
    assert res.result["diff"]["after"] == '{\n  "debug": true\n}\n'
    assert not path.parent.exists()


def test_diff_after_matches_written_file(tmp_path):
    path = tmp_path / "daemon.json"
    _write(path, EXISTING)
    res = _run(path, diff=True, settings=NVIDIA)
    assert res.result["diff"]["after"] == path.read_text()


def test_backup_holds_the_old_bytes_in_the_backup_tree(tmp_path, backup_root):
    path = tmp_path / "daemon.json"
    path.write_bytes(b'{"debug":false,  "log-level":"info"}')
    original = path.read_bytes()
    res = _run(path, settings={"debug": True}, backup=True)
    assert res.result["changed"] is True
    backup = res.result["backup_file"]
    assert os.path.dirname(backup) == f"{backup_root}{tmp_path}"
    assert sorted(os.listdir(tmp_path)) == ["daemon.json"]
    with open(backup, "rb") as handle:
        assert handle.read() == original
    assert json.loads(path.read_text()) == {"debug": True, "log-level": "info"}


def test_no_backup_when_the_file_is_created(tmp_path):
    path = tmp_path / "daemon.json"
    res = _run(path, settings={"debug": True}, backup=True)
    assert res.result["changed"] is True
    assert "backup_file" not in res.result
    assert _files(tmp_path) == ["daemon.json"]


# ---------------------------------------------------------------- remove and list strategies


def test_remove_paths(tmp_path):
    path = tmp_path / "daemon.json"
    _write(path, config_merge.merge(EXISTING, {"default-runtime": "nvidia", **NVIDIA}))
    res = _run(path, remove=["default-runtime", ["runtimes", "nvidia"], ["log-opts", "max-file"], ["no", "such"]])
    assert res.result["changed"] is True
    written = json.loads(path.read_text())
    assert "default-runtime" not in written
    assert written["runtimes"] == {"crun": {"path": "/usr/bin/crun"}}
    assert written["log-opts"] == {"max-size": "10m"}
    again = _run(path, remove=["default-runtime", ["runtimes", "nvidia"]])
    assert again.result["changed"] is False


def test_remove_then_set_replaces_an_object_exactly(tmp_path):
    path = tmp_path / "daemon.json"
    _write(path, {"runtimes": {"nvidia": {"path": "old", "runtimeArgs": ["--x"]}}})
    args = {"remove": [["runtimes", "nvidia"]], "settings": {"runtimes": {"nvidia": {"path": "new"}}}}
    assert _run(path, **args).result["changed"] is True
    assert json.loads(path.read_text()) == {"runtimes": {"nvidia": {"path": "new"}}}
    assert _run(path, **args).result["changed"] is False


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("replace", ["https://b", "https://a"]),
        ("append_unique", ["https://a", "https://c", "https://b"]),
        ("prepend_unique", ["https://b", "https://a", "https://c"]),
    ],
)
def test_list_strategies(tmp_path, strategy, expected):
    path = tmp_path / "daemon.json"
    _write(path, {"registry-mirrors": ["https://a", "https://c"]})
    args = {"settings": {"registry-mirrors": ["https://b", "https://a"]}, "list_strategy": strategy}
    res = _run(path, **args)
    assert res.result["changed"] is True
    assert json.loads(path.read_text())["registry-mirrors"] == expected
    assert _run(path, **args).result["changed"] is False


# ---------------------------------------------------------------- failures leave the file alone


def _assert_failed_and_untouched(res, path, original, message):
    assert res.failed, res.result
    assert message in res.result["msg"], res.result["msg"]
    assert path.read_bytes() == original
    assert _files(path.parent) == [path.name], "no backup or temporary file left behind"


def test_invalid_json_fails_with_location_and_fix(tmp_path):
    path = tmp_path / "daemon.json"
    path.write_bytes(b'{\n  "debug": true\n  "features": {}\n}\n')
    original = path.read_bytes()
    res = _run(path, settings=NVIDIA, backup=True)
    _assert_failed_and_untouched(
        res, path, original, f"{path} is not valid JSON: Expecting ',' delimiter at line 3 column 3. Fix the file"
    )


def test_non_object_top_level_fails(tmp_path):
    path = tmp_path / "daemon.json"
    path.write_bytes(b'["runtimes"]\n')
    res = _run(path, settings=NVIDIA, backup=True)
    _assert_failed_and_untouched(
        res, path, b'["runtimes"]\n', f"{path} holds an array at the top level, but daemon.json must be a JSON object"
    )


def test_path_is_a_directory_fails(tmp_path):
    path = tmp_path / "daemon.json"
    path.mkdir()
    res = _run(path, settings=NVIDIA)
    assert res.failed
    assert res.result["msg"] == f"{path} is a directory, not a file. Set path to the daemon.json file itself."
    assert list(path.iterdir()) == []


def test_unreadable_file_fails(tmp_path, monkeypatch):
    path = tmp_path / "daemon.json"
    original = _write(path, EXISTING)

    def denied(name, *args, **kwargs):
        # chmod 000 does not stop root, so simulate what open() raises for other users
        raise PermissionError(13, "Permission denied", name)

    monkeypatch.setattr(ddc, "open", denied, raising=False)
    res = _run(path, settings=NVIDIA, backup=True)
    monkeypatch.undo()
    _assert_failed_and_untouched(
        res, path, original, f"cannot read {path}: Permission denied. Run the task with become: true"
    )


def test_non_utf8_file_fails(tmp_path):
    path = tmp_path / "daemon.json"
    path.write_bytes(b'{"a": "\xff"}')
    res = _run(path, settings=NVIDIA)
    _assert_failed_and_untouched(res, path, b'{"a": "\xff"}', f"{path} is not UTF-8 text (byte 7: invalid start byte)")


def test_failing_validate_leaves_the_original(tmp_path):
    path = tmp_path / "daemon.json"
    original = _write(path, EXISTING)
    res = _run(path, settings=NVIDIA, backup=True, validate="false %s")
    _assert_failed_and_untouched(
        res, path, original, f"the new {path} failed validation: 'false %s' exited with status 1"
    )


def test_validate_stderr_is_in_the_message_and_sees_the_candidate(tmp_path):
    path = tmp_path / "daemon.json"
    original = _write(path, EXISTING)
    checker = tmp_path.parent / f"{tmp_path.name}-check.py"
    checker.write_text(
        "import json, sys\n"
        "cfg = json.load(open(sys.argv[1]))\n"
        "if cfg.get('default-runtime') == 'nvidia':\n"
        "    sys.exit('unable to configure the Docker daemon with file ' + sys.argv[1] + ': default-runtime refused')\n"
    )
    validate = f"{sys.executable} {checker} %s"
    bad = _run(path, settings={"default-runtime": "nvidia"}, backup=True, validate=validate)
    _assert_failed_and_untouched(bad, path, original, ": default-runtime refused. ")
    assert f"{tmp_path}/.daemon.json." in bad.result["msg"], "validate runs on a candidate next to the target"
    good = _run(path, settings=NVIDIA, validate=validate)
    assert good.result["changed"] is True
    assert json.loads(path.read_text())["features"] == {"buildkit": True, "cdi": True}


def test_failing_validate_on_a_new_file_removes_created_directories(tmp_path):
    path = tmp_path / "etc" / "docker" / "daemon.json"
    res = _run(path, settings=NVIDIA, validate="false %s")
    assert res.failed
    assert "failed validation" in res.result["msg"]
    assert _files(tmp_path) == []


def test_missing_validate_command_fails_cleanly(tmp_path):
    path = tmp_path / "daemon.json"
    original = _write(path, EXISTING)
    res = _run(path, settings=NVIDIA, validate="/nonexistent/dockerd --validate --config-file %s")
    _assert_failed_and_untouched(
        res, path, original, "cannot run the validate command '/nonexistent/dockerd --validate --config-file %s'"
    )


def test_validate_without_placeholder_is_rejected(tmp_path):
    path = tmp_path / "daemon.json"
    original = _write(path, EXISTING)
    res = _run(path, settings=NVIDIA, validate="dockerd --validate")
    _assert_failed_and_untouched(res, path, original, "validate must contain %s")


@pytest.mark.parametrize(
    ("remove", "message"),
    [([5], "a key path must be a string or a list of keys, got int: 5"), ([[]], "a key path must name at least one")],
)
def test_bad_remove_paths_are_rejected(tmp_path, remove, message):
    path = tmp_path / "daemon.json"
    original = _write(path, EXISTING)
    res = _run(path, remove=remove)
    _assert_failed_and_untouched(res, path, original, f"invalid remove or settings option: {message}")


def test_bad_list_strategy_is_rejected(tmp_path):
    path = tmp_path / "daemon.json"
    original = _write(path, EXISTING)
    res = _run(path, settings=NVIDIA, list_strategy="merge")
    _assert_failed_and_untouched(res, path, original, "value of list_strategy must be one of")


# ---------------------------------------------------------------- the write contract


def test_a_symlinked_daemon_json_stays_a_link_and_its_target_gets_the_change(tmp_path):
    real = tmp_path / "shared" / "daemon.json"
    real.parent.mkdir()
    _write(real, EXISTING)
    real.chmod(0o600)
    link = tmp_path / "daemon.json"
    link.symlink_to(real)
    res = _run(link, settings=NVIDIA)
    assert not res.failed, res.result
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text())["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert _run(link, settings=NVIDIA).result["changed"] is False


def _set_key_slowly(path: str, key: str, backup_root: str) -> None:
    """In a child process: run the module setting one key, with a pause between reading and writing."""
    import time

    from ansible_collections.gpunode.provisioning.plugins.module_utils.files import edit as file_edit

    file_edit.BACKUP_ROOT = backup_root
    build = ddc.build_config

    def slow_build(*args, **kwargs):
        time.sleep(0.05)
        return build(*args, **kwargs)

    ddc.build_config = slow_build
    res = _run(path, settings={key: True})
    os._exit(1 if res.failed or not res.result["changed"] else 0)


def test_concurrent_runs_on_one_file_never_lose_a_change(tmp_path, backup_root):
    import multiprocessing

    path = tmp_path / "daemon.json"
    _write(path, {})
    keys = [f"key-{number}" for number in range(6)]
    context = multiprocessing.get_context("fork")
    children = [context.Process(target=_set_key_slowly, args=(str(path), key, str(backup_root))) for key in keys]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
    assert [child.exitcode for child in children] == [0] * len(keys), "every run reports success"
    assert json.loads(path.read_text()) == dict.fromkeys(keys, True), "and every change is in the file"
    assert _files(tmp_path) == ["daemon.json"]


# ---------------------------------------------------------------- what json.loads lets through


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{\n  "debug": true,\n  "debug": false\n}\n',
            "line 3: the key 'debug' appears more than once in its object; which one counts is unclear and a "
            "rewrite would keep only one. Keep one of them, then run the task again.",
        ),
        (
            '{\n  "log-opts": {\n    "max-size": "10m",\n\n    "max-size": "20m"\n  }\n}\n',
            "line 5: the key 'log-opts.max-size' appears more than once in its object; which one counts is unclear "
            "and a rewrite would keep only one. Keep one of them, then run the task again.",
        ),
        (
            '{"log-opts": {"max-file": NaN}}',
            "line 1: log-opts.max-file is NaN, which is not JSON and dockerd cannot read. Use a number, then run "
            "the task again.",
        ),
        (
            '{\n "runtimes": {"x": {"args": [1, -Infinity]}}}',
            "line 2: runtimes.x.args[1] is -Infinity, which is not JSON and dockerd cannot read. Use a number, "
            "then run the task again.",
        ),
        (
            '{"a": Infinity}',
            "line 1: a is Infinity, which is not JSON and dockerd cannot read. Use a number, then run the task again.",
        ),
    ],
)
def test_repeated_keys_and_non_finite_numbers_are_refused_naming_file_line_and_key(tmp_path, text, message):
    path = tmp_path / "daemon.json"
    path.write_text(text)
    res = _run(path, settings={"debug": True}, backup=True)
    assert res.failed
    assert res.result["msg"] == f"{path} {message}"
    assert path.read_text() == text
    assert _files(tmp_path) == ["daemon.json"]


def test_keys_that_repeat_in_different_objects_and_strings_that_look_like_nan_are_fine(tmp_path):
    path = tmp_path / "daemon.json"
    value = {"a": {"x": 1}, "b": {"x": "NaN", "y": 'a "quoted": \\', "Infinity": 1}, "c": [{"x": 1}, {"x": 2}]}
    path.write_text(json.dumps(value))
    res = _run(path, settings={"debug": True})
    assert not res.failed, res.result
    assert json.loads(path.read_text()) == {**value, "debug": True}


def test_too_deep_nesting_is_a_clear_error_naming_the_file(tmp_path):
    path = tmp_path / "daemon.json"
    text = '{"a": ' + "[" * 100000 + "]" * 100000 + "}"
    path.write_text(text)
    res = _run(path, settings={"debug": True})
    assert res.failed
    assert res.result["msg"] == (
        f"{path} nests objects and arrays more than 64 levels deep (line 1); daemon.json never needs that. "
        "Fix the file, then run the task again."
    )
    assert path.read_text() == text


def test_nan_in_the_settings_is_refused_and_nothing_is_written(tmp_path):
    path = tmp_path / "daemon.json"
    before = _write(path, EXISTING)
    res = _run(path, settings={"log-opts": {"max-file": float("nan")}})
    assert res.failed
    assert res.result["msg"] == (
        "settings hold NaN or Infinity (Out of range float values are not JSON compliant: nan), which daemon.json "
        "cannot hold: use a number."
    )
    assert path.read_bytes() == before
