"""The k3s agent's restart is a transaction (issue 26): a template the agent cannot render is put back as it was,
the agent restarted with it, and the host failed with what was rolled back. Only in-k3s writes a template
(in-rke2's agent registers the runtime itself)."""

from __future__ import annotations

testinfra_hosts = ["ansible://in-k3s"]


def test_a_broken_template_is_rolled_back_and_the_agent_runs_again(refused_runs):
    # the run and the node's state right after it: conftest.py (one run with test_doctor.py's RKE2 refusal)
    run, output, after = refused_runs["run"], refused_runs["output"]["in-k3s"], refused_runs["after"]["in-k3s"]
    assert run.returncode != 0 and refused_runs["failed"]["in-k3s"] > 0, run.stdout[-3000:]
    assert "k3s.service did not come back after its config changed" in output, output[-3000:]
    assert "is running again with its previous config" in output, output[-3000:]
    assert after["file"] == refused_runs["before"]["in-k3s"]
    assert after["running"]
    assert "nvidia" in after["runtimes"]
