"""The kubelet role's Jinja programs made filters (plugins/filter/kubelet_tasks.py, kubelet.py kubelet_field_flags;
issue 40): each gives what the Jinja it replaced (tests/fixtures/jinja_before_filters/kubelet.yml, from 233085d)
rendered on the same inputs; kubelet_parts, new, decides which task files the role runs. The role calls them through
its plan (plugins/filter/kubelet_plan.py, tests/unit/test_kubelet_plan.py) and its vars (the report's messages)."""

from __future__ import annotations

import base64
import itertools

import pytest
import yaml
from conftest import ROOT, load_module, render_role_value

kt = load_module("kubelet_tasks", subdir="plugins/filter")
kb = load_module("kubelet", subdir="plugins/filter")
kc = load_module("kubelet_config", subdir="plugins/filter")
OLD = yaml.safe_load((ROOT / "tests/fixtures/jinja_before_filters/kubelet.yml").read_text())
NEW_VARS = yaml.safe_load((ROOT / "roles/kubelet/vars/main.yml").read_text())
# the report's message (tasks/apply.yml shows it; vars/main.yml works it out from the plan's report values and the file
# tasks' results: the role includes apply.yml where it says something, __kubelet_work)
NEW_REPORT = {"vars": {"__kubelet_messages": NEW_VARS["__kubelet_messages"]}}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# ------------------------------------------------------------------------------------------- the planned version
GPU_NODES = [
    {},
    {"kubelet": {"installed": True, "version": "1.31.4"}},
    {"kubelet": {"installed": True, "version": ""}, "installer": {"name": "rke2", "version": "v1.33.1+rke2r1"}},
    {"kubelet": {"installed": False, "version": None}, "installer": {"name": "k3s", "version": "v1.32.0+k3s1"}},
    {"kubelet": {"version": "1.30.0"}, "installer": {"name": "kubeadm", "version": "1.29.0"}},
    {"installer": {"name": "rke2", "version": ""}},
    {"installer": {"name": "k3s"}},
]


@pytest.mark.parametrize(
    ("gpu_node", "installed", "assumed"), list(itertools.product(GPU_NODES, [True, False], ["1.33"]))
)
def test_the_planned_version_is_what_the_old_jinja_chose(gpu_node, installed, assumed):
    variables = {"__kubelet_gpu_node": gpu_node, "__kubelet_installed": installed, "kubelet_assumed_version": assumed}
    old = render_role_value(OLD["__kubelet_version_raw"], variables)
    assert kt.kubelet_planned_version(gpu_node, installed, assumed) == old


# ---------------------------------------------------------------------------------------- files read, by path
READS = [
    {"skipped": True},
    {"results": []},
    {
        "results": [
            {"item": "/var/lib/kubelet/config.yaml", "content": _b64("kind: KubeletConfiguration\n")},
            {"item": "/etc/default/kubelet", "failed": True, "msg": "file not found"},
            {"item": "/etc/kubernetes/kubelet.conf.d/50-gpu-node.conf", "content": _b64("maxPods: 200\nä\n")},
        ]
    },
]


@pytest.mark.parametrize("read", READS)
def test_the_files_read_are_what_the_old_jinja_decoded(read):
    old = render_role_value(OLD["__kubelet_files"], {"__kubelet_read": {"results": [], **read}})
    assert kt.kubelet_read_files({"results": [], **read}) == old


# --------------------------------------------------------------------------- the installer's kubelet-arg fields
FIELDS = [
    {},
    {"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock", "registerWithTaints": [{"key": "a"}]},
    {"maxPods": 200, "cpuManagerPolicy": "static", "featureGates": {"UserNamespacesSupport": True}},
    {"reservedSystemCPUs": "0-1", "registerWithTaints": [], "topologyManagerPolicy": "single-numa-node"},
]


