"""A runtime that refuses its config on one node fails that node only: the run goes on for the others."""

from __future__ import annotations

import sys
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
from playbook_runner import folded, run_playbook

# one run drives the four docker/containerd nodes (rc-crio has its own play); it is started from the node that gets
# the refused config
testinfra_hosts = ["ansible://rc-debian12"]


def test_a_rollback_on_one_host_lets_the_other_hosts_go_on(host):
    before = host.file("/etc/docker/daemon.json").content_string
    settings = (
        "{{ {'hosts': ['unix:///run/gpunode-test.sock']} if inventory_hostname == 'rc-debian12'"
        " else {'labels': ['gpunode.test/other-hosts-go-on=' ~ inventory_hostname]} }}"
    )
    run = run_playbook(
        host,
        SCENARIO / "converge.yml",
        {"runtime_config_docker_settings": settings, "runtime_config_health_retries": 3},
        "--limit",
        "all:!crio_nodes:!containerd23_nodes",
    )
    assert run.returncode != 0
    recap = {line.split()[0]: line for line in run.stdout.splitlines() if line.startswith("rc-")}
    assert " failed=1 " in recap["rc-debian12"], recap
    # dockerd refused to start: the restart transaction takes the failed restart as its answer (ignored, rolled back)
    assert " ignored=1 " in recap["rc-debian12"], recap
    for other in ("rc-debian13", "rc-forky", "rc-ubuntu2204"):
        assert " failed=0 " in recap[other], recap
        assert " changed=0 " not in recap[other], f"{other} did not go on: {recap[other]}"
    # dockerd refused a key that is also a flag of its unit (-H fd://): rolled back byte for byte
    said = folded(run)
    assert "docker did not come back after its config changed" in said
    assert "Rolled back: restored /etc/docker/daemon.json from /var/backups/gpu-node-provisioning/etc/docker/" in said
    assert "is running again with its previous config" in said
    assert host.file("/etc/docker/daemon.json").content_string == before
    assert host.service("docker").is_running
    assert host.run("docker info").rc == 0
