# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""What the kubelet role's tasks decide and say, once Jinja programs in its tasks and vars (issue 40):

- `kubelet_planned_version(gpu_node, installed, assumed)`: the kubelet version the plan is for.
- `kubelet_parts(before, dra, dra_artifacts, installer_managed, subid_range, mode)`: the task files tasks/main.yml
  runs, from its one look at the node.
- `kubelet_read_files(read)`: path -> text of a registered slurp loop (files that were not there left out).
- `kubelet_file_results(dropin, main, removed, flags, main_path, env_path)`: [path, result] of every kubelet file
  task, what kubelet_rollback_plan (plugins/filter/kubelet_config.py) undoes.
- `kubelet_report_messages(values)`: the report of when and how the kubelet picks up its settings.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError


def _loop_results(registered) -> list:
    """The per-item results of a registered loop (skipped, or not registered: none)."""
    results = registered.get("results") if isinstance(registered, Mapping) else None
    return [result for result in results or [] if isinstance(result, Mapping)]


def kubelet_planned_version(gpu_node, installed, assumed):
    """The installed kubelet's version (gpu_node_facts), else the RKE2/k3s installer's (its agent runs the kubelet
    of its own version), else `assumed` (kubelet_assumed_version)."""
    gpu_node = gpu_node if isinstance(gpu_node, Mapping) else {}
    version = (gpu_node.get("kubelet") or {}).get("version")
    if installed and version and len(str(version)) > 0:
        return version
    installer = gpu_node.get("installer") or {}
    if installer.get("name", "") in ("rke2", "k3s") and installer.get("version"):
        return installer["version"]
    return assumed


def kubelet_parts(before, dra, dra_artifacts, installer_managed, subid_range, mode) -> list:
    """The task files tasks/main.yml includes, in order: dra.yml on a DRA node, else dra_absent.yml where the
    stat loop `before` found one of `dra_artifacts`; installer.yml on RKE2/k3s (it ends the role), else
    user_namespaces.yml when a host ID range is asked for (`subid_range`) and config_merge.yml in merge mode."""
    found = {result.get("item") for result in _loop_results(before) if (result.get("stat") or {}).get("exists")}
    parts = []
    if dra:
        parts.append("dra.yml")
    elif found & set(dra_artifacts or []):
        parts.append("dra_absent.yml")
    if installer_managed:
        return [*parts, "installer.yml"]
    if subid_range:
        parts.append("user_namespaces.yml")
    if mode == "merge":
        parts.append("config_merge.yml")
    return parts


def kubelet_read_files(read) -> dict:
    """{path: text} of a registered slurp loop; a file that was not there (no content) is left out."""
    return {
        result.get("item"): base64.b64decode(result["content"]).decode("utf-8")
        for result in _loop_results(read)
        if "content" in result
    }


def kubelet_file_results(dropin, main, removed, flags, main_path, env_path) -> list:
    """[path, registered result] of the kubelet file tasks, in the order they run: the drop-in writes (a loop over
    {dest, ...}), the merge into the main file, the removals (a loop over paths), KUBELET_EXTRA_ARGS."""
    return (
        [[(result.get("item") or {}).get("dest"), result] for result in _loop_results(dropin)]
        + [[main_path, main or {}]]
        + [[result.get("item"), result] for result in _loop_results(removed)]
        + [[env_path, flags or {}]]
    )


def kubelet_report_messages(values) -> list:
    """The report's messages, the ones that apply, in order. `values`: hostname, unknown_message and
    runtime_message (already '' when they do not apply), userns_gates (the role sets UserNamespacesSupport),
    userns_version, userns_gate (its value), installed, running, mode, version (the plan's), overridden (flags of
    kubeadm_flags_file that override the role's fields) and changed (a kubelet file changed)."""
    if not isinstance(values, Mapping):
        raise AnsibleFilterError(f"kubelet_report_messages: expects a mapping, not {type(values).__name__}")
    v = values
    messages = [v.get("unknown_message") or ""]
    if v["userns_gates"]:
        gate = str(v["userns_gate"]).lower()
        messages.append(
            f"kubelet {v['userns_version']} on {v['hostname']} has the UserNamespacesSupport feature gate off by "
            f"default: the KubeletConfiguration gets featureGates.UserNamespacesSupport {gate},"
            " so pods with hostUsers: false (user-namespaced FUSE pods) get a user namespace."
        )
    if not v["running"]:
        state = "installed but not running" if v["installed"] else "not installed"
        messages.append(
            f"The kubelet is {state} on this node, so it was not restarted. Its settings are in place ({v['mode']} "
            f"mode, planned for kubelet {v['version']}) and apply when the kubelet starts."
        )
    messages.append(v.get("runtime_message") or "")
    if v["overridden"]:
        flags = ", ".join(f"--{flag}" for flag in v["overridden"])
        messages.append(
            f"{v['kubeadm_flags_file']} sets {flags}, which override the KubeletConfiguration fields this role sets"
            " (command-line flags win). Remove them from that file (kubeadm 1.27 and later keeps these settings in the"
            " configuration), then restart the kubelet."
        )
    if v["installed"] and v["changed"]:
        messages.append(
            "--node-labels and registerWithTaints are applied when the node registers with the cluster. A node that"
            " is already registered keeps its labels and taints: change them with kubectl label node / kubectl taint"
            " node."
        )
    return [message for message in messages if message]


class FilterModule:
    """What the kubelet role's tasks decide and say (see the module docstring; kubelet_planned_version and
    kubelet_parts: the plan's, plugins/filter/kubelet_plan.py)."""

    def filters(self):
        return {
            "kubelet_read_files": kubelet_read_files,
            "kubelet_file_results": kubelet_file_results,
            "kubelet_report_messages": kubelet_report_messages,
        }
