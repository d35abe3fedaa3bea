"""NVIDIA's runtime is known by the binary it runs, not by the name it was given (issue 37).

One definition (plugins/module_utils/nvidia/runtime.py) serves the facts, the GPU-pods guard, the merges of docker,
containerd and CRI-O and the doctor. The nodes are shaped like the field's: AKS and microk8s call the entry
nvidia-container-runtime, the GPU Operator registers nvidia, nvidia-cdi and nvidia-legacy with binaries under
/usr/local/nvidia/toolkit, hand-made docker setups use names such as gpu."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import config as ct
from ansible_collections.gpunode.provisioning.plugins.module_utils.kubernetes import gpu_pods
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia import runtime as nvidia_runtime
from conftest import gather_node_facts, load_module
from test_runtime_config_crio import CRIO_NODE, render

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gpu_pods"
AKS = (FIXTURES / "aks-containerd-config.toml").read_text()
OPERATOR = (FIXTURES / "gpu-operator-containerd-config.toml").read_text()
PATH = "/etc/containerd/config.toml"
NVIDIA = {"name": "nvidia", "path": "/usr/bin/nvidia-container-runtime"}
TOOLKIT_UPSTREAM = gpu_pods.toolkit_config_facts("/", None)
PLUGIN_ENVVAR = {
    "running": True,
    "present": True,
    "pids": [4711],
    "strategies": ["envvar"],
    "source": "env",
    "sockets": [],
    "managed_by": "standalone",
}
crio_filters = load_module("crio", subdir="plugins/filter").FilterModule().filters()


@pytest.mark.parametrize(
    ("path", "nvidia"),
    [
        ("nvidia-container-runtime", True),
        ("/usr/bin/nvidia-container-runtime", True),
        ("/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi", True),
        ("/usr/local/nvidia/toolkit/nvidia-container-runtime.legacy", True),
        ("/opt/nvidia/nvidia-container-runtime", True),
        ("/usr/bin/runc", False),
        ("/usr/bin/nvidia-container-runtime-hook", False),  # the prestart hook is no OCI runtime
        ("/usr/bin/nvidia-container-runtime.real", False),
        ("nvidia", False),
        ("", False),
        (None, False),
    ],
)
def test_the_binary_decides(path, nvidia):
    assert nvidia_runtime.is_nvidia_binary(path) is nvidia


def test_an_entry_is_nvidias_by_its_binary_and_the_projects_name_counts_only_without_one():
    assert nvidia_runtime.is_nvidia_entry("gpu", "/usr/bin/nvidia-container-runtime")
    assert not nvidia_runtime.is_nvidia_entry("nvidia", "/usr/bin/crun")
    assert nvidia_runtime.is_nvidia_entry("nvidia", None)
    assert not nvidia_runtime.is_nvidia_entry("nvidia-container-runtime", None)
    runtimes = tomllib.loads(OPERATOR)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert nvidia_runtime.nvidia_entries("containerd", runtimes) == {
        "nvidia": "/usr/local/nvidia/toolkit/nvidia-container-runtime",
        "nvidia-cdi": "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi",
        "nvidia-legacy": "/usr/local/nvidia/toolkit/nvidia-container-runtime.legacy",
    }


# --- the facts -----------------------------------------------------------------------------------------------------

DOTTED = (
    "version = 2\n"
    "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = 'gpu'\n"
    "  runtimes.gpu.options.BinaryName = '/opt/bin/nvidia-container-runtime'  # hand-made\n"
)


@pytest.mark.parametrize(
    ("texts", "default", "binary"),
    [
        ([AKS], "nvidia-container-runtime", "/usr/bin/nvidia-container-runtime"),
        ([OPERATOR], "nvidia-cdi", "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi"),
        ([DOTTED], "gpu", "/opt/bin/nvidia-container-runtime"),
        # containerd 2.x's dump spells the tables with single quotes
        (
            [
                "[plugins.'io.containerd.cri.v1.runtime'.containerd]\ndefault_runtime_name = 'nvidia-cdi'\n"
                "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia-cdi.options]\n"
                "binaryName = '/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi'\n"
            ],
            "nvidia-cdi",
            "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi",
        ),
    ],
)
def test_containerd_state_reads_the_default_entrys_binary(texts, default, binary):
    state = gpu_pods.containerd_runtime_state(texts, "1.7.24")
    assert (state["default"], state["default_binary"], state["default_nvidia"]) == (default, binary, True)


def test_docker_and_crio_states_read_the_default_entrys_binary():
    docker = gpu_pods.docker_runtime_state(
        json.dumps({"default-runtime": "gpu", "runtimes": {"gpu": {"path": "nvidia-container-runtime"}}})
    )
    assert docker == {
        "default": "gpu",
        "cdi": False,
        "default_binary": "nvidia-container-runtime",
        "default_nvidia": True,
        "nvidia_entries": {"gpu": "nvidia-container-runtime"},
    }
    crio = gpu_pods.crio_runtime_state(
        [
            '[crio.runtime]\ndefault_runtime = "nvidia-cdi"\n',
            "[crio.runtime.runtimes.nvidia-cdi]\n"
            'runtime_path = "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi"\n',
        ]
    )
    assert crio["default_nvidia"] is True
    # a runtime that only has an NVIDIA-like name
    named = gpu_pods.crio_runtime_state(
        [
            '[crio.runtime]\ndefault_runtime = "nvidia-legacy"\n'
            '[crio.runtime.runtimes.nvidia-legacy]\nruntime_path = "/usr/bin/crun"\n'
        ]
    )
    assert named["default_nvidia"] is False


def test_facts_say_nvidias_runtime_is_containerds_default_on_an_aks_node(tmp_path):
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/bin/containerd").write_text("#!/bin/sh\n")
    (tmp_path / "usr/bin/containerd").chmod(0o755)
    (tmp_path / "etc/containerd").mkdir(parents=True)
    (tmp_path / "etc/containerd/config.toml").write_text(AKS)
    state = gather_node_facts(str(tmp_path))["runtime_defaults"]["containerd"]
    assert state["default"] == "nvidia-container-runtime"
    assert state["default_binary"] == "/usr/bin/nvidia-container-runtime"
    assert state["default_nvidia"] is True


# --- the GPU-pods guard --------------------------------------------------------------------------------------------


def _facts(state: dict, runtime: str = "containerd") -> dict:
    return {
        "device_plugin": PLUGIN_ENVVAR,
        "runtime_defaults": {runtime: {**state, "cdi_supported": True}},
        "toolkit_config": TOOLKIT_UPSTREAM,
    }


@pytest.mark.parametrize(
    ("runtime", "state", "named"),
    [
        (
            "containerd",
            gpu_pods.containerd_runtime_state([AKS], "1.7.24"),
            "containerd's default runtime nvidia-container-runtime (/usr/bin/nvidia-container-runtime) -> runc",
        ),
        (
            "containerd",
            gpu_pods.containerd_runtime_state([OPERATOR], "1.7.24"),
            "containerd's default runtime nvidia-cdi (/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi) -> runc",
        ),
        (
            "docker",
            gpu_pods.docker_runtime_state(
                '{"default-runtime": "gpu", "runtimes": {"gpu": {"path": "nvidia-container-runtime"}}}'
            ),
            "docker's default runtime gpu (nvidia-container-runtime) -> runc",
        ),
    ],
)
def test_the_guard_refuses_nvidias_runtime_under_any_name_and_names_entry_and_binary(runtime, state, named):
    facts = _facts(dict(state, cdi=False), runtime)
    message = gpu_pods.refusal_for_run(facts, "gpu1", [runtime], False, True, {})
    assert message.startswith("Refusing to change gpu1"), message
    assert named in message
    # keep_gpu_pod_access: set_as_default, and that entry stays the default under its own name
    assert gpu_pods.refusal_for_run(facts, "gpu1", [runtime], True, True, {}) == ""
    planned = gpu_pods.planned_runtimes(facts["runtime_defaults"], [runtime], True, True)
    assert planned[runtime]["default"] == state["default"]


def test_a_runtime_that_only_has_an_nvidia_like_name_is_no_gpu_path():
    state = gpu_pods.docker_runtime_state(
        '{"default-runtime": "nvidia-container-runtime", "runtimes": '
        '{"nvidia-container-runtime": {"path": "/usr/bin/crun"}}}'
    )
    assert gpu_pods.refusal_for_run(_facts(state, "docker"), "gpu1", ["docker"], False, True, {}) == ""


def test_the_doctors_device_plugin_row_warns_naming_the_entry():
    state = dict(gpu_pods.containerd_runtime_state([AKS], "1.7.24"), cdi=False)
    row = gpu_pods.doctor_row(PLUGIN_ENVVAR, {"containerd": state}, TOOLKIT_UPSTREAM)
    assert row["status"] == "warn", row
    assert (
        "containerd defaults to NVIDIA's runtime nvidia-container-runtime (/usr/bin/nvidia-container-runtime)"
        in (row["detail"])
    )


# --- containerd's merge: the default moves, NVIDIA's other entries stay ---------------------------------------------


def _cri(text: str) -> dict:
    return tomllib.loads(text)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]


def test_aks_default_moves_to_runc_with_its_settings_and_the_entry_stays():
    outcome = ct.plan_inplace(AKS, PATH, ct.Request(runtime=NVIDIA, unset_default=True))
    containerd = _cri(outcome.after)
    assert "default_runtime_name" not in containerd
    runtimes = containerd["runtimes"]
    assert runtimes["runc"] == {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": True}}
    assert runtimes["nvidia-container-runtime"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert runtimes["nvidia"]["options"] == {"SystemdCgroup": True, "BinaryName": "/usr/bin/nvidia-container-runtime"}
    assert outcome.nvidia["moved_from"] == "nvidia-container-runtime"
    assert outcome.nvidia["entries"] == {"nvidia-container-runtime": "/usr/bin/nvidia-container-runtime"}
    assert (
        "NVIDIA's runtime is also registered as nvidia-container-runtime (/usr/bin/nvidia-container-runtime): kept"
        in (outcome.nvidia["note"])
    )
    assert "# NVIDIA's runtime is the default on this node" in outcome.after  # comments survive
    assert ct.plan_inplace(outcome.after, PATH, ct.Request(runtime=NVIDIA, unset_default=True)).changed is False


def test_gpu_operator_default_moves_and_nvidia_cdi_and_nvidia_legacy_stay():
    outcome = ct.plan_inplace(OPERATOR, PATH, ct.Request(runtime=NVIDIA, unset_default=True))
    containerd = _cri(outcome.after)
    assert "default_runtime_name" not in containerd
    runtimes = containerd["runtimes"]
    assert runtimes["runc"] == {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": True}}
    for mode in ("cdi", "legacy"):
        binary = f"/usr/local/nvidia/toolkit/nvidia-container-runtime.{mode}"
        assert runtimes[f"nvidia-{mode}"]["options"] == {"BinaryName": binary, "SystemdCgroup": True}
    assert outcome.nvidia["moved_from"] == "nvidia-cdi"
    assert set(outcome.nvidia["entries"]) == {"nvidia-cdi", "nvidia-legacy"}


def test_keep_leaves_nvidias_runtime_the_default_under_its_own_name():
    for text, default in ((AKS, "nvidia-container-runtime"), (OPERATOR, "nvidia-cdi")):
        outcome = ct.plan_inplace(text, PATH, ct.Request(runtime=NVIDIA, default_runtime="nvidia"))
        assert _cri(outcome.after)["default_runtime_name"] == default
        assert outcome.nvidia["kept"] == default
        assert f"NVIDIA's runtime {default} stays the default" in outcome.nvidia["note"]


def test_an_imported_nvidia_default_under_another_name_is_refused():
    dump = tomllib.loads(OPERATOR)
    packaged = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  snapshotter = "overlayfs"\n'
    with pytest.raises(
        ct.ContainerdConfigError, match=re.escape("makes NVIDIA's runtime nvidia-cdi (/usr/local/nvidia")
    ):
        ct.plan_inplace(packaged, PATH, ct.Request(runtime=NVIDIA, unset_default=True, effective=dump))


# --- CRI-O's drop-in and its reading -------------------------------------------------------------------------------


def _with_default(text: str, name: str, binary: str) -> str:
    text = text.replace('default_runtime = "runc"', f'default_runtime = "{name}"', 1)
    return text + f'\n[crio.runtime.runtimes.{name}]\nruntime_path = "{binary}"\nruntime_type = "oci"\n'


def test_crio_dropin_moves_an_nvidia_default_under_another_name_back_to_crios_own():
    node = _with_default(CRIO_NODE, "nvidia-cdi", "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi")
    config = render(node)
    assert config["crio"]["runtime"]["default_runtime"] == "crun"  # CRI-O's own default from 1.31 (FALLBACK_DEFAULTS)
    # kept as the default when asked to be (keep_gpu_pod_access)
    assert "default_runtime" not in render(node, runtime_config_set_as_default=True)["crio"]["runtime"]
    problems = crio_filters["runtime_config_crio_reading_problems"]
    said = problems(
        CRIO_NODE,
        node.replace(
            "\n[crio.runtime.runtimes.nvidia-cdi]",
            "\n[crio.runtime.runtimes.nvidia]\nruntime_path = "
            '"/usr/bin/nvidia-container-runtime"\n[crio.runtime.runtimes.nvidia-cdi]',
        ),
        "nvidia",
        "/usr/bin/nvidia-container-runtime",
    )
    assert any("default_runtime is NVIDIA's runtime nvidia-cdi (/usr/local/nvidia/toolkit/" in p for p in said), said


# --- the doctor's default-runtime rows -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("default", "binary", "status"),
    [
        ("nvidia-container-runtime", "/usr/bin/nvidia-container-runtime", "fail"),
        ("nvidia-cdi", "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi", "fail"),
        ("gpu", "nvidia-container-runtime", "fail"),
        ("nvidia", None, "fail"),
        ("runc", None, "ok"),
        ("nvidia-legacy", "/usr/bin/crun", "ok"),
    ],
)
def test_the_doctors_default_runtime_row_fails_for_nvidias_runtime_under_any_name(default, binary, status):
    from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.containers import (
        default_runtime_row,
    )
    from conftest import params

    said = "default_runtime_name is {default}: every pod whose image sets"
    row = default_runtime_row(params(), "containerd", default, said, "intended", binary=binary)
    assert row["status"] == status, row
    if status == "fail":
        assert row["detail"].startswith(f"default_runtime_name is {nvidia_runtime.describe(default, binary)}: every")
        allowed = default_runtime_row(
            params(nvidia_default_allowed=True), "containerd", default, said, "x", binary=binary
        )
        assert allowed["status"] == "warn"


def test_containerds_reading_of_the_candidate_is_checked_for_nvidias_runtime_under_any_name():
    """verify_reading: kept as the default where asked (keep_gpu_pod_access); refused where it stays the default
    although it should have moved."""
    before = tomllib.loads(AKS)
    keep = ct.Request(runtime=NVIDIA, default_runtime="nvidia")
    kept = tomllib.loads(ct.plan_inplace(AKS, PATH, keep).after)
    ct.verify_reading(PATH, before, kept, keep)  # no error: nvidia-container-runtime stays the default
    move = ct.Request(runtime=NVIDIA, unset_default=True)
    moved = tomllib.loads(ct.plan_inplace(AKS, PATH, move).after)
    moved["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["default_runtime_name"] = "runc"  # as the dump says
    ct.verify_reading(PATH, before, moved, move)
    with pytest.raises(ct.ContainerdConfigError, match="is NVIDIA's runtime nvidia-container-runtime"):
        ct.verify_reading(PATH, before, kept, move)
