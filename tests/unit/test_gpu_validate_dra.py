"""The doctor's dra family (plugins/module_utils/gpu_validate/dra.py, issue 39): "GPU allocation" (which GPU plugin
is registered with the kubelet against gpu_node_facts_gpu_allocation) and "DRA prerequisites" (CDI with /var/run/cdi
in each runtime's effective config, the device nodes and their boot unit before the kubelet, the kubelet's plugin
directories). FakeNode (conftest.py) holds the sockets and directories as files and answers systemctl and docker.

The paths are those of NVIDIA's DRA driver (node_facts_dra's docstring cites them): the registration socket
<root-dir>/plugins_registry/gpu.nvidia.com-reg.sock, the device plugin's <root-dir>/device-plugins/nvidia-gpu.sock."""

from __future__ import annotations

from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import cdi, dra
from conftest import NO_GPU, FakeNode, load_module, node, params, shared_values

UNIT = shared_values()["__gpu_node_facts_dra_device_nodes_unit"]
ROOT_DIR = "/var/lib/kubelet"
DRA_SOCKET = f"{ROOT_DIR}/plugins_registry/gpu.nvidia.com-reg.sock"
DRA_SOCKET_ROLLING = f"{ROOT_DIR}/plugins_registry/gpu.nvidia.com-2f6c1e-reg.sock"
CSI_SOCKET = f"{ROOT_DIR}/plugins_registry/ebs.csi.aws.com-reg.sock"
PLUGIN_SOCKET = f"{ROOT_DIR}/device-plugins/nvidia-gpu.sock"
DIRS = {f"{ROOT_DIR}/plugins": "", f"{ROOT_DIR}/plugins_registry": ""}
DEVICES = {"/dev/nvidiactl": "", "/dev/nvidia-uvm": "", "/dev/nvidia0": "", "/dev/nvidia1": ""}
SYSTEMD = {
    ("systemctl", "is-enabled", UNIT): (0, "enabled", ""),
    ("systemctl", "show", "--property", "After", "--value", "kubelet.service"): (
        0,
        f"network-online.target {UNIT} containerd.service",
        "",
    ),
}
CONTAINERD = {"ok": True, "enable_cdi": True, "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"]}


def fake(*sockets, files=None, commands=None):
    return FakeNode(
        commands={**SYSTEMD, **(commands or {})},
        files={**DIRS, **DEVICES, **{s: "" for s in sockets}, **(files or {})},
    )


def dra_params(**overrides):
    return params(gpu_allocation="dra", runtimes=["containerd"], **overrides)


# ---- GPU allocation ----------------------------------------------------------------------------------------------


def test_the_dra_plugin_alone_on_a_dra_node_is_ok():
    result = dra.allocation_row(dra_params(), node(), fake(DRA_SOCKET, CSI_SOCKET))
    assert result["status"] == "ok", result
    assert "gpu.nvidia.com" in result["detail"]


def test_a_rolling_update_socket_counts_as_the_dra_plugin():
    assert dra.allocation_row(dra_params(), node(), fake(DRA_SOCKET_ROLLING))["status"] == "ok"


def test_both_plugins_registered_fail_whatever_was_chosen():
    for chosen in ("dra", "device-plugin"):
        result = dra.allocation_row(params(gpu_allocation=chosen), node(), fake(DRA_SOCKET, PLUGIN_SOCKET))
        assert result["status"] == "fail", result
        assert PLUGIN_SOCKET in result["detail"] and "both" in result["detail"]
        assert "gpu_node_facts_gpu_allocation" in result["fix"]


def test_the_plugin_not_chosen_fails():
    on_dra = dra.allocation_row(dra_params(), node(), fake(PLUGIN_SOCKET))
    on_plugin = dra.allocation_row(params(gpu_allocation="device-plugin"), node(), fake(DRA_SOCKET))
    assert (on_dra["status"], on_plugin["status"]) == ("fail", "fail")
    assert "set to dra" in on_dra["detail"] and "set to device-plugin" in on_plugin["detail"]


