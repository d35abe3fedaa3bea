"""runtime_config's finish include where daemon.json's merge fails, run on this machine (no docker needed).

daemon.json is merged inside tasks/finish.yml, after containerd's config.toml (tasks/main.yml: the merge that is
also the read). Where the docker merge then fails (dockerd --validate refuses a setting), containerd may already hold
its change, unrestarted; the next run's merge of it changes nothing, so only the pending-restart marker that an
interrupted run leaves makes that run restart containerd (runtime_config_state reads it). The rescue writes it, then
stops naming the file and the restart it left.
"""

from __future__ import annotations

import json

import yaml
from conftest import ROOT, run_local_playbook

ROLE = ROOT / "roles" / "runtime_config"


def _play(tmp_path, rollback: dict) -> list:
    return [
        {
            "name": "runtime_config's finish include, daemon.json refused",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": {
                "runtime_config_name": "nvidia",
                "runtime_config_docker_daemon_json": str(tmp_path / "daemon.json"),
                "runtime_config_backup": True,
                "runtime_config_state_dir": str(tmp_path / "state"),
                "__runtime_config_docker_pending": True,
                "__runtime_config_state": {"files": {"docker": {"exists": True}}},
                "__runtime_config_new_file": {},
                # a key dockerd does not know: its --validate refuses the file (as does a missing dockerd)
                "__runtime_config_docker_settings": {
                    "runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime", "args": []}},
                    "no-such-dockerd-setting": True,
                },
                "__runtime_config_docker_remove": [],
                "__runtime_config_docker_version": "27.5.1",
                "__runtime_config_rollback": rollback,
                "__runtime_config_notes": [],
                "__runtime_config_parts": [],
            },
            "tasks": [{"name": "Finish", "ansible.builtin.include_tasks": str(ROLE / "tasks" / "finish.yml")}],
        }
    ]


def _run(tmp_path, rollback: dict):
    (tmp_path / "daemon.json").write_text("{}\n")
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(_play(tmp_path, rollback), sort_keys=False))
    return run_local_playbook(playbook)


CONTAINERD = {
    "path": "/etc/containerd/config.toml",
    "existed": True,
    "backup_file": "/etc/containerd/config.toml.1234.2026-12-03@09:00:00~",
    "mode": "0644",
    "owner": "root",
    "group": "root",
    "dropin_path": "",
    "dropin_backup_file": "",
}


def test_a_refused_daemon_json_keeps_containerds_restart_for_the_next_run(tmp_path):
    run = _run(tmp_path, {"containerd": CONTAINERD})
    assert run.returncode != 0, run.stdout
    said = " ".join(run.stdout.split())
    assert f"{tmp_path / 'daemon.json'} was not changed:" in said, run.stdout[-3000:]
    assert "The restart of containerd, whose config this run changed, is recorded in" in said
    # the marker an interrupted run leaves, with what the restart's rollback needs
    marker = tmp_path / "state" / "pending-restart-containerd.json"
    assert json.loads(marker.read_text()) == CONTAINERD
    assert oct(marker.stat().st_mode & 0o777) == "0o600"
    assert (tmp_path / "daemon.json").read_text() == "{}\n"  # the refused merge wrote nothing


def test_with_nothing_changed_before_it_records_nothing(tmp_path):
    run = _run(tmp_path, {})
    assert run.returncode != 0, run.stdout
    said = " ".join(run.stdout.split())
    assert f"{tmp_path / 'daemon.json'} was not changed:" in said and "The restart of" not in said
    assert not (tmp_path / "state").exists()
