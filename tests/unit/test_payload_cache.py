"""The TEST HARNESS payload cache of the test command's ansible runs (molecule/resources/payload_cache,
tests/payload_cache.py): a second run sends the payload the first one built, a changed module_util is a new key, and
without the variable ansible-core builds its payloads as it always does."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

from tests import payload_cache

sys.path.insert(0, str(payload_cache.SITE))
import gpunode_payload_cache  # the harness module, from its own directory

ANSIBLE = Path(sys.executable).parent / "ansible"
CREATED = "ANSIBALLZ: Creating module"
CACHED = "ANSIBALLZ: using cached module"


def _adhoc(tmp_path: Path, env: dict) -> str:
    """One ad-hoc run of a module of this collection that imports its module_utils (kubelet_flags, check mode: it
    writes nothing), with ansible-core's debug log, which says whether it built the payload or took it."""
    flags = tmp_path / "kubelet"
    flags.write_text('KUBELET_EXTRA_ARGS="--v=2"\n')
    env = {**env, "ANSIBLE_DEBUG": "1", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "local")}
    result = subprocess.run(
        [
            str(ANSIBLE),
            *("localhost", "-i", "localhost,", "-c", "local", "--check"),
            *("-e", f"ansible_python_interpreter={sys.executable}"),
            *("-m", "gpunode.provisioning.kubelet_flags", "-a", f"path={flags} flags={{}}"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


def _payload_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if CREATED in line or CACHED in line]


def test_the_second_run_sends_the_payload_the_first_built(tmp_path):
    env = payload_cache.environment({**os.environ, payload_cache.VARIABLE: str(tmp_path / "cache")})
    first = _adhoc(tmp_path, env)
    second = _adhoc(tmp_path, env)
    assert CREATED in first, _payload_lines(first)
    assert CACHED in second and CREATED not in second, _payload_lines(second)
    # in the shared directory, not in the run's own temporary one
    assert any(line.split(CACHED + ": ")[1].startswith(str(tmp_path / "cache")) for line in _payload_lines(second))


def test_without_the_variable_each_run_builds_its_payloads(tmp_path):
    env = payload_cache.environment(dict(os.environ))
    env.pop(payload_cache.VARIABLE)
    for _ in range(2):
        output = _adhoc(tmp_path, env)
        assert CREATED in output, _payload_lines(output)
        assert str(payload_cache.cache_dir()) not in output


def _checkout(root: Path) -> Path:
    (root / "plugins" / "modules").mkdir(parents=True)
    (root / "plugins" / "module_utils" / "subject").mkdir(parents=True)
    (root / "plugins" / "module_utils" / "subject" / "one.py").write_text("VALUE = 1\n")
    module = root / "plugins" / "modules" / "thing.py"
    module.write_text("from ansible_collections.x.y.plugins.module_utils.subject.one import VALUE\n")
    return module


def test_a_changed_module_util_or_module_is_a_new_key(tmp_path):
    module = _checkout(tmp_path / "a")
    data = module.read_bytes()
    key = gpunode_payload_cache.payload_key(str(module), data)
    gpunode_payload_cache._TREES.clear()
    assert gpunode_payload_cache.payload_key(str(module), data) == key
    (tmp_path / "a" / "plugins" / "module_utils" / "subject" / "one.py").write_text("VALUE = 2\n")
    gpunode_payload_cache._TREES.clear()
    changed_util = gpunode_payload_cache.payload_key(str(module), data)
    assert changed_util != key
    assert gpunode_payload_cache.payload_key(str(module), data + b"\n") != changed_util
    # the same files in another checkout: its payload names other source paths, so another key
    other = _checkout(tmp_path / "b")
    (tmp_path / "b" / "plugins" / "module_utils" / "subject" / "one.py").write_text("VALUE = 2\n")
    assert gpunode_payload_cache.payload_key(str(other), data) != changed_util


def test_prune_removes_only_the_keys_no_run_used_for_days(tmp_path):
    env = {payload_cache.VARIABLE: str(tmp_path)}
    old, used = tmp_path / "old", tmp_path / "used"
    old.mkdir()
    used.mkdir()
    days_ago = time.time() - (payload_cache.KEEP_DAYS + 1) * 86400
    os.utime(old, (days_ago, days_ago))
    assert payload_cache.prune(env) == [old]
    assert used.is_dir() and not old.exists()


@pytest.mark.parametrize("argv0", ["ansible-doc", "ansible-galaxy", "python3", "pytest"])
def test_only_the_commands_that_build_payloads_take_the_hook(monkeypatch, argv0):
    monkeypatch.setattr(sys, "argv", [f"/usr/bin/{argv0}"])
    assert not gpunode_payload_cache._ansible_command()
    monkeypatch.setattr(sys, "argv", ["/venv/bin/ansible-playbook", "site.yml"])
    assert gpunode_payload_cache._ansible_command()
