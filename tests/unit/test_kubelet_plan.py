"""The kubelet role's plan (plugins/filter/kubelet_plan.py, issues 47 and 51): its inputs -> the plan, and the same
decisions as the program of lazy variables it replaced (tests/fixtures/jinja_before_filters/kubelet_vars.yml, the
role's vars/main.yml at 05315eb), rendered by Ansible on the same variables, facts and files, node by node: the
version, the check's messages, the mode, the fields, labels and flags, the merge, the parts, the report, the restart
transaction's configurations, the RKE2/k3s agent config, the drop-in's text."""

from __future__ import annotations

import base64
import copy

import pytest
import yaml
from ansible.plugins.loader import filter_loader, init_plugin_loader
from conftest import ROOT, load_module, render_role_value

kp = load_module("kubelet_plan", subdir="plugins/filter")
role_variables = load_module("role_variables", subdir="plugins/action")
ROLE = ROOT / "roles" / "kubelet"
init_plugin_loader()  # the builtin lookups (file, vars, varnames), as ansible-playbook resolves them
# the filters the old program called by name, which the role now calls through the plan
filter_loader.add_directory(str(ROOT / "tests/fixtures/jinja_before_filters/filter_plugins"))
OLD = yaml.safe_load((ROOT / "tests/fixtures/jinja_before_filters/kubelet_vars.yml").read_text())
NEW = yaml.safe_load((ROLE / "vars/main.yml").read_text())
FACTS_VARS = {
    **yaml.safe_load((ROOT / "roles/gpu_node_facts/vars/main.yml").read_text()),
    **yaml.safe_load((ROOT / "roles/gpu_node_facts/vars/Debian.yml").read_text()),
}
SHARED = {
    name: FACTS_VARS[name]
    for name in (
        "__gpu_node_facts_kubelet_dropin_min",
        "__gpu_node_facts_dra_min",
        "__gpu_node_facts_dra_device_nodes_unit",
        "__gpu_node_facts_kubelet_env_file_default",
    )
}
# the role's defaults, the three that name gpu_node_facts' shared values rendered
DEFAULTS = {
    **yaml.safe_load((ROLE / "defaults/main.yml").read_text()),
    "kubelet_config_dir": FACTS_VARS["__gpu_node_facts_kubelet_config_dir"],
    "kubelet_dropin_name": FACTS_VARS["__gpu_node_facts_kubelet_dropin_name"],
    "kubelet_main_config_path": FACTS_VARS["__gpu_node_facts_kubelet_main_config"],
}
MAIN = DEFAULTS["kubelet_main_config_path"]
ENV = "/etc/default/kubelet"
DROPIN = f"{DEFAULTS['kubelet_config_dir']}/{DEFAULTS['kubelet_dropin_name']}"
KUBEADM_FLAGS = "/var/lib/kubelet/kubeadm-flags.env"
ALPHA = "/etc/systemd/system/kubelet.service.d/50-gpu-node-config-dir.conf"
UNIT = "/etc/systemd/system/gpu-node-device-nodes.service"
WANTS = "/etc/systemd/system/multi-user.target.wants/gpu-node-device-nodes.service"
RKE2 = {
    "name": "rke2",
    "version": "v1.33.1+rke2r1",
    "service": "rke2-agent.service",
    "bin_dir": "/var/lib/rancher/rke2/bin",
    "kubelet": {
        "config": "/etc/rancher/rke2/config.yaml",
        "dropin_dir": "/etc/rancher/rke2/config.yaml.d",
        "dropin": "/etc/rancher/rke2/config.yaml.d/50-gpu-node.yaml",
    },
}
KUBEADM_CONFIG = """\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# kubeadm's
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
registerWithTaints:
- key: example.com/keep
  effect: NoSchedule
"""


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _reads(files: dict, present: set, dra_kubelet_dropin: str) -> list[dict]:
    """What tasks/read.yml's role_read registers as its reads: the slurp loop, the followed stats, the link's stat."""
    transaction = list(dict.fromkeys([MAIN, DROPIN, ALPHA, ENV]))
    slurp = {
        "results": [
            {"item": path, "content": _b64(files[path]), "encoding": "base64", "source": path}
            if path in files
            else {"item": path, "failed": False, "msg": f"file not found: {path}"}
            for path in [*transaction, KUBEADM_FLAGS]
        ]
    }

    def stat(paths):
        return {
            "results": [
                {"item": path, "stat": {"exists": True, "mode": "0644", "uid": 0, "gid": 0}}
                if path in files or path in present
                else {"item": path, "stat": {"exists": False}}
                for path in paths
            ]
        }

    return [slurp, stat([*transaction, dra_kubelet_dropin, UNIT]), stat([WANTS])]


