"""Node facts for GPU allocation (plugins/module_utils/node_facts/dra.py, issue 39), read from a node tree under
tmp_path: the running kubelet's --root-dir from /proc/<pid>/cmdline, the registration sockets in plugins_registry,
NVIDIA's device plugin's sockets and the DRA GPU plugin's checkpoint; and the facts module returns them."""

from __future__ import annotations

from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts import dra as facts
from conftest import gather_node_facts


def _kubelet(root, pid, *argv):
    proc = root / "proc" / str(pid)
    proc.mkdir(parents=True)
    (proc / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")


def _touch(root, path):
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("")


def test_root_dir_from_the_running_kubelets_command_line(tmp_path):
    _kubelet(tmp_path, 1, "/sbin/init")
    _kubelet(tmp_path, 812, "/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml", "--root-dir", "/data/kubelet/")
    assert facts.kubelet_root_dir(str(tmp_path)) == "/data/kubelet"


def test_root_dir_of_an_interpreted_kubelet_and_the_default(tmp_path):
    _kubelet(tmp_path, 7, "/usr/bin/python3", "/usr/bin/kubelet", "--root-dir=/srv/k")
    assert facts.kubelet_root_dir(str(tmp_path)) == "/srv/k"
    assert facts.kubelet_root_dir(str(tmp_path / "none")) == facts.KUBELET_ROOT_DIR_DEFAULT == "/var/lib/kubelet"


def test_registrations_device_plugin_and_checkpoint(tmp_path):
    for path in (
        "/var/lib/kubelet/plugins_registry/gpu.nvidia.com-reg.sock",
        "/var/lib/kubelet/plugins_registry/compute-domain.nvidia.com-reg.sock",
        "/var/lib/kubelet/device-plugins/nvidia-gpu.sock",
        "/var/lib/kubelet/device-plugins/kubelet.sock",
        "/var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json",
    ):
        _touch(tmp_path, path)
    found = facts.dra_facts(str(tmp_path))
    assert found["dra_drivers"] == ["compute-domain.nvidia.com", "gpu.nvidia.com"]
    assert found["dra_gpu_registered"] and found["device_plugin_registered"]
    assert found["device_plugin_sockets"] == ["/var/lib/kubelet/device-plugins/nvidia-gpu.sock"]
    assert found["checkpoint"] == "/var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json"
    assert found["checkpoint_exists"] and found["plugins_dir_exists"] and found["plugins_registry_exists"]


def test_an_empty_node(tmp_path):
    found = facts.dra_facts(str(tmp_path))
    assert not (found["dra_gpu_registered"] or found["device_plugin_registered"] or found["plugins_registry_exists"])
    assert found["registrations"] == [] and found["kubelet_root_dir"] == "/var/lib/kubelet"


def test_rolling_update_sockets_name_the_driver():
    names = ["gpu.nvidia.com-5b7c-reg.sock", "gpu.nvidia.com-reg.sock", "kubelet.sock", "csi.example.com-reg.sock"]
    assert facts.registered_drivers(names) == ["gpu.nvidia.com", "csi.example.com"]


def test_the_facts_module_returns_them(tmp_path):
    _touch(tmp_path, "/var/lib/kubelet/plugins_registry/gpu.nvidia.com-reg.sock")
    gathered = gather_node_facts(str(tmp_path), run_command=None, which=lambda name: None)
    assert gathered["dra"]["dra_gpu_registered"] is True
    assert gathered["dra"]["registrations"] == ["gpu.nvidia.com-reg.sock"]
