"""GPU allocation through NVIDIA's DRA driver (issue 39) on the kubelet nodes, after test_kubelet.py (file order).

kl-debian13 first refuses gpu_node_facts_gpu_allocation=dra for its kubelet 1.31, kl-debian12 a value that is no
choice, neither changing anything; kl-debian12 has no DRA part. kl-debian13 then moves to DRA: its TEST STAND-IN
kubelet reports 1.34.1 (the version file the stand-in reads), the run is checked with --check --diff, applied and
repeated (changed=0); the device node unit is enabled and ordered before kubelet.service, the plugin directories
and the node label are there, the DRA plugin's checkpoint goes only when asked. The doctor's dra rows
(gpu_validate_checks, as the gpu_validate role runs it) are ok with a TEST STAND-IN DRA kubelet plugin
(files/kubelet-plugin-standin holding plugins_registry/gpu.nvidia.com-reg.sock) and TEST STAND-IN device nodes
(empty files for /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia0: the node container has no GPU), against the real
containerd 2.1's config dump; they fail with the device plugin's socket registered too, and with /var/run/cdi
missing from containerd's cdi_spec_dirs. The node then moves back to the device plugin and 1.31, as
test_kubelet.py found it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
sys.path.insert(0, str(SCENARIO.parents[1]))
from playbook_runner import recap, run_playbook

from tests.doctor_params import shared_doctor_params, shared_values

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
VERSION_FILE = "/etc/kubelet-standin-version"
UNIT = shared_values()["__gpu_node_facts_dra_device_nodes_unit"]
UNIT_PATH = f"/etc/systemd/system/{UNIT}"
KUBELET_DROPIN = "/etc/systemd/system/kubelet.service.d/50-gpu-node-device-nodes.conf"
PLUGINS = "/var/lib/kubelet/plugins"
REGISTRY = "/var/lib/kubelet/plugins_registry"
CHECKPOINT = f"{PLUGINS}/gpu.nvidia.com/checkpoint.json"
DRA_SOCKET = f"{REGISTRY}/gpu.nvidia.com-reg.sock"
DEVICE_PLUGIN_SOCKET = "/var/lib/kubelet/device-plugins/nvidia-gpu.sock"
LABEL = "gpu-node-provisioning/gpu-allocation=dra"
STANDIN = "/usr/local/bin/kubelet-plugin-standin"
STANDIN_DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0")
CONTAINERD_CONFIG = "/etc/containerd/config.toml"
WATCHED = ("/etc/default", "/var/lib/kubelet", "/etc/kubernetes", "/etc/systemd/system")
DRA = {"gpu_node_facts_gpu_allocation": "dra"}


def _playbook(host, extra_vars: dict, *args: str):
    run = run_playbook(host, SCENARIO / "converge.yml", extra_vars, *args)
    run.stdout = ANSI_ESCAPE.sub("", run.stdout)
    return run


def _folded(run) -> str:
    return " ".join(run.stdout.split())


def _snapshot(host) -> dict:
    out = host.check_output(f"find {' '.join(WATCHED)} -type f -print0 | sort -z | xargs -0 sha256sum")
    return dict(reversed(line.split(None, 1)) for line in out.splitlines())


def _is_dra_node(host) -> bool:
    return host.backend.get_hostname() == "kl-debian13"


def _doctor(host, facts: dict) -> dict:
    """The dra family's rows as the gpu_validate role runs them (the node simulates a GPU as converge.yml does).
    The facts are read once: the rows read the sockets and containerd's config dump themselves."""
    args = {
        "families": ["dra"],
        "node": facts,
        "has_gpu": True,
        "runtimes": facts["runtimes_installed"],
        **shared_doctor_params(),
        "gpu_allocation": "dra",
    }
    out = host.ansible("gpu_validate_checks", json.dumps(args), check=False)
    assert "checks" in out, out
    return {row["check"]: row for row in out["checks"]}


def _standin(host, unit: str, socket: str) -> None:
    started = host.run(f"systemd-run --unit={unit} --collect {STANDIN} {socket}")
    assert started.rc == 0, started.stderr
    assert host.run(f"for i in $(seq 50); do [ -S {socket} ] && exit 0; sleep 0.1; done; exit 1").rc == 0


def _stop(host, unit: str) -> None:
    host.run(f"systemctl stop {unit}")


def test_dra_below_1_34_or_a_wrong_choice_is_refused_before_anything_changes(host):
    """kl-debian13 (kubelet 1.31) asks for DRA, kl-debian12 for a choice that is none."""
    extra_vars = DRA if _is_dra_node(host) else {"gpu_node_facts_gpu_allocation": "both"}
    before = _snapshot(host)
    run = _playbook(host, extra_vars)
    assert run.returncode != 0, run.stdout
    text = _folded(run)
    if _is_dra_node(host):
        version = host.file(VERSION_FILE).content_string.strip()
        assert "TASK [kubelet : Check the kubelet variables" in run.stdout, run.stdout[-3000:]
        assert "needs kubelet 1.34 or later" in text and f"but the kubelet is {version}" in text, text[-2000:]
        assert "Nothing on the node was changed" in text
    else:
        facts_task = "TASK [gpu_node_facts : Check the variables and gather the GPU node facts"
        assert facts_task in run.stdout, run.stdout[-3000:]
        assert "gpu_node_facts_gpu_allocation" in text and "device-plugin" in text, text[-2000:]
    assert _snapshot(host) == before


