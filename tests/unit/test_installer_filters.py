"""The filters behind runtime_config and kubelet on RKE2 and k3s nodes (plugins/filter/installer.py,
plugins/filter/kubelet_installer.py): what goes into the containerd template and the agent config drop-ins."""

from __future__ import annotations

import tomllib

import pytest
import yaml
from conftest import load_module

installer = load_module("installer", subdir="plugins/filter")
kubelet_installer = load_module("kubelet_installer", subdir="plugins/filter")
kubelet = load_module("kubelet", subdir="plugins/filter")
FilterError = installer.AnsibleFilterError

BINARY = "/usr/bin/nvidia-container-runtime"
CRI = 'plugins."io.containerd.grpc.v1.cri"'
GENERATED = f"""version = 2
[{CRI}.containerd]
  snapshotter = "overlayfs"
[{CRI}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{CRI}.containerd.runtimes.runc.options]
  SystemdCgroup = true
"""
DETECTED = (
    GENERATED
    + f"""[{CRI}.containerd.runtimes."nvidia"]
  runtime_type = "io.containerd.runc.v2"
[{CRI}.containerd.runtimes."nvidia".options]
  BinaryName = "{BINARY}"
  SystemdCgroup = true
"""
)
ETC = "/var/lib/rancher/k3s/agent/etc/containerd"


def facts(name="k3s", version="1.27.5", base=True, detection=None, default_option=False):
    return {
        "name": name,
        "version": version,
        "service": "k3s.service",
        "containerd": {
            "config": f"{ETC}/config.toml",
            "template": f"{ETC}/config.toml.tmpl",
            "templates": [f"{ETC}/config-v3.toml.tmpl", f"{ETC}/config.toml.tmpl"],
            "template_base": base,
            "nvidia_detection": detection,
            "default_runtime_option": default_option,
        },
    }


def plan(inst, generated=GENERATED, template=None, binary=BINARY, extra=""):
    return installer.installer_runtime_plan(inst, generated, template, "nvidia", binary, False, extra)


def rendered(template: str, base: str = GENERATED) -> dict:
    """What the agent generates from the template: the base config in place of the template action."""
    return tomllib.loads(template.replace('{{ template "base" . }}', base))


