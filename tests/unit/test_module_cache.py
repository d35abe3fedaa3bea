"""The module payload cache of the project's actions (plugins/plugin_utils/payload_cache.py, issue 47): a second run
sends the payload the first built, and builds it again where a source file, the copy or the directory's owner and mode
are not what they were; with the cache off, each run builds its payloads as ansible-core does."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from ansible_collections.gpunode.provisioning.plugins.plugin_utils import payload_cache
from conftest import ROOT, local_playbook_command

CREATED = "ANSIBALLZ: Creating module"
CACHED = "ANSIBALLZ: using cached module"
NODE_FILES = "gpunode.provisioning.plugins.modules.node_files"

PLAYBOOK = """\
- name: One read through role_read (node_files)
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Read the file
      gpunode.provisioning.role_read:
        reads:
          - module: ansible.builtin.stat
            args: {path: "{{ target }}"}
      register: read
      check_mode: false
    - name: The read says what stat says
      ansible.builtin.assert:
        that: read.stat.exists and read.stat.size == 6
"""


def _run(tmp_path: Path, cache) -> str:
    """The playbook once, with ansible-core's debug log (which says whether it built node_files' payload)."""
    (tmp_path / "target").write_text("hello\n")
    playbook = tmp_path / "read.yml"
    playbook.write_text(PLAYBOOK)
    env = {k: v for k, v in os.environ.items() if k not in ("GPUNODE_PAYLOAD_CACHE", "PYTHONPATH")}
    env.update({"ANSIBLE_DEBUG": "1", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "local"), payload_cache.ENV: str(cache)})
    result = subprocess.run(
        local_playbook_command(playbook, "-c", "local", "-e", f"target={tmp_path / 'target'}"),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


def _built(output: str) -> list[str]:
    """How node_files' payload came: "built" or "cached", in order."""
    return [
        "built" if CREATED in line else "cached"
        for line in output.splitlines()
        if (CREATED in line or CACHED in line) and NODE_FILES in line
    ] or ["built" for line in output.splitlines() if CREATED in line]


def _entry(cache: Path) -> tuple[Path, dict]:
    (meta,) = cache.glob("*.json")
    return meta, json.loads(meta.read_text())


def test_the_second_run_sends_the_payload_the_first_built(tmp_path):
    cache = tmp_path / "cache"
    first = _run(tmp_path, cache)
    assert CREATED in first
    _meta, recorded = _entry(cache)
    assert recorded["fqn"] == f"ansible_collections.{NODE_FILES}"
    assert f"ansible_collections/{NODE_FILES.replace('.', '/')}.py" in recorded["sources"]
    assert "ansible/module_utils/basic.py" in recorded["sources"]
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    second = _run(tmp_path, cache)
    assert CREATED not in second, "the second run built node_files' payload again"
    assert CACHED in second


def test_a_changed_source_the_copy_or_a_shared_directory_builds_again(tmp_path):
    cache = tmp_path / "cache"
    _run(tmp_path, cache)
    meta, recorded = _entry(cache)
    # a source file whose bytes are not the recorded ones (as after an edit of a module_util)
    edited = dict(recorded, sources={**recorded["sources"], "ansible/module_utils/basic.py": "0" * 64})
    meta.write_text(json.dumps(edited))
    assert CREATED in _run(tmp_path, cache)
    # stored again (its zip's timestamps are the build's: the payload's own hash may differ)
    assert _entry(cache)[1]["sources"] == recorded["sources"], "the rebuilt payload was not stored again"
    # the copy itself changed
    (payload,) = cache.glob("*.payload")
    payload.write_bytes(payload.read_bytes() + b"x")
    assert CREATED in _run(tmp_path, cache)
    assert CREATED not in _run(tmp_path, cache)
    # a directory others may write to: its files are pickles, never read
    cache.chmod(0o777)
    try:
        assert CREATED in _run(tmp_path, cache)
    finally:
        cache.chmod(0o700)


def test_off_builds_every_time_and_keeps_nothing(tmp_path):
    assert CREATED in _run(tmp_path, "off")
    assert CREATED in _run(tmp_path, "off")
    assert not list(tmp_path.glob("off*"))


def test_default_directory_and_off(monkeypatch):
    monkeypatch.delenv(payload_cache.ENV, raising=False)
    assert payload_cache.cache_dir().parts[-2:] == ("gpunode", "payloads")
    for value in ("off", "0", "OFF", "no"):
        monkeypatch.setenv(payload_cache.ENV, value)
        assert payload_cache.cache_dir() is None


def test_only_ansible_core_and_the_module_collection_are_kept(tmp_path):
    root = tmp_path / "ansible_collections" / "ns" / "coll"
    module = str(root / "plugins" / "modules" / "m.py")
    fqn = "ansible_collections.ns.coll.plugins.modules.m"
    kept = payload_cache.sources_of(
        [
            "ansible/module_utils/basic.py",
            "ansible_collections/__init__.py",
            "ansible_collections/ns/__init__.py",
            "ansible_collections/ns/coll/plugins/module_utils/x.py",
        ],
        fqn,
        module,
    )
    assert kept == {
        "ansible/module_utils/basic.py": os.path.join(payload_cache._ANSIBLE_DIR, "module_utils", "basic.py"),
        "ansible_collections/__init__.py": None,
        "ansible_collections/ns/__init__.py": None,
        "ansible_collections/ns/coll/plugins/module_utils/x.py": str(root / "plugins" / "module_utils" / "x.py"),
    }
    for other in (
        "ansible_collections/other/coll/plugins/module_utils/x.py",
        "ansible_collections/ns/other/plugins/module_utils/x.py",
        "something/else.py",
    ):
        assert payload_cache.sources_of(["ansible/module_utils/basic.py", other], fqn, module) is None
    # a module outside a collection (library/, a role's): nothing is kept
    assert (
        payload_cache.sources_of(["ansible/module_utils/basic.py"], "ansible.legacy.m", str(tmp_path / "m.py")) is None
    )
