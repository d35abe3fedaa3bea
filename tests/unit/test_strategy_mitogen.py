"""plugins/strategy/gpunode_mitogen.py: mitogen's linear strategy when mitogen works, plain linear otherwise.

The proof is what the nodes see: under mitogen every task runs in one persistent Python on the node, so
the parent process of two `command` tasks is the same; under linear each task has a fresh one.
"""

from __future__ import annotations

import re

import yaml
from conftest import load_module, run_local_playbook

PLAYBOOK = [
    {
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "tasks": [
            {
                "name": f"Print the parent process of a command ({n})",
                "ansible.builtin.command": "python3 -c 'import os; print(\"PARENT=%d\" % os.getppid())'",
                "changed_when": False,
            }
            for n in (1, 2)
        ],
    }
]


def _run(tmp_path, monkeypatch, hide_mitogen: bool, fqcn: bool = False):
    playbook = tmp_path / "play.yml"
    play = dict(PLAYBOOK[0])
    extra = ["-v"]
    if fqcn:
        # the host's connection by its fully qualified name (an inventory variable, as molecule's and linted
        # inventories write it), not the play keyword
        del play["connection"]
        extra += ["-e", "ansible_connection=ansible.builtin.local"]
    playbook.write_text(yaml.safe_dump([play]))
    monkeypatch.setenv("ANSIBLE_STRATEGY", "gpunode_mitogen")
    monkeypatch.setenv("ANSIBLE_DEPRECATION_WARNINGS", "False")
    if hide_mitogen:
        # a controller without mitogen: its package cannot be imported
        fake = tmp_path / "no-mitogen" / "ansible_mitogen"
        fake.mkdir(parents=True)
        (fake / "__init__.py").write_text("raise ImportError('No module named ansible_mitogen (test)')\n")
        monkeypatch.setenv("PYTHONPATH", str(fake.parent))
    result = run_local_playbook(playbook, *extra)
    parents = re.findall(r"PARENT=(\d+)", result.stdout)
    return result, parents


def test_mitogen_runs_every_task_in_one_persistent_python(tmp_path, monkeypatch):
    result, parents = _run(tmp_path, monkeypatch, hide_mitogen=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(parents) == 2 and parents[0] == parents[1], result.stdout
    assert "mitogen is not usable" not in result.stdout + result.stderr


def test_a_fully_qualified_connection_name_gets_mitogen_too(tmp_path, monkeypatch):
    result, parents = _run(tmp_path, monkeypatch, hide_mitogen=False, fqcn=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(parents) == 2 and parents[0] == parents[1], result.stdout


def test_only_the_names_mitogen_redirects_are_shortened():
    from ansible_collections.gpunode.provisioning.plugins.module_utils.plugins.connection_names import (
        SHORT_CONNECTION_NAMES,
    )
    from ansible_mitogen.strategy import REDIRECTED_CONNECTION_PLUGINS

    short_connection_vars = load_module("gpunode_mitogen", "plugins/strategy").short_connection_vars

    assert set(SHORT_CONNECTION_NAMES.values()) <= set(REDIRECTED_CONNECTION_PLUGINS)
    assert short_connection_vars({"ansible_connection": "community.docker.docker", "x": 1}) == {
        "ansible_connection": "docker",
        "x": 1,
    }
    unchanged = {"ansible_connection": "community.general.incus"}
    assert short_connection_vars(unchanged) is unchanged
    assert short_connection_vars({}) == {}


def test_without_mitogen_the_run_falls_back_to_linear_and_says_why(tmp_path, monkeypatch):
    result, parents = _run(tmp_path, monkeypatch, hide_mitogen=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(parents) == 2 and parents[0] != parents[1], result.stdout
    output = " ".join((result.stdout + result.stderr).split())
    assert "gpunode_mitogen: mitogen is not usable on this controller" in output
    assert "ImportError: No module named ansible_mitogen (test)" in output
    assert "running the plain linear strategy" in output
