"""Every filter a plugin registers is called by a role, a playbook or a molecule scenario: a filter nothing calls is
dead code that still has to be read, tested and kept in step (issue 28)."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT, load_module

PLUGINS = sorted(path.stem for path in (ROOT / "plugins" / "filter").glob("*.py"))
CALLERS = [
    path
    for folder in ("roles", "playbooks", "molecule", "inventories")
    for path in (ROOT / folder).rglob("*")
    if path.is_file() and path.suffix in {".yml", ".yaml", ".j2"}
]
TEXT = "\n".join(path.read_text() for path in CALLERS)


@pytest.mark.parametrize("plugin", PLUGINS)
def test_every_registered_filter_is_called(plugin):
    filters = load_module(plugin, subdir="plugins/filter").FilterModule().filters()
    assert [name for name in filters if not re.search(rf"\b{name}\b", TEXT)] == []
