"""The k3s agent's restart is a transaction (issue 26): a template the agent cannot render is put back as it was,
the agent restarted with it, and the host failed with what was rolled back. Only in-k3s writes a template
(in-rke2's agent registers the runtime itself)."""

from __future__ import annotations

import sys
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
sys.path.insert(0, str(SCENARIO / "tests"))
from playbook_runner import run_playbook
from test_installers import NODES, _cri, _etc, _generated

testinfra_hosts = ["ansible://in-k3s"]


def test_a_broken_template_is_rolled_back_and_the_agent_runs_again(host):
    node = NODES["in-k3s"]
    template = f"{_etc(node)}/config.toml.tmpl"
    before = host.file(template).content_string
    # a Go template action the agent cannot render ({{"{{"}} keeps Ansible from templating it)
    broken = '{{"{{"}} template "nonexistent" . }}'
    # 3 health checks, not the role's 30: the agent that cannot render its template never comes back
    bad = {"runtime_config_installer_template_extra": broken, "runtime_config_health_retries": 3}
    run = run_playbook(host, SCENARIO / "converge.yml", bad)
    assert run.returncode != 0, run.stdout
    assert "k3s.service did not come back after its config changed" in run.stdout, run.stdout[-3000:]
    assert "is running again with its previous config" in run.stdout, run.stdout[-3000:]
    assert host.file(template).content_string == before
    assert host.service("k3s.service").is_running
    assert "nvidia" in _cri(_generated(host, node))["runtimes"]
