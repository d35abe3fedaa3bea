"""Tests of plugins/modules/kubelet_flags.py: pure functions, and the module run end to end on tmp_path."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import load_module, run_module

kf = load_module("kubelet_flags")

DEBIAN_DEFAULT = "KUBELET_EXTRA_ARGS=\n"
SYSCONFIG = (
    "# Managed by hand\n"
    "KUBELET_KUBECONFIG_ARGS=--kubeconfig=/etc/kubernetes/kubelet.conf\n"
    'KUBELET_EXTRA_ARGS="--v=2 --node-labels a=1,b=2 --cgroup-driver cgroupfs --fail-swap-on=false"\n'
    "\n"
    "OTHER='keep me'\n"
)


def _run(path, check_mode=False, diff=False, **args):
    return run_module(kf, {"path": str(path), **args}, check_mode=check_mode, diff=diff)


def _write(path, text):
    path.write_bytes(text.encode())
    return path.read_bytes()


def _line(path, variable="KUBELET_EXTRA_ARGS"):
    return next(line for line in path.read_text().splitlines() if line.startswith(variable + "="))


def _files(directory):
    return sorted(p.name for p in directory.iterdir())


# ---------------------------------------------------------------- parsing


def test_parse_args_reads_every_form_and_keeps_the_text():
    args = kf.parse_args("--v=2 --node-labels a=1 -verbose --bare --root-dir /var/lib/kubelet stray")
    assert [(a.name, a.value, a.text) for a in args] == [
        ("v", "2", "--v=2"),
        ("node-labels", "a=1", "--node-labels a=1"),
        ("verbose", None, "-verbose"),
        ("bare", None, "--bare"),
        ("root-dir", "/var/lib/kubelet", "--root-dir /var/lib/kubelet"),
        (None, None, "stray"),
    ]
    assert kf.render_args(args) == "--v=2 --node-labels a=1 -verbose --bare --root-dir /var/lib/kubelet stray"


def test_parse_labels_keeps_order_and_skips_empty_items_like_the_kubelet():
    assert kf.parse_labels("b=2,a=1,,c=", "/f") == {"b": "2", "a": "1", "c": ""}
    assert list(kf.parse_labels("z=1,a=2", "/f")) == ["z", "a"]


def test_parse_labels_names_the_bad_item_and_the_fix():
    with pytest.raises(kf.FlagsError) as exc:
        kf.parse_labels("a=1,oops", "/etc/default/kubelet")
    assert str(exc.value) == (
        "/etc/default/kubelet: --node-labels holds 'oops', which is not key=value (the whole value is 'a=1,oops'). "
        "Fix --node-labels in the file (labels are comma-separated key=value pairs), then run again."
    )


@pytest.mark.parametrize(
    ("line", "quote", "value", "tail"),
    [
        ('KUBELET_EXTRA_ARGS="--a=1 --b=2"', '"', "--a=1 --b=2", ""),
        ("KUBELET_EXTRA_ARGS='--a=1'  # note", "'", "--a=1", "  # note"),
        ("KUBELET_EXTRA_ARGS=--a=1 --b=2  ", "", "--a=1 --b=2", "  "),
        ("KUBELET_EXTRA_ARGS=", "", "", ""),
        ('export KUBELET_EXTRA_ARGS="--a=1"', '"', "--a=1", ""),
    ],
)
def test_find_assignment_reads_each_quoting(line, quote, value, tail):
    assignment, earlier = kf.find_assignment([line + "\n"], "KUBELET_EXTRA_ARGS", "/f")
    assert (assignment.quote, assignment.value, assignment.tail, earlier) == (quote, value, tail, [])


def test_find_assignment_ignores_comments_and_similar_names():
    lines = ["# KUBELET_EXTRA_ARGS=--old\n", "MY_KUBELET_EXTRA_ARGS=--x\n", "KUBELET_EXTRA_ARGS_2=--y\n"]
    assert kf.find_assignment(lines, "KUBELET_EXTRA_ARGS", "/f") == (None, [])


# ---------------------------------------------------------------- the module: adding, replacing, removing


def test_adds_flags_to_kubeadm_default_file_in_double_quotes(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, DEBIAN_DEFAULT)
    res = _run(path, flags={"--config-dir": "/etc/kubernetes/kubelet.conf.d", "v": 2})
    assert not res.failed, res.result
    assert res.result["changed"] is True
    assert path.read_text() == "KUBELET_EXTRA_ARGS='--config-dir=/etc/kubernetes/kubelet.conf.d --v=2'\n"
    assert res.result["flags"] == {"config-dir": "/etc/kubernetes/kubelet.conf.d", "v": "2"}


def test_replaces_flags_in_place_in_both_forms_and_keeps_the_others_untouched(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, SYSCONFIG)
    res = _run(path, flags={"cgroup-driver": "systemd", "fail-swap-on": True})
    assert not res.failed, res.result
    assert _line(path) == (
        "KUBELET_EXTRA_ARGS='--v=2 --node-labels a=1,b=2 --cgroup-driver=systemd --fail-swap-on=true'"
    )


def test_removes_flags_with_their_values_in_every_occurrence(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, 'KUBELET_EXTRA_ARGS="--cgroup-driver cgroupfs --v=2 --cgroup-driver=systemd --x"\n')
    res = _run(path, flags_absent=["--cgroup-driver", "x"])
    assert not res.failed, res.result
    assert path.read_text() == "KUBELET_EXTRA_ARGS='--v=2'\n"


def test_duplicated_flag_is_folded_into_the_first_place(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, 'KUBELET_EXTRA_ARGS="--max-pods=10 --v=2 --max-pods 20"\n')
    res = _run(path, flags={"max-pods": 64})
    assert not res.failed, res.result
    assert path.read_text() == "KUBELET_EXTRA_ARGS='--max-pods=64 --v=2'\n"


def test_null_value_writes_a_bare_flag_and_false_is_lowercase(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, DEBIAN_DEFAULT)
    res = _run(path, flags={"bare": None, "fail-swap-on": False})
    assert not res.failed, res.result
    assert path.read_text() == "KUBELET_EXTRA_ARGS='--bare --fail-swap-on=false'\n"
    assert res.result["flags"] == {"bare": None, "fail-swap-on": "false"}


def test_other_lines_are_kept_byte_for_byte(tmp_path):
    path = tmp_path / "kubelet"
    text = "# comment with KUBELET_EXTRA_ARGS=--nope\r\nKUBELET_EXTRA_ARGS='--v=2'\r\n  INDENTED=x   \nLAST=no-newline"
    _write(path, text)
    res = _run(path, flags={"v": "4"})
    assert not res.failed, res.result
    assert path.read_bytes() == (
        b"# comment with KUBELET_EXTRA_ARGS=--nope\r\nKUBELET_EXTRA_ARGS='--v=4'\r\n  INDENTED=x   \nLAST=no-newline"
    )


def test_an_edited_line_is_always_written_in_single_quotes(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, "KUBELET_EXTRA_ARGS=--v=2\n")
    assert not _run(path, flags={"v": "3"}).failed
    assert path.read_text() == "KUBELET_EXTRA_ARGS='--v=3'\n"
    assert not _run(path, flags={"max-pods": "64"}).failed
    assert path.read_text() == "KUBELET_EXTRA_ARGS='--v=3 --max-pods=64'\n"


def test_export_prefix_and_trailing_comment_are_kept(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, 'export KUBELET_EXTRA_ARGS="--v=2" # set by ops\n')
    assert not _run(path, flags={"v": "5"}).failed
    assert path.read_text() == "export KUBELET_EXTRA_ARGS='--v=5' # set by ops\n"


def test_missing_line_is_appended_after_a_file_without_final_newline(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, "FOO=bar")
    assert not _run(path, flags={"v": "2"}).failed
    assert path.read_text() == "FOO=bar\nKUBELET_EXTRA_ARGS='--v=2'\n"


def test_missing_file_is_created_with_mode_0644(tmp_path):
    path = tmp_path / "kubelet"
    res = _run(path, node_labels={"nvidia.com/gpu.present": True})
    assert not res.failed, res.result
    assert path.read_text() == "KUBELET_EXTRA_ARGS='--node-labels=nvidia.com/gpu.present=true'\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644


def test_missing_file_with_create_false_fails_and_creates_nothing(tmp_path):
    path = tmp_path / "kubelet"
    res = _run(path, flags={"v": "2"}, create=False)
    assert res.failed
    assert res.result["msg"] == f"{path} does not exist and create is false. Create the file, or set create: true."
    assert _files(tmp_path) == []


def test_missing_file_with_only_removals_is_not_an_error(tmp_path):
    path = tmp_path / "kubelet"
    res = _run(path, flags_absent=["v"], node_labels_absent=["a"], create=False)
    assert not res.failed, res.result
    assert res.result["changed"] is False
    assert _files(tmp_path) == []


def test_last_assignment_is_edited_and_the_earlier_ones_are_named(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, 'KUBELET_EXTRA_ARGS="--v=1"\nKUBELET_EXTRA_ARGS="--v=2"\n')
    res = _run(path, flags={"max-pods": "64"})
    assert not res.failed, res.result
    assert path.read_text() == "KUBELET_EXTRA_ARGS=\"--v=1\"\nKUBELET_EXTRA_ARGS='--v=2 --max-pods=64'\n"
    computed = kf.compute(path.read_text(), "/f", "KUBELET_EXTRA_ARGS", {"v": "3"}, [], {}, [])
    assert computed["warnings"] == [
        "/f assigns KUBELET_EXTRA_ARGS more than once (lines 1, 2); systemd uses the last one (line 2), so only "
        "that one is edited. Remove the earlier ones to avoid confusion."
    ]


def test_variable_option_edits_another_variable(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, 'KUBELET_ARGS="--v=2"\nKUBELET_EXTRA_ARGS="--x=1"\n')
    assert not _run(path, variable="KUBELET_ARGS", flags={"v": "3"}).failed
    assert path.read_text() == "KUBELET_ARGS='--v=3'\nKUBELET_EXTRA_ARGS=\"--x=1\"\n"


# ---------------------------------------------------------------- node labels as a map


def test_labels_are_merged_as_a_map_in_place_keeping_order(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, SYSCONFIG)
    res = _run(path, node_labels={"b": "20", "nvidia.com/gpu.present": "true"})
    assert not res.failed, res.result
    assert _line(path) == (
        "KUBELET_EXTRA_ARGS='--v=2 --node-labels=a=1,b=20,nvidia.com/gpu.present=true "
        "--cgroup-driver cgroupfs --fail-swap-on=false'"
    )
    assert res.result["node_labels"] == {"a": "1", "b": "20", "nvidia.com/gpu.present": "true"}


def test_several_node_labels_flags_are_folded_into_the_first(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, 'KUBELET_EXTRA_ARGS="--node-labels=a=1 --v=2 --node-labels=a=3,b=2"\n')
    res = _run(path, node_labels={"c": "4"})
    assert not res.failed, res.result
    assert path.read_text() == "KUBELET_EXTRA_ARGS='--node-labels=a=3,b=2,c=4 --v=2'\n"


def test_labels_are_removed_and_the_last_one_removes_the_flag(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, 'KUBELET_EXTRA_ARGS="--v=2 --node-labels=a=1,b=2"\n')
    assert not _run(path, node_labels_absent=["a"]).failed
    assert path.read_text() == "KUBELET_EXTRA_ARGS='--v=2 --node-labels=b=2'\n"
    res = _run(path, node_labels_absent=["b", "not-there"])
    assert not res.failed, res.result
    assert path.read_text() == "KUBELET_EXTRA_ARGS='--v=2'\n"
    assert res.result["node_labels"] == {}


def test_labels_already_right_in_space_form_are_left_alone(tmp_path):
    path = tmp_path / "kubelet"
    before = _write(path, SYSCONFIG)
    res = _run(path, node_labels={"a": 1}, flags={"v": "2"}, flags_absent=["not-there"])
    assert not res.failed, res.result
    assert res.result["changed"] is False
    assert path.read_bytes() == before


# ---------------------------------------------------------------- idempotence, check mode, diff, backup, validate


def test_second_run_changes_nothing_byte_for_byte(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, SYSCONFIG)
    args = dict(
        flags={"config-dir": "/etc/kubernetes/kubelet.conf.d"},
        flags_absent=["cgroup-driver"],
        node_labels={"nvidia.com/gpu.present": "true"},
        node_labels_absent=["a"],
    )
    assert _run(path, **args).result["changed"] is True
    after_first = path.read_bytes()
    mtime = os.stat(path).st_mtime_ns
    second = _run(path, **args)
    assert second.result["changed"] is False
    assert path.read_bytes() == after_first
    assert os.stat(path).st_mtime_ns == mtime


def test_check_mode_reports_the_change_with_a_diff_and_writes_nothing(tmp_path):
    path = tmp_path / "kubelet"
    before = _write(path, DEBIAN_DEFAULT)
    res = _run(path, check_mode=True, diff=True, flags={"v": "2"})
    assert not res.failed, res.result
    assert res.result["changed"] is True
    assert res.result["diff"] == {
        "before": "KUBELET_EXTRA_ARGS=\n",
        "after": "KUBELET_EXTRA_ARGS='--v=2'\n",
        "before_header": f"{path} (before)",
        "after_header": f"{path} (after)",
    }
    assert res.result["extra_args"] == "--v=2"
    assert path.read_bytes() == before
    assert _files(tmp_path) == ["kubelet"]


def test_check_mode_on_a_missing_file_creates_nothing(tmp_path):
    path = tmp_path / "kubelet"
    res = _run(path, check_mode=True, flags={"v": "2"})
    assert res.result["changed"] is True
    assert _files(tmp_path) == []


def test_backup_keeps_the_old_content_in_the_backup_tree(tmp_path, backup_root):
    path = tmp_path / "kubelet"
    before = _write(path, DEBIAN_DEFAULT)
    res = _run(path, backup=True, flags={"v": "2"})
    assert not res.failed, res.result
    backup = res.result["backup_file"]
    assert Path(backup).read_bytes() == before
    assert os.path.dirname(backup) == f"{backup_root}{tmp_path}"
    assert sorted(_files(tmp_path)) == ["kubelet"]


def test_failed_validation_leaves_the_file_unchanged_and_no_temp_file(tmp_path):
    path = tmp_path / "kubelet"
    before = _write(path, DEBIAN_DEFAULT)
    res = _run(path, flags={"v": "2"}, validate="/bin/sh -c 'echo broken >&2; exit 3' %s")
    assert res.failed
    assert res.result["msg"].startswith(f"the new {path} failed validation: ")
    assert "exited with status 3: broken." in res.result["msg"]
    assert path.read_bytes() == before
    assert _files(tmp_path) == ["kubelet"]


def test_passing_validation_writes_the_file(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, DEBIAN_DEFAULT)
    res = _run(path, flags={"v": "2"}, validate="/bin/sh -n %s")
    assert not res.failed, res.result
    assert path.read_text() == "KUBELET_EXTRA_ARGS='--v=2'\n"


def test_validate_without_placeholder_is_refused(tmp_path):
    res = _run(tmp_path / "kubelet", flags={"v": "2"}, validate="/bin/true")
    assert res.failed
    assert res.result["msg"] == "validate must contain %s (the candidate file's path), got: /bin/true"


def test_mode_is_applied_to_an_existing_file(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, DEBIAN_DEFAULT)
    os.chmod(path, 0o600)
    res = _run(path, mode="0644")
    assert res.result["changed"] is True
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644


# ---------------------------------------------------------------- bad file content: precise messages, file unchanged


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'KUBELET_EXTRA_ARGS="--v=2\n',
            '{path} line 1: the KUBELET_EXTRA_ARGS value opens a " quote that is not closed on the same line. '
            "Put the whole value on one line, then run again.",
        ),
        (
            "A=1\nKUBELET_EXTRA_ARGS=--v=2 \\\n",
            "{path} line 2: the KUBELET_EXTRA_ARGS value continues on the next line (trailing backslash), which is "
            "not supported. Put the whole value on one line, then run again.",
        ),
        (
            'KUBELET_EXTRA_ARGS="--a=\\"x\\""\n',
            "{path} line 1: the KUBELET_EXTRA_ARGS value contains a backslash; escapes are not supported. "
            "Remove the backslash (kubelet flags do not need one), then run again.",
        ),
        (
            'KUBELET_EXTRA_ARGS="--v=2" --x\n',
            "{path} line 1: there is text after the closing quote of KUBELET_EXTRA_ARGS ('--x'). "
            "Move it inside the quotes or onto its own line, then run again.",
        ),
        (
            "KUBELET_EXTRA_ARGS=--node-labels='a=1'\n",
            "{path} line 1: the unquoted KUBELET_EXTRA_ARGS value contains quotes or backslashes. "
            'Quote the whole value instead (KUBELET_EXTRA_ARGS="--flag=value ..."), then run again.',
        ),
        (
            'KUBELET_EXTRA_ARGS="--node-labels=a=1,broken"\n',
            "{path}: --node-labels holds 'broken', which is not key=value (the whole value is 'a=1,broken'). "
            "Fix --node-labels in the file (labels are comma-separated key=value pairs), then run again.",
        ),
    ],
)
def test_bad_file_content_fails_with_a_precise_message(tmp_path, text, message):
    path = tmp_path / "kubelet"
    before = _write(path, text)
    res = _run(path, flags={"v": "3"}, node_labels={"x": "y"})
    assert res.failed
    assert res.result["msg"] == message.format(path=path)
    assert path.read_bytes() == before


def test_non_utf8_file_is_refused(tmp_path):
    path = tmp_path / "kubelet"
    path.write_bytes(b"KUBELET_EXTRA_ARGS=\xff\n")
    res = _run(path, flags={"v": "3"})
    assert res.failed
    assert res.result["msg"] == (
        f"{path} is not UTF-8 text (byte 19: invalid start byte). Fix the file's encoding, then run again."
    )


def test_directory_path_is_refused(tmp_path):
    res = _run(tmp_path, flags={"v": "3"})
    assert res.failed
    assert res.result["msg"] == f"{tmp_path} is a directory, not a file. Set path to the kubelet's environment file."


def test_labels_in_the_file_are_not_judged_when_no_label_is_managed(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, 'KUBELET_EXTRA_ARGS="--node-labels=broken --v=2"\n')
    res = _run(path, flags={"v": "3"})
    assert not res.failed, res.result
    assert path.read_text() == "KUBELET_EXTRA_ARGS='--node-labels=broken --v=3'\n"
    assert res.result["node_labels"] == {}


# ---------------------------------------------------------------- bad arguments: precise messages


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"flags": {"node-labels": "a=1"}},
            "flags: set labels with the node_labels option, not as a node-labels flag.",
        ),
        (
            {"flags_absent": ["--node-labels"]},
            "flags_absent: remove labels with the node_labels_absent option, not the whole flag.",
        ),
        (
            {"flags": {"v": "2"}, "flags_absent": ["--v"]},
            "'v' is both in flags and in flags_absent. Keep it in one of them.",
        ),
        ({"flags": {"bad name": "x"}}, "flags: 'bad name' is not a flag name (letters, digits, '-', '_' and '.')."),
        ({"flags": {"v": "2", "--v": "3"}}, "flags: 'v' is given twice (with and without dashes). Keep one."),
        (
            {"flags": {"node-ip": "10.0.0.1 10.0.0.2"}},
            "flags: the value of 'node-ip' ('10.0.0.1 10.0.0.2') contains whitespace, a quote or a backslash, which "
            "cannot be passed through KUBELET_EXTRA_ARGS. Use a value without them.",
        ),
        ({"flags": {"x": [1]}}, "flags: the value of 'x' is a list; use a string, number, boolean or null."),
        (
            {"node_labels": {"node-role.kubernetes.io/gpu": ""}},
            "node_labels: label key 'node-role.kubernetes.io/gpu' is in the reserved node-role.kubernetes.io "
            "namespace, and the kubelet refuses to start with it in --node-labels (only node.kubernetes.io/..., "
            "kubelet.kubernetes.io/... and the well-known topology, os, arch and instance-type labels are allowed); "
            "use your own prefix (e.g. example.com/role), or set the label through the API (kubectl label node).",
        ),
        (
            {"node_labels": {"Example.com/x": "1"}},
            "node_labels: label key 'Example.com/x': the prefix 'Example.com' must be a DNS subdomain of at most 253 "
            "characters: lowercase letters, digits, '-' and '.', each dot-separated part starting and ending with a "
            "letter or digit.",
        ),
        (
            {"node_labels": {"a": "x" * 64}},
            f"node_labels: label value '{'x' * 64}' is not valid: it must be empty or at most 63 characters: letters, "
            "digits, '-', '_' and '.', starting and ending with a letter or digit.",
        ),
        (
            {"node_labels": {"a": "1"}, "node_labels_absent": ["a"]},
            "node_labels: label 'a' is both in node_labels and in node_labels_absent; keep it in one of them.",
        ),
        (
            {"variable": "KUBELET-ARGS"},
            "variable must be a shell variable name (letters, digits, '_'), got 'KUBELET-ARGS'",
        ),
    ],
)
def test_bad_arguments_fail_with_a_precise_message_and_touch_nothing(tmp_path, args, message):
    path = tmp_path / "kubelet"
    before = _write(path, DEBIAN_DEFAULT)
    res = _run(path, **args)
    assert res.failed
    assert res.result["msg"] == message
    assert path.read_bytes() == before


def test_check_result_catches_a_rendering_that_does_not_read_back():
    with pytest.raises(kf.FlagsError) as exc:
        kf.check_result('KUBELET_EXTRA_ARGS="--v=1"\n', "/f", "KUBELET_EXTRA_ARGS", {"v": "2"}, [], None)
    assert str(exc.value).startswith("internal error: the new /f would not read back as intended for v.")


def test_a_symlinked_environment_file_stays_a_link_and_its_target_gets_the_flags(tmp_path):
    real = tmp_path / "real-kubelet"
    before = _write(real, DEBIAN_DEFAULT)
    real.chmod(0o640)
    link = tmp_path / "kubelet"
    link.symlink_to(real)
    res = _run(link, flags={"v": "2"}, backup=True)
    assert not res.failed, res.result
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert "--v=2" in _line(real)
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert Path(res.result["backup_file"]).read_bytes() == before
    assert sorted(_files(tmp_path)) == ["kubelet", "real-kubelet"]


# ---------------------------------------------------------------- what a shell and systemd read


def _sourced(path) -> list[str]:
    """The words a shell that sources the file gives for $KUBELET_EXTRA_ARGS (as systemd splits it: at whitespace)."""
    out = subprocess.run(
        ["bash", "-c", 'set -a; . "$1"; printf "%s\\n" $KUBELET_EXTRA_ARGS', "bash", str(path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=path.parent,
    )
    return out.stdout.splitlines()


def test_a_byte_order_mark_is_read_and_the_admins_line_is_edited_not_shadowed(tmp_path):
    path = tmp_path / "kubelet"
    path.write_bytes(b'\xef\xbb\xbfKUBELET_EXTRA_ARGS="--max-pods=200 --node-ip=10.0.0.5"\nOTHER=1\n')
    res = _run(path, flags={"v": "2"})
    assert not res.failed, res.result
    assert path.read_bytes() == b"KUBELET_EXTRA_ARGS='--max-pods=200 --node-ip=10.0.0.5 --v=2'\nOTHER=1\n"
    assert res.result["flags"] == {"max-pods": "200", "node-ip": "10.0.0.5", "v": "2"}
    assert _sourced(path) == ["--max-pods=200", "--node-ip=10.0.0.5", "--v=2"]
    assert _run(path, flags={"v": "2"}).result["changed"] is False


def test_shell_syntax_in_flag_values_is_quoted_so_a_sourcing_shell_runs_nothing(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, 'KUBELET_EXTRA_ARGS="--v=2"\n')
    flags = {
        "eviction-hard": "memory.available<100Mi",
        "provider-id": "x$(touch${IFS}pwned-1)`touch${IFS}pwned-2`;touch${IFS}pwned-3>|&",
        "node-ip": "$HOME",
    }
    res = _run(path, flags=flags)
    assert not res.failed, res.result
    assert path.read_text() == (
        "KUBELET_EXTRA_ARGS='--v=2 --eviction-hard=memory.available<100Mi "
        "--provider-id=x$(touch${IFS}pwned-1)`touch${IFS}pwned-2`;touch${IFS}pwned-3>|& --node-ip=$HOME'\n"
    )
    assert _sourced(path) == ["--v=2", *(f"--{name}={value}" for name, value in flags.items())]
    assert sorted(_files(tmp_path)) == ["kubelet"], "the shell created no file: nothing was run"


def test_an_unquoted_line_with_a_redirection_is_rewritten_quoted(tmp_path):
    path = tmp_path / "kubelet"
    _write(path, "KUBELET_EXTRA_ARGS=--eviction-hard=memory.available<100Mi\n")
    res = _run(path, flags={"v": "2"})
    assert not res.failed, res.result
    assert path.read_text() == "KUBELET_EXTRA_ARGS='--eviction-hard=memory.available<100Mi --v=2'\n"
    assert _sourced(path) == ["--eviction-hard=memory.available<100Mi", "--v=2"]


@pytest.mark.parametrize(
    ("line", "flag", "char"),
    [
        ("KUBELET_EXTRA_ARGS='--node-ip=\"10.0.0.5\"'\n", "the flag --node-ip ('--node-ip=\"10.0.0.5\"')", "'\"'"),
        ('KUBELET_EXTRA_ARGS="--provider-id=it\'s"\n', 'the flag --provider-id ("--provider-id=it\'s")', '"\'"'),
        ("KUBELET_EXTRA_ARGS='--x=a\\b'\n", "the flag --x ('--x=a\\\\b')", "'\\\\'"),
        ("KUBELET_EXTRA_ARGS='--x=a\x01b'\n", "the flag --x ('--x=a\\x01b')", "'\\x01'"),
    ],
)
def test_a_flag_that_cannot_be_quoted_for_both_readers_is_refused_by_name(tmp_path, line, flag, char):
    path = tmp_path / "kubelet"
    before = _write(path, line)
    res = _run(path, flags={"v": "2"}, backup=True)
    assert res.failed
    assert res.result["msg"] == (
        f"{path}: {flag} holds {char}, which cannot be quoted so that a shell that sources the file and systemd's "
        f"EnvironmentFile both read the same flags. {path} was left unchanged; remove that character from the flag "
        "(in the file or in the task), then run again."
    )
    assert path.read_bytes() == before
    assert _files(tmp_path) == ["kubelet"]


@pytest.mark.parametrize("value", ["a\x01b", "a\x7fb", "a\ufeffb"])
def test_control_characters_in_a_task_flag_are_refused(tmp_path, value):
    path = tmp_path / "kubelet"
    before = _write(path, DEBIAN_DEFAULT)
    res = _run(path, flags={"node-ip": value})
    assert res.failed
    assert res.result["msg"].startswith(f"flags: the value of 'node-ip' ({value!r}) contains whitespace, a quote")
    assert path.read_bytes() == before
