"""Tests of plugins/filter/kubelet.py, kubelet_config.py and plugins/module_utils/kubernetes/names.py."""

from __future__ import annotations

import base64
import copy
import re
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpunode.provisioning.plugins.module_utils.kubernetes import names
from conftest import load_module, role_defaults, shared_values

kb = load_module("kubelet", subdir="plugins/filter")
kc = load_module("kubelet_config", subdir="plugins/filter")
# the role passes gpu_node_facts' threshold to both filters; so do these tests
DROPIN_MIN = shared_values()["__gpu_node_facts_kubelet_dropin_min"]


def plan_for(version, mode="auto", dropin_min=DROPIN_MIN):
    return kb.kubelet_config_plan(version, mode, dropin_min)


def validate(params, version=None, dropin_min=DROPIN_MIN):
    return kb.kubelet_validate(params, version, dropin_min)


ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = role_defaults("kubelet")


def params(**overrides):
    result = copy.deepcopy(DEFAULTS)
    result.update(overrides)
    return result


# ---------------------------------------------------------------- kubernetes_names


@pytest.mark.parametrize(
    "key",
    ["nvidia.com/gpu.present", "a", "A_b.c-d", "example.com/" + "x" * 63, "a" * 63, "node.kubernetes.io/pool"],
)
def test_valid_label_keys(key):
    assert names.qualified_name_error(key) is None


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (
            "a/b/c",
            "label key 'a/b/c' has more than one '/': use [prefix/]name, e.g. example.com/gpu-pool",
        ),
        ("/x", "label key '/x' has an empty prefix before '/': drop the '/' or put a DNS subdomain before it"),
        (
            "",
            "label key '': the name part is empty; the name must be at most 63 characters: letters, digits, "
            "'-', '_' and '.', starting and ending with a letter or digit",
        ),
        (
            "a" * 64,
            f"label key '{'a' * 64}': the name part '{'a' * 64}' is 64 characters long; the name must be at "
            "most 63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
        ),
        (
            "-a",
            "label key '-a': the name part '-a' has characters or an ending that are not allowed; the name must "
            "be at most 63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
        ),
        (
            "ex_ample.com/a",
            "label key 'ex_ample.com/a': the prefix 'ex_ample.com' must be a DNS subdomain of at most "
            "253 characters: lowercase letters, digits, '-' and '.', each dot-separated part starting and ending with "
            "a letter or digit",
        ),
        (
            ("a." * 127) + "bb/x",
            f"label key '{('a.' * 127) + 'bb/x'}': the prefix '{('a.' * 127) + 'bb'}' must be a "
            "DNS subdomain of at most 253 characters: lowercase letters, digits, '-' and '.', each dot-separated part "
            "starting and ending with a letter or digit",
        ),
        (5, "label key 5 is a int, not a string"),
    ],
)
def test_invalid_label_keys_have_precise_messages(key, message):
    assert names.qualified_name_error(key) == message


@pytest.mark.parametrize("value", ["", "true", "a.b_c-d", "x" * 63])
def test_valid_label_values(value):
    assert names.label_value_error(value) is None


@pytest.mark.parametrize("value", ["x" * 64, "a b", "-a", "a-", "é"])
def test_invalid_label_values(value):
    assert names.label_value_error(value) == (
        f"label value {value!r} is not valid: it must be empty or at most 63 characters: letters, digits, "
        "'-', '_' and '.', starting and ending with a letter or digit"
    )


@pytest.mark.parametrize(
    "key",
    [
        "node.kubernetes.io/pool",
        "gpu.node.kubernetes.io/x",
        "kubelet.kubernetes.io/x",
        "topology.kubernetes.io/zone",
        "kubernetes.io/arch",
        "example.com/role",
        "mykubernetes.io/x",
        "plain",
    ],
)
def test_labels_the_kubelet_accepts(key):
    assert names.kubelet_label_error(key) is None


@pytest.mark.parametrize(
    "key",
    [
        "node-role.kubernetes.io/gpu",
        "kubernetes.io/role",
        "k8s.io/x",
        "foo.k8s.io/x",
        "node-restriction.kubernetes.io/a",
    ],
)
def test_labels_the_kubelet_refuses(key):
    message = names.kubelet_label_error(key)
    namespace = key.split("/")[0]
    assert message.startswith(f"label key {key!r} is in the reserved {namespace} namespace, and the kubelet refuses")


@pytest.mark.parametrize(
    ("text", "taint"),
    [
        ("nvidia.com/gpu=present:NoSchedule", {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}),
        ("dedicated:NoExecute", {"key": "dedicated", "effect": "NoExecute"}),
        ("a=:PreferNoSchedule", {"key": "a", "value": "", "effect": "PreferNoSchedule"}),
    ],
)
def test_parse_and_render_taints(text, taint):
    assert names.parse_taint(text) == taint
    assert names.render_taint(taint) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "nvidia.com/gpu=present",
            "taint 'nvidia.com/gpu=present' has no effect: write key[=value]:Effect, e.g. "
            "nvidia.com/gpu=present:NoSchedule",
        ),
        (
            "a=b:NoSchedul",
            "taint 'a=b:NoSchedul' has the effect 'NoSchedul': use one of NoSchedule, PreferNoSchedule, NoExecute",
        ),
        (
            ":NoSchedule",
            "taint ':NoSchedule': taint key '': the name part is empty; the name must be at most 63 "
            "characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
        ),
        (
            "a=b c:NoSchedule",
            "taint 'a=b c:NoSchedule': taint value 'b c' is not valid: it must be empty or at most "
            "63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
        ),
        ({"key": "a"}, "taint {'key': 'a'} is a dict, not a string of the form key[=value]:Effect"),
    ],
)
def test_bad_taints_have_precise_messages(text, message):
    with pytest.raises(ValueError) as exc:
        names.parse_taint(text)
    assert str(exc.value) == message