def test_a_release_with_base_template_and_no_detection_gets_our_template():
    result = plan(facts())
    assert result["refuse"] == "" and result["detected"] is False
    lines = result["template"].splitlines()
    assert sum("{{" in line for line in lines) == 1, "one template action only, none in the comments"
    config = rendered(result["template"])
    nvidia = config["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]
    # a copy of runc's table with only the binary replaced
    assert nvidia == {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": True, "BinaryName": BINARY}}


def test_our_template_is_stable_once_the_agent_rendered_it():
    first = plan(facts())["template"]
    generated_now = first.replace('{{ template "base" . }}', GENERATED)
    again = plan(facts(), generated=generated_now, template=first)
    assert again["template"] == first


def test_a_release_that_detects_nvidia_needs_no_template_and_ours_goes():
    inst = facts(name="rke2", version="1.28.5", detection=True, default_option=True)
    assert plan(inst)["detected"] is True and plan(inst)["template"] == ""
    ours = plan(facts())["template"]
    assert plan(inst, template=ours)["remove_template"] is True


def test_a_runtime_the_agent_already_serves_needs_no_template():
    result = plan(facts(detection=None), generated=DETECTED)
    assert result["detected"] is True and result["template"] == ""


def test_a_binary_where_the_installer_does_not_look_gets_a_template():
    result = plan(facts(detection=True), binary="/opt/nvidia/bin/nvidia-container-runtime")
    assert result["detected"] is False
    assert "/opt/nvidia/bin/nvidia-container-runtime" in result["template"]


def test_a_template_of_someone_else_is_refused_and_named():
    result = plan(facts(), template='{{ template "base" . }}\n# mine\n')
    assert result["template"] == ""
    assert f"{ETC}/config.toml.tmpl exists and is not ours" in result["refuse"]
    assert "Nothing was changed" in result["refuse"]


@pytest.mark.parametrize(("base", "why"), [(False, "no {{ template"), (None, "version is unknown")])
def test_a_release_without_base_template_is_refused(base, why):
    result = plan(facts(version="1.27.4" if base is False else None, base=base))
    assert why in result["refuse"] and result["template"] == ""


def test_extra_text_goes_after_the_runtime_verbatim():
    result = plan(facts(detection=True), extra='[plugins."x"]\n  y = 1\n')
    assert result["template"].rstrip().endswith('[plugins."x"]\n  y = 1')


def test_the_binary_name_is_spelled_once_when_the_base_spells_it_otherwise():
    base = GENERATED.replace("SystemdCgroup = true", 'SystemdCgroup = true\n  binaryName = "/usr/bin/runc"')
    nvidia = rendered(plan(facts(), generated=base)["template"], base)["plugins"]["io.containerd.grpc.v1.cri"][
        "containerd"
    ]["runtimes"]["nvidia"]
    assert [key for key in nvidia["options"] if key.lower() == "binaryname"] == ["BinaryName"]


def test_the_default_runtime_goes_through_the_agent_option():
    text = installer.installer_agent_dropin(facts(default_option=True), "nvidia", True)
    assert yaml.safe_load(text) == {"default-runtime": "nvidia"}
    assert installer.installer_agent_dropin(facts(default_option=True), "nvidia", False) == ""
    with pytest.raises(FilterError, match="no agent option default-runtime"):
        installer.installer_agent_dropin(facts(default_option=False), "nvidia", True)


# --------------------------------------------------------------------------- kubelet drop-in

PARAMS = {
    "kubelet_node_labels": {"example.com/pool": "gpu"},
    "kubelet_gpu_node_labels": {"nvidia.com/gpu.present": "true"},
    "kubelet_node_labels_absent": [],
    "kubelet_register_with_taints": [],
    "kubelet_gpu_register_with_taints": ["nvidia.com/gpu=present:NoSchedule"],
    "kubelet_flags": {"max-pods": 200},
    "kubelet_flags_absent": [],
    "kubelet_feature_gates": {},
    "kubelet_seccomp_default": True,
}
OWN = "/etc/rancher/k3s/config.yaml.d/90-gpu-node-kubelet.yaml"
CONFIG = "/etc/rancher/k3s/config.yaml"
ADMIN = (
    "# keep me\nnode-label:\n  - example.com/rack=r7\n  - nvidia.com/gpu.present=false\n"
    "kubelet-arg:\n  - max-pods=150\n"
)


def dropin(params=PARAMS, files=None, has_gpu=True):
    """The filter with the inputs the role gives it (vars/main.yml): the kubeadm path's labels, taints, fields."""
    fields = kubelet.kubelet_compose_config(params, "", has_gpu, {})
    field_flags = {
        kubelet.flag_for_field(key): value
        for key, value in fields.items()
        if key not in ("containerRuntimeEndpoint", "registerWithTaints")
    }
    return kubelet_installer.kubelet_installer_dropin(
        params,
        kubelet.kubelet_compose_labels(params, has_gpu),
        fields.get("registerWithTaints", []),
        field_flags,
        {"name": "k3s"},
        files or {CONFIG: ADMIN},
        OWN,
    )


def test_the_dropin_repeats_the_admins_entries_and_ours_win():
    result = dropin()
    data = yaml.safe_load(result["content"])
    assert data["node-label"] == ["example.com/rack=r7", "nvidia.com/gpu.present=true", "example.com/pool=gpu"]
    assert data["node-taint"] == ["nvidia.com/gpu=present:NoSchedule"]
    assert data["kubelet-arg"] == ["seccomp-default=true", "max-pods=200"]
    assert result["content"].startswith("# Managed by Ansible (kubelet role)")


def test_a_later_dropin_is_not_repeated_and_an_earlier_one_is():
    files = {
        CONFIG: ADMIN,
        "/etc/rancher/k3s/config.yaml.d/10-site.yaml": "node-label: [site=a]\n",
        "/etc/rancher/k3s/config.yaml.d/99-late.yaml": "node-label: [late=b]\n",
    }
    labels = yaml.safe_load(dropin(files=files)["content"])["node-label"]
    assert "site=a" in labels and "late=b" not in labels and "example.com/rack=r7" not in labels


def test_nothing_to_add_gives_no_dropin():
    params = {**PARAMS, "kubelet_node_labels": {}, "kubelet_flags": {}, "kubelet_seccomp_default": None}
    assert dropin(params, has_gpu=False, files={CONFIG: ""})["content"] == ""


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({**PARAMS, "kubelet_flags": {"Max_Pods": 1}}, "not a flag name"),
        ({**PARAMS, "kubelet_flags": {"max-pods": "1\n2"}}, "line break"),
        ({**PARAMS, "kubelet_gpu_register_with_taints": ["nvidia.com/gpu=present:Sometimes"]}, "Sometimes"),
    ],
)
def test_values_the_agent_would_reject_are_refused(params, message):
    with pytest.raises(Exception, match=message):
        dropin(params)


