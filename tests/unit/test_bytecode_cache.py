"""The TEST HARNESS compile cache of molecule's nodes (molecule/resources/bytecode_cache): a payload's file runs
as compiled from its bytes, under the payload's own path, whether it came from the cache or not; a changed file
is compiled again; zip files that are not Ansible payloads are left alone."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

HOOK = Path(__file__).resolve().parents[2] / "molecule" / "resources" / "bytecode_cache"

SOURCE = """
VALUE = {value!r}

def fails():
    raise RuntimeError("from the payload")
"""

RAISE = 'raise RuntimeError("from the payload")'

# counts the compiles the cache asks zipimport for, imports gpunode_test_mod from the zip, prints what it saw
PROBE = """
import sys, traceback
import gpunode_bytecode_cache as cache
compiled = []
original = cache._compile
cache._compile = lambda path, source: compiled.append(path) or original(path, source)
sys.path.insert(0, sys.argv[1])
import gpunode_test_mod
try:
    gpunode_test_mod.fails()
except RuntimeError:
    where = traceback.extract_tb(sys.exc_info()[2])[-1]
print(gpunode_test_mod.VALUE, len(compiled), where.filename, where.lineno, where.line)
"""


def _payload(directory: Path, name: str, value: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    archive = directory / name
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("gpunode_test_mod.py", SOURCE.format(value=value))
    return archive


def _probe(archive: Path, cache: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(HOOK), "GPUNODE_BYTECODE_CACHE": str(cache)}
    run = subprocess.run([sys.executable, "-c", PROBE, str(archive)], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip().split(maxsplit=4)


def test_a_payload_file_is_compiled_once_and_runs_under_its_own_path(tmp_path):
    cache = tmp_path / "cache"
    first = _payload(tmp_path / "one", "ansible_ping_payload.zip", "first")
    # zipimport asks twice for an imported file (CPython 3.11): once compiled, once from the cache
    assert _probe(first, cache) == ["first", "1", f"{first}/gpunode_test_mod.py", "5", RAISE]
    assert len(list(cache.iterdir())) == 1
    # the same bytes in another task's payload (another temporary directory): from the cache, under its own path
    again = _payload(tmp_path / "two", "ansible_ping_payload.zip", "first")
    assert _probe(again, cache) == ["first", "0", f"{again}/gpunode_test_mod.py", "5", RAISE]


def test_a_changed_payload_file_is_compiled_again(tmp_path):
    cache = tmp_path / "cache"
    _probe(_payload(tmp_path / "one", "ansible_ping_payload.zip", "first"), cache)
    changed = _payload(tmp_path / "two", "ansible_ping_payload.zip", "second")
    assert _probe(changed, cache)[:2] == ["second", "1"]
    assert len(list(cache.iterdir())) == 2


def test_a_zip_that_is_not_an_ansible_payload_is_left_alone(tmp_path):
    cache = tmp_path / "cache"
    other = _payload(tmp_path / "one", "application.zip", "first")
    value, compiles, path, _line, _text = _probe(other, cache)
    assert (value, path) == ("first", f"{other}/gpunode_test_mod.py")
    assert int(compiles) > 0 and not cache.exists()  # compiled as zipimport does, nothing kept