# ---------------------------------------------------------------- versions and plans


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1.31", "1.31.0"), ("v1.29.3", "1.29.3"), ("Kubernetes v1.31.0", "1.31.0"), ("1.30.1-eks-1234", "1.30.1")],
)
def test_kubelet_version(value, expected):
    assert kb.kubelet_version(value) == expected


@pytest.mark.parametrize("value", ["", "latest", "1", 1.31, None])
def test_kubelet_version_refuses_non_versions(value):
    with pytest.raises(kb.AnsibleFilterError) as exc:
        kb.kubelet_version(value)
    assert str(exc.value) == f"kubelet version {value!r} is not a version like 1.31 or v1.31.2"


@pytest.mark.parametrize(
    ("version", "mode", "expected"),
    [
        ("1.27.9", "auto", {"mode": "merge", "dropin_support": "none", "alpha_env": False}),
        ("1.28.0", "auto", {"mode": "dropin", "dropin_support": "alpha", "alpha_env": True}),
        ("1.29.5", "merge", {"mode": "merge", "dropin_support": "alpha", "alpha_env": False}),
        ("1.30.0", "auto", {"mode": "dropin", "dropin_support": "beta", "alpha_env": False}),
        ("1.35.0", "dropin", {"mode": "dropin", "dropin_support": "ga", "alpha_env": False}),
        ("2.0", "auto", {"mode": "dropin", "dropin_support": "ga", "alpha_env": False}),
    ],
)
def test_config_plan(version, mode, expected):
    plan = plan_for(version, mode)
    assert {key: plan[key] for key in expected} == expected
    assert plan["version"] == kb.kubelet_version(version)


def test_config_plan_refuses_dropin_for_old_kubelets():
    with pytest.raises(kb.AnsibleFilterError) as exc:
        plan_for("1.27.3", "dropin")
    assert str(exc.value) == (
        "kubelet 1.27.3 has no --config-dir (it arrived in 1.28); set kubelet_config_mode to auto or merge"
    )


def test_config_plan_and_validate_take_the_drop_in_threshold_from_the_caller():
    # the role passes gpu_node_facts' __gpu_node_facts_kubelet_dropin_min, the one place of that value
    assert plan_for("1.28.0", "auto", "1.29")["mode"] == "merge"
    assert plan_for("1.29.0", "auto", "1.29")["mode"] == "dropin"
    with pytest.raises(kb.AnsibleFilterError) as exc:
        plan_for("1.28.3", "dropin", "1.29")
    assert "(it arrived in 1.29)" in str(exc.value)
    errors = validate(params(kubelet_config_mode="dropin"), "1.28.1", "1.29")
    assert [e for e in errors if e.startswith("kubelet_config_mode: dropin needs kubelet 1.29 or later")] != []


# ---------------------------------------------------------------- runtime endpoint


def _node(running=(), installed=()):
    return {"runtimes_running": list(running), "runtimes_installed": list(installed)}


@pytest.mark.parametrize(
    ("node", "endpoint"),
    [
        (_node(["containerd"], ["containerd"]), "unix:///run/containerd/containerd.sock"),
        (_node([], ["crio"]), "unix:///var/run/crio/crio.sock"),
        (_node(["docker"], ["docker", "containerd"]), "unix:///run/cri-dockerd.sock"),
        (_node(["crio"], ["docker", "crio"]), "unix:///var/run/crio/crio.sock"),
    ],
)
def test_runtime_endpoint_from_the_one_runtime(node, endpoint):
    assert kb.kubelet_runtime_endpoint(node, "auto")["endpoint"] == endpoint


def test_runtime_endpoint_for_docker_mentions_cri_dockerd():
    result = kb.kubelet_runtime_endpoint(_node(["docker"]), "auto")
    assert result["message"] == (
        "containerRuntimeEndpoint unix:///run/cri-dockerd.sock: docker is the only container runtime running on this "
        "node (Docker is reached through cri-dockerd, which must be installed)."
    )


def test_runtime_endpoint_ambiguous_is_left_alone_with_a_reason():
    result = kb.kubelet_runtime_endpoint(_node(["docker", "containerd"]), "auto")
    assert result == {
        "endpoint": "",
        "message": "several container runtimes are running on this node (docker, containerd), so "
        "containerRuntimeEndpoint is left to the kubelet's own configuration; set kubelet_container_runtime_endpoint "
        "(e.g. unix:///run/containerd/containerd.sock) to choose one.",
    }


def test_runtime_endpoint_none_found_and_explicit_and_empty():
    assert kb.kubelet_runtime_endpoint({}, "auto")["endpoint"] == ""
    assert kb.kubelet_runtime_endpoint(None, "auto")["message"].startswith("no container runtime")
    assert kb.kubelet_runtime_endpoint(_node(["crio"]), "unix:///x.sock")["endpoint"] == "unix:///x.sock"
    assert kb.kubelet_runtime_endpoint(_node(["crio"]), "")["endpoint"] == ""


# ---------------------------------------------------------------- validation: every bad input, a precise message


def test_defaults_are_valid():
    assert validate(params(), "1.31.2") == []


def test_a_full_valid_configuration_passes():
    good = params(
        kubelet_seccomp_default=True,
        kubelet_cgroup_driver="systemd",
        kubelet_container_runtime_endpoint="unix:///run/containerd/containerd.sock",
        kubelet_cpu_manager_policy="static",
        kubelet_reserved_system_cpus="0-1,32-33",
        kubelet_topology_manager_policy="single-numa-node",
        kubelet_feature_gates={"DynamicResourceAllocation": True},
        kubelet_register_with_taints=["dedicated=gpu:NoExecute"],
        kubelet_config={"maxPods": 64, "topologyManagerScope": "pod"},
        kubelet_config_passthrough={"someFutureField": 1},
        kubelet_node_labels={"example.com/pool": "a100", "node.kubernetes.io/exclude-from-external-load-balancers": ""},
        kubelet_node_labels_absent=["example.com/old"],
        kubelet_flags={"v": 2, "node-ip": "10.0.0.5"},
        kubelet_flags_absent=["--pod-infra-container-image"],
        kubelet_config_absent=["evictionSoft"],
    )
    assert validate(good, "1.29.0") == []