def test_a_broken_agent_config_is_named():
    with pytest.raises(Exception, match=r"config\.yaml"):
        dropin(files={CONFIG: "node-label: [a\n"})


# ---- kubespray: the inventory entry that keeps the runtime across kubespray runs ----------------------------


def _kubespray_standin():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "molecule/installers/files/kubespray-rerender-standin.py"
    spec = importlib.util.spec_from_file_location("kubespray_rerender_standin", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fixture(name):
    from pathlib import Path

    return (Path(__file__).resolve().parents[1] / "fixtures" / "containerd" / name).read_text()


def test_the_kubespray_stand_in_renders_what_the_fixture_holds():
    text = _fixture("v2-kubespray-2.27.toml")
    body = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))
    assert _kubespray_standin().render({}) == body


def test_the_kubespray_entry_is_runcs_with_one_binary_name_and_kubespray_renders_it():
    rendered = _fixture("v2-kubespray-2.27.toml")
    entry = installer.kubespray_runtime(rendered, "nvidia", BINARY)
    assert entry == {
        "name": "nvidia",
        "type": "io.containerd.runc.v2",
        "engine": "",  # kubespray v2.24-v2.27 and config-v1.toml.j2 read runtime.engine / runtime.root
        "root": "",
        "base_runtime_spec": "cri-base.json",  # the template puts containerd_cfg_dir/ in front
        "options": {"systemdCgroup": "true", "BinaryName": BINARY},  # strings: the template writes them bare
    }
    again = _kubespray_standin().render({"containerd_additional_runtimes": [entry]})
    runtimes = tomllib.loads(again)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert runtimes["nvidia"]["options"] == {"systemdCgroup": True, "BinaryName": BINARY}
    assert runtimes["nvidia"]["base_runtime_spec"] == "/etc/containerd/cri-base.json"
    # kubespray's render of the entry is what the role's merge leaves: a rerun of the role changes nothing there
    assert installer.kubespray_runtime(again, "nvidia", BINARY) == entry


def test_a_kubespray_entry_without_engine_fails_as_kubesprays_template_would():
    standin = _kubespray_standin()
    with pytest.raises(KeyError):
        standin.render(
            {"containerd_additional_runtimes": [{"name": "nvidia", "type": "io.containerd.runc.v2", "options": {}}]}
        )


def test_kubesprays_render_for_containerd_2_3_is_version_4_and_the_entry_renders_back_unchanged():
    """kubespray today (46dbdd3) renders config version 4 for containerd_version >= 2.3 and 3 below (the stand-in's
    render_2x): runc's options as its defaults spell them; the entry the role prints for such a node, rendered by
    kubespray, is what the role reads back (a rerun changes nothing), with no engine/root in the file."""
    standin = _kubespray_standin()
    assert tomllib.loads(standin.render_2x({"containerd_version": "2.2.1"}))["version"] == 3
    rendered = standin.render_2x({"containerd_version": "2.3.4"})
    config = tomllib.loads(rendered)
    assert config["version"] == 4
    runtimes = config["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]
    assert runtimes["runc"]["options"] == {"Root": "", "SystemdCgroup": True, "BinaryName": "/usr/local/bin/runc"}
    assert config["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"].startswith("registry.k8s.io/")
    entry = installer.kubespray_runtime(rendered, "nvidia", BINARY)
    assert entry["options"] == {"Root": "", "SystemdCgroup": "true", "BinaryName": BINARY}
    assert entry["base_runtime_spec"] == "cri-base.json"
    again = standin.render_2x({"containerd_version": "2.3.4", "containerd_additional_runtimes": [entry]})
    nvidia = tomllib.loads(again)["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]["nvidia"]
    assert nvidia == {**runtimes["runc"], "options": {**runtimes["runc"]["options"], "BinaryName": BINARY}}
    assert installer.kubespray_runtime(again, "nvidia", BINARY) == entry
