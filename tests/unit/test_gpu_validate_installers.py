"""The doctor on nodes laid out by a cluster installer (issue 26): RKE2/k3s run their own containerd (its binary,
ctr and socket in the installer's paths, config.toml generated at every agent start from the template and the
agent config), and take the kubelet's settings from config.yaml + config.yaml.d; kubespray renders config.toml
and the kubelet's files at every kubespray run. Each row is shown passing and failing."""

from __future__ import annotations

import sys

import pytest
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.containerd import (
    check_containerd,
    containerd_rows,
    containerd_state,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.kubelet import (
    agent_settings,
    check_kubelet,
)
from conftest import FakeNode, node, params, row
from test_gpu_validate_containerd import PLUGINS_OK

SOCK = "/run/k3s/containerd/containerd.sock"
BIN = "/var/lib/rancher/k3s/data/current/bin"
ETC = "/var/lib/rancher/k3s/agent/etc/containerd"
K3S = {
    "name": "k3s",
    "version": "1.27.5",
    "bin_dir": BIN,
    "service": "k3s.service",
    "containerd": {
        "binary": f"{BIN}/containerd",
        "socket": SOCK,
        "running": True,
        "config": f"{ETC}/config.toml",
        "config_regenerated": "agent start",
        "template": f"{ETC}/config.toml.tmpl",
        "templates": [f"{ETC}/config-v3.toml.tmpl", f"{ETC}/config.toml.tmpl"],
    },
    "kubelet": {
        "settings": "agent_config_dropin",
        "config": "/etc/rancher/k3s/config.yaml",
        "dropin_dir": "/etc/rancher/k3s/config.yaml.d",
        "dropin": "/etc/rancher/k3s/config.yaml.d/90-gpu-node-kubelet.yaml",
    },
}
KUBESPRAY = {
    "name": "kubespray",
    "service": "kubelet.service",
    "containerd": {"binary": "/usr/local/bin/containerd", "config_regenerated": "kubespray run"},
    "kubelet": {
        "settings": "kubespray_inventory",
        "config": "/etc/kubernetes/kubelet-config.yaml",
        "files": ["/etc/kubernetes/kubelet.env", "/etc/kubernetes/kubelet-config.yaml"],
    },
}
DUMP_RUNC_ONLY = (
    "version = 2\n"
    '[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "runc"\n'
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n'
)
DUMP_NVIDIA = DUMP_RUNC_ONLY + (
    '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n  runtime_type = "io.containerd.runc.v2"\n'
    '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
    '    BinaryName = "/usr/bin/nvidia-container-runtime"\n'
)
DUMP = (f"{BIN}/containerd", "--config", f"{ETC}/config.toml", "config", "dump")
CTR = (f"{BIN}/ctr", "--address", SOCK)
AGENT_START = ("systemctl", "show", "k3s.service", "-p", "ExecMainStartTimestampMonotonic", "--value")


def k3s_node(dump=DUMP_NVIDIA, plugins=(0, PLUGINS_OK, ""), mtimes=None):
    facts = node(has_gpu=False, installer=K3S, runtimes={"containerd": {"installed": False, "running": False}})
    fake = FakeNode(
        commands={DUMP: (0, dump, ""), (*CTR, "plugins", "ls"): plugins, AGENT_START: (0, "100000000", "")},
        files={f"{BIN}/ctr": ""},
        mtimes=mtimes if mtimes is not None else {f"{ETC}/config.toml.tmpl": 1_700_000_050.0},
    )
    return facts, fake


def test_on_k3s_the_doctor_asks_the_installers_containerd_through_its_socket_and_the_agent_unit():
    facts, fake = k3s_node()
    c = containerd_state(params(), facts, fake)
    assert [tuple(argv) for argv in fake.ran] == [DUMP, (*CTR, "plugins", "ls"), AGENT_START]
    rows = containerd_rows(params(), facts, c, None, None, True)
    assert rows[0] == row("containerd: CRI plugin", "ok", "ctr plugins ls: cri ok (the kubelet can run pods)")
    assert rows[1] == row("containerd: nvidia runtime", "ok", "runtimes.nvidia in the effective configuration")
    assert rows[2] == row(
        "containerd: running config", "ok", "k3s.service started after its config files were last written"
    )


def test_on_k3s_a_config_without_the_runtime_fails_and_names_the_installers_fix():
    facts, fake = k3s_node(dump=DUMP_RUNC_ONLY)
    rows = containerd_rows(params(), facts, containerd_state(params(), facts, fake), None, None, True)
    assert rows[1]["status"] == "fail"
    assert rows[1]["detail"] == "no runtimes.nvidia in containerd config dump (k3s node) (runtimes: runc)"
    assert rows[1]["fix"].startswith(f"Run site.yml --tags runtime: it writes {ETC}/config.toml.tmpl")


def test_on_k3s_an_unreachable_socket_and_a_failed_cri_plugin_fail_with_the_agents_journal():
    facts, fake = k3s_node(plugins=(1, "", f"ctr: failed to dial {SOCK}: connection refused"))
    rows = containerd_rows(params(), facts, containerd_state(params(), facts, fake), None, None, True)
    assert rows[0] == row(
        "containerd: CRI plugin", "fail", f"ctr cannot reach containerd: ctr: failed to dial {SOCK}: connection refused"
    )
    broken = "TYPE ID PLATFORMS STATUS\nio.containerd.grpc.v1 cri linux/amd64 error\n"
    facts, fake = k3s_node(plugins=(0, broken, ""))
    rows = containerd_rows(params(), facts, containerd_state(params(), facts, fake), None, None, True)
    assert rows[0]["status"] == "fail" and rows[0]["fix"].startswith("journalctl -u k3s.service |")


def test_on_k3s_a_template_or_agent_config_written_after_the_agent_started_is_not_what_runs():
    later = 1_700_000_150.0  # the agent started at 1_700_000_100
    for path in (f"{ETC}/config.toml.tmpl", "/etc/rancher/k3s/config.yaml", "/etc/rancher/k3s/config.yaml.d/x.yaml"):
        facts, fake = k3s_node(mtimes={path: later, f"{ETC}/config.toml": later})
        rows = containerd_rows(params(), facts, containerd_state(params(), facts, fake), None, None, True)
        assert rows[2]["status"] == "warn", path
        assert rows[2]["detail"].startswith(f"{path} was written after k3s.service started")
        assert rows[2]["fix"].startswith("Restart k3s's agent (systemctl restart k3s.service)")


def test_the_container_through_nvidia_goes_through_the_installers_ctr_and_socket():
    facts, fake = k3s_node()
    image = {"containerd_test_image": "docker.io/gpunode-test/busybox:latest", "containerd_namespace": "k8s.io"}
    fake.commands[(*CTR, "--namespace", "k8s.io", "images", "ls", "--quiet")] = (0, image["containerd_test_image"], "")
    c = containerd_state(params(**image), facts, fake)
    assert c["image"]
    check_containerd(params(**image), facts, fake, True, c)
    argv = fake.ran[-1]
    start = argv.index(CTR[0])
    assert argv[start : start + 6] == [*CTR, "--namespace", "k8s.io", "run"]


def test_on_kubespray_a_rerender_that_dropped_the_runtime_fails_and_names_kubesprays_variable():
    facts = node(
        has_gpu=False,
        installer=KUBESPRAY,
        runtimes={"containerd": {"installed": True, "running": False, "binary": "/usr/local/bin/containerd"}},
    )
    fake = FakeNode(commands={("/usr/local/bin/containerd", "config", "dump"): (0, DUMP_RUNC_ONLY, "")})
    rows = containerd_rows(params(), facts, containerd_state(params(), facts, fake), None, None, True)
    assert rows[1]["status"] == "fail"
    assert rows[1]["detail"] == "no runtimes.nvidia in containerd config dump (kubespray node) (runtimes: runc)"
    assert "containerd_additional_runtimes in the kubespray inventory" in rows[1]["fix"]
    assert "rerun site.yml --tags runtime" in rows[1]["fix"]
    fake.commands[("/usr/local/bin/containerd", "config", "dump")] = (0, DUMP_NVIDIA, "")
    rows = containerd_rows(params(), facts, containerd_state(params(), facts, fake), None, None, True)
    assert rows[1]["status"] == "ok"


# ---- the kubelet's settings where the installer keeps them -----------------------------------------------------

DROPIN = K3S["kubelet"]["dropin"]
AGENT_FILES = {
    "/etc/rancher/k3s/config.yaml": "# admin\nnode-label:\n  - example.com/rack=r7\nkubelet-arg: [max-pods=150]\n",
    DROPIN: "node-label:\n  - example.com/rack=r7\n  - nvidia.com/gpu.present=true\nnode-taint: []\n"
    "kubelet-arg:\n  - max-pods=200\n",
}


def kubelet_fake(files=None, dropin_mtime=1_700_000_050.0):
    files = dict(AGENT_FILES if files is None else files)
    mtimes = {path: 1_700_000_010.0 for path in files if path.startswith("/etc/rancher/k3s/config.yaml.d/")}
    if DROPIN in files:
        mtimes[DROPIN] = dropin_mtime
    return FakeNode(commands={AGENT_START: (0, "100000000", "")}, files=files, mtimes=mtimes)


def test_on_k3s_the_kubelet_row_reads_config_yaml_and_its_drop_ins():
    facts = node(installer=K3S)
    assert check_kubelet(params(), facts, kubelet_fake()) == [
        row(
            "kubelet configuration",
            "ok",
            f"drop-in {DROPIN}: k3s 1.27.5's agent passes its kubelet node-label x2, node-taint x0, kubelet-arg x1",
        )
    ]


def test_on_k3s_the_kubelet_row_fails_without_the_drop_in_instead_of_no_kubelet_yet():
    facts = node(installer=K3S, kubelet={"installed": False})
    files = {k: v for k, v in AGENT_FILES.items() if k != DROPIN}
    [got] = check_kubelet(params(), facts, kubelet_fake(files))
    assert got["status"] == "fail" and got["detail"].startswith(f"no drop-in {DROPIN} on a k3s node")
    assert got["fix"] == "Run site.yml --tags kubelet"


def test_on_k3s_a_drop_in_written_after_the_agent_started_warns_and_a_broken_file_fails():
    [got] = check_kubelet(params(), node(installer=K3S), kubelet_fake(dropin_mtime=1_700_000_150.0))
    assert got["status"] == "warn" and got["fix"].startswith("Restart k3s.service")
    broken = {**AGENT_FILES, "/etc/rancher/k3s/config.yaml.d/50-admin.yaml": "node-label: [a\n  nope: {\n"}
    [got] = check_kubelet(params(), node(installer=K3S), kubelet_fake(broken))
    assert got["status"] == "fail"
    assert got["detail"].startswith("/etc/rancher/k3s/config.yaml.d/50-admin.yaml cannot be read as k3s's agent config")


@pytest.mark.parametrize("pyyaml", [True, False])
def test_the_agent_config_reader_takes_the_forms_the_installers_document(pyyaml, monkeypatch):
    if not pyyaml:
        monkeypatch.setitem(sys.modules, "yaml", None)  # a node without PyYAML: the flat reader
    text = (
        "# c\nnode-label:\n  - 'a=b'\n  - c=d # note\nkubelet-arg: [max-pods=1, \"x=y\"]\ntoken: secret\nnode-taint:\n"
    )
    expected = {"node-label": ["a=b", "c=d"], "kubelet-arg": ["max-pods=1", "x=y"], "node-taint": []}
    assert agent_settings(text) == expected
    with pytest.raises(ValueError):
        agent_settings("node-label: [a\n  nope: {\n")


def test_on_kubespray_the_kubelet_row_says_where_the_settings_belong():
    facts = node(installer=KUBESPRAY)
    [got] = check_kubelet(params(), facts, FakeNode(files={"/etc/kubernetes/kubelet.env": 'KUBELET_ARGS="--v=2"'}))
    assert got["status"] == "warn" and "node_labels, node_taints, kubelet_config_extra_args" in got["fix"]
    env = {"/etc/kubernetes/kubelet.env": 'KUBELET_ARGS="--config-dir=/etc/kubernetes/kubelet.conf.d"'}
    fake = FakeNode(files={**env, "/etc/kubernetes/kubelet.conf.d/50-gpu-node.conf": ""})
    [got] = check_kubelet(params(), facts, fake)
    assert got["status"] == "ok"
