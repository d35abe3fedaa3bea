# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Rollouts: the ``serial:`` of playbooks/gpu_nodes.yml (a canary, then batches) and of the rollout playbooks, and
the rollout mechanism's kubectl, its wait for a node's GPUs, its stops and resumes (playbooks/tasks/rollout.yml).

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

The shared mechanism of every rollout playbook (playbooks/tasks/rollout.yml):

`gpu_rollout_batches(prefix, canary=None, batch=None, max_unavailable=None)`
    The ``serial:`` of a rollout playbook: ``<prefix>_canary`` (default 1) then ``<prefix>_batch`` or
    ``<prefix>_max_unavailable`` (default "25%"), checked by gpu_rollout_serial under those names.

`gpu_rollout_control_plane(groups, drain=True, prefix="rollout", play_hosts=None)`
    The first ``kube_control_plane`` host, '' with ``drain`` off; refused where the inventory has none (an AWX job
    slice without it), naming why and the fix.

`gpu_rollout_node_state(result, node, rollout="")`, `gpu_rollout_annotation(rollout, step, reason, cordoned)`,
`gpu_rollout_annotate(kubectl, node, value=None)`, `gpu_rollout_results(previous, node="")`
    The node's cordon and the stop a last run recorded in its annotation ``gpu-node-provisioning/rollout`` (and
    the sentence saying where it resumes), that annotation's value, the kubectl command line that writes or
    removes it, and the fleet report's row of a stop.

`gpu_rollout_plan(node, host, needed, what, batch, reboot, drain_host, cordoned_before=False, validate=True)`
    One node's line of the plan every run prints (and ``--check`` stops after).

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


def gpu_rollout_serial(
    canary,
    batches=None,
    canary_name="gpu_nodes_canary",
    batches_name="gpu_nodes_batches",
    max_unavailable=None,
    max_unavailable_name="rollout_max_unavailable",
) -> list:
    """The ``serial:`` list of a rollout (module docstring)."""
    if not _unset(max_unavailable):
        if not _unset(batches) and batches != max_unavailable:
            raise AnsibleFilterError(
                f"{batches_name} and {max_unavailable_name} are both set: a batch is drained at once, so its size "
                f"is the number of nodes unavailable at a time; set one of them"
            )
        batches, batches_name = max_unavailable, max_unavailable_name
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


def gpu_rollout_batches(prefix, canary=None, batch=None, max_unavailable=None) -> list:
    """The ``serial:`` of a rollout playbook (playbooks/tasks/rollout.yml): ``<prefix>_canary`` nodes first (default
    1; 0: none), then batches of ``<prefix>_batch`` or ``<prefix>_max_unavailable`` nodes (a number or a percentage;
    default "25%"): every node of a batch is drained at once, so the batch size is the number unavailable at a time."""
    if _unset(batch) and _unset(max_unavailable):
        batch = "25%"
    return gpu_rollout_serial(
        1 if canary is None else canary,
        batch,
        canary_name=f"{prefix}_canary",
        batches_name=f"{prefix}_batch",
        max_unavailable=max_unavailable,
        max_unavailable_name=f"{prefix}_max_unavailable",
    )


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


