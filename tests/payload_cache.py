"""The TEST HARNESS payload cache of the test command's ansible runs (molecule/resources/payload_cache): where it
lives and how a run gets it. One home for both users: tests/molecule/test_scenarios.py (molecule's runs) and
tests/unit/conftest.py (the unit tests' playbooks)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "molecule" / "resources" / "payload_cache"
VARIABLE = "GPUNODE_PAYLOAD_CACHE"
KEEP_DAYS = 2


def cache_dir(environ=os.environ) -> Path:
    """$GPUNODE_PAYLOAD_CACHE, else ansiballz/ in the host cache of scripts/lib.sh (GPUNODE_CACHE, same default)."""
    if environ.get(VARIABLE):
        return Path(environ[VARIABLE])
    host = environ.get("GPUNODE_CACHE") or Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / (
        "gpu-node-provisioning"
    )
    return Path(host) / "ansiballz"


def environment(env: dict, site_dirs=(SITE,)) -> dict:
    """env with the cache's directory and site_dirs first on PYTHONPATH (the first sitecustomize.py on it is the one
    Python imports: tests/unit/bytecode_site's imports the payload cache too)."""
    paths = [*map(str, site_dirs), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, VARIABLE: str(cache_dir(env)), "PYTHONPATH": os.pathsep.join(paths)}


def prune(environ=os.environ, now=None) -> list[Path]:
    """Remove the keys (one directory each) no run used for KEEP_DAYS days: each change of the code is a new key."""
    root, now = cache_dir(environ), time.time() if now is None else now
    removed = []
    try:
        for key in root.iterdir() if root.is_dir() else ():
            if key.is_dir() and now - key.stat().st_mtime > KEEP_DAYS * 86400:
                shutil.rmtree(key, ignore_errors=True)
                removed.append(key)
    except OSError:  # an unreadable cache: the runs fall back to building their payloads (gpunode_payload_cache)
        pass
    return removed