def _node(**gpu_node) -> dict:
    return {"has_gpu": False, "runtimes_running": ["containerd"], "runtimes_installed": ["containerd"], **gpu_node}


CASES = {
    "installed-1.31-dropin": ({}, _node(kubelet={"installed": True, "running": True, "version": "1.31.4"}), {}, set()),
    "not-installed-1.29-alpha-userns-gpu": (
        {
            "kubelet_assumed_version": "1.29",
            "kubelet_user_namespaces": True,
            "kubelet_user_namespaces_subid_start": 1048576,
            "kubelet_user_namespaces_subid_count": 7208960,
            "kubelet_gpu_register_with_taints": ["nvidia.com/gpu=present:NoSchedule"],
            "kubelet_node_labels": {"example.com/rack": "r1"},
        },
        _node(has_gpu=True, kubelet={"installed": False, "running": False}),
        {},
        set(),
    ),
    "installed-1.27-merge": (
        {
            "kubelet_register_with_taints": ["example.com/dedicated=ml:NoSchedule"],
            "kubelet_config": {"maxPods": 200},
            "kubelet_cpu_manager_policy": "static",
            "kubelet_reserved_system_cpus": "0-1",
            "kubelet_remove_conflicting_flags": True,
            "kubelet_config_absent": ["clusterDNS"],
        },
        _node(kubelet={"installed": True, "running": True, "version": "v1.27.9"}),
        {MAIN: KUBEADM_CONFIG, KUBEADM_FLAGS: 'KUBELET_KUBEADM_ARGS="--cgroup-driver=systemd --max-pods=10"\n'},
        set(),
    ),
    "merge-unchanged-healthz-off": (
        {"kubelet_config_mode": "merge", "kubelet_cgroup_driver": "systemd"},
        _node(kubelet={"installed": True, "running": False, "version": "1.33.0"}),
        {
            MAIN: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n"
            "containerRuntimeEndpoint: unix:///run/containerd/containerd.sock\nhealthzPort: 0\n"
        },
        set(),
    ),
    "dra-1.34-root-dir": (
        {"gpu_node_facts_gpu_allocation": "dra", "kubelet_flags": {"root-dir": "/data/kubelet"}},
        _node(has_gpu=True, kubelet={"installed": True, "running": True, "version": "1.34.1"}),
        {DROPIN: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\n"},
        {UNIT},
    ),
    "device-plugin-with-dra-left": (
        {"kubelet_reset_resource_manager_state": False},
        _node(kubelet={"installed": True, "running": True, "version": "1.35.0"}, dra={"kubelet_root_dir": "/k/"}),
        {ENV: 'KUBELET_EXTRA_ARGS="--node-labels=gpu-node-provisioning/gpu-allocation=dra"\n'},
        {WANTS},
    ),
    "rke2": (
        {"kubelet_node_labels": {"example.com/pool": "a"}, "kubelet_config_mode": "merge"},
        _node(kubelet={"installed": False, "running": False}, installer=RKE2),
        {},
        set(),
    ),
    "several-runtimes-verbose": (
        {"kubelet_config_passthrough": {"evictionHard": {"memory.available": "5%"}}},
        _node(runtimes_running=["containerd", "crio"], kubelet={"installed": True, "running": True, "version": "1.30"}),
        {},
        set(),
        1,
    ),
    "refused-values-and-unknown": (
        {"kubelet_node_labels": {"node-role.kubernetes.io/gpu": ""}, "kubelet_typo": 1},
        _node(kubelet={"installed": True, "running": True, "version": "1.31.0"}),
        {},
        set(),
    ),
    "refused-dra-on-1.31": (
        {"gpu_node_facts_gpu_allocation": "dra", "kubelet_typo": 1},
        _node(kubelet={"installed": True, "running": True, "version": "1.31.0"}),
        {},
        set(),
    ),
    "refused-both-assumed": (
        {
            "gpu_node_facts_gpu_allocation": "dra",
            "kubelet_config_dir": "/etc/kube let",
            "kubelet_assumed_version": "1.33",
        },
        _node(kubelet={"installed": False, "running": False}),
        {},
        set(),
    ),
    "unknown-only-reported": ({"kubelet_typo": 1}, _node(), {}, set()),
}


def _variables(case: str) -> dict:
    overrides, gpu_node, files, present, *verbosity = CASES[case]
    variables = {
        **copy.deepcopy(DEFAULTS),
        **SHARED,
        "gpu_node_facts_gpu_allocation": "device-plugin",
        **copy.deepcopy(overrides),
        "ansible_facts": {"gpu_node": gpu_node},
        "inventory_hostname": "node-1",
        "ansible_verbosity": verbosity[0] if verbosity else 0,
        "ansible_check_mode": False,
        "ansible_managed": "Managed by Ansible",
        "role_path": str(ROLE),
    }
    kubelet_unit = RKE2["service"] if gpu_node.get("installer") else "kubelet.service"
    dropin = f"/etc/systemd/system/{kubelet_unit}.d/50-gpu-node-device-nodes.conf"
    variables["__kubelet_node"] = {"reads": _reads(files, present, dropin)}
    return variables


# the public variables' names as the old and the new vars read them (a lookup of meta/argument_specs.yml, rendered in
# the check test), as a list: the old program read the file again for each variable it rendered (many per value)
PUBLIC = {"__kubelet_public_variables": list(DEFAULTS)}


def _old(expression: str, variables: dict):
    return render_role_value(expression, {**variables, **OLD, **PUBLIC})


def _new(expression: str, variables: dict):
    """Rendered with the new vars, the plan registered with the read as role_read registers it."""
    plan = render_role_value(
        "{{ __kubelet_plan_after_read }}",
        {**variables, **NEW, **PUBLIC, "role_read_reads": variables["__kubelet_node"]["reads"]},
    )
    node = {**variables["__kubelet_node"], "plan": plan}
    return render_role_value(expression, {**variables, **NEW, **PUBLIC, "__kubelet_node": node})


def _problems(rules: dict, variables: dict) -> list[str]:
    return role_variables.rule_problems(rules, lambda template: render_role_value(template, variables))


@pytest.mark.parametrize("case", list(CASES))
def test_the_check_says_what_the_old_rules_said(case):
    variables = _variables(case)
    old = _problems(OLD["__kubelet_variable_checks"], {**variables, **OLD})
    new = _problems(NEW["__kubelet_variable_checks"], {**variables, **NEW})
    assert new == old
    assert bool(new) == case.startswith("refused")


ACCEPTED = [case for case in CASES if not case.startswith("refused")]
# old variable -> the plan's key
SAME = {
    "__kubelet_version_raw": "version",
    "__kubelet_installed": "installed",
    "__kubelet_running": "running",
    "__kubelet_has_gpu": "has_gpu",
    "__kubelet_params": "params",
    "__kubelet_files": "files",
    "__kubelet_plan": "config",
    "__kubelet_runtime": "runtime",
    "__kubelet_main_current": "main_current",
    "__kubelet_fields": "fields",
    "__kubelet_labels": "labels",
    "__kubelet_new_effective": "new_effective",
    "__kubelet_healthz_url": "healthz_url",
    "__kubelet_restart_wanted": "restart_wanted",
    "__kubelet_dra": "dra",
    "__kubelet_dra_paths": "dra_paths",
    "__kubelet_parts": "parts",
    "__kubelet_dropins_unread": "dropins_unread",
    "__kubelet_flags_args": "flags_args",
}


@pytest.mark.parametrize("case", ACCEPTED)
def test_the_plan_decides_what_the_old_variables_decided(case):
    variables = _variables(case)
    plan = _new("{{ __kubelet_plan }}", variables)
    for old_name, key in SAME.items():
        assert plan[key] == _old("{{ " + old_name + " }}", variables), (old_name, key)
    if plan["config"]["mode"] == "merge":
        assert plan["merge"] == _old("{{ __kubelet_merge }}", variables)
    else:
        assert plan["merge"] is None


@pytest.mark.parametrize("case", ACCEPTED)
def test_the_report_and_the_restart_transaction_are_what_they_were(case):
    variables = _variables(case)
    changed = ACCEPTED.index(case) % 2 == 1  # a file changed: the report says how labels and taints apply
    variables |= {
        "__kubelet_flags_result": {"changed": changed},
        "__kubelet_dropin_result": {"changed": False, "results": []},
        "__kubelet_removed": {"skipped": True, "changed": False},
    }
    for name in ("__kubelet_messages", "__kubelet_state_resets", "__kubelet_old_healthz_url"):
        assert _new("{{ " + name + " }}", variables) == _old("{{ " + name + " }}", variables), name
    # the drop-in's text: the template over the plan's fields
    template = (ROLE / "templates/etc/kubernetes/kubelet.conf.d/50-gpu-node.conf.j2").read_text()
    old_template = template.replace("__kubelet_plan.fields", "__kubelet_fields")
    assert _new(template, variables) == _old(old_template, variables)


def test_the_agent_config_on_rke2_is_what_it_was():
    variables = _variables("rke2")
    variables["__kubelet_installer_read"] = {
        "results": [
            {"item": RKE2["kubelet"]["config"], "content": _b64("node-label: [team=ml]\nkubelet-arg: [max-pods=90]\n")}
        ]
    }
    new = _new("{{ __kubelet_installer_plan }}", variables)
    assert new == _old("{{ __kubelet_installer_plan }}", variables)
    assert "example.com/pool=a" in new["node-label"] and "team=ml" in new["node-label"]


# ------------------------------------------------------------------------------------- the filter on its own
def _inputs(**overrides) -> dict:
    params = {name: copy.deepcopy(value) for name, value in DEFAULTS.items()}
    params.update(overrides.pop("params", {}))
    return {
        "params": params,
        "variable_names": list(params),
        "gpu_node": {"kubelet": {"installed": True, "running": True, "version": "1.31.2"}},
        "installer_managed": False,
        "hostname": "n1",
        "verbosity": 0,
        "gpu_allocation": "device-plugin",
        "dropin_min": "1.28",
        "dra_min": "1.34",
        "env_file_path": ENV,
        "dropin_path": DROPIN,
        "kubeadm_flags_file": KUBEADM_FLAGS,
        "alpha_env_dropin": ALPHA,
        "root_dir": "/var/lib/kubelet",
        "dra_label": "gpu-node-provisioning/gpu-allocation",
        "dra_artifacts": [UNIT, WANTS],
        "userns_gate_from": "1.30",
        "userns_default_on": "1.33",
        **overrides,
    }


NO_READS = [{"results": []}, {"results": []}, {"results": []}]


def test_a_node_with_nothing_read_gets_the_drop_in_and_its_flags():
    plan = kp.kubelet_plan(_inputs(), NO_READS)
    assert plan["config"] == {"version": "1.31.2", "mode": "dropin", "dropin_support": "beta", "alpha_env": False}
    assert plan["parts"] == [] and plan["merge"] is None and plan["files"] == {}
    assert plan["flags_args"]["flags"] == {"config-dir": DEFAULTS["kubelet_config_dir"]}
    assert plan["dropins_unread"] == [ALPHA]
    assert plan["restart_wanted"] is True and plan["healthz_url"] == "http://127.0.0.1:10248/healthz"
    assert plan["labels"]["absent"][-1] == "gpu-node-provisioning/gpu-allocation"
    assert plan["report"]["unknown_message"] == "" and plan["report"]["overridden"] == []


def test_user_namespaces_add_their_gate_under_the_users_gates():
    inputs = _inputs(params={"kubelet_user_namespaces": True})
    assert kp.kubelet_plan(inputs, NO_READS)["fields"]["featureGates"] == {"UserNamespacesSupport": True}
    inputs = _inputs(
        params={"kubelet_user_namespaces": True, "kubelet_feature_gates": {"UserNamespacesSupport": False}}
    )
    plan = kp.kubelet_plan(inputs, NO_READS)
    assert plan["fields"]["featureGates"] == {"UserNamespacesSupport": False}
    assert plan["report"]["userns_gates"] and plan["report"]["userns_gate"] is False
    # on by default from 1.33: no gate
    inputs["params"]["kubelet_feature_gates"] = {}
    inputs["gpu_node"]["kubelet"]["version"] = "1.33.0"
    assert "featureGates" not in kp.kubelet_plan(inputs, NO_READS)["fields"]


def test_the_check_names_unknown_variables_only_with_a_refusal():
    inputs = _inputs()
    inputs["variable_names"].append("kubelet_typo")
    assert kp.kubelet_plan_check(inputs) == []
    inputs["params"]["kubelet_dropin_name"] = "gpu.yaml"
    problems = kp.kubelet_plan_check(inputs)
    assert problems[0].startswith("kubelet_dropin_name: 'gpu.yaml' is not a drop-in file name")
    assert problems[-1].startswith("These variables start with kubelet_") and "kubelet_typo." in problems[-1]


def test_dra_needs_its_kubelet_version():
    inputs = _inputs(gpu_allocation="dra")
    (problem,) = kp.kubelet_plan_check(inputs)
    assert "needs kubelet 1.34 or later" in problem and "but the kubelet is 1.31.2." in problem
    inputs["gpu_node"] = {}
    inputs["params"]["kubelet_assumed_version"] = "v1.34"
    assert kp.kubelet_plan_check(inputs) == []
    plan = kp.kubelet_plan(inputs, NO_READS)
    assert plan["parts"] == ["dra.yml"] and plan["labels"]["labels"]["gpu-node-provisioning/gpu-allocation"] == "dra"
    assert plan["dra_paths"]["plugins_dir"] == "/var/lib/kubelet/plugins"
    assert plan["restart_wanted"] is False


def test_a_main_file_that_is_not_yaml_fails_the_plan_with_the_fix():
    reads = copy.deepcopy(NO_READS)
    reads[0]["results"] = [{"item": MAIN, "content": _b64("a: [\n")}]
    with pytest.raises(Exception, match=r"is not valid YAML .* Fix the file"):
        kp.kubelet_plan(_inputs(), reads)