BAD_INPUTS = [
    (
        "kubelet_assumed_version",
        1.3,
        'kubelet_assumed_version: 1.3 is a YAML number, which loses digits (1.30 reads as 1.3); quote it, e.g. "1.30".',
    ),
    (
        "kubelet_assumed_version",
        "latest",
        'kubelet_assumed_version: \'latest\' is not a kubelet version; use a string like "1.31" or "v1.31.2".',
    ),
    (
        "kubelet_reserved_system_cpus",
        "0 - 1",
        "kubelet_reserved_system_cpus: '0 - 1' is not a CPU list; use numbers "
        'and ranges like "0-1,32-33" (no spaces).',
    ),
    (
        "kubelet_reserved_system_cpus",
        "3-1",
        "kubelet_reserved_system_cpus: the range '3-1' in '3-1' runs backwards; write it low-high.",
    ),
    (
        "kubelet_reserved_system_cpus",
        [0, 1],
        'kubelet_reserved_system_cpus: [0, 1] is a list; use a CPU list string like "0-1" or "0,32".',
    ),
    (
        "kubelet_container_runtime_endpoint",
        "/run/containerd/containerd.sock",
        "kubelet_container_runtime_endpoint: "
        "'/run/containerd/containerd.sock' is not a unix socket URL; use auto, an empty string (leave it alone) "
        "or e.g. unix:///run/containerd/containerd.sock.",
    ),
    (
        "kubelet_feature_gates",
        {"dynamic-resource-allocation": True},
        "kubelet_feature_gates: "
        "'dynamic-resource-allocation' is not a feature gate name; gates are CamelCase, "
        "e.g. DynamicResourceAllocation.",
    ),
    (
        "kubelet_feature_gates",
        {"Foo": "true"},
        "kubelet_feature_gates: Foo is 'true' (a string); use true or false (unquoted).",
    ),
    (
        "kubelet_register_with_taints",
        ["gpu=yes"],
        "kubelet_register_with_taints: taint 'gpu=yes' has no effect: write "
        "key[=value]:Effect, e.g. nvidia.com/gpu=present:NoSchedule.",
    ),
    (
        "kubelet_register_with_taints",
        ["nvidia.com/gpu=other:NoSchedule"],
        "kubelet_register_with_taints / "
        "kubelet_gpu_register_with_taints: the taint nvidia.com/gpu with effect NoSchedule is given twice; Kubernetes "
        "allows one per key and effect, keep one.",
    ),
    (
        "kubelet_gpu_register_with_taints",
        ["nvidia.com/gpu:Evict"],
        "kubelet_gpu_register_with_taints: taint "
        "'nvidia.com/gpu:Evict' has the effect 'Evict': use one of NoSchedule, PreferNoSchedule, NoExecute.",
    ),
    (
        "kubelet_node_labels",
        {"bad key": "x"},
        "kubelet_node_labels: label key 'bad key': the name part 'bad key' has "
        "characters or an ending that are not allowed; the name must be at most 63 characters: letters, digits, '-', "
        "'_' and '.', starting and ending with a letter or digit.",
    ),
    (
        "kubelet_node_labels",
        {"a": "x y"},
        "kubelet_node_labels: label value 'x y' is not valid: it must be empty or "
        "at most 63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit (label "
        "'a').",
    ),
    (
        "kubelet_node_labels",
        {"a": ["x"]},
        "kubelet_node_labels: label value ['x'] is a list, not a string (label 'a').",
    ),
    (
        "kubelet_gpu_node_labels",
        {"node-role.kubernetes.io/gpu": ""},
        "kubelet_gpu_node_labels: label key "
        "'node-role.kubernetes.io/gpu' is in the reserved node-role.kubernetes.io namespace, and the kubelet "
        "refuses to start with it in --node-labels (only node.kubernetes.io/..., kubelet.kubernetes.io/... and the "
        "well-known topology, os, arch and instance-type labels are allowed); use your own prefix (e.g. "
        "example.com/role), or set the label through the API (kubectl label node).",
    ),
    (
        "kubelet_node_labels_absent",
        ["nvidia.com/gpu.present"],
        "kubelet_node_labels_absent: 'nvidia.com/gpu.present' "
        "is also set in kubelet_node_labels or kubelet_gpu_node_labels; keep it in one place.",
    ),
    (
        "kubelet_node_labels_absent",
        ["a b"],
        "kubelet_node_labels_absent: label key 'a b': the name part 'a b' has "
        "characters or an ending that are not allowed; the name must be at most 63 characters: letters, digits, '-', "
        "'_' and '.', starting and ending with a letter or digit.",
    ),
    (
        "kubelet_config",
        {"cgroupDriver": "systemd"},
        "kubelet_config: cgroupDriver has its own variable; set kubelet_cgroup_driver instead.",
    ),
    ("kubelet_config", {"kind": "KubeletConfiguration"}, "kubelet_config: leave out kind; the role writes it."),
    (
        "kubelet_config_passthrough",
        {"apiVersion": "v1"},
        "kubelet_config_passthrough: leave out apiVersion; the role writes it.",
    ),
    (
        "kubelet_config_passthrough",
        {"registerWithTaints": []},
        "kubelet_config_passthrough: registerWithTaints is "
        "already set by kubelet_gpu_register_with_taints; set it in one place.",
    ),
    (
        "kubelet_config_absent",
        ["registerWithTaints"],
        "kubelet_config_absent: registerWithTaints is also set by this role's variables; keep it in one place.",
    ),
    ("kubelet_config_absent", ["kind"], "kubelet_config_absent: kind cannot be removed."),
    (
        "kubelet_flags",
        {"config-dir": "/x"},
        "kubelet_flags: --config-dir is managed by this role; set kubelet_config_dir instead.",
    ),
    (
        "kubelet_flags",
        {"--node-labels": "a=b"},
        "kubelet_flags: --node-labels is managed by this role; set kubelet_node_labels instead.",
    ),
    (
        "kubelet_flags",
        {"bad flag": 1},
        "kubelet_flags: 'bad flag' is not a flag name; use letters, digits, '-', '_' and '.'.",
    ),
    (
        "kubelet_flags",
        {"node-ip": "a b"},
        "kubelet_flags: the value of 'node-ip' ('a b') contains whitespace, a quote "
        "or a backslash, which KUBELET_EXTRA_ARGS cannot carry; use a value without them.",
    ),
    ("kubelet_flags", {"x": {"a": 1}}, "kubelet_flags: the value of 'x' is a dict; use a string."),
    (
        "kubelet_flags",
        {"register-with-taints": "a:NoSchedule"},
        "kubelet_flags: --register-with-taints would override "
        "registerWithTaints, which this role already sets in the KubeletConfiguration; set it in one place only (drop "
        "the flag).",
    ),
    (
        "kubelet_flags_absent",
        ["--config-dir"],
        "kubelet_flags_absent: --config-dir is managed by this role; set kubelet_config_dir instead.",
    ),
    (
        "kubelet_config_dir",
        "etc/kubernetes",
        "kubelet_config_dir: 'etc/kubernetes' is not an absolute path; use a path that starts with '/'.",
    ),
    (
        "kubelet_main_config_path",
        None,
        "kubelet_main_config_path: None is not an absolute path; use a path that starts with '/'.",
    ),
    (
        "kubelet_env_file",
        "default/kubelet",
        "kubelet_env_file: 'default/kubelet' is not an absolute path; use a path that starts with '/'.",
    ),
    (
        "kubelet_dropin_name",
        "50-gpu.yaml",
        "kubelet_dropin_name: '50-gpu.yaml' is not a drop-in file name; the "
        "kubelet reads only *.conf files, e.g. 50-gpu-node.conf (no '/').",
    ),
    (
        "kubelet_dropin_name",
        "sub/50.conf",
        "kubelet_dropin_name: 'sub/50.conf' is not a drop-in file name; the "
        "kubelet reads only *.conf files, e.g. 50-gpu-node.conf (no '/').",
    ),
    (
        "kubelet_healthz_timeout",
        0,
        "kubelet_healthz_timeout: 0 is not a number of seconds; use an integer of 1 or more.",
    ),
]
# User namespaces (hostUsers: false): the gate switch and the optional host ID range.
BAD_INPUTS += [
    (
        "kubelet_user_namespaces_subid_start",
        100000,
        "kubelet_user_namespaces_subid_start: 100000 is not a multiple of 65536 of at least 65536; the kubelet gives "
        "each pod 65536 IDs (the count covers maxPods x 65536), or use null for no range.",
    ),
    (
        "kubelet_user_namespaces_subid_count",
        65536 * 110,
        "kubelet_user_namespaces_subid_start and kubelet_user_namespaces_subid_count go together: "
        "set both, or neither (null: the kubelet picks IDs above 65535 by itself).",
    ),
]


