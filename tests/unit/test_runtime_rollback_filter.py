"""plugins/filter/runtime_rollback.py: runtime_config's rollback plan, which was a Jinja program in the role's
vars/main.yml. The expected plans are what that program rendered for the same inputs (checked with Ansible's
Templar when the filter replaced it); the last test renders the role's own vars through the filter."""

from __future__ import annotations

import pytest
import yaml
from conftest import ROOT, load_module, render_role_value, shared_values

rollback = load_module("runtime_rollback", subdir="plugins/filter")
RUNTIMES = ["docker", "containerd", "crio"]
FILES = {"docker": "/etc/docker/daemon.json", "containerd": "/etc/containerd/config.toml", "crio": "/c/99-nvidia.conf"}
AS_BEFORE = {"exists": True, "mode": "0644", "owner": "root", "group": "root"}


def state(pending=None, **files):
    before = {"docker": dict(AS_BEFORE), "containerd": dict(AS_BEFORE), "crio": {"exists": False}, **files}
    return {"files": before, **({} if pending is None else {"pending": pending})}


def plan(results, targets, node_state, undo=None):
    return rollback.runtime_rollback_plan(results, RUNTIMES, targets, FILES, node_state, undo or {})


DOCKER_PLAN = {
    "path": "/etc/docker/daemon.json",
    "existed": True,
    "backup_file": "/b/daemon.json~",
    "mode": "0644",
    "owner": "root",
    "group": "root",
}
CONTAINERD_PLAN = {
    "path": "/etc/containerd/config.toml",
    "existed": True,
    "backup_file": "/b/config.toml~",
    "mode": "0644",
    "owner": "root",
    "group": "root",
    "dropin_path": "/etc/containerd/conf.d/99-nvidia.toml",
    "dropin_backup_file": "",
}
CHANGED = {
    "docker": {"changed": True, "backup_file": "/b/daemon.json~"},
    "containerd": {
        "changed": True,
        "backup_file": "/b/config.toml~",
        "dropin_path": "/etc/containerd/conf.d/99-nvidia.toml",
        "dropin_backup_file": "",
    },
}


def test_nothing_changed_nothing_to_roll_back():
    assert (
        plan({"docker": {"changed": False}, "containerd": {"changed": False}}, ["docker", "containerd"], state()) == {}
    )


def test_changed_runtimes_in_restart_order_whatever_order_they_were_given_in():
    result = plan(CHANGED, ["docker", "containerd"], state())
    assert result == {"containerd": CONTAINERD_PLAN, "docker": DOCKER_PLAN}
    assert list(result) == ["containerd", "docker"], "docker's containerd comes back first"


def test_a_new_file_has_no_backup_mode_or_owner_and_a_task_that_did_not_run_changed_nothing():
    result = plan({"crio": {"changed": True}}, ["crio", "docker"], state())
    assert result == {
        "crio": {"path": "/c/99-nvidia.conf", "existed": False, "backup_file": "", "mode": "", "owner": "", "group": ""}
    }


@pytest.mark.parametrize(
    ("results", "targets", "expected"),
    [
        ({"containerd": {"changed": True, "backup_file": "x"}}, ["docker"], {}),  # not a target
        ({"docker": {"results": [{"changed": False}, {"changed": True}]}}, ["docker"], ["docker"]),  # a loop's result
        ({"docker": {"results": [{"changed": False}]}}, ["docker"], {}),
    ],
)
def test_only_targets_whose_merge_changed_are_planned(results, targets, expected):
    assert list(plan(results, targets, state())) == list(expected)


def test_an_earlier_runs_pending_change_wins_and_the_installers_undo_is_added():
    pending = {
        "docker": {"path": "/etc/docker/daemon.json", "existed": True, "backup_file": "/b/old"},
        "containerd": {"path": "/etc/containerd/config.toml", "existed": True, "backup_file": "/b/c"},
    }
    undo = {"rke2": {"path": "/var/lib/rancher/rke2/agent/etc/containerd/config-v3.toml.tmpl", "existed": False}}
    result = plan({"docker": {"changed": True, "backup_file": "/b/d"}}, ["docker", "containerd"], state(pending), undo)
    assert result == {
        "docker": {**pending["docker"], "pending_since_earlier_run": True},
        "rke2": undo["rke2"],
        "containerd": {**pending["containerd"], "pending_since_earlier_run": True},
    }
    assert list(result) == ["docker", "rke2", "containerd"]


def test_a_null_backup_file_stays_null():
    result = plan(
        {"containerd": {"changed": True, "backup_file": None}}, ["containerd"], state(containerd={"exists": True})
    )
    assert result["containerd"]["backup_file"] is None
    assert (result["containerd"]["mode"], result["containerd"]["dropin_path"]) == ("", "")


def test_a_result_that_is_not_a_mapping_is_refused():
    with pytest.raises(rollback.AnsibleFilterError, match="mapping"):
        plan({"docker": "changed"}, ["docker"], state())


def test_the_roles_vars_give_the_plan_of_its_registered_results():
    role = ROOT / "roles" / "runtime_config"
    variables = {
        **yaml.safe_load((role / "defaults" / "main.yml").read_text()),
        **shared_values(),
        **yaml.safe_load((role / "vars" / "main.yml").read_text()),
        "__runtime_config_targets": ["docker", "containerd"],
        "__runtime_config_docker": CHANGED["docker"],
        "__runtime_config_containerd": CHANGED["containerd"],
        "__runtime_config_crio": {"changed": True},  # not a target: not planned
        "__runtime_config_state": state(),
    }
    rendered = render_role_value("{{ __runtime_config_rollback }}", variables)
    assert rendered == {"containerd": CONTAINERD_PLAN, "docker": DOCKER_PLAN}
    assert list(rendered) == ["containerd", "docker"]
