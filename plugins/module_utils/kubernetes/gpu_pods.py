# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""What the GPU pods of a node rely on, and whether a planned change takes their GPUs away (issue 25).

Shared by the node-side modules gpu_node_facts (the read) and gpu_validate_checks (the doctor's
"device plugin vs node" row), and by the controller-side filter gpu_pods_guard (the refusal before any
change). Stdlib only, Python 3.8+ (no PyYAML): the runtimes' TOML configs are read by containerd/tables.py,
the device plugin's files with anchored regexes.

NVIDIA's device plugin, as its upstream sources define it (checked in NVIDIA/k8s-device-plugin at
1b826ac and NVIDIA/gpu-operator at a22dbf6):
- the binary is `nvidia-device-plugin` (cmd/nvidia-device-plugin; the Helm chart's container runs
  `command: ["nvidia-device-plugin"]`; the GPU Operator's entrypoint.sh ends in
  `exec nvidia-device-plugin`). The kernel keeps 15 characters of it in /proc/<pid>/comm:
  `nvidia-device-p`.
- the strategy is the string-slice flag `--device-list-strategy` with the environment variable
  `DEVICE_LIST_STRATEGY` (cmd/nvidia-device-plugin/main.go), comma-separated values among `envvar`
  (the default), `volume-mounts`, `cdi-annotations`, `cdi-cri` (api/config/v1/consts.go); a flag
  wins over the variable, which wins over the config file (`--config-file` / `CONFIG_FILE`, key
  `flags.plugin.deviceListStrategy`, api/config/v1/flags.go).
- Helm: value `deviceListStrategy` becomes `DEVICE_LIST_STRATEGY` (templates/daemonset-device-plugin.yml).
  GPU Operator: assets/state-device-plugin/0500_daemonset.yaml sets `DEVICE_LIST_STRATEGY=envvar`;
  with ClusterPolicy `spec.cdi.enabled: true` (the default from 25.10) the operator sets
  `cdi-annotations,cdi-cri` (controllers/object_controls.go transformDevicePluginCtrForCDI); other
  values go in `spec.devicePlugin.env`. The operator's validator writes /run/nvidia/validations.