def test_a_user_namespace_range_in_whole_blocks_is_accepted():
    good = params(kubelet_user_namespaces_subid_start=65536 * 16, kubelet_user_namespaces_subid_count=65536 * 110)
    assert validate(good, "1.31.0") == []


@pytest.mark.parametrize(
    ("var", "value", "message"), BAD_INPUTS, ids=[f"{v}-{i}" for i, (v, _, _) in enumerate(BAD_INPUTS)]
)
def test_each_bad_input_has_one_precise_message(var, value, message):
    assert validate(params(**{var: value}), "1.31.0") == [message]


# Types and choices are meta/argument_specs.yml's alone: the role_variables action (types, null, choices)
# refuses these before kubelet_validate runs, which therefore does not check them again.
role_variables = load_module("role_variables", subdir="plugins/action")
SPEC = yaml.safe_load((ROOT / "roles/kubelet/meta/argument_specs.yml").read_text())["argument_specs"][
    role_variables.ENTRY_POINT
]["options"]
SPEC_REFUSES = [
    ("kubelet_config_mode", "drop-in", "kubelet_config_mode must be one of auto, dropin, merge (got 'drop-in')"),
    (
        "kubelet_cgroup_driver",
        "Systemd",
        "kubelet_cgroup_driver must be one of systemd, cgroupfs, null (got 'Systemd')",
    ),
    ("kubelet_cpu_manager_policy", "Static", "kubelet_cpu_manager_policy must be one of none, static, null (got"),
    ("kubelet_topology_manager_policy", "single_numa_node", "must be one of none, best-effort, restricted, single"),
    ("kubelet_seccomp_default", "yes", "kubelet_seccomp_default must be a boolean (got a string ('yes'))"),
    ("kubelet_feature_gates", ["A"], "kubelet_feature_gates must be a mapping (got a list)"),
    ("kubelet_register_with_taints", "a:NoSchedule", "kubelet_register_with_taints must be a list of str"),
    ("kubelet_node_labels", ["a=b"], "kubelet_node_labels must be a mapping (got a list)"),
    ("kubelet_config", "maxPods: 1", "kubelet_config must be a mapping (got a string"),
    ("kubelet_config_passthrough", None, "kubelet_config_passthrough is null"),
    ("kubelet_config_absent", [["a", "b"]], "kubelet_config_absent must be a list of str, but item 0 is a list"),
    ("kubelet_flags", "--v=2", "kubelet_flags must be a mapping (got a string"),
    ("kubelet_flags_absent", "v", "kubelet_flags_absent must be a list of str (got a string"),
    ("kubelet_healthz_timeout", True, "kubelet_healthz_timeout must be an integer (got a boolean)"),
    ("kubelet_backup", "yes", "kubelet_backup must be a boolean (got a string ('yes'))"),
    ("kubelet_restart_on_change", None, "kubelet_restart_on_change is null"),
    ("kubelet_remove_conflicting_flags", 1, "kubelet_remove_conflicting_flags must be a boolean (got a number (1))"),
    ("kubelet_reset_resource_manager_state", "false", "must be a boolean (got a string ('false'))"),
    ("kubelet_dra_clear_checkpoint", "yes", "kubelet_dra_clear_checkpoint must be a boolean (got a string ('yes'))"),
    ("kubelet_healthz_check", [], "kubelet_healthz_check must be a boolean (got a list)"),
    ("kubelet_user_namespaces", "yes", "kubelet_user_namespaces must be a boolean (got a string ('yes'))"),
    ("kubelet_user_namespaces_subid_start", "65536", "must be an integer (got a string ('65536'))"),
]


