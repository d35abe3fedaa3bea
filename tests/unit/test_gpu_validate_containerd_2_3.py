"""The doctor on containerd 2.3 (issue 36): the "containerd: drop-in versions" row, and the containerd rows reading
what containerd 2.3 prints.

FakeNode (conftest.py) answers commands and file reads; where it matters, the real containerd 2.3.4 of the
upstream directory (fixture upstream_dir) is the oracle: the row fails exactly where that containerd refuses the
files, and the rows read its real `config dump`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import tomlkit
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import config as ct
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import tables as containerd_tables
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import logic as gpu_validate_logic
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.containerd import (
    config_versions,
    containerd_state,
    containerd_versions_row,
    cri_plugins,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import Node
from conftest import GPU_NODE, FakeNode, params, row

ROOT = "/etc/containerd/config.toml"
CONFD = "/etc/containerd/conf.d"
CHECK = "containerd: drop-in versions"
NVIDIA = {"name": "nvidia", "path": "/usr/bin/nvidia-container-runtime"}


def _node(containerd_version=None) -> dict:
    return {**GPU_NODE, "runtimes": {"containerd": {"installed": True, "running": True, "version": containerd_version}}}


def _row(files: dict, containerd_version=None, root=ROOT) -> dict:
    """The row on a fake node holding ``files`` (the conf.d ones found by glob, as on the node)."""
    fake = FakeNode(files=files, mtimes={path: 1.0 for path in files})
    return containerd_versions_row(_node(containerd_version), {"versions": config_versions(root, fake)})


V2_ROOT = f"version = 2\nimports = ['{CONFD}/*.toml']\n"
V4_DROPIN = "version = 4\n[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = true\n"


def test_a_dropin_above_its_roots_version_fails_and_says_what_containerd_2_3_does():
    files = {ROOT: V2_ROOT, f"{CONFD}/10-a.toml": "version = 2\n", f"{CONFD}/99-nvidia.toml": V4_DROPIN}
    assert _row(files, "2.3.4") == row(
        CHECK,
        "fail",
        f"{CONFD}/99-nvidia.toml has config version 4 on disk, above 2 of {ROOT} that imports it: containerd 2.3.4"
        " refuses to start (drop-in config version 4 higher than root config version 2)",
        f"Write version = 2 in {CONFD}/99-nvidia.toml with version 2's table names (or migrate {ROOT} with containerd"
        " config migrate), then restart containerd; NVIDIA's toolkit <= 1.19.1 wrote such drop-ins from config"
        " dump's version (NVIDIA/aicr#1688). Upgrade the toolkit, or let site.yml --tags runtime write the runtime"
        " (its drop-in takes the root file's version)",
    )
    older = _row(files, "2.2.7")
    assert older["status"] == "fail"
    assert older["detail"].endswith(
        "containerd 2.3 refuses to start with it; 2.0 to 2.2 merge the files as version 4 and leave the root"
        " file's tables unmigrated (the reason given in containerd commit 21248d00)"
    )
    # the mutation undone: the drop-in at the root's version
    files[f"{CONFD}/99-nvidia.toml"] = V4_DROPIN.replace("version = 4", "version = 2")
    assert _row(files, "2.3.4") == row(
        CHECK, "ok", f"{ROOT}: version 2; its 2 imported file(s) are not above it (on disk)"
    )


def test_the_row_follows_imports_as_containerd_does_relative_nested_and_once():
    files = {
        ROOT: "version = 3\nimports = ['conf.d/*.toml', 'conf.d/*.toml']\n",
        f"{CONFD}/10-a.toml": "version = 3\nimports = ['/opt/extra.toml', '../containerd/config.toml']\n",
        "/opt/extra.toml": "version = 4\n",
    }
    fake = FakeNode(files=files, mtimes={f"{CONFD}/10-a.toml": 1.0})  # /opt/extra.toml: named, not globbed
    versions = config_versions(ROOT, fake)
    assert versions["files"] == [(ROOT, 3), (f"{CONFD}/10-a.toml", 3), ("/opt/extra.toml", 4)]
    result = containerd_versions_row(_node("2.3.4"), {"versions": versions})
    assert result["status"] == "fail" and result["detail"].startswith("/opt/extra.toml has config version 4")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({}, row(CHECK, "skipped", f"{ROOT} does not exist or cannot be read: no drop-ins to compare")),
        ({ROOT: "version = 4\n"}, row(CHECK, "ok", f"{ROOT}: version 4, imports no file")),
        ({ROOT: "oom_score = 0\n"}, row(CHECK, "ok", f"{ROOT}: no version key (1), imports no file")),
        (
            {ROOT: V2_ROOT, f"{CONFD}/99-x.toml": "version = [\n"},
            row(CHECK, "warn", f"{ROOT}: version 2, imports no file; cannot read {CONFD}/99-x.toml"),
        ),
    ],
)
def test_the_row_without_a_conflict(files, expected):
    assert _row(files, "2.3.4") == expected


def test_the_state_reads_the_files_of_the_installers_generated_config():
    generated = "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"
    installer = {
        "name": "k3s",
        "bin_dir": "/var/lib/rancher/k3s/data/current/bin",
        "containerd": {
            "config_regenerated": "agent start",
            "binary": "/var/lib/rancher/k3s/data/current/bin/containerd",
            "config": generated,
            "socket": "/run/k3s/containerd/containerd.sock",
        },
    }
    fake = FakeNode(files={generated: "version = 3\n", ROOT: "version = 2\n"})
    state = containerd_state(params(), {**_node(), "installer": installer}, fake)
    assert state["versions"] == {"root": generated, "files": [(generated, 3)], "unreadable": []}


# --------------------------------------------------------------------------- containerd 2.3.4 itself


@pytest.fixture(scope="module")
def containerd(upstream_dir) -> Path:
    binary = upstream_dir / "containerd" / "bin" / "containerd"
    if not binary.is_file():
        pytest.fail(f"{binary} is missing: see {upstream_dir}/containerd/BUILD.md", pytrace=False)
    return binary


@pytest.mark.parametrize(
    ("root_version", "dropins"),
    [(2, [4]), (2, [2, 3]), (3, [3]), (4, [2, 4]), (None, [3, 4]), (4, [])],
)
def test_the_row_fails_exactly_where_containerd_2_3_refuses_the_files(containerd, tmp_path, root_version, dropins):
    root = tmp_path / "config.toml"
    root.write_text((f"version = {root_version}\n" if root_version else "") + "imports = ['conf.d/*.toml']\n")
    (tmp_path / "conf.d").mkdir()
    for index, version in enumerate(dropins):
        (tmp_path / "conf.d" / f"{index}.toml").write_text(f"version = {version}\n")
    refused = subprocess.run([str(containerd), "--config", str(root), "config", "dump"], capture_output=True, text=True)
    result = containerd_versions_row(_node("2.3.4"), {"versions": config_versions(str(root), Node())})
    assert (refused.returncode != 0) == (result["status"] == "fail"), (refused.stderr, result)
    assert result["status"] in ("ok", "fail"), result
    if refused.returncode:
        words = refused.stderr.strip().rsplit("containerd: ", 1)[-1]
        assert f"({words})" in result["detail"], (words, result["detail"])


def _dump_with_our_dropin(containerd: Path, upstream_dir: Path, tmp_path: Path) -> str:
    """containerd 2.3.4's `config dump` of its own default (version 4) with the drop-in containerd_config writes."""
    text = (upstream_dir / "containerd" / "config-default-v4.toml").read_text()
    text = text.replace("/etc/containerd/conf.d/*.toml", f"{tmp_path}/conf.d/*.toml")
    root, dropin = tmp_path / "config.toml", tmp_path / "conf.d" / "99-nvidia.toml"
    root.write_text(text)
    _root, plan = ct.plan_dropin(text, str(root), None, str(dropin), ct.Request(runtime=NVIDIA, enable_cdi=True), 4)
    dropin.parent.mkdir()
    dropin.write_text(plan.after)
    return subprocess.run(
        [str(containerd), "--config", str(root), "config", "dump"], capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.parametrize("parser", ["tomllib", "the node's own (Python < 3.11)"])
def test_the_rows_read_containerd_2_3s_dump(containerd, upstream_dir, tmp_path, monkeypatch, parser):
    out = _dump_with_our_dropin(containerd, upstream_dir, tmp_path)
    assert tomlkit.parse(out)["version"] == 4
    if parser != "tomllib":
        monkeypatch.setattr(containerd_tables, "tomllib", None)
    fake = FakeNode(commands={("containerd", "config", "dump"): (0, out, "")})
    state = containerd_state(params(), {**_node("2.3.4"), "runtimes": {"containerd": {"running": False}}}, fake)
    assert state["ok"] and state["registered"], state
    assert (state["runtimes"], state["default"]) == (["nvidia", "runc"], "runc")
    assert state["default_entry"] == {"runtime_type": "io.containerd.runc.v2", "binary": ""}
    assert gpu_validate_logic.runtime_config(out)["parsed"] is True


# The real `ctr plugins ls` of containerd 2.3.4 (../shared/upstream, a daemon started once on the build machine with
# its root, state and sockets in a temporary directory, NRI off; the stderr line of cgroup v1's deprecation dropped).
PLUGINS_2_3 = (Path(__file__).resolve().parents[1] / "fixtures" / "containerd" / "ctr-plugins-ls-2.3.4.txt").read_text()


def test_the_cri_row_reads_containerd_2_3s_plugin_list():
    assert cri_plugins((0, PLUGINS_2_3, "")) == {"cri": "ok"}
    runtime_failed = PLUGINS_2_3.replace(
        "io.containerd.cri.v1                      runtime                  linux/amd64    ok",
        "io.containerd.cri.v1                      runtime                  linux/amd64    error",
    )
    assert runtime_failed != PLUGINS_2_3
    assert cri_plugins((0, runtime_failed, "")) == {"cri": "error", "cri_detail": "io.containerd.cri.v1/runtime=error"}
    cri = ("io.containerd.cri.v1 ", "io.containerd.grpc.v1                     cri ")
    without = "\n".join(line for line in PLUGINS_2_3.splitlines() if not line.startswith(cri))
    assert len(without.splitlines()) == len(PLUGINS_2_3.splitlines()) - 3
    assert cri_plugins((0, without, "")) == {"cri": "error", "cri_detail": "no CRI plugin listed"}
