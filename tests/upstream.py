"""Where the upstream builds the tests take as inputs are (containerd, CRI-O, NVIDIA's toolkit, each with its
BUILD.md): GPUNODE_UPSTREAM_DIR, else ../shared/upstream next to the project, as .config/molecule/config.yml and
scripts/lib.sh find it (tests/unit/test_upstream_dir.py holds every reader to the same default)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM_VARIABLE = "GPUNODE_UPSTREAM_DIR"


def upstream_dir(environ=os.environ) -> Path:
    """The upstream builds' directory (it may not exist)."""
    named = environ.get(UPSTREAM_VARIABLE)
    return Path(named) if named else ROOT.parent / "shared" / "upstream"