def _spec_problems(var, value) -> list[str]:
    """What the role_variables action says about one variable's type and choices."""
    return role_variables.type_problems(SPEC, {var: value}) + role_variables.choice_problems(SPEC, {var: value})


@pytest.mark.parametrize(("var", "value", "message"), SPEC_REFUSES, ids=[case[0] for case in SPEC_REFUSES])
def test_argument_specs_refuse_wrong_types_and_choices_before_the_role_checks(var, value, message):
    problems = _spec_problems(var, value)
    assert [p for p in problems if message in p], problems


def test_valid_values_pass_the_argument_specs():
    assert [p for var, value in params().items() for p in _spec_problems(var, value)] == []


def test_every_public_variable_has_a_bad_input_test():
    assert {var for var, _, _ in BAD_INPUTS} | {var for var, _, _ in SPEC_REFUSES} == set(DEFAULTS)


def test_unknown_kubelet_configuration_fields_pass_through():
    # no copy of the upstream field list: the kubelet judges names (a field newer than the role just works)
    assert validate(params(kubelet_config={"maxpods": 10, "someFutureField": {"a": 1}}), "1.31.0") == []
    fields = kb.kubelet_compose_config(params(kubelet_config={"someFutureField": {"a": 1}}))
    assert fields["someFutureField"] == {"a": 1}


def test_messages_add_up_for_several_problems():
    errors = validate(params(kubelet_reserved_system_cpus="x", kubelet_healthz_timeout=0), "1.31.0")
    assert [error.split(":")[0] for error in errors] == ["kubelet_reserved_system_cpus", "kubelet_healthz_timeout"]


def test_dropin_mode_for_an_old_installed_kubelet_is_refused():
    assert validate(params(kubelet_config_mode="dropin"), "1.27.4") == [
        "kubelet_config_mode: dropin needs kubelet 1.28 or later (--config-dir), but the kubelet is 1.27.4; "
        "use auto or merge."
    ]


def test_unreadable_installed_kubelet_version_is_reported():
    assert validate(params(), "unknown") == [
        "the installed kubelet reports the version 'unknown', which this role cannot read; check `kubelet --version` "
        "on the node."
    ]


def test_passthrough_and_config_may_not_both_set_a_field():
    errors = validate(params(kubelet_config={"maxPods": 1}, kubelet_config_passthrough={"maxPods": 2}))
    assert errors == ["kubelet_config_passthrough: maxPods is also in kubelet_config; set it in one place."]


def test_flags_that_override_a_configured_field_are_refused():
    errors = validate(params(kubelet_config={"maxPods": 64}, kubelet_flags={"max-pods": 110}))
    assert errors == [
        "kubelet_flags: --max-pods would override maxPods, which this role already sets in the KubeletConfiguration; "
        "set it in one place only (drop the flag)."
    ]


class _TaggedStr(str):
    """Stands for Ansible's _AnsibleTaggedStr: the variables a filter gets are subclasses of the plain types."""


class _TaggedList(list):
    pass


def test_type_names_in_messages_see_through_ansibles_subclasses():
    # found by molecule/kubelet: the message read "'yes' is a _AnsibleTaggedStr"
    assert validate(params(kubelet_feature_gates={"A": _TaggedStr("yes")}), "1.31.0") == [
        "kubelet_feature_gates: A is 'yes' (a string); use true or false (unquoted)."
    ]
    assert validate(params(kubelet_node_labels={"a": _TaggedList(["x"])}), "1.31.0") == [
        "kubelet_node_labels: label value ['x'] is a list, not a string (label 'a')."
    ]


def test_integer_reserved_cpus_and_boolean_label_values_are_accepted():
    assert validate(params(kubelet_reserved_system_cpus=0, kubelet_node_labels={"a": True})) == []


# ---------------------------------------------------------------- what the role writes


def test_compose_config_order_and_gpu_taints():
    fields = kb.kubelet_compose_config(
        params(
            kubelet_seccomp_default=True,
            kubelet_cgroup_driver="systemd",
            kubelet_reserved_system_cpus=0,
            kubelet_feature_gates={"A": True},
            kubelet_config={"maxPods": 64},
            kubelet_config_passthrough={"futureField": "x"},
        ),
        "unix:///run/containerd/containerd.sock",
        True,
    )
    assert fields == {
        "cgroupDriver": "systemd",
        "seccompDefault": True,
        "reservedSystemCPUs": "0",
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "featureGates": {"A": True},
        "registerWithTaints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        "maxPods": 64,
        "futureField": "x",
    }
    assert list(fields) == list(fields.keys())  # insertion order is the file's order


def test_compose_config_without_gpu_and_without_settings_is_empty():
    assert kb.kubelet_compose_config(params(), "", False) == {}


