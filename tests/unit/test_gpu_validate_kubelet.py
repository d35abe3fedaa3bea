"""The doctor's kubelet family on kubeadm-style nodes (plugins/module_utils/gpu_validate/kubelet.py); RKE2/k3s
and kubespray nodes in test_gpu_validate_installers.py.

Each check is a function of its inputs (parameters, node facts, command results, files); the tables give each
row a passing case and the failing cases. FakeNode (conftest.py) answers the commands and file reads."""

from __future__ import annotations

import pytest
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.kubelet import check_kubelet
from conftest import FakeNode, node, params, row

# ---- kubelet -----------------------------------------------------------------------------------------------

DROPIN = "/etc/kubernetes/kubelet.conf.d/50-gpu-node.conf"
MAIN = "/var/lib/kubelet/config.yaml"
ENV = "/etc/default/kubelet"
WITH_CONFIG_DIR = 'KUBELET_EXTRA_ARGS="--config-dir=/etc/kubernetes/kubelet.conf.d"\n'
KC = "kubelet configuration"


@pytest.mark.parametrize(
    ("p", "kubelet", "files", "expected"),
    [
        (
            {},
            {"installed": True, "version": "1.31.2"},
            {DROPIN: "", ENV: WITH_CONFIG_DIR},
            row(KC, "ok", f"drop-in {DROPIN} (kubelet 1.31.2)"),
        ),
        ({}, {"installed": False}, {DROPIN: ""}, row(KC, "ok", f"drop-in {DROPIN} (no kubelet yet)")),
        (
            {},
            {"installed": True, "version": "1.27.6"},
            {MAIN: ""},
            row(KC, "ok", f"merged into {MAIN} (kubelet 1.27.6 reads no drop-ins)"),
        ),
        (
            {"kubelet_config_mode": "merge"},
            {"installed": True, "version": ""},
            {MAIN: ""},
            row(KC, "ok", f"merged into {MAIN} (kubelet ? reads no drop-ins)"),
        ),
        (
            {},
            {"installed": True, "version": "1.31.2"},
            {DROPIN: "", ENV: 'KUBELET_EXTRA_ARGS=""\n'},
            row(
                KC,
                "warn",
                f"drop-in {DROPIN} is there, but {ENV} passes no --config-dir: the kubelet does not read it",
                "Run site.yml --tags kubelet",
            ),
        ),
        (
            {},
            {"installed": True, "version": "1.31.2"},
            {MAIN: ""},
            row(KC, "fail", f"no drop-in at {DROPIN} on a node with kubelet 1.31.2", "Run site.yml --tags kubelet"),
        ),
        (
            {},
            {"installed": True},
            {},
            row(
                KC,
                "fail",
                f"no drop-in at {DROPIN} on a node with kubelet (version unknown)",
                "Run site.yml --tags kubelet",
            ),
        ),
        ({}, {"installed": False}, {}, row(KC, "skipped", "no kubelet installed and no drop-in")),
    ],
)
def test_kubelet(p, kubelet, files, expected):
    assert check_kubelet(params(**p), node(kubelet=kubelet), FakeNode(files=files)) == [expected]