- its socket is `<kubelet device-plugins dir>/nvidia-<resource>.sock`: `nvidia-gpu.sock` for
  nvidia.com/gpu, `nvidia-mig-<profile>.sock` for MIG resources (internal/plugin/server.go
  getPluginSocketPath; the directory is the kubelet's /var/lib/kubelet/device-plugins/).

How a GPU pod gets its GPU with each strategy (REFERENCE.md, NVIDIA container toolkit):
- envvar: only through the nvidia runtime (the runtime's default, or RuntimeClass nvidia) and only while
  the toolkit accepts NVIDIA_VISIBLE_DEVICES from unprivileged containers;
- volume-mounts: through the nvidia runtime with `accept-nvidia-visible-devices-as-volume-mounts`;
- cdi-annotations: through a runtime with CDI on (containerd enable_cdi, CRI-O), or the nvidia runtime;
- cdi-cri: through a runtime with CDI on.
Pods that use RuntimeClass nvidia cannot be seen from the node; the verdict is about pods that use
the runtime's default, as the device plugin's own deployments do.
"""

from __future__ import annotations

import glob
import os
import re

from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.runtime import (  # noqa: F401 (re-exported: gpu_pods.* for its users)  # pylint: disable=unused-import
    CDI_PREFIXES_DEFAULT,
    CDI_PREFIXES_KEY,
    CDI_TABLE,
    ENVVAR_KEY,
    TOOLKIT_DEFAULTS,
    VOLUME_MOUNTS_KEY,
    cdi_annotation_prefixes,
    config_read_by,
    containerd_runtime_state,
    crio_runtime_state,
    docker_runtime_state,
    entry_binary,
    is_nvidia_entry,
    nvidia_binaries,
    nvidia_runtime_facts,
    toolkit_config_facts,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.runtime import describe as describe_entry
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.runtime import read_file as _read
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.runtime import rooted as _rooted

DEVICE_PLUGIN_BINARY = "nvidia-device-plugin"
# TASK_COMM_LEN is 16: comm holds the first 15 characters of the executable's name.
DEVICE_PLUGIN_COMM = DEVICE_PLUGIN_BINARY[:15]
DEVICE_PLUGIN_SOCKET_DIR = "/var/lib/kubelet/device-plugins"
DEVICE_PLUGIN_SOCKET_GLOB = "nvidia-*.sock"
GPU_OPERATOR_VALIDATIONS = "/run/nvidia/validations"
STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
DEFAULT_STRATEGY = "envvar"
# Host daemons that open /dev/nvidia* and are no workload.
HOST_GPU_DAEMONS = frozenset({"nvidia-persiste", "nv-fabricmanager", "nv-hostengine", DEVICE_PLUGIN_COMM})
NVIDIA_DEVICE_RE = re.compile(r"/dev/nvidia\d+")
CAP_SYS_ADMIN = 21  # linux/capability.h


def parse_strategies(value) -> list:
    """The strategies of a flag or variable value ("cdi-annotations,cdi-cri"), in order, without repeats."""
    items = value if isinstance(value, (list, tuple)) else str(value or "").split(",")
    strategies = []
    for item in items:
        name = str(item).strip().strip("\"'").lower()
        if name and name not in strategies:
            strategies.append(name)
    return strategies


def strategy_from_config_text(text) -> list | None:
    """flags.plugin.deviceListStrategy (or flags.deviceListStrategy) of a device plugin config file (YAML or
    JSON): a scalar, an inline list or a block list; None when the file does not set it."""
    if not text:
        return None
    match = re.search(r"""^[ \t]*"?deviceListStrategy"?[ \t]*:[ \t]*(.*)$""", text, re.MULTILINE)
    if not match:
        return None
    value = match.group(1).split(" #")[0].strip().rstrip(",")
    if value.startswith("["):
        return parse_strategies(value.strip("[]"))
    if value and value not in ("null", "~"):
        return parse_strategies(value)
    # a block list: the "- item" lines that follow
    items = []
    for line in text[match.end() :].splitlines()[1:]:
        item = re.match(r"^\s*-\s*(\S+)", line)
        if not item:
            break
        items.append(item.group(1))
    return parse_strategies(items) or None


def _argv(proc_pid: str) -> list:
    data = _read(os.path.join(proc_pid, "cmdline"), binary=True) or b""
    return [arg.decode("utf-8", "replace") for arg in data.split(b"\0") if arg]


def _environ(proc_pid: str) -> dict:
    data = _read(os.path.join(proc_pid, "environ"), binary=True) or b""
    env = {}
    for item in data.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def _flag(argv: list, name: str) -> list:
    """Values of a urfave/cli flag: --name=v, --name v, -name=v, -name v; repeated flags add up."""
    values = []
    for index, arg in enumerate(argv):
        for prefix in (f"--{name}", f"-{name}"):
            if arg == prefix and index + 1 < len(argv):
                values.append(argv[index + 1])
            elif arg.startswith(prefix + "="):
                values.append(arg[len(prefix) + 1 :])
    return values


def device_plugin_process(proc_pid: str) -> dict | None:
    """The device plugin's strategy as its process says it; None when the process is no device plugin."""
    comm = (_read(os.path.join(proc_pid, "comm")) or "").strip()
    argv = _argv(proc_pid)
    if comm != DEVICE_PLUGIN_COMM and not (argv and os.path.basename(argv[0]) == DEVICE_PLUGIN_BINARY):
        return None
    env = _environ(proc_pid)
    flags = _flag(argv, "device-list-strategy")
    if flags:
        return {"strategies": parse_strategies(",".join(flags)), "source": "flag"}
    if env.get("DEVICE_LIST_STRATEGY", "").strip():
        return {"strategies": parse_strategies(env["DEVICE_LIST_STRATEGY"]), "source": "env"}
    config = (_flag(argv, "config-file") or [env.get("CONFIG_FILE", "")])[-1]
    if config:
        # the file is in the plugin's container: read it through the process's root
        from_file = strategy_from_config_text(_read(os.path.join(proc_pid, "root", config.lstrip("/"))))
        if from_file:
            return {"strategies": from_file, "source": "config-file"}
        if from_file is None and _read(os.path.join(proc_pid, "root", config.lstrip("/"))) is None:
            return {"strategies": [], "source": "unreadable-config-file"}
    return {"strategies": [DEFAULT_STRATEGY], "source": "default"}


def device_plugin_facts(root: str = "/", socket_dir: str = DEVICE_PLUGIN_SOCKET_DIR) -> dict:
    """The running NVIDIA device plugin(s) of the node at root.

    running: a process was found; strategies: the union of their strategies ([] when unknown);
    source: flag, env, config-file, default, or unknown (a socket without a process that could be read);
    sockets: nvidia-*.sock in the kubelet's device-plugins directory; managed_by: gpu-operator when the
    operator's validations directory exists, else standalone (null without a device plugin).
    """
    proc = _rooted(root, "/proc")
    try:
        entries = sorted((entry for entry in os.listdir(proc) if entry.isdigit()), key=int)
    except OSError:
        entries = []
    pids, strategies, sources = [], [], []
    for entry in entries:
        found = device_plugin_process(os.path.join(proc, entry))
        if found is None:
            continue
        pids.append(int(entry))
        sources.append(found["source"])
        strategies.extend(s for s in found["strategies"] if s not in strategies)
    sockets = sorted(
        os.path.join(socket_dir, os.path.basename(path))
        for path in glob.glob(os.path.join(_rooted(root, socket_dir), DEVICE_PLUGIN_SOCKET_GLOB))
    )
    present = bool(pids or sockets)
    if not pids:
        source = "unknown" if sockets else None
    else:
        source = sources[0] if len(set(sources)) == 1 else ",".join(sorted(set(sources)))
    return {
        "running": bool(pids),
        "present": present,
        "pids": pids,
        "strategies": strategies,
        "source": source,
        "sockets": sockets,
        "managed_by": (
            ("gpu-operator" if os.path.isdir(_rooted(root, GPU_OPERATOR_VALIDATIONS)) else "standalone")
            if present
            else None
        ),
    }


def gpu_processes(root: str = "/", exclude=()) -> list:
    """Workload processes that hold or were given GPUs: an NVIDIA_VISIBLE_DEVICES naming devices in their
    environment, or an open /dev/nvidia<N>. Host daemons (persistenced, fabric manager, DCGM, the device
    plugin) are left out. Each: {pid, comm, visible_devices, open_devices}."""
    proc = _rooted(root, "/proc")
    try:
        entries = sorted((entry for entry in os.listdir(proc) if entry.isdigit()), key=int)
    except OSError:
        return []
    found = []
    for entry in entries:
        if int(entry) in exclude:
            continue
        proc_pid = os.path.join(proc, entry)
        comm = (_read(os.path.join(proc_pid, "comm")) or "").strip()
        if comm in HOST_GPU_DAEMONS:
            continue
        visible = _environ(proc_pid).get("NVIDIA_VISIBLE_DEVICES", "").strip()
        if visible.lower() in ("", "void", "none"):
            visible = ""
        devices = set()
        try:
            for fd in os.listdir(os.path.join(proc_pid, "fd")):
                target = os.readlink(os.path.join(proc_pid, "fd", fd))
                if NVIDIA_DEVICE_RE.fullmatch(target):
                    devices.add(target)
        except OSError:
            pass
        if visible or devices:
            item = {"pid": int(entry), "comm": comm, "visible_devices": visible, "open_devices": sorted(devices)}
            item.update(_how_it_got_them(proc, proc_pid, visible, devices))
            found.append(item)
    return found


def _privileged(proc_pid: str) -> bool | None:
    """Whether CAP_SYS_ADMIN is in the process's bounding set: what NVIDIA's runtime calls privileged (toolkit 1.20,
    internal/config/image/privileged.go); None when /proc/<pid>/status cannot be read."""
    match = re.search(r"^CapBnd:\s*([0-9a-fA-F]+)", _read(os.path.join(proc_pid, "status")) or "", re.MULTILINE)
    return None if match is None else bool(int(match.group(1), 16) >> CAP_SYS_ADMIN & 1)


def _how_it_got_them(proc: str, proc_pid: str, visible: str, devices: set) -> dict:
    """privileged (CAP_SYS_ADMIN), container (a mount namespace other than PID 1's) and by_envvar: an unprivileged
    container whose NVIDIA_VISIBLE_DEVICES names devices and that has NVIDIA device nodes, open or in its /dev: what
    NVIDIA's runtime gave it for the variable, which it stops doing once the config it reads refuses the variable
    from unprivileged containers (issue 46)."""
    privileged = _privileged(proc_pid)
    try:
        container = os.readlink(os.path.join(proc_pid, "ns", "mnt")) != os.readlink(
            os.path.join(proc, "1", "ns", "mnt")
        )
    except OSError:
        container = False
    if not devices and visible and container:
        try:
            devices = {
                name for name in os.listdir(os.path.join(proc_pid, "root", "dev")) if re.fullmatch(r"nvidia\d+", name)
            }
        except OSError:
            devices = set()
    return {
        "privileged": privileged,
        "container": container,
        "by_envvar": bool(visible) and container and privileged is False and bool(devices),
    }


def nvidia_default(state: dict, name: str = "nvidia") -> bool:
    """Whether the default of a runtime state is NVIDIA's runtime: by its binary where the facts read it, else by
    the name (states written by hand, or by an older gpu_node_facts)."""
    if "default_nvidia" in (state or {}):
        return bool(state["default_nvidia"])
    return bool((state or {}).get("default")) and state.get("default") == name


def _default_named(state: dict) -> str:
    """The default entry as a message names it: its name and, where known, its binary."""
    return describe_entry(state.get("default"), state.get("default_binary"))


def _delivers(strategy: str, state: dict, toolkit: dict, name: str) -> bool:
    nvidia = nvidia_default(state, name)
    if strategy == "envvar":
        return nvidia and bool(toolkit.get("accept_envvar_when_unprivileged_effective"))
    if strategy == "volume-mounts":
        return nvidia and bool(toolkit.get("accept_volume_mounts_effective"))
    if strategy == "cdi-annotations":
        # the runtime's own CDI, or NVIDIA's runtime as the default where it reads CDI annotations
        return bool(state.get("cdi")) or (nvidia and bool(toolkit.get("cdi_annotation_prefixes_effective", True)))
    if strategy == "cdi-cri":
        return bool(state.get("cdi"))
    return False


def gpu_access(plugin: dict, runtimes: dict, toolkit: dict, name: str = "nvidia") -> dict:
    """Per runtime: whether GPU pods get their GPUs (`delivers`) and whether pods without a GPU request can
    see GPUs (`leaks`: nvidia is the default and the toolkit honours NVIDIA_VISIBLE_DEVICES from
    unprivileged containers, which CUDA images set to all). runtimes: {runtime: {default, cdi}}."""
    strategies = plugin.get("strategies") or []
    result = {}
    for runtime, state in runtimes.items():
        result[runtime] = {
            "delivers": any(_delivers(s, state, toolkit, name) for s in strategies),
            "leaks": nvidia_default(state, name) and bool(toolkit.get("accept_envvar_when_unprivileged_effective")),
            "default": state.get("default"),
            "default_named": _default_named(state),
        }
    return result


def _describe(plugin: dict, pids: bool = True) -> str:
    if not plugin.get("running"):
        return "a device plugin socket ({}) whose process could not be read".format(", ".join(plugin["sockets"]))
    where = "under the GPU Operator" if plugin.get("managed_by") == "gpu-operator" else "standalone"
    strategies = ",".join(plugin.get("strategies") or []) or "unknown"
    pid = (", pid " + ",".join(str(pid) for pid in plugin.get("pids") or [])) if pids else ""
    return f"NVIDIA's device plugin ({where}{pid}) with device-list-strategy {strategies} ({plugin.get('source')})"


def doctor_row(plugin: dict, runtimes: dict, toolkit: dict, name: str = "nvidia", gpu_pods: int = 0) -> dict:
    """The doctor's "device plugin vs node" row: skipped (no device plugin), fail (GPU pods get no GPU through
    any of the node's runtimes), warn (pods without a GPU request can see GPUs), else ok."""
    check = "device plugin vs node"
    if not plugin.get("present"):
        return {"check": check, "status": "skipped", "detail": "no NVIDIA device plugin runs on this node", "fix": ""}
    access = gpu_access(plugin, runtimes, toolkit, name)
    what = _describe(plugin, pids=False)  # the report is rewritten when the node changes, not when a pid does
    pods = f"; {gpu_pods} running GPU workload process(es)" if gpu_pods else ""
    delivering = [runtime for runtime, item in access.items() if item["delivers"]]
    if not delivering:
        defaults = (
            ", ".join(f"{runtime} default {item['default_named']}" for runtime, item in access.items()) or "no runtime"
        )
        return {
            "check": check,
            "status": "fail",
            "detail": f"GPU pods would get no GPU: {what}; {defaults}; toolkit accepts the envvar from"
            f" unprivileged containers: {str(toolkit.get('accept_envvar_when_unprivileged_effective')).lower()}{pods}",
            "fix": "Move the device plugin to cdi-cri (Helm deviceListStrategy=cdi-cri; GPU Operator ClusterPolicy"
            " spec.cdi.enabled: true), or set nvidia_container_toolkit_keep_gpu_pod_access: true and run site.yml",
        }
    leaking = [runtime for runtime, item in access.items() if item["leaks"]]
    if leaking:
        return {
            "check": check,
            "status": "warn",
            "detail": "pods without a GPU request can see GPUs: "
            + ", ".join(
                f"{runtime} defaults to NVIDIA's runtime {access[runtime]['default_named']}" for runtime in leaking
            )
            + f"; the toolkit accepts NVIDIA_VISIBLE_DEVICES from unprivileged containers; {what}{pods}",
            "fix": "Migrate: device plugin to cdi-cri first, then nvidia_container_toolkit_keep_gpu_pod_access: false"
            " (playbooks/migrate_gpu_isolation.yml)",
        }
    return {
        "check": check,
        "status": "ok",
        "detail": f"{what}: GPU pods get GPUs through {', '.join(delivering)}{pods}",
        "fix": "",
    }


def planned_runtimes(current: dict, targets, set_as_default: bool, enable_cdi: bool, name: str = "nvidia") -> dict:
    """The runtimes' {default, cdi} after runtime_config with these settings: NVIDIA's runtime becomes the default
    (set_as_default: an NVIDIA entry that is the default already stays it, under its own name) or stops being it,
    under whatever name (runc for containerd and docker; CRI-O's built-in default otherwise); CDI on where asked and
    the runtime supports it (containerd 1.7+: current['cdi_supported'])."""
    planned = {}
    for runtime, state in current.items():
        state = dict(state)
        if runtime in targets:
            if set_as_default:
                if not nvidia_default(state, name):
                    state.update(default=name, default_binary=None, default_nvidia=True)
            elif nvidia_default(state, name):
                state.update(default=None if runtime == "crio" else "runc", default_binary=None, default_nvidia=False)
            if enable_cdi and state.get("cdi_supported", runtime != "docker"):
                state["cdi"] = True
        planned[runtime] = state
    return planned


def refusal(
    node: str,
    plugin: dict,
    current: dict,
    planned: dict,
    toolkit_now: dict,
    toolkit_planned: dict,
    gpu_pods: list,
    name: str = "nvidia",
    keep_var: str = "nvidia_container_toolkit_keep_gpu_pod_access",
) -> str:
    """The refusal message when the planned settings take GPUs away from GPU pods that get them now
    (a runtime that delivers now and would not), else "". A device plugin whose strategy cannot be read
    counts as the upstream default, envvar."""
    if not plugin.get("present"):
        return ""
    known = dict(plugin)
    if not known.get("strategies"):
        known["strategies"] = [DEFAULT_STRATEGY]
    now = gpu_access(known, current, toolkit_now, name)
    after = gpu_access(known, planned, toolkit_planned, name)
    lost = [runtime for runtime in now if now[runtime]["delivers"] and not after.get(runtime, {}).get("delivers")]
    if not lost:
        return ""
    changes = []
    for runtime in lost:
        before, after_default = current[runtime].get("default"), planned[runtime].get("default")
        if before != after_default:
            changes.append(
                f"{runtime}'s default runtime {_default_named(current[runtime])} -> {after_default or 'built-in'}"
            )
    if toolkit_now.get("accept_envvar_when_unprivileged_effective") and not toolkit_planned.get(
        "accept_envvar_when_unprivileged_effective"
    ):
        changes.append(f"{ENVVAR_KEY} true -> false")
    if toolkit_now.get("accept_volume_mounts_effective") and not toolkit_planned.get("accept_volume_mounts_effective"):
        changes.append(f"{VOLUME_MOUNTS_KEY} true -> false")
    prefixes_now = toolkit_now.get("cdi_annotation_prefixes_effective")
    if prefixes_now and not toolkit_planned.get("cdi_annotation_prefixes_effective", prefixes_now):
        changes.append(f"{CDI_TABLE}.{CDI_PREFIXES_KEY} {prefixes_now} -> []")
    workloads = ", ".join(f"{p['comm']} (pid {p['pid']})" for p in gpu_pods[:5]) or "none right now"
    return (
        f"Refusing to change {node}: it runs {_describe(plugin)}, and GPU pods get their GPUs through"
        f" {', '.join(lost)} today. This run would change {'; '.join(changes) or 'the runtime setup'}, and from the"
        f" next pod start every GPU pod on {node} would get no GPU. GPU workloads running now: {workloads}."
        " Nothing was changed. Two ways forward: (a) move the device plugin to CDI first, then run"
        " again: Helm chart nvidia-device-plugin: --set deviceListStrategy=cdi-cri; GPU Operator: ClusterPolicy"
        " spec.cdi.enabled: true (its device plugin then runs with DEVICE_LIST_STRATEGY=cdi-annotations,cdi-cri)"
        " (volume-mounts is no way out: it needs nvidia as the default runtime and volume mounts accepted, which"
        " is what this run isolates); wait until the plugin pod on this node runs"
        ' with it (README, "Nodes that already run GPU pods"; playbooks/migrate_gpu_isolation.yml does it in'
        f" batches). (b) keep today's semantics on this node: {keep_var}: true"
        " (NVIDIA's runtime stays the default, under the name it has, and NVIDIA_VISIBLE_DEVICES stays honoured;"
        " the doctor then warns that pods without a GPU request can see GPUs here)."
    )


def toolkit_planned(toolkit_now: dict, settings: dict) -> dict:
    """The toolkit config's two keys and CDI annotation prefixes as they act after a merge of `settings` (config.toml
    as a nested dict)."""
    planned = dict(toolkit_now)
    for key, name in ((ENVVAR_KEY, "accept_envvar_when_unprivileged"), (VOLUME_MOUNTS_KEY, "accept_volume_mounts")):
        if key in (settings or {}):
            planned[name + "_effective"] = bool(settings[key])
    cdi = settings or {}
    for part in CDI_TABLE.split("."):
        cdi = cdi.get(part) if isinstance(cdi, dict) else None
    if isinstance(cdi, dict) and isinstance(cdi.get(CDI_PREFIXES_KEY), list):
        planned["cdi_annotation_prefixes_effective"] = list(cdi[CDI_PREFIXES_KEY])
    return planned


def refusal_for_run(
    facts: dict,
    node: str,
    targets,
    set_as_default: bool,
    enable_cdi: bool,
    settings: dict,
    name: str = "nvidia",
    keep_var: str = "nvidia_container_toolkit_keep_gpu_pod_access",
    own_config: str | None = None,
    keep: bool = False,
) -> str:
    """refusal() from the gpu_node facts and a run's settings: the runtimes it configures (targets), whether
    nvidia becomes their default, CDI, and the toolkit config keys it merges (settings; {} for none). Then, for
    every NVIDIA runtime entry whatever its name (issue 46): entries whose config cannot be told (entry_refusal),
    and GPUs that workloads or RuntimeClass pods get by the envvar from a config this run closes (envvar_refusal).
    own_config: the toolkit config the toolkit role merges (None: a run that merges no toolkit config, such as
    runtime_config's own guard: no entry checks); keep: the keep_var is true (no entry checks)."""
    by_default = _refusal_by_default_for_run(facts, node, targets, set_as_default, enable_cdi, settings, name, keep_var)
    if by_default or keep or not own_config:
        return by_default
    return entry_refusal(facts, node, own_config) or envvar_refusal(facts, node, own_config, settings, keep_var)


def _refusal_by_default_for_run(
    facts: dict,
    node: str,
    targets,
    set_as_default: bool,
    enable_cdi: bool,
    settings: dict,
    name: str = "nvidia",
    keep_var: str = "nvidia_container_toolkit_keep_gpu_pod_access",
) -> str:
    """refusal() from the gpu_node facts and a run's settings: the runtimes it configures (targets), whether
    nvidia becomes their default, CDI, and the toolkit config keys it merges (settings; {} for none)."""
    current = facts.get("runtime_defaults") or {}
    toolkit_now = facts.get("toolkit_config") or toolkit_config_facts("/", None)
    targets = list(targets or [])
    # RKE2/k3s (gpu_node_facts: the agent regenerates the installer's containerd config at every start)
    agent = ((facts.get("installer") or {}).get("containerd") or {}).get("config_regenerated") == "agent start"
    through_installer = agent and "containerd" in current and "containerd" not in targets
    if through_installer:
        # RKE2/k3s: runtime_config registers the runtime in the installer's containerd (its agent config sets the
        # default runtime) although containerd is not among the installed runtimes; CDI stays as the agent has it.
        targets.append("containerd")
    planned = planned_runtimes(current, targets, bool(set_as_default), bool(enable_cdi), name)
    if through_installer:
        planned["containerd"]["cdi"] = current["containerd"].get("cdi")
    return refusal(
        node,
        facts.get("device_plugin") or {},
        current,
        planned,
        toolkit_now,
        toolkit_planned(toolkit_now, settings),
        facts.get("gpu_workloads") or [],
        name,
        keep_var,
    )


# The GPU Operator's toolkit installer writes the config its wrappers name at every start of its DaemonSet's pod,
# from its flags, whose environment variables the ClusterPolicy's spec.toolkit.env sets (NVIDIA/nvidia-container-toolkit
# v1.20.0 cmd/nvidia-ctk-installer/toolkit/toolkit.go: flag accept-nvidia-visible-devices-envvar-when-unprivileged,
# default true, EnvVars ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED; ..._AS_VOLUME_MOUNTS likewise;
# NVIDIA/gpu-operator v26.7.0 controllers/object_controls.go TransformToolkit copies config.Toolkit.Env to the
# toolkit container). Without that setting the Operator turns the door back on at its next start.
OPERATOR_SETTING = (
    "GPU Operator: ClusterPolicy spec.toolkit.env [{name: ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED,"
    ' value: "false"}] (its toolkit pod rewrites that file at every start; this setting makes it write false)'
)


def _entries_named(entries) -> str:
    return ", ".join(f"{e['runtime']} {describe_entry(e['name'], e.get('binary'))}" for e in entries)


def foreign_configs(facts: dict, own_config: str | None) -> dict:
    """{config: [entries]} of the NVIDIA runtime entries that read a config other than the one the toolkit role
    merges (own_config), known and readable (the others: entry_refusal)."""
    found: dict = {}
    for entry in (facts or {}).get("nvidia_runtimes") or []:
        config = entry.get("config")
        if config and config != own_config and not entry.get("problem") and (entry.get("toolkit") or {}).get("exists"):
            found.setdefault(config, []).append(entry)
    return found


def isolation_settings(settings: dict) -> dict:
    """The isolation keys of the role's config.toml settings: what is merged into every other config an NVIDIA
    runtime entry reads (the two accept-* keys and the CDI annotation prefixes), nothing else of the role's."""
    subset = {key: settings[key] for key in (ENVVAR_KEY, VOLUME_MOUNTS_KEY) if key in (settings or {})}
    cdi = settings or {}
    for part in CDI_TABLE.split("."):
        cdi = cdi.get(part) if isinstance(cdi, dict) else None
    if isinstance(cdi, dict) and isinstance(cdi.get(CDI_PREFIXES_KEY), list):
        subset["nvidia-container-runtime"] = {"modes": {"cdi": {CDI_PREFIXES_KEY: list(cdi[CDI_PREFIXES_KEY])}}}
    return subset


def config_targets(facts: dict, own_config: str, settings: dict, keep: bool = False) -> list:
    """The toolkit configs the toolkit role merges into: {path, settings, label} for its own config.toml, then for
    each other config an NVIDIA runtime entry reads (foreign_configs) its isolation keys (isolation_settings), the
    label naming the entries and the Operator-side setting that makes it last. With keep (the keep_var) only the
    role's own: the others stay as they are, the doctor warns."""
    targets = [{"path": own_config, "settings": settings, "label": own_config}]
    if keep:
        return targets
    for config, entries in sorted(foreign_configs(facts, own_config).items()):
        targets.append(
            {
                "path": config,
                "settings": isolation_settings(settings),
                "label": f"{config}: the isolation keys, as NVIDIA's runtime reads this file for"
                f" {_entries_named(entries)}; {OPERATOR_SETTING}",
            }
        )
    return targets


def entry_refusal(facts: dict, node: str, own_config: str | None) -> str:
    """The refusal before any change of NVIDIA runtime entries whose config cannot be made safe by a merge: a wrapper
    this project cannot follow, or a config file that is not there (NVIDIA's defaults then accept the envvar from
    unprivileged containers). "" when there is none."""
    bad = []
    for entry in (facts or {}).get("nvidia_runtimes") or []:
        if entry.get("problem"):
            bad.append(f"{_entries_named([entry])}: {entry['problem']}")
        elif entry.get("config") and entry["config"] != own_config and not (entry.get("toolkit") or {}).get("exists"):
            bad.append(
                f"{_entries_named([entry])}: its runtime reads {entry['config']} ({entry.get('via')}), which does not"
                " exist, so NVIDIA's defaults apply (accept-nvidia-visible-devices-envvar-when-unprivileged = true)"
            )
    if not bad:
        return ""
    return (
        f"Refusing to change {node}: NVIDIA's runtime is registered as {'; '.join(bad)}. Through such an entry an"
        " unprivileged container that sets NVIDIA_VISIBLE_DEVICES=all (as CUDA images do) gets every GPU, and this"
        " project cannot tell or merge the config it reads. Nothing was changed. Fix: give that runtime a config with"
        f" {ENVVAR_KEY} = false and {VOLUME_MOUNTS_KEY} = false ({OPERATOR_SETTING}), or remove the entry from the"
        " runtime's config together with the RuntimeClasses that name it, then run again."
    )


def envvar_refusal(facts: dict, node: str, own_config: str | None, settings: dict, keep_var: str) -> str:
    """The refusal when this run closes NVIDIA_VISIBLE_DEVICES (or volume mounts) in a config an NVIDIA runtime entry
    reads while something gets GPUs through it that way today: the device plugin on envvar (volume-mounts) hands
    GPUs to pods that name such an entry as RuntimeClass, and workloads (gpu_workloads by_envvar: unprivileged
    containers with NVIDIA_VISIBLE_DEVICES and NVIDIA device nodes) have them now. "" when nothing loses a GPU."""
    facts = facts or {}
    plugin = facts.get("device_plugin") or {}
    strategies = (plugin.get("strategies") or [DEFAULT_STRATEGY]) if plugin.get("present") else []
    workloads = [w for w in facts.get("gpu_workloads") or [] if w.get("by_envvar")]
    groups: dict = {}
    for entry in facts.get("nvidia_runtimes") or []:
        if entry.get("config") and (entry.get("toolkit") or {}).get("exists") is not None:
            groups.setdefault(entry["config"], []).append(entry)
    closing, reasons = [], []
    for config, entries in sorted(groups.items()):
        now = entries[0].get("toolkit") or {}
        planned = toolkit_planned(now, settings if config == own_config else isolation_settings(settings))
        closes = [
            key
            for key, name in (
                (ENVVAR_KEY, "accept_envvar_when_unprivileged"),
                (VOLUME_MOUNTS_KEY, "accept_volume_mounts"),
            )
            if now.get(name + "_effective") and not planned.get(name + "_effective")
        ]
        if not closes:
            continue
        hit = (ENVVAR_KEY in closes and ("envvar" in strategies or workloads)) or (
            VOLUME_MOUNTS_KEY in closes and "volume-mounts" in strategies
        )
        if hit:
            closing.append(
                f"{', '.join(k + ' true -> false' for k in closes)} in {config}, read by {_entries_named(entries)}"
            )
    if not closing:
        return ""
    if plugin.get("present") and ({"envvar", "volume-mounts"} & set(strategies)):
        reasons.append(
            f"{_describe(plugin)}: GPU pods that name one of those entries as RuntimeClass get their GPUs so"
        )
    if workloads:
        named = ", ".join(
            f"{w['comm']} (pid {w['pid']}, NVIDIA_VISIBLE_DEVICES={w['visible_devices']})" for w in workloads[:5]
        )
        reasons.append(f"unprivileged containers that have GPUs by NVIDIA_VISIBLE_DEVICES now: {named}")
    return (
        f"Refusing to change {node}: this run would set {'; '.join(closing)}, and {'; '.join(reasons)}. From their next"
        " start they would get no GPU. Nothing was changed. Two ways forward: (a) move the device plugin to CDI first"
        " (Helm chart nvidia-device-plugin: --set deviceListStrategy=cdi-cri; GPU Operator: ClusterPolicy"
        " spec.cdi.enabled: true) and let those pods request nvidia.com/gpu (restart them so that they get their GPUs"
        f' through CDI), then run again (README, "Nodes that already run GPU pods"); (b) {keep_var}: true keeps'
        " today's semantics on this node (the doctor then warns that pods without a GPU request can see GPUs here)."
    )


def mig_refusal(facts: dict, node: str, layout: str, shown: int = 5) -> str:
    """The refusal of a MIG layout change while processes hold GPUs (the facts' gpu_workloads: GPU pods and other
    clients; host daemons and the device plugin are left out, the MIG manager's hooks stop those), or "" when none
    does. A layout change destroys and creates GPU instances: what runs on them loses its GPU."""
    workloads = list((facts or {}).get("gpu_workloads") or [])
    if not workloads:
        return ""
    named = ", ".join(f"{item.get('comm') or '?'} (pid {item.get('pid')})" for item in workloads[:shown])
    more = f" and {len(workloads) - shown} more" if len(workloads) > shown else ""
    return (
        f"{node}: MIG layout {layout} is not in place and {len(workloads)} process(es) hold GPUs: {named}{more}."
        f" Changing the layout would take their GPUs. Drain the node's GPU pods first (kubectl drain {node}"
        " --ignore-daemonsets --delete-emptydir-data), then run site.yml --tags mig again."
        " Nothing on the node was changed."
    )