def test_compose_config_keeps_the_main_files_other_taints():
    main = {
        "registerWithTaints": [
            {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
            {"key": "nvidia.com/gpu", "value": "old", "effect": "NoSchedule"},
        ]
    }
    fields = kb.kubelet_compose_config(params(), "", True, main)
    assert fields["registerWithTaints"] == [
        {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
    ]


def test_compose_labels_on_gpu_and_cpu_nodes():
    user = params(kubelet_node_labels={"example.com/pool": 7}, kubelet_node_labels_absent=["old"])
    assert kb.kubelet_compose_labels(user, True) == {
        "labels": {"nvidia.com/gpu.present": "true", "example.com/pool": "7"},
        "absent": ["old"],
    }
    assert kb.kubelet_compose_labels(user, False) == {
        "labels": {"example.com/pool": "7"},
        "absent": ["old", "nvidia.com/gpu.present"],
    }
    forced = params(kubelet_node_labels={"nvidia.com/gpu.present": False})
    assert kb.kubelet_compose_labels(forced, False) == {"labels": {"nvidia.com/gpu.present": "false"}, "absent": []}


@pytest.mark.parametrize(
    ("field", "flag"),
    [
        ("cgroupDriver", "cgroup-driver"),
        ("containerRuntimeEndpoint", "container-runtime-endpoint"),
        ("reservedSystemCPUs", "reserved-cpus"),
        ("cpuCFSQuota", "cpu-cfs-quota"),
        ("registerWithTaints", "register-with-taints"),
        ("healthzBindAddress", "healthz-bind-address"),
        ("podCIDR", "pod-cidr"),
        ("maxPods", "max-pods"),
    ],
)
def test_flag_for_field(field, flag):
    assert kb.flag_for_field(field) == flag


def test_flag_changes_in_dropin_mode():
    plan = plan_for("1.31.0")
    changes = kb.kubelet_flag_changes(
        params(kubelet_flags={"--v": 2}, kubelet_flags_absent=["x"]),
        plan,
        {"cgroupDriver": "systemd", "featureGates": {"A": True}},
    )
    assert changes == {
        "flags": {"v": 2, "config-dir": "/etc/kubernetes/kubelet.conf.d"},
        "flags_absent": ["x", "cgroup-driver"],
    }


def test_flag_changes_for_old_kubelets_remove_config_dir_and_can_keep_conflicts():
    plan = plan_for("1.27.0")
    changes = kb.kubelet_flag_changes(params(kubelet_remove_conflicting_flags=False), plan, {"cgroupDriver": "systemd"})
    assert changes == {"flags": {}, "flags_absent": ["config-dir"]}
    plan = plan_for("1.31.0", "merge")
    assert kb.kubelet_flag_changes(params(kubelet_remove_conflicting_flags=False), plan, {}) == {
        "flags": {},
        "flags_absent": [],
    }


MAIN = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
healthzPort: 10248
"""


def test_merge_config_leaves_the_text_alone_when_nothing_changes():
    result = kc.kubelet_merge_config(MAIN, {"cgroupDriver": "systemd"}, [], "/var/lib/kubelet/config.yaml")
    assert result["changed"] is False
    assert result["content"] is MAIN


def test_merge_config_merges_keeps_other_keys_and_order_and_removes():
    result = kc.kubelet_merge_config(
        MAIN,
        {"authentication": {"webhook": {"enabled": True}}, "clusterDNS": ["10.0.0.10"], "seccompDefault": True},
        ["healthzPort"],
    )
    assert result["changed"] is True
    assert result["content"] == (
        "apiVersion: kubelet.config.k8s.io/v1beta1\n"
        "kind: KubeletConfiguration\n"
        "authentication:\n"
        "  anonymous:\n"
        "    enabled: false\n"
        "  webhook:\n"
        "    enabled: true\n"
        "cgroupDriver: systemd\n"
        "clusterDNS:\n"
        "- 10.0.0.10\n"
        "seccompDefault: true\n"
    )
    again = kc.kubelet_merge_config(result["content"], {"seccompDefault": True}, ["healthzPort"])
    assert again["changed"] is False


def test_merge_config_creates_a_full_document_from_nothing():
    result = kc.kubelet_merge_config("", {"maxPods": 64})
    assert result["changed"] is True
    assert result["content"] == "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 64\n"


def test_parse_config_errors_name_the_file_and_the_fix():
    with pytest.raises(kb.AnsibleFilterError) as exc:
        kc.kubelet_parse_config("a: [1,\nb: 2\n", "/var/lib/kubelet/config.yaml")
    assert str(exc.value).startswith("/var/lib/kubelet/config.yaml is not valid YAML at line ")
    assert str(exc.value).endswith("Fix the file (the kubelet cannot read it either), then run again.")
    with pytest.raises(kb.AnsibleFilterError) as exc:
        kc.kubelet_parse_config("- a\n", "/c.yaml")
    assert str(exc.value) == (
        "/c.yaml holds a list at the top level, not a KubeletConfiguration mapping. Fix the file, then run again."
    )
    with pytest.raises(kb.AnsibleFilterError) as exc:
        kc.kubelet_parse_config("kind: KubeProxyConfiguration\n", "/c.yaml")
    assert str(exc.value) == (
        "/c.yaml is a KubeProxyConfiguration, not a KubeletConfiguration. Point kubelet_main_config_path at the "
        "kubelet's --config file."
    )
    assert kc.kubelet_parse_config("", "/c.yaml") == {}
    assert kc.kubelet_parse_config("# only a comment\n", "/c.yaml") == {}


def test_config_document_is_a_full_object_with_type_meta_first():
    text = kc.kubelet_config_document({"seccompDefault": True, "featureGates": {"B": False, "A": True}})
    assert text == (
        "apiVersion: kubelet.config.k8s.io/v1beta1\n"
        "kind: KubeletConfiguration\n"
        "seccompDefault: true\n"
        "featureGates:\n"
        "  B: false\n"
        "  A: true\n"
    )
    assert yaml.safe_load(text)["kind"] == "KubeletConfiguration"


def test_config_document_quotes_strings_that_look_like_other_types():
    text = kc.kubelet_config_document({"reservedSystemCPUs": "0", "x": "true"})
    assert yaml.safe_load(text) == {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "reservedSystemCPUs": "0",
        "x": "true",
    }


def test_effective_config_applies_dropins_in_order_and_replaces_lists():
    main = {"a": 1, "l": [1, 2], "m": {"x": 1}}
    assert kc.kubelet_effective_config(main, {"l": [3]}, {"m": {"y": 2}}) == {"a": 1, "l": [3], "m": {"x": 1, "y": 2}}
    assert main == {"a": 1, "l": [1, 2], "m": {"x": 1}}


@pytest.mark.parametrize(
    ("config", "url"),
    [
        ({}, "http://127.0.0.1:10248/healthz"),
        ({"healthzPort": 10256, "healthzBindAddress": "10.0.0.5"}, "http://10.0.0.5:10256/healthz"),
        ({"healthzBindAddress": "0.0.0.0"}, "http://127.0.0.1:10248/healthz"),
        ({"healthzBindAddress": "::"}, "http://[::1]:10248/healthz"),
        ({"healthzBindAddress": "fd00::5"}, "http://[fd00::5]:10248/healthz"),
        ({"healthzPort": 0}, ""),
    ],
)
def test_healthz_url(config, url):
    assert kc.kubelet_healthz_url(config) == url


@pytest.mark.parametrize(
    ("old", "new", "resets"),
    [
        ({}, {}, []),
        ({}, {"cpuManagerPolicy": "none"}, []),
        ({}, {"cpuManagerPolicy": "static"}, ["cpu_manager_state"]),
        (
            {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"},
            {"cpuManagerPolicy": "static"},
            ["cpu_manager_state"],
        ),
        ({"memoryManagerPolicy": "Static"}, {}, ["memory_manager_state"]),
        ({"maxPods": 1}, {"maxPods": 2, "topologyManagerPolicy": "restricted"}, []),
    ],
)
def test_state_resets(old, new, resets):
    assert kc.kubelet_state_resets(old, new) == resets


def test_flags_in_text_finds_flags_in_kubeadm_flags_env():
    text = (
        'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///x --pod-infra-container-image=p '
        '--cgroup-driver x"\n'
    )
    found = kc.kubelet_flags_in_text(text, ["container-runtime-endpoint", "cgroup-driver", "max-pods", "cgroup"])
    assert found == ["container-runtime-endpoint", "cgroup-driver"]
    assert kc.kubelet_flags_in_text("", ["a"]) == []


def test_service_state_from_a_service_facts_result():
    result = {"ansible_facts": {"services": {"kubelet.service": {"name": "kubelet.service", "state": "running"}}}}
    assert kc.kubelet_service_state(result, "kubelet") == "running"
    assert kc.kubelet_service_state(result, "kubelet.service") == "running"
    assert kc.kubelet_service_state({"skipped": True}, "kubelet") == "unknown"
    assert kc.kubelet_service_state(None) == "unknown"


def test_every_filter_the_role_uses_exists():
    pattern = re.compile(r"(?:\|\s*|map\(')gpunode\.provisioning\.(kubelet_[a-z_]+)")
    used = set()
    for path in (ROOT / "roles/kubelet").rglob("*"):
        if path.suffix in (".yml", ".j2"):
            used.update(pattern.findall(path.read_text()))
    assert {"kubelet_plan", "kubelet_plan_check", "kubelet_config_document", "kubelet_field_flags"} <= used
    # the plan (it calls the checks and the composition), the installer drop-in's filters (RKE2/k3s config.yaml.d),
    # the config files' and the tasks' live in their own files
    installer = load_module("kubelet_installer", subdir="plugins/filter")
    tasks = load_module("kubelet_tasks", subdir="plugins/filter")
    plan = load_module("kubelet_plan", subdir="plugins/filter")
    provided = set(kb.FilterModule().filters()) | set(kc.FilterModule().filters()) | set(plan.FilterModule().filters())
    assert used <= provided | set(installer.FilterModule().filters()) | set(tasks.FilterModule().filters())


# ---------------------------------------------------------------- anchored at the very end, paths checked up front

SPACE_MSG = (
    "contains whitespace, a quote, a backslash or a control character, which cannot be passed on the kubelet's "
    "command line (KUBELET_EXTRA_ARGS is split at whitespace); use a path without them."
)

NOT_PLAIN_MSG = "is not a plain file or directory path; drop the '.', '..' or trailing '/'."


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        (
            "kubelet_config_dir",
            "/etc/kubernetes/kubelet conf.d",
            f"kubelet_config_dir: {'/etc/kubernetes/kubelet conf.d'!r} {SPACE_MSG}",
        ),
        (
            "kubelet_config_dir",
            "/etc/kubelet.conf.d\n",
            f"kubelet_config_dir: {'/etc/kubelet.conf.d' + chr(10)!r} {SPACE_MSG}",
        ),
        (
            "kubelet_main_config_path",
            "/var/lib/kubelet/config '.yaml",
            f"kubelet_main_config_path: {'/var/lib/kubelet/config ' + chr(39) + '.yaml'!r} {SPACE_MSG}",
        ),
        (
            "kubelet_env_file",
            "/etc/default/kube\tlet",
            f"kubelet_env_file: {'/etc/default/kube' + chr(9) + 'let'!r} {SPACE_MSG}",
        ),
        (
            "kubelet_config_dir",
            "/etc/kubernetes/../kubelet.conf.d",
            f"kubelet_config_dir: '/etc/kubernetes/../kubelet.conf.d' {NOT_PLAIN_MSG}",
        ),
        (
            "kubelet_config_dir",
            "/etc/kubelet.conf.d/",
            f"kubelet_config_dir: '/etc/kubelet.conf.d/' {NOT_PLAIN_MSG}",
        ),
    ],
)
def test_a_path_that_the_command_line_or_the_module_cannot_take_is_refused_before_anything_is_written(
    var, value, message
):
    assert validate(params(**{var: value}), "1.31.0") == [message]


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("kubelet_reserved_system_cpus", "0\n"),
        ("kubelet_container_runtime_endpoint", "unix:///run/containerd/containerd.sock\n"),
        ("kubelet_dropin_name", "50-gpu-node.conf\n"),
        ("kubelet_feature_gates", {"UserNamespacesSupport\n": True}),
        ("kubelet_flags", {"v\n": 2}),
        ("kubelet_flags_absent", ["v\n"]),
        ("kubelet_node_labels", {"example.com/pool\n": "a"}),
        ("kubelet_node_labels", {"example.com/pool": "a100\n"}),
        ("kubelet_register_with_taints", ["example.com/dedicated=ml\n:NoSchedule"]),
        ("kubelet_register_with_taints", ["example.com/dedicated=ml:NoSchedule\n"]),
    ],
)
def test_a_value_ending_in_a_newline_is_refused(var, value):
    errors = validate(params(**{var: value}), "1.31.0")
    assert len(errors) == 1 and errors[0].startswith(var), errors


KUBEADM_WITH_COMMENTS = """\
# Written by kubeadm; the platform team added comments.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false  # never anonymous
# DNS of the cluster
clusterDNS:
- 10.96.0.10
evictionHard:
  memory.available: "100Mi"   # quoted on purpose
healthzPort: 10248
"""


def test_merge_mode_keeps_comments_quoting_order_and_list_style():
    result = kc.kubelet_merge_config(
        KUBEADM_WITH_COMMENTS,
        {"evictionHard": {"nodefs.available": "10%"}, "cgroupDriver": "systemd", "clusterDNS": ["10.0.0.10"]},
        ["healthzPort"],
    )
    assert result["changed"] is True
    assert result["content"] == (
        "# Written by kubeadm; the platform team added comments.\n"
        "apiVersion: kubelet.config.k8s.io/v1beta1\n"
        "kind: KubeletConfiguration\n"
        "authentication:\n"
        "  anonymous:\n"
        "    enabled: false  # never anonymous\n"
        "# DNS of the cluster\n"
        "clusterDNS:\n"
        "- 10.0.0.10\n"
        "evictionHard:\n"
        '  memory.available: "100Mi"   # quoted on purpose\n'
        "  nodefs.available: 10%\n"
        "cgroupDriver: systemd\n"
    )
    assert kc.kubelet_merge_config(result["content"], {"cgroupDriver": "systemd"}, ["healthzPort"])["changed"] is False


def test_merge_mode_keeps_an_indented_list_style():
    text = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nclusterDNS:\n  - 10.96.0.10\n"
    result = kc.kubelet_merge_config(text, {"tlsCipherSuites": ["A", "B"]})
    assert result["content"] == text + "tlsCipherSuites:\n  - A\n  - B\n"


def _loop(results):
    return {"results": results}


def test_rollback_plan_restores_changed_files_with_their_mode_and_owner_and_removes_new_ones():
    read = _loop(
        [
            {"item": "/etc/default/kubelet", "content": base64.b64encode(b'KUBELET_EXTRA_ARGS="--v=2"\n').decode()},
            {
                "item": "/var/lib/kubelet/config.yaml",
                "content": base64.b64encode(b"kind: KubeletConfiguration\n").decode(),
            },
            {"item": "/etc/kubernetes/kubelet.conf.d/50-gpu-node.conf", "failed": True, "msg": "file not found"},
        ]
    )
    stat = _loop(
        [
            {"item": "/etc/default/kubelet", "stat": {"exists": True, "mode": "0600", "uid": 0, "gid": 4}},
            {"item": "/var/lib/kubelet/config.yaml", "stat": {"exists": True, "mode": "0644", "uid": 0, "gid": 0}},
            {"item": "/etc/kubernetes/kubelet.conf.d/50-gpu-node.conf", "stat": {"exists": False}},
        ]
    )
    pairs = [
        ["/etc/kubernetes/kubelet.conf.d/50-gpu-node.conf", {"changed": True}],
        ["/var/lib/kubelet/config.yaml", {"changed": False}],
        ["/etc/default/kubelet", {"changed": True, "backup_file": "/var/backups/x~"}],
        ["/etc/default/kubelet", {"changed": True}],
    ]
    assert kc.kubelet_rollback_plan(pairs, read, stat) == [
        {
            "path": "/etc/kubernetes/kubelet.conf.d/50-gpu-node.conf",
            "existed": False,
            "content": "",
            "mode": "",
            "owner": "",
            "group": "",
        },
        {
            "path": "/etc/default/kubelet",
            "existed": True,
            "content": 'KUBELET_EXTRA_ARGS="--v=2"\n',
            "mode": "0600",
            "owner": "0",
            "group": "4",
        },
    ]
    assert kc.kubelet_rollback_plan([["/var/lib/kubelet/config.yaml", {"changed": False}]], read, stat) == []


def test_rollback_plan_refuses_a_changed_file_it_did_not_look_at_before():
    stat = _loop(
        [{"item": "/a", "skipped": True}, {"item": "/b", "stat": {"exists": True, "mode": "0644", "uid": 0, "gid": 0}}]
    )
    with pytest.raises(kb.AnsibleFilterError, match="/a changed but was not looked at before the change"):
        kc.kubelet_rollback_plan([["/a", {"changed": True}]], _loop([]), stat)
    with pytest.raises(kb.AnsibleFilterError, match="/b changed but its content was not read"):
        kc.kubelet_rollback_plan([["/b", {"changed": True}]], _loop([]), stat)


def test_the_drop_in_threshold_comes_from_the_role_not_from_a_fallback():
    with pytest.raises(kb.AnsibleFilterError, match="__gpu_node_facts_kubelet_dropin_min"):
        kb.kubelet_config_plan("1.31.0", "auto")
