"""runtime_config on a DRA node (issue 39), its vars rendered by Ansible on the controller: CDI on whatever
runtime_config_enable_cdi says, /var/run/cdi (the DRA plugin's CDI_ROOT, one home in gpu_node_facts' vars) added to
the spec directories, a kubelet before 1.34 refused naming its version; a device plugin node rendered as before."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import ROOT, run_local_playbook

PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - ansible.builtin.include_vars: {file: "%(root)s/roles/gpu_node_facts/defaults/main.yml"}
    - ansible.builtin.include_vars: {file: "%(root)s/roles/gpu_node_facts/vars/main.yml"}
    - ansible.builtin.include_vars: {file: "%(root)s/roles/runtime_config/defaults/main.yml"}
    - ansible.builtin.include_vars: {file: "%(root)s/roles/runtime_config/vars/main.yml"}
    - ansible.builtin.set_fact:
        ansible_facts: {gpu_node: {kubelet: {installed: true, version: "%(kubelet)s"}, installer: {name: kubeadm}}}
    - ansible.builtin.copy:
        dest: "%(out)s"
        mode: "0644"
        content: >-
          {{ {'cdi': __runtime_config_enable_cdi | bool, 'dirs': __runtime_config_cdi_spec_dirs,
              'too_old': __gpu_node_facts_dra_too_old | bool, 'refusal': __gpu_node_facts_dra_refusal | trim,
              'rule': __runtime_config_variable_checks.dra.ok | bool} | to_json }}
"""


def _render(tmp_path, kubelet: str, **extra) -> dict:
    out = tmp_path / "out.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK % {"root": ROOT, "kubelet": kubelet, "out": out})
    run = run_local_playbook(playbook, "-e", json.dumps(extra))
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(out.read_text())


@pytest.mark.parametrize("kubelet", ["1.34.1", "1.35.0"])
def test_a_dra_node_gets_cdi_with_var_run_cdi(tmp_path, kubelet):
    got = _render(
        tmp_path,
        kubelet,
        gpu_node_facts_gpu_allocation="dra",
        runtime_config_enable_cdi=False,
        runtime_config_cdi_spec_dirs=["/etc/cdi"],
    )
    assert got["cdi"] is True and got["dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert got["too_old"] is False and got["rule"] is True


def test_a_device_plugin_node_is_rendered_as_before(tmp_path):
    defaults = yaml.safe_load((ROOT / "roles" / "runtime_config" / "defaults" / "main.yml").read_text())
    got = _render(tmp_path, "1.31.2", runtime_config_enable_cdi=False, runtime_config_cdi_spec_dirs=["/etc/cdi"])
    assert got["cdi"] is False and got["dirs"] == ["/etc/cdi"]
    assert _render(tmp_path, "1.31.2")["dirs"] == defaults["runtime_config_cdi_spec_dirs"]
    assert got["rule"] is True


def test_dra_on_kubelet_1_33_is_refused_naming_the_version(tmp_path):
    got = _render(tmp_path, "1.33.4", gpu_node_facts_gpu_allocation="dra")
    assert got["too_old"] is True and got["rule"] is False
    assert "needs kubelet 1.34 or later" in got["refusal"] and "its kubelet is 1.33.4" in got["refusal"]