def test_the_chosen_plugin_not_registered_yet_warns():
    result = dra.allocation_row(dra_params(), node(), fake(CSI_SOCKET))
    assert result["status"] == "warn" and "no DRA plugin gpu.nvidia.com" in result["detail"], result
    assert dra.allocation_row(params(gpu_allocation="device-plugin"), node(), fake())["status"] == "warn"


def test_the_device_plugin_on_a_device_plugin_node_is_ok():
    assert dra.allocation_row(params(gpu_allocation="device-plugin"), node(), fake(PLUGIN_SOCKET))["status"] == "ok"


def test_skipped_without_a_running_kubelet_or_without_a_gpu():
    stopped = node(kubelet={"installed": True, "running": False, "version": "1.34.1"})
    assert dra.allocation_row(dra_params(), stopped, fake(DRA_SOCKET, PLUGIN_SOCKET))["status"] == "skipped"
    assert dra.allocation_row(dra_params(), NO_GPU, fake(DRA_SOCKET, PLUGIN_SOCKET))["status"] == "skipped"


def test_a_relocated_root_dir_is_where_the_sockets_are_looked_for():
    moved = node(dra={"kubelet_root_dir": "/data/kubelet"})
    both = fake(
        "/data/kubelet/plugins_registry/gpu.nvidia.com-reg.sock", "/data/kubelet/device-plugins/nvidia-gpu.sock"
    )
    assert dra.allocation_row(dra_params(), moved, both)["status"] == "fail"
    # the default root-dir's sockets are not this kubelet's
    assert dra.allocation_row(dra_params(), moved, fake(DRA_SOCKET, PLUGIN_SOCKET))["status"] == "warn"


# ---- DRA prerequisites -------------------------------------------------------------------------------------------


def test_prerequisites_ok_on_a_ready_dra_node():
    result = dra.prerequisites_row(dra_params(), node(), fake(), CONTAINERD)
    assert result["status"] == "ok", result
    assert "containerd CDI /etc/cdi, /var/run/cdi" in result["detail"]


def test_prerequisites_skipped_on_a_device_plugin_node():
    assert (
        dra.prerequisites_row(params(gpu_allocation="device-plugin"), node(), fake(), CONTAINERD)["status"] == "skipped"
    )


def test_var_run_cdi_missing_from_containerds_cdi_dirs_fails():
    state = dict(CONTAINERD, cdi_spec_dirs=["/etc/cdi"])
    result = dra.prerequisites_row(dra_params(), node(), fake(), state)
    assert result["status"] == "fail", result
    assert "containerd: cdi_spec_dirs ['/etc/cdi'] lack /var/run/cdi" in result["detail"]


def test_run_cdi_is_the_same_directory():
    state = dict(CONTAINERD, cdi_spec_dirs=["/run/cdi/"])
    assert dra.prerequisites_row(dra_params(), node(), fake(), state)["status"] == "ok"


def test_cdi_off_in_containerd_fails():
    result = dra.prerequisites_row(dra_params(), node(), fake(), dict(CONTAINERD, enable_cdi=False))
    assert result["status"] == "fail" and "enable_cdi is off" in result["detail"], result


def test_missing_device_nodes_unit_ordering_and_plugin_dirs_fail():
    bare = FakeNode(
        commands={
            ("systemctl", "is-enabled", UNIT): (1, "disabled", ""),
            ("systemctl", "show", "--property", "After", "--value", "kubelet.service"): (
                0,
                "network-online.target",
                "",
            ),
        },
        files={"/dev/nvidiactl": ""},
    )
    detail = dra.prerequisites_row(dra_params(), node(), bare, CONTAINERD)["detail"]
    assert f"{UNIT} is disabled" in detail
    assert f"kubelet.service does not start after {UNIT}" in detail
    assert "missing device nodes /dev/nvidia-uvm, /dev/nvidia<N>" in detail
    assert f"missing kubelet plugin directories {ROOT_DIR}/plugins, {ROOT_DIR}/plugins_registry" in detail


