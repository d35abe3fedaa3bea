"""plugins/filter/fuse.py: the fuse role's one read of the node decides whether its changing tasks run
(roles/fuse/tasks/read.yml, tasks/configure.yml). The read's own script (vars/main.yml) runs here on files made in a
temporary directory, and the filter reads what it printed."""

from __future__ import annotations

import hashlib
import os
import subprocess

import pytest
import yaml
from conftest import ROOT, load_module

fuse = load_module("fuse", subdir="plugins/filter")
VARS = yaml.safe_load((ROOT / "roles/fuse/vars/main.yml").read_text())
RULE = 'KERNEL=="fuse", MODE="0666"\n'
ROOT_OWNED = os.getuid() == 0


def read(tmp_path, packages_manager="", package_names=("fuse3", "crun"), tail=()):
    """The read task's command as the role runs it, on paths under ``tmp_path``."""
    paths = [str(tmp_path / name) for name in ("modules-load.d", "modules-load.d/fuse.conf", "fuse", "99-fuse.rules")]
    paths.append(str(tmp_path / "fuse.conf"))
    argv = ["/bin/sh", "-c", VARS["__fuse_read_script"], "fuse-read", str(tmp_path / "rules.d"),
            str(tmp_path / "fuse.conf"), packages_manager, *paths, "--", *package_names, "--", *tail]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, check=True)
    return {"stdout_lines": result.stdout.splitlines(), "cmd": argv}


def wanted(tmp_path, allow_other=False, packages=()):
    return {
        "packages": list(packages),
        "files": [
            {"path": str(tmp_path / "modules-load.d"), "mode": "0755", "root": True},
            {"path": str(tmp_path / "modules-load.d/fuse.conf"), "mode": "0644", "root": True, "content": "fuse\n"},
            {"path": str(tmp_path / "99-fuse.rules"), "mode": "0644", "root": True, "content": RULE},
        ],
        "conf": {"path": str(tmp_path / "fuse.conf"), "allow_other": allow_other},
    }


@pytest.fixture
def node(tmp_path):
    """A node as the role leaves it: every file there, with its mode and text; fuse.conf with the line off."""
    (tmp_path / "modules-load.d").mkdir(mode=0o755)
    (tmp_path / "modules-load.d").chmod(0o755)
    (tmp_path / "modules-load.d/fuse.conf").write_text("fuse\n")
    (tmp_path / "99-fuse.rules").write_text(RULE)
    (tmp_path / "fuse.conf").write_text("# mount_max = 1000\n#user_allow_other\n")
    for name in ("modules-load.d/fuse.conf", "99-fuse.rules", "fuse.conf"):
        (tmp_path / name).chmod(0o644)
    (tmp_path / "rules.d").mkdir()
    return tmp_path


@pytest.mark.skipif(not ROOT_OWNED, reason="the role's files are root's: the read is compared as root")
def test_a_node_as_the_role_leaves_it_has_nothing_to_change(node):
    result = read(node)
    assert "udev-rules-dir" in result["stdout_lines"]
    assert fuse.fuse_differences(result, wanted(node)) == []


@pytest.mark.skipif(not ROOT_OWNED, reason="the role's files are root's: the read is compared as root")
@pytest.mark.parametrize(
    ("change", "allow_other", "difference"),
    [
        (lambda n: (n / "modules-load.d/fuse.conf").unlink(), False, "modules-load.d/fuse.conf is missing"),
        (lambda n: (n / "99-fuse.rules").write_text('KERNEL=="fuse", MODE="0600"\n'), False, "has other content"),
        (lambda n: (n / "99-fuse.rules").chmod(0o600), False, "99-fuse.rules has mode 0600"),
        (lambda n: (n / "modules-load.d").chmod(0o700), False, "modules-load.d has mode 0700"),
        (lambda n: os.chown(n / "99-fuse.rules", 1000, 1000), False, "99-fuse.rules is not owned by root"),
        (lambda n: (n / "fuse.conf").write_text("user_allow_other\n"), False, "fuse.conf allows user_allow_other"),
        (lambda n: (n / "fuse.conf").write_text(" user_allow_other \t\n"), False, "fuse.conf allows user_allow_other"),
        (lambda n: None, True, "fuse.conf does not allow user_allow_other"),
        (lambda n: (n / "fuse.conf").write_text("user_allow_other\n#user_allow_other\n"), True, "does not allow"),
        (lambda n: (n / "fuse.conf").unlink(), True, "fuse.conf does not allow user_allow_other"),
    ],
)
def test_each_difference_runs_the_changing_tasks(node, change, allow_other, difference):
    change(node)
    found = fuse.fuse_differences(read(node), wanted(node, allow_other=allow_other))
    assert len(found) == 1 and difference in found[0], found


@pytest.mark.skipif(not ROOT_OWNED, reason="the role's files are root's: the read is compared as root")
def test_user_allow_other_on_is_kept_as_lineinfile_leaves_it(node):
    (node / "fuse.conf").write_text("#user_allow_other\nuser_allow_other\n")
    assert fuse.fuse_differences(read(node), wanted(node, allow_other=True)) == []
    (node / "fuse.conf").chmod(0o600)
    assert fuse.fuse_differences(read(node), wanted(node, allow_other=True)) == [f"{node}/fuse.conf has mode 0600"]


def test_packages_are_read_from_dpkg_and_rpm_lines():
    lines = ["installed fuse3 ii", "installed crun rc", "package crun is not installed", "stat x", "Candidate: 1.9"]
    asked = {"packages": ["fuse3", "crun"], "files": [], "conf": {"path": "/etc/fuse.conf", "allow_other": False}}
    assert fuse.fuse_differences({"stdout_lines": lines}, asked) == ["package crun is not installed"]
    assert fuse.fuse_differences({"stdout_lines": ["installed crun hi", *lines]}, asked) == []


def test_the_read_prints_the_package_query_last_and_the_device_mode(node):
    """The crun query's words end the command (package_candidates reads its last word); a device has no SHA-1."""
    result = read(node, tail=["echo", "Candidate: 1.14.1-1", "crun"])
    assert result["cmd"][-1] == "crun" and "Candidate: 1.14.1-1 crun" in result["stdout_lines"]
    assert result["stdout_lines"][-1] == "udev-rules-dir"
    sha1 = hashlib.sha1(RULE.encode()).hexdigest()
    assert f"stat 644 {os.getuid()} {os.getgid()} {sha1} {node}/99-fuse.rules" in result["stdout_lines"]
    assert f"stat 755 {os.getuid()} {os.getgid()} - {node}/modules-load.d" in result["stdout_lines"]


def test_a_read_without_its_lines_is_refused():
    with pytest.raises(Exception, match="registered result of the read task"):
        fuse.fuse_differences({"rc": 0}, {"conf": {}})
