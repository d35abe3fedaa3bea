"""The values several roles share, read from their one home (roles/gpu_node_facts/vars/main.yml), and the doctor
module's parameters made from them: tests that call gpu_validate_checks directly pass what the gpu_validate role
passes (the module has no fallback of its own for these)."""

from __future__ import annotations

from pathlib import Path

import yaml

SHARED_VARS = Path(__file__).resolve().parents[1] / "roles" / "gpu_node_facts" / "vars" / "main.yml"


def shared_values() -> dict:
    """roles/gpu_node_facts/vars/main.yml as a dict."""
    return yaml.safe_load(SHARED_VARS.read_text())


def shared_doctor_params() -> dict:
    """gpu_validate_checks' parameters that the gpu_validate role fills from the shared values (its defaults)."""
    shared = shared_values()
    return {
        "runtime_binary": shared["__gpu_node_facts_runtime_binary"],
        "kubelet_dropin_name": shared["__gpu_node_facts_kubelet_dropin_name"],
        "kubelet_dropin_min": shared["__gpu_node_facts_kubelet_dropin_min"],
        "kubelet_config_dir": shared["__gpu_node_facts_kubelet_config_dir"],
        "kubelet_main_config": shared["__gpu_node_facts_kubelet_main_config"],
        "seccomp_root": shared["__gpu_node_facts_seccomp_root"],
        "apparmor_profile": shared["__gpu_node_facts_apparmor_profile_name"],
        "seccomp_profile": shared["__gpu_node_facts_seccomp_profile_name"],
        "toolkit_config": shared["__gpu_node_facts_toolkit_config"],
        "dra_device_nodes_unit": shared["__gpu_node_facts_dra_device_nodes_unit"],
        "gpu_allocation": "device-plugin",
        "settings_record": shared["__gpu_node_facts_gpu_settings_record"],
    }