def gpu_rollout_wait(api, timeout, delay, count, prefix="upgrade_driver") -> dict:
    """The wait's settings, checked (module docstring)."""
    if api not in WAIT_APIS:
        raise AnsibleFilterError(
            f"{prefix}_gpu_api: {api!r}; write device_plugin (nvidia.com/gpu in the node's allocatable), "
            "dra (ResourceSlices of the DRA driver gpu.nvidia.com) or none (wait for Ready only)"
        )
    delay = _seconds(delay, f"{prefix}_ready_delay", 1)
    timeout = _seconds(timeout, f"{prefix}_ready_timeout", delay)
    if isinstance(count, bool) or not str(count).strip().isdigit():
        raise AnsibleFilterError(
            f"{prefix}_gpu_count: {count!r}; write the number of GPUs that must be allocatable again (2), "
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


# ---- the shared mechanism of every rollout (playbooks/tasks/rollout.yml) ------------------------------------------

# The node annotation that holds a stopped rollout's step and reason (read back by the next run: it resumes there,
# and the fleet report shows it); the prefix is the project's, as the node label gpu-node-provisioning/gpu-allocation.
ANNOTATION = "gpu-node-provisioning/rollout"


def gpu_rollout_control_plane(groups, drain=True, prefix="rollout", play_hosts=None) -> str:
    """The host that cordons and drains (the first of ``kube_control_plane``), '' when ``drain`` is off; refused,
    before anything changes, where the play has no such host. AWX's job slicing gives each slice job an inventory of
    its own hosts only, its groups keeping only those (awx/main/models/inventory.py, get_script_data and
    get_sliced_hosts), and no variable tells the job it is a slice (awx/main/models/unified_jobs.py awx_meta_vars;
    the slice number is the job's field job_slice_number, used only to cut the inventory): a slice without the
    control-plane host sees no such group, which is what is refused here."""
    if not _truthy(drain):
        return ""
    hosts = list((groups or {}).get("kube_control_plane") or [])
    if hosts:
        return hosts[0]
    raise AnsibleFilterError(
        "no host of group kube_control_plane is in this run's inventory, so the nodes cannot be cordoned and "
        "drained before the change: the rollout stops before any change. Add the control-plane host to the "
        "inventory in group kube_control_plane (kubectl and its kubeconfig are read there). Under AWX or AAP, do "
        "not slice a rollout job (job slicing cuts the inventory, and a slice without that host cannot drain). "
        f"Nodes outside any cluster: set {prefix}_drain=false"
        + (f" (hosts of this play: {', '.join(map(str, play_hosts))})" if play_hosts else "")
    )


def _truthy(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on", "y")
    return bool(value)


def gpu_rollout_node_state(result, node, rollout="") -> dict:
    """The node as the rollout finds it, from ``kubectl get node NODE -o jsonpath={.spec.unschedulable}|
    {.metadata.annotations}``: ``{"found", "unschedulable", "previous", "resume", "cordoned_by_rollout"}``.
    ``previous`` is the annotation ANNOTATION a stopped rollout left ({rollout, step, reason, cordoned}) or None;
    ``resume`` a sentence saying where the last run stopped ('' when it did not stop on this node);
    ``cordoned_by_rollout``: the node is cordoned because a rollout stopped on it (uncordoned when it finishes),
    not by someone before (left cordoned). A node kubectl does not know (NotFound): found False."""
    result = result or {}
    state = {"found": False, "unschedulable": False, "previous": None, "resume": "", "cordoned_by_rollout": False}
    if result.get("rc") != 0:
        return state
    state["found"] = True
    spec, _sep, annotations = str(result.get("stdout") or "").strip().partition("|")
    state["unschedulable"] = spec.strip() == "true"
    try:
        annotations = json.loads(annotations) if annotations.strip() else {}
        previous = json.loads(annotations.get(ANNOTATION) or "null")
    except (ValueError, AttributeError):
        previous = None
    if isinstance(previous, Mapping):
        state["previous"] = dict(previous)
        state["cordoned_by_rollout"] = state["unschedulable"] and bool(previous.get("cordoned"))
        same = "" if previous.get("rollout") in ("", None, rollout) else f" (of {previous.get('rollout')})"
        state["resume"] = (
            f"Resuming: the last rollout{same} stopped on node {node} at step {previous.get('step') or '?'}: "
            f"{previous.get('reason') or 'no reason recorded'}. It runs again from the start of its steps"
            + (
                "; the node is cordoned since then and is uncordoned when it finishes."
                if state["cordoned_by_rollout"]
                else "."
            )
        )
    return state


def gpu_rollout_annotation(rollout, step, reason, cordoned) -> str:
    """The annotation's value: compact JSON of the rollout, the step it stopped at, why (its first 600 characters,
    on one line) and whether the rollout left the node cordoned."""
    text = " ".join(str(reason or "").split())
    return json.dumps(
        {"rollout": str(rollout), "step": str(step), "reason": text[:600], "cordoned": bool(cordoned)},
        separators=(",", ":"),
        sort_keys=True,
    )


def gpu_rollout_annotate(kubectl, node, value=None) -> list:
    """The kubectl command line that records ``value`` in the node's annotation ANNOTATION (overwriting), or, with
    None, removes it."""
    record = f"{ANNOTATION}={value}" if value is not None else f"{ANNOTATION}-"
    return [*kubectl, "annotate", "node", str(node), record, *(["--overwrite"] if value is not None else [])]


def gpu_rollout_results(previous, node="") -> list:
    """The fleet report's row of a stopped rollout (the doctor's row format): ``[]`` for None."""
    if not isinstance(previous, Mapping):
        return []
    rollout = previous.get("rollout") or "rollout"
    return [
        {
            "check": f"rollout: {rollout}",
            "status": "fail",
            "detail": f"stopped at step {previous.get('step') or '?'}: {previous.get('reason') or 'no reason'}"
            + (" (the node stays cordoned)" if previous.get("cordoned") else ""),
            "fix": f"fix the cause, then run playbooks/{rollout}.yml again: it resumes on {node or 'this node'} "
            f"(kubectl annotate node {node or '<node>'} {ANNOTATION}- forgets the stop)",
            "family": "rollout",  # not one of the doctor's: the fleet report lists it after them
        }
    ]


# What a pod on the node is that a drain would evict (kubectl drain --help, kubernetes/kubectl
# pkg/cmd/drain/drain.go: "evicts or deletes all pods except mirror pods", DaemonSet-managed pods are never deleted):
# a mirror pod carries the annotation the kubelet sets, MirrorPodAnnotationKey "kubernetes.io/config.mirror"
# (kubernetes/api core/v1 annotation_key_constants.go); a DaemonSet's pod names it in metadata.ownerReferences; a pod
# whose phase is Succeeded or Failed has ended and runs nothing a restart could break.
MIRROR_POD = "kubernetes.io/config.mirror"


def gpu_rollout_node_pods(result, node="") -> dict:
    """The pods that run on the node, from ``kubectl get pods --all-namespaces --field-selector spec.nodeName=NODE
    -o json``: ``{"known", "pods", "reason"}``. ``pods``: "namespace/name" of each pod that is neither a mirror pod,
    nor a DaemonSet's, nor finished: those a drain evicts. ``known`` False (kubectl failed, or its answer is no pod
    list): the node counts as busy (``reason`` says why), so that it is drained rather than restarted under its pods."""
    result = result or {}
    if result.get("rc") != 0:
        why = " ".join(str(result.get("stderr") or result.get("msg") or "kubectl failed").split())
        return {"known": False, "pods": [], "reason": f"the pods on node {node} could not be listed ({why})"}
    try:
        items = json.loads(str(result.get("stdout") or "")).get("items")
        if not isinstance(items, list):
            raise ValueError("no items")
    except (ValueError, AttributeError) as error:
        return {"known": False, "pods": [], "reason": f"kubectl's pod list of node {node} is unreadable ({error})"}
    pods = []
    for pod in items:
        meta = pod.get("metadata") or {}
        if MIRROR_POD in (meta.get("annotations") or {}):
            continue
        if any((owner or {}).get("kind") == "DaemonSet" for owner in meta.get("ownerReferences") or []):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        pods.append(f"{meta.get('namespace') or 'default'}/{meta.get('name') or '?'}")
    return {"known": True, "pods": sorted(pods), "reason": ""}


def _drain_step(cordoned_before, pods) -> str:
    cordon = "keep cordoned (it was before)" if cordoned_before else "cordon"
    if pods is None:
        return cordon + ", drain"
    if not pods.get("known", True):
        return f"{cordon}, drain ({pods.get('reason')}: counted as busy)"
    running = pods.get("pods") or []
    if not running:
        return f"{cordon}, no drain (no pod runs there but DaemonSet, mirror and finished pods)"
    shown = ", ".join(running[:5]) + (f" and {len(running) - 5} more" if len(running) > 5 else "")
    return f"{cordon}, drain ({len(running)} pod{'s' if len(running) != 1 else ''} run there: {shown})"


def gpu_rollout_plan(
    node, host, needed, what, batch, reboot, drain_host, cordoned_before=False, validate=True, pods=None
) -> str:
    """One node's line of the plan ``--check`` prints (and every run shows before it touches the node). ``pods``:
    None (the change drains every node), or gpu_rollout_node_pods's answer (it drains only a node where pods run)."""
    if not _truthy(needed):
        return f"{host} (node {node}), batch {batch}: nothing to change ({what}); not drained."
    steps = []
    if drain_host:
        steps.append(_drain_step(cordoned_before, pods))
    steps.append(what)
    if _truthy(reboot):
        steps.append("reboot")
    steps.append("wait until Ready with its GPUs allocatable" if drain_host else "")
    steps.append("the doctor" if _truthy(validate) else "")
    if drain_host and not cordoned_before:
        steps.append("uncordon")
    return f"{host} (node {node}), batch {batch}: " + ", ".join(step for step in steps if step) + "."


class FilterModule:
    """Filters of the rollout playbooks."""

    def filters(self):
        return {
            "gpu_rollout_serial": gpu_rollout_serial,
            "gpu_rollout_kubectl": gpu_rollout_kubectl,
            "gpu_rollout_batches": gpu_rollout_batches,
            "gpu_rollout_wait": gpu_rollout_wait,
            "gpu_rollout_node_gpus": gpu_rollout_node_gpus,
            "gpu_rollout_wait_script": gpu_rollout_wait_script,
            "gpu_rollout_control_plane": gpu_rollout_control_plane,
            "gpu_rollout_node_state": gpu_rollout_node_state,
            "gpu_rollout_annotation": gpu_rollout_annotation,
            "gpu_rollout_annotate": gpu_rollout_annotate,
            "gpu_rollout_results": gpu_rollout_results,
            "gpu_rollout_plan": gpu_rollout_plan,
            "gpu_rollout_node_pods": gpu_rollout_node_pods,
        }
