"""The plugin warm-up callback (plugins/callback/plugin_warmup.py), run by ansible-playbook for real.

Every task of every host runs in a worker forked from the controller's main process. Ansible parses the documentation
(the option definitions) of its own connection, shell and become plugins in the main process at start; a collection's
plugin was parsed in each worker, again for every task and host (issue 47: about a tenth of the benchmark's no-op
re-run, whose nodes are reached through community.docker.docker). The warm-up loads the play's plugins in the main
process at the start of each play. What a worker inherits is what the main process holds when
the play's first task starts: a second callback records there which option definitions Ansible's configuration holds
(Ansible registers them when a configurable plugin's documentation is parsed). No host is contacted: the plays run
``meta: noop`` only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
WARMUP = "gpunode.provisioning.plugin_warmup"

RECORDER = textwrap.dedent(
    '''
    """TEST STAND-IN: records, in the main process, which plugins' option definitions Ansible holds at task start."""
    import json
    import os

    from ansible import constants as C
    from ansible.plugins.callback import CallbackBase

    PREFIX = "ansible_collections."


    class CallbackModule(CallbackBase):
        CALLBACK_VERSION = 2.0
        CALLBACK_TYPE = "aggregate"
        CALLBACK_NAME = "record"
        CALLBACK_NEEDS_ENABLED = True

        def v2_playbook_on_task_start(self, task, is_conditional):
            # a collection plugin is registered under its Python name:
            # ansible_collections.<namespace>.<collection>.plugins.<type>.<name>
            held = [
                f"{kind} {name.removeprefix(PREFIX).replace('.plugins.' + kind, '')}"
                for kind in ("connection", "shell", "become")
                for name in C.config.get_configuration_definitions(kind) or {}
            ]
            with open(os.environ["RECORD_FILE"], "a") as handle:
                handle.write(json.dumps({"play": task.play.get_name(), "held": held}) + "\\n")
    '''
)

INVENTORY = {
    "all": {
        "children": {
            "in_docker": {
                "hosts": {
                    "node-a": {
                        "ansible_connection": "community.docker.docker",
                        "ansible_become_method": "community.general.sudosu",
                    }
                }
            },
            "over_api": {"hosts": {"node-b": {"ansible_connection": "community.docker.docker_api"}}},
        }
    }
}

PLAYBOOK = [
    {
        "name": "docker",
        "hosts": "in_docker",
        "gather_facts": False,
        "become": True,
        "tasks": [{"ansible.builtin.meta": "noop"}],
    },
    {"name": "api", "hosts": "over_api", "gather_facts": False, "tasks": [{"ansible.builtin.meta": "noop"}]},
]


def _held(tmp_path: Path, callbacks: str) -> dict[str, list[str]]:
    (tmp_path / "callbacks").mkdir(exist_ok=True)
    (tmp_path / "callbacks" / "record.py").write_text(RECORDER)
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(INVENTORY))
    (tmp_path / "play.yml").write_text(yaml.safe_dump(PLAYBOOK, sort_keys=False))
    record = tmp_path / f"record-{len(callbacks)}.jsonl"
    env = {
        **os.environ,
        "ANSIBLE_CALLBACK_PLUGINS": str(tmp_path / "callbacks"),
        "ANSIBLE_CALLBACKS_ENABLED": callbacks,
        "RECORD_FILE": str(record),
    }
    run = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(tmp_path / "hosts.yml"),
            str(tmp_path / "play.yml"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return {row["play"]: row["held"] for row in map(json.loads, record.read_text().splitlines())}


def test_each_plays_connection_and_become_plugins_are_loaded_before_the_workers_fork(tmp_path):
    held = _held(tmp_path, f"{WARMUP},record")
    # the first play: its host's connection and become method (collections'), beside Ansible's own
    assert {"connection community.docker.docker", "become community.general.sudosu", "connection ssh"} <= set(
        held["docker"]
    ), held
    assert "connection community.docker.docker_api" not in held["docker"], held
    # the second play adds its host's connection
    assert "connection community.docker.docker_api" in held["api"], held


def test_without_the_warmup_each_worker_would_load_them(tmp_path):
    """What the warm-up saves: without it the main process holds Ansible's own plugins only."""
    held = _held(tmp_path, "record")
    assert "connection ssh" in held["docker"] and "become sudo" in held["docker"], held
    assert not [name for name in held["docker"] + held["api"] if "community." in name], held


def test_the_project_enables_it():
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "ansible.cfg")
    assert WARMUP in [name.strip() for name in parser.get("defaults", "callbacks_enabled").split(",")]


def test_a_name_it_cannot_resolve_is_left_to_the_worker(tmp_path, monkeypatch):
    """A template or an unknown plugin never fails the run here; the task's worker reports it as Ansible does."""
    monkeypatch.setenv("GPUNODE_TEMPLATE_CACHE", "off")  # this test's process keeps Jinja's own compile
    sys.path.insert(0, str(ROOT / "plugins" / "callback"))
    try:
        import plugin_warmup
    finally:
        sys.path.pop(0)

    assert plugin_warmup._plain("{{ conn }}") == ""
    assert plugin_warmup._plain(None) == ""
    assert plugin_warmup._plain("community.docker.docker") == "community.docker.docker"

    class Play:
        connection = "ssh"
        become_method = "sudo"

        @staticmethod
        def get_variable_manager():
            raise RuntimeError("no inventory")

        @staticmethod
        def get_name():
            return "broken"

    warmup = plugin_warmup.CallbackModule()
    assert warmup.template_cache is False
    warmup.v2_playbook_on_play_start(Play())  # must not raise
    assert warmup.loaded == []
