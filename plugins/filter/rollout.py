# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Rollouts: the ``serial:`` of playbooks/gpu_nodes.yml (a canary, then batches) and of
playbooks/upgrade_driver.yml (its batch size), and upgrade_driver.yml's kubectl and its wait for a node's GPUs.

`gpu_rollout_serial(canary, batches, canary_name="gpu_nodes_canary", batches_name="gpu_nodes_batches")`
    The list for a play's ``serial:``: ``[canary, *batches]``. ``canary`` is a number of nodes (None, "" or 0:
    no canary). ``batches`` is one batch size or a list of them, each a number of nodes or a percentage of
    the play's nodes ("25%"); Ansible repeats the last one until every node had its turn. A canary without
    batches is followed by the rest of the nodes in one batch ("100%"). Neither: ``[]``, which Ansible reads
    as all nodes in one batch (no batching). Anything else is refused with a message that names the
    variable (the names given) and what to write.

`gpu_rollout_kubectl(installer, admin, kubeconfig=None, kubectl=None)`
    The kubectl command line of playbooks/upgrade_driver.yml: ``[kubectl, "--kubeconfig", path]``. ``admin`` is the
    table of where each installer keeps them (``__gpu_node_facts_cluster_admin``), ``installer`` the installer name
    of the control-plane host (gpu_node_facts ``installer.name``; unknown or empty: kubeadm's). A ``kubeconfig`` or
    ``kubectl`` the user gave wins over the table.

`gpu_rollout_wait(api, timeout, delay, count)`
    The wait of upgrade_driver.yml checked before any node is touched: ``{"api", "timeout", "delay", "retries",
    "count"}``. ``api`` is ``device_plugin`` (the device plugin's extended resource in the node's
    ``status.allocatable``), ``dra`` (the DRA driver's ResourceSlices for the node) or ``none`` (only Ready);
    ``timeout`` and ``delay`` whole seconds (delay > 0, timeout >= delay); ``count`` the GPUs that must be back
    (0: none are asked for, as ``none``). A bad value is refused naming the variable.

`gpu_rollout_wait_script(kubectl, node, wait, resourceslices="resourceslices.v1.resource.k8s.io",
driver="gpu.nvidia.com")`
    The bash script of one try of the wait task: it prints ``{"node": <kubectl get node -o json>, "slices": ...}``,
    the slices being the DRA driver's ResourceSlices of the node where ``wait`` (gpu_rollout_wait's) waits for
    DRA devices, else ``null``: what gpu_rollout_node_gpus reads. ``kubectl`` is the command line (a list).

`gpu_rollout_node_gpus(result, node, api="device_plugin", resource="nvidia.com/gpu", driver="gpu.nvidia.com",
count=1)`
    Whether a node is back after its upgrade, from one try of the wait task: ``result`` is its registered result
    (``rc``, ``stdout``, ``stderr``), whose stdout is ``{"node": <kubectl get node -o json>, "slices": <kubectl get
    resourceslices -o json, or null>}``. Returns ``{"back", "ready", "gpus", "missing", "fix"}``: ``back`` when
    the node's condition Ready is True and at least ``count`` GPUs are allocatable: for ``device_plugin`` the
    integer ``status.allocatable[resource]`` (for the default ``nvidia.com/gpu``, the sum of the device plugin's
    ``nvidia.com/gpu``, ``nvidia.com/mig-*`` and their ``.shared`` names: a MIG or time-sliced node);
    for ``dra`` the devices of the ResourceSlices whose ``spec.driver`` is
    ``driver`` and ``spec.nodeName`` the node (resource.k8s.io/v1, GA in Kubernetes 1.34: kubernetes/api
    resource/v1/types.go, ResourceSliceSpec ``driver``/``nodeName``/``devices``); ``none`` asks only for Ready.
    ``missing`` says what is not there yet (empty when back) and ``fix`` what to look at.

Pure functions; the unit tests call them without Ansible.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - Ansible is always there when the playbook runs

    class AnsibleFilterError(Exception):
        pass


PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def _unset(value) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _batch(value, name: str):
    """One batch size: a positive int, or 'N%' with 0 < N <= 100."""
    if isinstance(value, bool):
        raise AnsibleFilterError(
            f"{name}: {value!r} is no batch size; write a number of nodes (2) or a percentage ('25%')"
        )
    if isinstance(value, int):
        if value > 0:
            return value
    elif isinstance(value, str):
        text = value.strip()
        if text.isdigit() and int(text) > 0:
            return int(text)
        match = PERCENT.match(text)
        if match and 0 < float(match.group(1)) <= 100:
            return f"{match.group(1)}%"
    raise AnsibleFilterError(
        f"{name}: {value!r} is no batch size; write a number of nodes greater than 0 (2) or a percentage "
        "of the play's nodes from 1% to 100% ('25%')"
    )


def gpu_rollout_serial(canary, batches=None, canary_name="gpu_nodes_canary", batches_name="gpu_nodes_batches") -> list:
    """The ``serial:`` list of a rollout (module docstring)."""
    serial = []
    if not _unset(canary) and canary != 0:
        first = _batch(canary, canary_name)
        if isinstance(first, str):
            raise AnsibleFilterError(
                f"{canary_name}: {canary!r}: the canary is a number of nodes (1), not a percentage"
            )
        serial.append(first)
    if isinstance(batches, (list, tuple)):
        if not batches:
            raise AnsibleFilterError(f"{batches_name}: an empty list; leave it unset, or give batch sizes (['25%'])")
        serial += [_batch(item, f"{batches_name}[{index}]") for index, item in enumerate(batches)]
    elif not _unset(batches):
        serial.append(_batch(batches, batches_name))
    elif serial:
        serial.append("100%")
    return serial


def gpu_rollout_kubectl(installer, admin, kubeconfig=None, kubectl=None) -> list:
    """The kubectl command line of the control-plane host (module docstring)."""
    entry = admin.get(installer) if isinstance(installer, str) and installer in admin else admin["kubeadm"]
    return [
        kubectl if not _unset(kubectl) else entry["kubectl"],
        "--kubeconfig",
        kubeconfig if not _unset(kubeconfig) else entry["kubeconfig"],
    ]


WAIT_APIS = ("device_plugin", "dra", "none")


def _seconds(value, name: str, least: int) -> int:
    text = str(value).strip() if not isinstance(value, bool) else ""
    if text.endswith("s"):
        text = text[:-1]
    if not text.isdigit() or int(text) < least:
        raise AnsibleFilterError(
            f"{name}: {value!r} is no number of seconds; write a whole number of at least {least} (600)"
        )
    return int(text)


def gpu_rollout_wait(api, timeout, delay, count) -> dict:
    """The wait's settings, checked (module docstring)."""
    if api not in WAIT_APIS:
        raise AnsibleFilterError(
            f"upgrade_driver_gpu_api: {api!r}; write device_plugin (nvidia.com/gpu in the node's allocatable), "
            "dra (ResourceSlices of the DRA driver gpu.nvidia.com) or none (wait for Ready only)"
        )
    delay = _seconds(delay, "upgrade_driver_ready_delay", 1)
    timeout = _seconds(timeout, "upgrade_driver_ready_timeout", delay)
    if isinstance(count, bool) or not str(count).strip().isdigit():
        raise AnsibleFilterError(
            f"upgrade_driver_gpu_count: {count!r}; write the number of GPUs that must be allocatable again (2), "
            "or 0 to wait for Ready only"
        )
    return {"api": api, "timeout": timeout, "delay": delay, "retries": -(-timeout // delay), "count": int(count)}


def _ready(node: Mapping):
    """(Ready is True, how the Ready condition reads)."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            words = [f"Ready={condition.get('status')}"] + [
                condition[key] for key in ("reason", "message") if condition.get(key)
            ]
            return condition.get("status") == "True", ": ".join(words)
    return False, "no Ready condition"


# NVIDIA's device plugin names its resources nvidia.com/gpu, nvidia.com/mig-<profile> under the MIG strategy mixed
# (release notes of NVIDIA/k8s-device-plugin v0.7.0, e.g. nvidia.com/mig-3g.20gb) and, shared (time-slicing, MPS)
# with renameByDefault, <name>.shared (api/config/v1/consts.go DefaultSharedResourceNameSuffix, resources.go
# DefaultSharedRename). Counted together for the default resource: each GPU back gives at least one of them (a MIG
# GPU one per instance, a shared GPU one per replica), so a MIG or shared node is back when their sum reaches its
# GPU count.
DEVICE_PLUGIN_RESOURCE = "nvidia.com/gpu"
_DEVICE_PLUGIN_NAMES = re.compile(r"nvidia\.com/(gpu(\.shared)?|mig-[0-9a-z.+-]+)")


def _device_plugin_resources(allocatable: Mapping) -> list:
    """The allocatable resources of NVIDIA's device plugin (nvidia.com/gpu, mig-*, their .shared names), sorted."""
    return sorted(name for name in allocatable if isinstance(name, str) and _DEVICE_PLUGIN_NAMES.fullmatch(name))


def _quantity(value) -> int:
    """An extended resource's quantity (a whole number: extended resources take no fractions)."""
    try:
        return int(str(value))
    except ValueError:
        return 0


def gpu_rollout_node_gpus(
    result, node, api="device_plugin", resource="nvidia.com/gpu", driver="gpu.nvidia.com", count=1
) -> dict:
    """Whether the node is Ready with its GPUs allocatable again (module docstring)."""
    kubelet_fix = (
        f"look at the kubelet on {node} (systemctl status kubelet, journalctl -u kubelet) and at the doctor's "
        "report (playbooks/validate.yml)"
    )
    state = {"back": False, "ready": False, "gpus": 0, "missing": "", "fix": kubelet_fix}
    stdout = (result or {}).get("stdout") or ""
    try:
        answer = json.loads(stdout) if (result or {}).get("rc") == 0 else None
    except ValueError:
        answer = None
    if not isinstance(answer, Mapping) or not isinstance(answer.get("node"), Mapping):
        said = ((result or {}).get("stderr") or stdout or "no output").strip().splitlines()
        state["missing"] = f"kubectl could not read node {node}: {said[-1] if said else 'no output'}"
        state["fix"] = "check the kubeconfig and kubectl on the kube_control_plane host (upgrade_driver_kubeconfig)"
        return state
    state["ready"], ready_text = _ready(answer["node"])
    missing = [] if state["ready"] else [f"the node is not Ready ({ready_text})"]
    if count < 1:
        api = "none"
    if api == "device_plugin":
        allocatable = (answer["node"].get("status") or {}).get("allocatable") or {}
        names = _device_plugin_resources(allocatable) if resource == DEVICE_PLUGIN_RESOURCE else []
        names = names or ([resource] if resource in allocatable else [])
        state["gpus"] = sum(_quantity(allocatable[name]) for name in names)
        shown = " + ".join(f"{name} {allocatable[name]}" for name in names)
        if not names:
            missing.append(f"{resource} is not in its status.allocatable")
        elif state["gpus"] < count:
            missing.append(f"allocatable {shown}, {count} wanted")
        plugin_fix = (
            f"look at the NVIDIA device plugin's pod on {node} (kubectl get pods -A -o wide "
            f"--field-selector spec.nodeName={node}; its log), which registers {resource}"
        )
    elif api == "dra":
        slices = [
            item
            for item in ((answer.get("slices") or {}).get("items") or [])
            if (item.get("spec") or {}).get("driver") == driver and (item.get("spec") or {}).get("nodeName") == node
        ]
        state["gpus"] = sum(len((item.get("spec") or {}).get("devices") or []) for item in slices)
        if not slices:
            missing.append(f"no ResourceSlice of the DRA driver {driver} names the node")
        elif state["gpus"] < count:
            missing.append(f"the ResourceSlices of {driver} list {state['gpus']} devices, {count} wanted")
        plugin_fix = (
            f"look at the DRA driver's kubelet plugin pod on {node} (kubectl get pods -A -o wide "
            f"--field-selector spec.nodeName={node}; its log), which publishes the ResourceSlices of {driver}"
        )
    else:
        plugin_fix = ""
    state["missing"] = "; ".join(missing)
    state["back"] = not missing
    if state["ready"] and missing:
        state["fix"] = plugin_fix
    return state


def gpu_rollout_wait_script(
    kubectl,
    node: str,
    wait: Mapping,
    resourceslices: str = "resourceslices.v1.resource.k8s.io",
    driver: str = "gpu.nvidia.com",
) -> str:
    """The bash script of one try of upgrade_driver.yml's wait: the node, and its ResourceSlices when DRA is awaited."""
    command = " ".join(shlex.quote(str(arg)) for arg in kubectl)
    if wait["api"] == "dra" and wait["count"] > 0:
        selector = shlex.quote(f"spec.nodeName={node},spec.driver={driver}")
        slices = f"{command} get {shlex.quote(resourceslices)} -o json \\\n  --field-selector {selector}"
    else:
        slices = "printf 'null'"
    return "\n".join(
        [
            "set -euo pipefail",
            "printf '{\"node\": '",
            f"{command} get node {shlex.quote(node)} -o json",
            "printf ', \"slices\": '",
            slices,
            "printf '}\\n'",
            "",
        ]
    )


class FilterModule:
    """Filters of the rollout playbooks."""

    def filters(self):
        return {
            "gpu_rollout_serial": gpu_rollout_serial,
            "gpu_rollout_kubectl": gpu_rollout_kubectl,
            "gpu_rollout_wait": gpu_rollout_wait,
            "gpu_rollout_node_gpus": gpu_rollout_node_gpus,
            "gpu_rollout_wait_script": gpu_rollout_wait_script,
        }