def test_no_gpu_does_not_ask_for_device_nodes():
    bare = fake(files={}, commands={})
    bare.files = {k: v for k, v in bare.files.items() if not k.startswith("/dev/")}
    result = dra.prerequisites_row(dra_params(), NO_GPU, bare, CONTAINERD)
    assert result["status"] == "ok" and "no GPU: device nodes not checked" in result["detail"], result


def test_a_relocated_root_dir_names_the_helm_values():
    moved = node(dra={"kubelet_root_dir": "/data/kubelet"})
    host = fake(files={"/data/kubelet/plugins": "", "/data/kubelet/plugins_registry": ""})
    result = dra.prerequisites_row(dra_params(), moved, host, CONTAINERD)
    assert result["status"] == "ok", result
    assert "kubeletPlugin.kubeletRegistrarDirectoryPath=/data/kubelet/plugins_registry" in result["detail"]


CRIO_DEFAULT = '[crio.runtime]\n# cdi_spec_dirs = [\n# \t"/etc/cdi",\n# \t"/var/run/cdi",\n# ]\n'


def test_crio_default_dirs_count_and_an_override_without_var_run_cdi_fails():
    ok = {"ok": True, "dump": (0, CRIO_DEFAULT, "")}
    assert (
        dra.prerequisites_row(params(gpu_allocation="dra", runtimes=["crio"]), node(), fake(), None, ok)["status"]
        == "ok"
    )
    narrowed = {"ok": True, "dump": (0, '[crio.runtime]\ncdi_spec_dirs = ["/etc/cdi"]\n', "")}
    result = dra.prerequisites_row(params(gpu_allocation="dra", runtimes=["crio"]), node(), fake(), None, narrowed)
    assert result["status"] == "fail" and "CRI-O: cdi_spec_dirs ['/etc/cdi'] lack" in result["detail"], result


DOCKER_INFO = ("docker", "info", "--format", "{{json .CDISpecDirs}}")


def _docker_node(version="26.1.5"):
    return node(runtimes={"docker": {"installed": True, "running": True, "version": version}})


def test_docker_cdi_dirs_from_docker_info():
    on = fake(commands={DOCKER_INFO: (0, '["/etc/cdi","/var/run/cdi"]', "")})
    off = fake(commands={DOCKER_INFO: (0, "[]", "")})
    docker = params(gpu_allocation="dra", runtimes=["docker"])
    assert dra.prerequisites_row(docker, _docker_node(), on)["status"] == "ok"
    result = dra.prerequisites_row(docker, _docker_node(), off)
    assert result["status"] == "fail" and "docker: CDI is off" in result["detail"], result
    # docker before 25 has no CDI: noted, not failed (pods reach it only through cri-dockerd)
    assert dra.prerequisites_row(docker, _docker_node("20.10.24"), fake())["status"] == "ok"


# ---- the TOML readers and the wiring -----------------------------------------------------------------------------


def test_cdi_enabled_reads_containerd_dumps():
    v17 = (
        '[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = false\n  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]\n'
    )
    v2 = "[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = true\n  cdi_spec_dirs = ['/etc/cdi']\n"
    assert (cdi.cdi_enabled(v17), cdi.cdi_enabled(v2), cdi.cdi_enabled("[plugins]\n")) == (False, True, None)


def test_the_doctor_runs_the_family_last():
    checks = load_module("gpu_validate_checks")
    assert checks.FAMILIES[-1] == "dra"
    result = checks.run_checks(
        params(families=["dra"], gpu_allocation="dra", runtimes=[], node=node()), fake(DRA_SOCKET, PLUGIN_SOCKET)
    )
    assert [(r["check"], r["status"]) for r in result["checks"]] == [
        ("GPU allocation", "fail"),
        ("DRA prerequisites", "ok"),
    ]