@pytest.mark.parametrize("fields", FIELDS)
def test_the_installer_field_flags_are_what_the_old_jinja_made(fields):
    variables = {"__kubelet_fields": fields}
    fields_old = OLD["__kubelet_installer_fields"]
    old = render_role_value(
        "{{ dict(__f | map(attribute='key') | map('kubelet_flag_for_field') | zip(__f | map(attribute='value'))) }}",
        {**variables, "__f": fields_old},
    )
    assert kb.kubelet_field_flags(fields, ["containerRuntimeEndpoint", "registerWithTaints"]) == old


# ------------------------------------------------------------------------------- the file results rolled back
DROPIN = {
    "changed": True,
    "results": [
        {"item": {"dest": "/etc/kubernetes/kubelet.conf.d/50-gpu-node.conf"}, "changed": True, "backup_file": "/b"},
        {"item": {"dest": "/etc/systemd/system/kubelet.service.d/50-gpu-node-config-dir.conf"}, "changed": False},
    ],
}
REMOVED = {"changed": False, "results": [{"item": "/etc/systemd/system/kubelet.service.d/x.conf", "changed": False}]}
RESULTS = [
    ({"skipped": True, "changed": False}, {}, {"changed": True}),
    (DROPIN, {"skipped": True, "changed": False}, REMOVED),
    (DROPIN, {"changed": True, "backup_file": "/m"}, {"skipped": True}),
]


@pytest.mark.parametrize(("dropin", "main", "removed"), RESULTS)
@pytest.mark.parametrize("flags", [{"changed": True}, {"changed": False}])
def test_the_file_results_are_the_pairs_the_old_jinja_rolled_back(dropin, main, removed, flags):
    # the old pairs: the expression before `| gpunode.provisioning.kubelet_rollback_plan(...)`, evaluated as it was
    expression = OLD["__kubelet_rollback"].split("| gpunode.provisioning.kubelet_rollback_plan")[0] + "}}"
    variables = {
        "__kubelet_dropin_result": dropin,
        "__kubelet_main_result": main,
        "__kubelet_removed": removed,
        "__kubelet_flags_result": flags,
        "kubelet_main_config_path": "/var/lib/kubelet/config.yaml",
        "__kubelet_env_file_path": "/etc/default/kubelet",
    }
    old = [list(pair) for pair in render_role_value(expression, variables)]
    new = kt.kubelet_file_results(dropin, main, removed, flags, "/var/lib/kubelet/config.yaml", "/etc/default/kubelet")
    assert new == old


# -------------------------------------------------------------------------------------------------- the report
REPORT_CASES = [
    # unknown variables, userns gates, installed, running, runtime endpoint, verbosity, kubeadm flags, changed
    (False, {}, True, True, "auto", 0, "", False),
    (True, {"UserNamespacesSupport": True}, True, False, "auto", 0, "", True),
    (False, {"UserNamespacesSupport": True}, False, False, "unix:///run/x.sock", 1, "", False),
    (True, {}, True, True, "auto", 0, 'KUBELET_KUBEADM_ARGS="--cgroup-driver=systemd --max-pods=10"\n', True),
    (False, {}, True, True, "unix:///run/x.sock", 0, 'KUBELET_KUBEADM_ARGS="--pod-infra-container-image=p"\n', False),
]
SAID = [1, 5, 3, 4, 0]  # messages of each case with gate None


def test_the_cases_cover_each_message():
    said = []
    for case in REPORT_CASES:
        unknown, userns, installed, running, endpoint, verbosity, kubeadm_flags, changed = case
        values = {
            "hostname": "n",
            "unknown_message": "u" if unknown else "",
            "userns_gates": bool(userns),
            "userns_version": "1.31",
            "userns_gate": True,
            "installed": installed,
            "running": running,
            "mode": "dropin",
            "version": "1.31",
            "runtime_message": "r" if endpoint == "auto" or verbosity else "",
            "kubeadm_flags_file": "f",
            "overridden": ["cgroup-driver"] if "cgroup" in kubeadm_flags else [],
            "changed": changed,
        }
        said.append(len(kt.kubelet_report_messages(values)))
    assert said == SAID


