"""TOML files written with dotted keys (valid TOML) are merged like files with [tables]."""

from __future__ import annotations

import tomlkit
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import config as ct
from conftest import load_module

tm = load_module("toml_merge", subdir="plugins/action")

PATH = "/etc/containerd/config.toml"
NVIDIA = {"name": "nvidia", "path": "/usr/bin/nvidia-container-runtime"}

DOTTED = """\
# admin's containerd config, written with dotted keys
version = 2
plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.runtime_type = "io.containerd.runc.v2"
plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options.SystemdCgroup = true

[grpc]
  address = "/run/containerd/containerd.sock"  # kept
"""

DOTTED_IN_A_TABLE = """\
version = 2

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  containerd.default_runtime_name = "runc"
  containerd.runtimes.runc.runtime_type = "io.containerd.runc.v2"
  containerd.runtimes.runc.options.SystemdCgroup = true
"""


def _cri(text: str) -> dict:
    return tomlkit.parse(text).unwrap()["plugins"]["io.containerd.grpc.v1.cri"]


def test_containerd_config_with_dotted_keys_gets_the_runtime_with_runcs_options():
    outcome = ct.plan_inplace(DOTTED, PATH, ct.Request(runtime=NVIDIA))
    assert outcome.changed is True
    runtimes = _cri(outcome.after)["containerd"]["runtimes"]
    assert runtimes["runc"] == {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": True}}
    assert runtimes["nvidia"]["options"] == {"SystemdCgroup": True, "BinaryName": "/usr/bin/nvidia-container-runtime"}
    assert outcome.after.startswith("# admin's containerd config, written with dotted keys\nversion = 2\n")
    assert '  address = "/run/containerd/containerd.sock"  # kept\n' in outcome.after
    assert ct.plan_inplace(outcome.after, PATH, ct.Request(runtime=NVIDIA)).changed is False


def test_dotted_keys_inside_a_table_are_merged_too():
    outcome = ct.plan_inplace(DOTTED_IN_A_TABLE, PATH, ct.Request(runtime=NVIDIA))
    cri = _cri(outcome.after)
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.9"
    assert cri["containerd"]["default_runtime_name"] == "runc"
    assert cri["containerd"]["runtimes"]["nvidia"]["options"]["SystemdCgroup"] is True


def test_a_dotted_file_that_needs_no_change_is_left_byte_for_byte():
    text = DOTTED_IN_A_TABLE + '  containerd.runtimes.nvidia.runtime_type = "io.containerd.runc.v2"\n'
    text += "  containerd.runtimes.nvidia.options.SystemdCgroup = true\n"
    text += '  containerd.runtimes.nvidia.options.BinaryName = "/usr/bin/nvidia-container-runtime"\n'
    outcome = ct.plan_inplace(text, PATH, ct.Request(runtime=NVIDIA))
    assert (outcome.changed, outcome.after) == (False, text)


def test_toml_merge_merges_into_dotted_keys():
    text = (
        'disable-require = false\nnvidia-container-runtime.log-level = "info"\nnvidia-container-runtime.mode = "auto"\n'
    )
    result = tm.plan(text, "/etc/nvidia-container-runtime/config.toml", {"nvidia-container-runtime": {"mode": "cdi"}})
    assert result.changed is True
    assert tomlkit.parse(result.after).unwrap() == {
        "disable-require": False,
        "nvidia-container-runtime": {"log-level": "info", "mode": "cdi"},
    }


DOTTED_WITH_COMMENTS = """\
version = 2
# runc as the kubelet wants it
plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.runtime_type = "io.containerd.runc.v2"
plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options.SystemdCgroup = true   # keep systemd cgroups
"""


def test_dotted_keys_keep_their_inline_comments():
    """Issue 37: the tree under a dotted key is written as tables, each value with the comment it had."""
    outcome = ct.plan_inplace(DOTTED_WITH_COMMENTS, PATH, ct.Request(runtime=NVIDIA))
    assert outcome.changed is True
    assert "\nSystemdCgroup = true   # keep systemd cgroups\n" in outcome.after
    assert "# runc as the kubelet wants it\n" in outcome.after
    assert _cri(outcome.after)["containerd"]["runtimes"]["runc"]["options"] == {"SystemdCgroup": True}
    in_a_table = DOTTED_IN_A_TABLE.replace(
        "SystemdCgroup = true\n", "SystemdCgroup = true  # systemd, as the kubelet\n"
    )
    after = ct.plan_inplace(in_a_table, PATH, ct.Request(runtime=NVIDIA)).after
    assert "\nSystemdCgroup = true  # systemd, as the kubelet\n" in after
    # toml_merge (the toolkit's config.toml) undots the same way
    text = 'nvidia-container-runtime.mode = "auto"  # set by the admin\n'
    result = tm.plan(
        text, "/etc/nvidia-container-runtime/config.toml", {"nvidia-container-runtime": {"log-level": "info"}}
    )
    assert 'mode = "auto"  # set by the admin' in result.after
