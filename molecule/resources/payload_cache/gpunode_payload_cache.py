"""TEST HARNESS (the test command's own ansible runs only: molecule's scenarios and the unit tests' playbooks; not the
demo, the benchmark or a user's run): each module's payload built once for the test command, not once per run.

ansible-core builds a module's payload (AnsiballZ: recursive_finder parses the module and every module_util it imports,
then zips them) once per ansible-playbook run and module, in the run's own temporary directory: ansible-core 2.19,
lib/ansible/executor/module_common.py, ``_find_module_utils``, the cache at ``C.DEFAULT_LOCAL_TMP/ansiballz_cache``
under a name of the module's FQCN, compression and extensions only (DEFAULT_LOCAL_TMP is a new directory per process,
config type ``tmppath``). The test command starts hundreds of runs, and a build costs 0.2 to 0.3 CPU s a module on the
build machine (measured: setup 0.31, gpu_node_facts 0.29, gpu_settings 0.23 CPU s a build).

Where GPUNODE_PAYLOAD_CACHE is set and the process is an ansible command, ``_find_module_utils`` runs with
DEFAULT_LOCAL_TMP pointed at GPUNODE_PAYLOAD_CACHE/<key> for the call, so ansible-core's own cache (its lock, its
atomic write) is shared by every run whose key is the same. The key hashes everything a payload is built from that
can differ between runs: ansible-core's version and location, the Python, the module's path and bytes and, for a module
of a checkout (``<root>/plugins/modules/``), the path and bytes of every file under ``<root>/plugins/module_utils``.
A changed module_util is a new key, so a stale payload is never sent. Any error falls back to ansible-core's own way.
tests/unit/test_payload_cache.py checks it; tests/conftest.py sets the variable, tests/molecule/test_scenarios.py and
tests/unit/conftest.py put this directory on PYTHONPATH.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys

VARIABLE = "GPUNODE_PAYLOAD_CACHE"
_TREES: dict[str, str] = {}


def _tree_digest(root: str) -> str:
    """sha256 of the relative path and bytes of every file under root/plugins/module_utils (once a process)."""
    if root not in _TREES:
        digest = hashlib.sha256()
        base = os.path.join(root, "plugins", "module_utils")
        for directory, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(directory, name)
                    digest.update(os.path.relpath(path, base).encode() + b"\0")
                    with open(path, "rb") as source:
                        digest.update(hashlib.sha256(source.read()).digest())
        _TREES[root] = digest.hexdigest()
    return _TREES[root]


def payload_key(module_path: str, module_data: bytes) -> str:
    """The shared cache's subdirectory for this module's payload."""
    import ansible

    real = os.path.realpath(module_path)
    parts = [ansible.__version__, os.path.dirname(os.path.realpath(ansible.__file__)), sys.version, real]
    parts.append(hashlib.sha256(module_data).hexdigest())
    marker = os.sep + os.path.join("plugins", "modules") + os.sep
    if marker in real:
        parts.append(_tree_digest(real.rsplit(marker, 1)[0]))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def install(cache: str) -> bool:
    """Wrap module_common._find_module_utils; False (nothing changed) where ansible-core's differs."""
    from ansible import constants
    from ansible.executor import module_common

    original = getattr(module_common, "_find_module_utils", None)
    if original is None or not hasattr(constants, "DEFAULT_LOCAL_TMP"):
        return False

    def _find_module_utils(*args, **kwargs):
        own = constants.DEFAULT_LOCAL_TMP
        try:
            shared = os.path.join(cache, payload_key(kwargs["module_path"], kwargs["b_module_data"]))
            os.makedirs(shared, exist_ok=True)
            os.utime(shared)  # in use: tests/payload_cache.py prunes the keys no run used for days
        except Exception:  # a harness: any surprise keeps ansible-core's own cache
            return original(*args, **kwargs)
        constants.DEFAULT_LOCAL_TMP = shared
        try:
            return original(*args, **kwargs)
        finally:
            constants.DEFAULT_LOCAL_TMP = own

    module_common._find_module_utils = _find_module_utils
    return True


def _ansible_command() -> bool:
    """ansible-playbook or ansible (an ad-hoc run): the commands that build payloads."""
    argv0 = os.path.basename(sys.argv[0]) if getattr(sys, "argv", None) else ""
    return argv0 in ("ansible-playbook", "ansible")


if os.environ.get(VARIABLE) and _ansible_command():
    with contextlib.suppress(Exception):  # a harness: never stop a run
        install(os.environ[VARIABLE])