@pytest.mark.parametrize("case", REPORT_CASES)
@pytest.mark.parametrize("gate", [None, False])
def test_the_report_says_what_the_old_jinja_said(case, gate):
    unknown, userns, installed, running, endpoint, verbosity, kubeadm_flags, changed = case
    variables = {
        "inventory_hostname": "node-1",
        "__kubelet_unknown_variables": ["kubelet_typo"] if unknown else [],
        "__kubelet_unknown_message": "These variables start with kubelet_ ...: kubelet_typo.",
        "__kubelet_userns_feature_gates": userns,
        "__kubelet_userns_version": "1.31.2",
        "kubelet_feature_gates": {} if gate is None else {"UserNamespacesSupport": gate},
        "__kubelet_installed": installed,
        "__kubelet_running": running,
        "__kubelet_plan": {"mode": "dropin", "version": "1.31.2"},
        "__kubelet_runtime": {"endpoint": "", "message": "no CRI socket found"},
        "kubelet_container_runtime_endpoint": endpoint,
        "ansible_verbosity": verbosity,
        "__kubelet_kubeadm_flags_file": "/var/lib/kubelet/kubeadm-flags.env",
        "__kubelet_files": {"/var/lib/kubelet/kubeadm-flags.env": kubeadm_flags} if kubeadm_flags else {},
        "__kubelet_fields": {"cgroupDriver": "systemd", "maxPods": 110},
        "__kubelet_flags_result": {"changed": changed},
        "__kubelet_dropin_result": {"changed": False, "results": []},
        "__kubelet_removed": {"skipped": True, "changed": False},
    }
    old = render_role_value("{{ __kubelet_messages | select | list }}", {**variables, **OLD["report_vars"]})
    # the plan's report values (plugins/filter/kubelet_plan.py works them out; test_kubelet_plan.py compares them)
    report = {
        "hostname": "node-1",
        "unknown_message": variables["__kubelet_unknown_message"] if unknown else "",
        "userns_gates": bool(userns),
        "userns_version": "1.31.2",
        "userns_gate": variables["kubelet_feature_gates"].get("UserNamespacesSupport", True),
        "installed": installed,
        "running": running,
        "mode": "dropin",
        "version": "1.31.2",
        "runtime_message": "no CRI socket found" if endpoint == "auto" or verbosity >= 1 else "",
        "kubeadm_flags_file": "/var/lib/kubelet/kubeadm-flags.env",
        "overridden": kc.kubelet_flags_in_text(kubeadm_flags, ["cgroup-driver", "max-pods"]),
    }
    new = render_role_value(
        "{{ __kubelet_messages }}", {**variables, **NEW_REPORT["vars"], "__kubelet_plan": {"report": report}}
    )
    assert new == old


# ------------------------------------------------------------------------------------------------ the parts run
def _before(*present):
    paths = ["/etc/systemd/system/kubelet.service.d/50-gpu-node-device-nodes.conf", "/unit", "/wants", "/cfg"]
    return {"results": [{"item": path, "stat": {"exists": path in present}} for path in paths]}


ARTIFACTS = ["/etc/systemd/system/kubelet.service.d/50-gpu-node-device-nodes.conf", "/unit", "/wants"]


@pytest.mark.parametrize(
    ("before", "dra", "managed", "subid", "mode", "parts"),
    [
        (_before("/cfg"), False, False, False, "dropin", []),
        (_before("/cfg"), False, False, True, "merge", ["user_namespaces.yml", "config_merge.yml"]),
        (_before("/wants"), False, False, False, "dropin", ["dra_absent.yml"]),
        (_before("/unit", "/cfg"), True, False, False, "dropin", ["dra.yml"]),
        (_before(), True, True, True, "merge", ["dra.yml", "installer.yml"]),
        (_before("/unit"), False, True, False, "dropin", ["dra_absent.yml", "installer.yml"]),
        ({"skipped": True}, False, False, False, "merge", ["config_merge.yml"]),
    ],
)
def test_the_parts_follow_the_node_and_the_variables(before, dra, managed, subid, mode, parts):
    assert kt.kubelet_parts(before, dra, ARTIFACTS, managed, subid, mode) == parts
