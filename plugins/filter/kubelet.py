# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Filters of the kubelet role: input checks, the KubeletConfiguration it writes, and decisions.

Types and choices of the role's variables are meta/argument_specs.yml's (Ansible's role argument
validation and the role_variables action check them first); kubelet_validate checks only what
argument_specs cannot say: values (versions, labels, taints, CPU lists, paths on the command line)
and rules across variables. KubeletConfiguration field names are not checked here: the kubelet
validates its own configuration, and the role's health check reports a kubelet that refused it.

Everything here is a pure function of its arguments (the role passes variables
and file contents in), so the unit tests call them without Ansible. YAML is
parsed and written here, on the controller, where PyYAML is always present:
the node needs nothing beyond Python's standard library.
"""

from __future__ import annotations

import copy
import re

from ansible_collections.gpunode.provisioning.plugins.module_utils.kubernetes import names as _names
from ansible_collections.gpunode.provisioning.plugins.plugin_utils import controller_files

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - Ansible is always there when the role runs

    class AnsibleFilterError(Exception):
        pass


# Role variable -> the KubeletConfiguration field it sets.
DEDICATED_FIELDS = {
    "kubelet_cgroup_driver": "cgroupDriver",
    "kubelet_container_runtime_endpoint": "containerRuntimeEndpoint",
    "kubelet_seccomp_default": "seccompDefault",
    "kubelet_cpu_manager_policy": "cpuManagerPolicy",
    "kubelet_reserved_system_cpus": "reservedSystemCPUs",
    "kubelet_topology_manager_policy": "topologyManagerPolicy",
    "kubelet_feature_gates": "featureGates",
    "kubelet_register_with_taints": "registerWithTaints",
    "kubelet_gpu_register_with_taints": "registerWithTaints",
}

# Command-line flags that override a configuration field, where the name is not
# simply the field in kebab-case. featureGates is left out on purpose: the
# kubelet merges --feature-gates with the configuration gate by gate.
_FLAG_FOR_FIELD = {"reservedSystemCPUs": "reserved-cpus", "cgroupsPerQOS": "cgroups-per-qos"}
_NO_FLAG_FIELDS = {"featureGates", "apiVersion", "kind"}

# Flags this role manages itself, which kubelet_flags and kubelet_flags_absent may not name.
MANAGED_FLAGS = {"config-dir": "kubelet_config_dir", "node-labels": "kubelet_node_labels"}

RUNTIME_ENDPOINTS = {
    "containerd": "unix:///run/containerd/containerd.sock",
    "crio": "unix:///var/run/crio/crio.sock",
    "docker": "unix:///run/cri-dockerd.sock",
}

CONFIG_MODES = ("auto", "dropin", "merge")

# First minor release of the later --config-dir stages; the first (alpha, which needs KUBELET_CONFIG_DROPIN_DIR_ALPHA)
# is the role's dropin_min, gpu_node_facts' __gpu_node_facts_kubelet_dropin_min (the doctor reads it too).
DROPIN_BETA, DROPIN_GA = (1, 30), (1, 35)

_VERSION_RE = re.compile(r"^(?:Kubernetes\s+)?v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+][0-9A-Za-z.+-]*)?\Z")
_CPUSET_RE = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*\Z")
_FEATURE_GATE_RE = re.compile(r"^[A-Z][A-Za-z0-9]*\Z")
_FLAG_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_UNSAFE_FLAG_VALUE_RE = re.compile(r"[\s\"'\\\x00-\x1f\x7f\ufeff]")
_DROPIN_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.conf\Z")
_ENDPOINT_RE = re.compile(r"^unix:///\S+\Z")


# --- versions and plans ------------------------------------------------------------------------------------


def parse_version(value) -> tuple[int, int, int] | None:
    """``"v1.31.2"``, ``"1.31"``, ``"Kubernetes v1.31.0"`` -> (1, 31, 2); None when it is not a version string."""
    if not isinstance(value, str):
        return None
    match = _VERSION_RE.match(value.strip())
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def kubelet_version(value) -> str:
    """Normalise a kubelet version to ``major.minor.patch``."""
    parsed = parse_version(value)
    if parsed is None:
        raise AnsibleFilterError(f"kubelet version {value!r} is not a version like 1.31 or v1.31.2")
    return "{}.{}.{}".format(*parsed)


def kubelet_config_plan(version, requested_mode: str = "auto", dropin_min=None) -> dict:
    """Decide how the configuration is written for a kubelet of ``version``.

    ``dropin_min`` is the first release with --config-dir (the role passes gpu_node_facts'
    ``__gpu_node_facts_kubelet_dropin_min``, the one home of that value).

    Returns ``mode`` (``dropin`` or ``merge``), ``dropin_support`` (``none``,
    ``alpha``, ``beta`` or ``ga``), ``alpha_env`` (whether the kubelet needs
    KUBELET_CONFIG_DROPIN_DIR_ALPHA) and ``version`` (``major.minor.patch``).
    """
    parsed = parse_version(version)
    if parsed is None:
        raise AnsibleFilterError(f"kubelet version {version!r} is not a version like 1.31 or v1.31.2")
    if requested_mode not in CONFIG_MODES:
        raise AnsibleFilterError(f"kubelet_config_mode {requested_mode!r} is not one of {', '.join(CONFIG_MODES)}")
    minor = parsed[:2]
    first = _dropin_min(dropin_min)
    if minor >= DROPIN_GA:
        support = "ga"
    elif minor >= DROPIN_BETA:
        support = "beta"
    elif minor >= first:
        support = "alpha"
    else:
        support = "none"
    mode = requested_mode
    if mode == "auto":
        mode = "merge" if support == "none" else "dropin"
    if mode == "dropin" and support == "none":
        raise AnsibleFilterError(
            f"kubelet {kubelet_version(version)} has no --config-dir (it arrived in {first[0]}.{first[1]}); "
            "set kubelet_config_mode to auto or merge"
        )
    return {
        "version": "{}.{}.{}".format(*parsed),
        "mode": mode,
        "dropin_support": support,
        "alpha_env": mode == "dropin" and support == "alpha",
    }


def kubelet_runtime_endpoint(gpu_node: dict, requested) -> dict:
    """Pick containerRuntimeEndpoint: the variable, or (``auto``) the one runtime the node runs.

    Returns ``endpoint`` ('' when the role leaves the field alone) and
    ``message`` (why, for the run's output).
    """
    if requested in (None, ""):
        return {
            "endpoint": "",
            "message": "kubelet_container_runtime_endpoint is empty: containerRuntimeEndpoint "
            "is left to the kubelet's own configuration.",
        }
    if requested != "auto":
        return {"endpoint": requested, "message": f"containerRuntimeEndpoint {requested} (from the variable)."}
    gpu_node = gpu_node or {}
    running = [name for name in gpu_node.get("runtimes_running") or [] if name in RUNTIME_ENDPOINTS]
    installed = [name for name in gpu_node.get("runtimes_installed") or [] if name in RUNTIME_ENDPOINTS]
    found, how = (running, "running") if running else (installed, "installed")
    if len(found) == 1:
        name = found[0]
        endpoint = RUNTIME_ENDPOINTS[name]
        extra = " (Docker is reached through cri-dockerd, which must be installed)" if name == "docker" else ""
        return {
            "endpoint": endpoint,
            "message": f"containerRuntimeEndpoint {endpoint}: {name} is the only "
            f"container runtime {how} on this node{extra}.",
        }
    if not found:
        return {
            "endpoint": "",
            "message": "no container runtime (containerd, CRI-O, Docker) was found on this "
            "node, so containerRuntimeEndpoint is left to the kubelet's own configuration; set "
            "kubelet_container_runtime_endpoint to choose one.",
        }
    return {
        "endpoint": "",
        "message": f"several container runtimes are {how} on this node ({', '.join(found)}), "
        "so containerRuntimeEndpoint is left to the kubelet's own configuration; set "
        "kubelet_container_runtime_endpoint (e.g. unix:///run/containerd/containerd.sock) to choose one.",
    }


# --- input checks ------------------------------------------------------------------------------------------


_type_name = controller_files.type_name


def _check_abs_path(errors, params, var, allow_empty=False) -> None:
    value = params.get(var)
    if allow_empty and value in ("", None):
        return
    if not isinstance(value, str) or not value.startswith("/"):
        errors.append(f"{var}: {value!r} is not an absolute path; use a path that starts with '/'.")
    elif _UNSAFE_FLAG_VALUE_RE.search(value):
        errors.append(
            f"{var}: {value!r} contains whitespace, a quote, a backslash or a control character, which cannot be "
            "passed on the kubelet's command line (KUBELET_EXTRA_ARGS is split at whitespace); use a path without them."
        )
    elif value == "/" or value.endswith("/") or "/../" in f"{value}/" or "/./" in f"{value}/":
        errors.append(f"{var}: {value!r} is not a plain file or directory path; drop the '.', '..' or trailing '/'.")


def _check_version(errors, var, value) -> None:
    if isinstance(value, float):
        errors.append(
            f'{var}: {value!r} is a YAML number, which loses digits (1.30 reads as 1.3); quote it, e.g. "1.30".'
        )
    elif parse_version(value) is None:
        errors.append(f'{var}: {value!r} is not a kubelet version; use a string like "1.31" or "v1.31.2".')


def _check_labels(errors, var, labels) -> None:
    for key, value in labels.items():
        problem = _names.qualified_name_error(key) or _names.kubelet_label_error(key)
        if problem:
            errors.append(f"{var}: {problem}.")
            continue
        if isinstance(value, (bool, int, float)) and not isinstance(value, str):
            value = _label_text(value)
        problem = _names.label_value_error(value)
        if problem:
            errors.append(f"{var}: {problem} (label {key!r}).")


def _label_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _check_taints(errors, var, taints) -> list[dict]:
    parsed = []
    for taint in taints:
        try:
            parsed.append(_names.parse_taint(taint))
        except ValueError as exc:
            errors.append(f"{var}: {exc}.")
    return parsed


def _check_cpuset(errors, var, value) -> None:
    if value is None:
        return
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        errors.append(f'{var}: {value!r} is {_type_name(value)}; use a CPU list string like "0-1" or "0,32".')
        return
    if not _CPUSET_RE.match(value):
        errors.append(f'{var}: {value!r} is not a CPU list; use numbers and ranges like "0-1,32-33" (no spaces).')
        return
    for part in value.split(","):
        low, _sep, high = part.partition("-")
        if high and int(high) < int(low):
            errors.append(f"{var}: the range {part!r} in {value!r} runs backwards; write it low-high.")


def _check_flags(errors, params, fields: dict) -> None:
    flags = params.get("kubelet_flags") or {}
    absent = params.get("kubelet_flags_absent") or []
    overriding = {flag_for_field(field): field for field in fields}
    names = set()
    for raw, value in flags.items():
        name = str(raw).lstrip("-")
        names.add(name)
        if not _FLAG_NAME_RE.match(name):
            errors.append(f"kubelet_flags: {raw!r} is not a flag name; use letters, digits, '-', '_' and '.'.")
        elif name in MANAGED_FLAGS:
            errors.append(f"kubelet_flags: --{name} is managed by this role; set {MANAGED_FLAGS[name]} instead.")
        elif name in overriding:
            errors.append(
                f"kubelet_flags: --{name} would override {overriding[name]}, which this role already sets in the "
                f"KubeletConfiguration; set it in one place only (drop the flag)."
            )
        if value is not None and not isinstance(value, (str, int, float, bool)):
            errors.append(f"kubelet_flags: the value of {raw!r} is {_type_name(value)}; use a string.")
        elif value is not None and _UNSAFE_FLAG_VALUE_RE.search(_label_text(value)):
            errors.append(
                f"kubelet_flags: the value of {raw!r} ({value!r}) contains whitespace, a quote or a backslash, "
                "which KUBELET_EXTRA_ARGS cannot carry; use a value without them."
            )
    for raw in absent:
        name = str(raw).lstrip("-")
        if not _FLAG_NAME_RE.match(name):
            errors.append(f"kubelet_flags_absent: {raw!r} is not a flag name; use letters, digits, '-', '_' and '.'.")
        elif name in MANAGED_FLAGS:
            errors.append(f"kubelet_flags_absent: --{name} is managed by this role; set {MANAGED_FLAGS[name]} instead.")
        elif name in names:
            errors.append(f"kubelet_flags_absent: --{name} is also in kubelet_flags; keep it in one of them.")


SUBID_BLOCK = 65536  # one pod's user namespace: the kubelet's ranges are multiples of it


def _check_user_namespaces(errors, params) -> None:
    """The optional host ID range for pods' user namespaces (integers: argument_specs)."""
    start = params.get("kubelet_user_namespaces_subid_start")
    count = params.get("kubelet_user_namespaces_subid_count")
    before = len(errors)
    for var, value in (("kubelet_user_namespaces_subid_start", start), ("kubelet_user_namespaces_subid_count", count)):
        if value is None:
            continue
        if value < SUBID_BLOCK or value % SUBID_BLOCK:
            errors.append(
                f"{var}: {value!r} is not a multiple of {SUBID_BLOCK} of at least {SUBID_BLOCK}; the kubelet gives "
                f"each pod {SUBID_BLOCK} IDs (the count covers maxPods x {SUBID_BLOCK}), or use null for no range."
            )
    if len(errors) == before and (start is None) != (count is None):
        errors.append(
            "kubelet_user_namespaces_subid_start and kubelet_user_namespaces_subid_count go together: "
            "set both, or neither (null: the kubelet picks IDs above 65535 by itself)."
        )


def _dropin_min(value) -> tuple[int, int]:
    """The first (major, minor) with --config-dir: ``value``, the role's __gpu_node_facts_kubelet_dropin_min."""
    if value is None:
        raise AnsibleFilterError("the kubelet drop-in threshold is missing: pass __gpu_node_facts_kubelet_dropin_min")
    parsed = parse_version(str(value))
    if parsed is None:
        raise AnsibleFilterError(f"the kubelet drop-in threshold {value!r} is not a version like 1.28")
    return parsed[:2]


def kubelet_validate(params: dict, version=None, dropin_min=None) -> list[str]:
    """Check the role's variables; return one message per problem (empty when all is well).

    ``params`` maps each public variable to its value; ``version`` is the
    kubelet version the role plans for (installed or assumed).
    """
    errors: list[str] = []
    _check_version(errors, "kubelet_assumed_version", params.get("kubelet_assumed_version"))
    if version is not None and not isinstance(version, float) and parse_version(version) is None:
        errors.append(
            f"the installed kubelet reports the version {version!r}, which this role cannot read; "
            "check `kubelet --version` on the node."
        )
    elif (
        version is not None
        and params.get("kubelet_config_mode") == "dropin"
        and parse_version(version) is not None
        and parse_version(version)[:2] < _dropin_min(dropin_min)
    ):
        errors.append(
            f"kubelet_config_mode: dropin needs kubelet {'.'.join(map(str, _dropin_min(dropin_min)))} or later "
            f"(--config-dir), but the kubelet is "
            f"{kubelet_version(version)}; use auto or merge."
        )

    _check_cpuset(errors, "kubelet_reserved_system_cpus", params.get("kubelet_reserved_system_cpus"))

    endpoint = params.get("kubelet_container_runtime_endpoint")
    if endpoint not in (None, "", "auto") and (not isinstance(endpoint, str) or not _ENDPOINT_RE.match(endpoint)):
        errors.append(
            f"kubelet_container_runtime_endpoint: {endpoint!r} is not a unix socket URL; use auto, an empty string "
            "(leave it alone) or e.g. unix:///run/containerd/containerd.sock."
        )

    for name, value in (params.get("kubelet_feature_gates") or {}).items():
        if not isinstance(name, str) or not _FEATURE_GATE_RE.match(name):
            errors.append(
                f"kubelet_feature_gates: {name!r} is not a feature gate name; gates are CamelCase, "
                "e.g. DynamicResourceAllocation."
            )
        if not isinstance(value, bool):
            errors.append(
                f"kubelet_feature_gates: {name} is {value!r} ({_type_name(value)}); use true or false (unquoted)."
            )

    taints = _check_taints(errors, "kubelet_register_with_taints", params.get("kubelet_register_with_taints"))
    taints += _check_taints(errors, "kubelet_gpu_register_with_taints", params.get("kubelet_gpu_register_with_taints"))
    seen = set()
    for taint in taints:
        ident = (taint["key"], taint["effect"])
        if ident in seen:
            errors.append(
                f"kubelet_register_with_taints / kubelet_gpu_register_with_taints: the taint {taint['key']} with "
                f"effect {taint['effect']} is given twice; Kubernetes allows one per key and effect, keep one."
            )
        seen.add(ident)

    _check_labels(errors, "kubelet_node_labels", params.get("kubelet_node_labels"))
    _check_labels(errors, "kubelet_gpu_node_labels", params.get("kubelet_gpu_node_labels"))
    wanted = set(params.get("kubelet_node_labels") or {}) | set(params.get("kubelet_gpu_node_labels") or {})
    for key in params.get("kubelet_node_labels_absent") or []:
        problem = _names.qualified_name_error(key)
        if problem:
            errors.append(f"kubelet_node_labels_absent: {problem}.")
        elif key in wanted:
            errors.append(
                f"kubelet_node_labels_absent: {key!r} is also set in kubelet_node_labels or "
                "kubelet_gpu_node_labels; keep it in one place."
            )

    set_by_vars = {field: var for var, field in DEDICATED_FIELDS.items() if params.get(var) not in (None, "", {}, [])}
    config = params.get("kubelet_config") or {}
    for field in config:
        if field in ("apiVersion", "kind"):
            errors.append(f"kubelet_config: leave out {field}; the role writes it.")
        elif field in DEDICATED_FIELDS.values():
            owner = next(var for var, owned in DEDICATED_FIELDS.items() if owned == field)
            errors.append(f"kubelet_config: {field} has its own variable; set {owner} instead.")
    passthrough = params.get("kubelet_config_passthrough") or {}
    for field in passthrough:
        if field in ("apiVersion", "kind"):
            errors.append(f"kubelet_config_passthrough: leave out {field}; the role writes it.")
        elif field in set_by_vars:
            errors.append(
                f"kubelet_config_passthrough: {field} is already set by {set_by_vars[field]}; set it in one place."
            )
        elif field in config:
            errors.append(f"kubelet_config_passthrough: {field} is also in kubelet_config; set it in one place.")
    for field in params.get("kubelet_config_absent") or []:
        if field in ("apiVersion", "kind"):
            errors.append(f"kubelet_config_absent: {field} cannot be removed.")
        elif field in set_by_vars or field in config or field in passthrough:
            errors.append(f"kubelet_config_absent: {field} is also set by this role's variables; keep it in one place.")

    fields = dict.fromkeys(list(set_by_vars) + list(config) + list(passthrough))
    fields.pop("featureGates", None)
    _check_flags(errors, params, fields)

    _check_abs_path(errors, params, "kubelet_config_dir")
    _check_abs_path(errors, params, "kubelet_main_config_path")
    _check_abs_path(errors, params, "kubelet_env_file", allow_empty=True)
    name = params.get("kubelet_dropin_name")
    if not isinstance(name, str) or not _DROPIN_NAME_RE.match(name):
        errors.append(
            f"kubelet_dropin_name: {name!r} is not a drop-in file name; the kubelet reads only *.conf files, "
            "e.g. 50-gpu-node.conf (no '/')."
        )
    timeout = params.get("kubelet_healthz_timeout")
    if timeout is not None and timeout < 1:
        errors.append(f"kubelet_healthz_timeout: {timeout!r} is not a number of seconds; use an integer of 1 or more.")
    _check_user_namespaces(errors, params)
    return errors


# --- what the role writes ----------------------------------------------------------------------------------


def kubelet_taints(taints) -> list[dict]:
    """``["key=value:Effect", ...]`` -> registerWithTaints entries."""
    try:
        return [_names.parse_taint(taint) for taint in taints or []]
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


def kubelet_compose_config(params: dict, endpoint: str = "", has_gpu: bool = False, main_config=None) -> dict:
    """The KubeletConfiguration fields (without apiVersion/kind) the role's variables ask for, in a stable order.

    ``main_config`` is the kubelet's main configuration: its registerWithTaints
    are kept (a drop-in's list replaces the main file's), ours win per key and
    effect.
    """
    fields: dict = {}
    for var, field in (
        ("kubelet_cgroup_driver", "cgroupDriver"),
        ("kubelet_seccomp_default", "seccompDefault"),
        ("kubelet_cpu_manager_policy", "cpuManagerPolicy"),
        ("kubelet_reserved_system_cpus", "reservedSystemCPUs"),
        ("kubelet_topology_manager_policy", "topologyManagerPolicy"),
    ):
        value = params.get(var)
        if value is not None:
            fields[field] = str(value) if field == "reservedSystemCPUs" else value
    if endpoint:
        fields["containerRuntimeEndpoint"] = endpoint
    if params.get("kubelet_feature_gates"):
        fields["featureGates"] = dict(params["kubelet_feature_gates"])
    ours = kubelet_taints(params.get("kubelet_register_with_taints"))
    if has_gpu:
        ours += kubelet_taints(params.get("kubelet_gpu_register_with_taints"))
    if ours:
        idents = {(taint["key"], taint["effect"]) for taint in ours}
        existing = (main_config or {}).get("registerWithTaints") or []
        kept = [
            taint
            for taint in existing
            if isinstance(taint, dict) and (taint.get("key"), taint.get("effect")) not in idents
        ]
        fields["registerWithTaints"] = copy.deepcopy(kept) + ours
    fields.update(copy.deepcopy(params.get("kubelet_config") or {}))
    fields.update(copy.deepcopy(params.get("kubelet_config_passthrough") or {}))
    return fields


def kubelet_compose_labels(params: dict, has_gpu: bool = False) -> dict:
    """The node labels to set and to remove in --node-labels.

    On GPU nodes the GPU labels are set, then the user's (which win). On other
    nodes the GPU labels are removed unless the user sets them. Values become
    text (``true`` -> ``"true"``).
    """
    gpu_labels = params.get("kubelet_gpu_node_labels") or {}
    user_labels = params.get("kubelet_node_labels") or {}
    labels = dict(gpu_labels) if has_gpu else {}
    labels.update(user_labels)
    absent = list(params.get("kubelet_node_labels_absent") or [])
    if not has_gpu:
        absent += [key for key in gpu_labels if key not in user_labels and key not in absent]
    return {
        "labels": {key: value if isinstance(value, str) else _label_text(value) for key, value in labels.items()},
        "absent": absent,
    }


def flag_for_field(field: str) -> str:
    """The command-line flag that overrides a configuration field (``maxPods`` -> ``max-pods``)."""
    if field in _FLAG_FOR_FIELD:
        return _FLAG_FOR_FIELD[field]
    return re.sub(r"(?<=[a-z0-9])([A-Z])|(?<=[A-Z])([A-Z][a-z])", r"-\1\2", field).lower()


def kubelet_field_flags(fields: dict, left_out=()) -> dict:
    """The KubeletConfiguration ``fields`` by their flag names (RKE2/k3s kubelet-arg), ``left_out`` fields not."""
    return {flag_for_field(field): value for field, value in fields.items() if field not in left_out}


def kubelet_flag_changes(params: dict, plan: dict, fields: dict) -> dict:
    """The ``flags`` and ``flags_absent`` for the kubelet_flags module.

    Drop-in mode makes sure of ``--config-dir``; a kubelet older than 1.28 must
    not get it. With kubelet_remove_conflicting_flags, flags that would
    override a field the role sets are removed.
    """
    flags = {str(name).lstrip("-"): value for name, value in (params.get("kubelet_flags") or {}).items()}
    absent = [str(name).lstrip("-") for name in params.get("kubelet_flags_absent") or []]
    if plan["mode"] == "dropin":
        flags["config-dir"] = params["kubelet_config_dir"]
    elif plan["dropin_support"] == "none":
        absent.append("config-dir")
    if params.get("kubelet_remove_conflicting_flags"):
        for field in fields:
            if field not in _NO_FLAG_FIELDS:
                flag = flag_for_field(field)
                if flag not in flags and flag not in absent:
                    absent.append(flag)
    return {"flags": flags, "flags_absent": absent}


class FilterModule:
    """Filters of the kubelet role. The others above are the plan's (plugins/filter/kubelet_plan.py calls them)."""

    def filters(self):
        return {"kubelet_field_flags": kubelet_field_flags}