def test_a_node_moves_to_dra_and_back(host):
    if not _is_dra_node(host):
        # the device plugin (the default): no DRA unit, ordering or label was made on this node
        for path in (UNIT_PATH, KUBELET_DROPIN):
            assert not host.file(path).exists, path
        assert LABEL not in host.file("/etc/default/kubelet").content_string
        return
    old_version = host.file(VERSION_FILE).content_string.strip()
    host.ansible("copy", f"src={SCENARIO / 'files' / 'kubelet-plugin-standin'} dest={STANDIN} mode=0755", check=False)
    try:
        host.run(f"echo 1.34.1 > {VERSION_FILE}")
        _move_to_dra(host)
        _doctor_rows_and_their_mutations(host)
        _checkpoint_only_when_asked(host)
    finally:
        _stop(host, "dra-plugin-standin")
        _stop(host, "device-plugin-standin")
        host.run(f"rm -f {' '.join(STANDIN_DEVICES)} {STANDIN}")
        host.run(f"echo {old_version} > {VERSION_FILE}")
    back = _playbook(host, {})
    assert back.returncode == 0, back.stdout[-3000:]
    for path in (UNIT_PATH, KUBELET_DROPIN, f"/etc/systemd/system/multi-user.target.wants/{UNIT}"):
        assert not host.file(path).exists, path
    assert LABEL not in host.file("/etc/default/kubelet").content_string


def _move_to_dra(host) -> None:
    hostname = host.backend.get_hostname()
    before = _snapshot(host)
    check = _playbook(host, DRA, "--check", "--diff")
    assert check.returncode == 0, check.stdout[-3000:]
    assert LABEL in check.stdout, check.stdout[-3000:]
    assert "Before=kubelet.service" in check.stdout, check.stdout[-3000:]
    assert _snapshot(host) == before, "--check changed the node"

    first = _playbook(host, DRA)
    assert first.returncode == 0, first.stdout[-3000:]
    assert recap(first.stdout)[hostname]["changed"] > 0
    # the second run changes nothing, and leaves the DRA plugin's checkpoint alone when not asked
    host.run(f"mkdir -p {PLUGINS}/gpu.nvidia.com && echo '{{}}' > {CHECKPOINT}")
    second = _playbook(host, DRA)
    assert second.returncode == 0, second.stdout[-3000:]
    assert recap(second.stdout)[hostname]["changed"] == 0, second.stdout[-3000:]
    assert host.file(CHECKPOINT).exists, "the checkpoint went without kubelet_dra_clear_checkpoint"

    assert host.file(UNIT_PATH).contains("create-device-nodes --control-devices --load-kernel-modules")
    assert host.run(f"systemctl is-enabled {UNIT}").stdout.strip() == "enabled"
    after = host.check_output("systemctl show --property After --value kubelet.service").split()
    assert UNIT in after, after
    assert UNIT in host.check_output("systemctl show --property Wants --value kubelet.service").split()
    for path in (PLUGINS, REGISTRY):
        assert host.file(path).is_directory, path
    assert LABEL in host.file("/etc/default/kubelet").content_string
    # DRA is on by default from 1.34: no DynamicResourceAllocation gate
    assert (
        "DynamicResourceAllocation" not in host.file("/etc/kubernetes/kubelet.conf.d/50-gpu-node.conf").content_string
    )


def _doctor_rows_and_their_mutations(host) -> None:
    host.run(f"touch {' '.join(STANDIN_DEVICES)}")  # TEST STAND-IN device nodes: the node container has no GPU
    _standin(host, "dra-plugin-standin", DRA_SOCKET)
    facts = host.ansible("gpu_node_facts", check=False)["ansible_facts"]["gpu_node"]
    rows = _doctor(host, facts)
    assert rows["GPU allocation"]["status"] == "ok", rows
    assert rows["DRA prerequisites"]["status"] == "ok", rows
    assert "containerd CDI /etc/cdi, /var/run/cdi" in rows["DRA prerequisites"]["detail"], rows

    # mutation 1: NVIDIA's device plugin registers too
    _standin(host, "device-plugin-standin", DEVICE_PLUGIN_SOCKET)
    rows = _doctor(host, facts)
    assert rows["GPU allocation"]["status"] == "fail", rows
    assert "are both registered" in rows["GPU allocation"]["detail"], rows
    _stop(host, "device-plugin-standin")

    # mutation 2: containerd's CDI directories without /var/run/cdi (its config dump is what the doctor reads)
    original = host.file(CONTAINERD_CONFIG).content_string
    host.run(f"cp -p {CONTAINERD_CONFIG} {CONTAINERD_CONFIG}.i39-test")
    host.run(
        f'sed -i \'s|^\\[plugins."io.containerd.grpc.v1.cri"\\]$|&\\n  cdi_spec_dirs = ["/etc/cdi"]|\' '
        f"{CONTAINERD_CONFIG}"
    )
    try:
        assert 'cdi_spec_dirs = ["/etc/cdi"]' in host.file(CONTAINERD_CONFIG).content_string
        rows = _doctor(host, facts)
        row = rows["DRA prerequisites"]
        assert row["status"] == "fail", row
        assert "containerd: cdi_spec_dirs ['/etc/cdi'] lack /var/run/cdi" in row["detail"], row
        # the stand-in device plugin is gone again: the allocation row is back to ok
        assert rows["GPU allocation"]["status"] == "ok", rows
    finally:
        host.run(f"mv {CONTAINERD_CONFIG}.i39-test {CONTAINERD_CONFIG}")
    assert host.file(CONTAINERD_CONFIG).content_string == original


def _checkpoint_only_when_asked(host) -> None:
    cleared = _playbook(host, {**DRA, "kubelet_dra_clear_checkpoint": True})
    assert cleared.returncode == 0, cleared.stdout[-3000:]
    assert not host.file(CHECKPOINT).exists
