# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's containerd rows: where this node's containerd is (the system's, or RKE2/k3s's own), what it
reports (config dump, CRI plugin, start time against its config files), the containers through ctr, and the
isolation family's CAP_SYS_ADMIN container through CRI's default runtime.

The node-side module gpu_validate_checks imports this file as module_utils.gpu_validate.containerd.
Stdlib only, Python 3.8+ (the node's python3).
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd.tables import TomlError, toml_tables
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd.versions import (
    AICR_1688,
    DROPIN_RULE_SINCE,
    dropin_version_conflicts,
    file_version,
    load_order,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.cdi import cdi_enabled, cdi_spec_dirs
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.containers import (
    ALLOWED_DEFAULT_FIX,
    COUNT_DEVICES,
    container_run,
    container_run_row,
    default_runtime_row,
    envvar_isolation_row,
    new_run_id,
    sys_admin_row,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.doors import annotation_passthrough
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import (
    Node,
    table_row,
    truncate,
    truthy,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.logic import runtime_config
from ansible_collections.gpunode.provisioning.plugins.module_utils.system.units import main_start_argv, main_start_us
from ansible_collections.gpunode.provisioning.plugins.module_utils.system.versions import version_tuple

CONTAINERD_CONFIG = "/etc/containerd/config.toml"
CONTAINERD_DROPINS = "/etc/containerd/conf.d/*.toml"
CONTAINERD_SOCKET = "unix:///run/containerd/containerd.sock"
RUNC_SHIM = "io.containerd.runc.v2"


def cri_plugins(result) -> dict:
    """What `ctr plugins ls` (stdout and stderr together) says of the CRI plugin: {cri, cri_detail}."""
    rc, out, err = result
    if rc != 0:
        lines = f"{out}\n{err}".strip().splitlines()
        return {"cri": "unreachable", "cri_detail": lines[-1] if lines else ""}
    listed, bad = 0, []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 2 and (fields[0].startswith("io.containerd.cri.") or fields[1] == "cri"):
            listed += 1
            if fields[-1] != "ok":
                bad.append(f"{fields[0]}/{fields[1]}={fields[-1]}")
    if not listed:
        return {"cri": "error", "cri_detail": "no CRI plugin listed"}
    return {"cri": "error", "cri_detail": " ".join(bad)} if bad else {"cri": "ok"}


def crictl_facts(result, runtime_name: str) -> dict:
    """`crictl info` of the running containerd (through the CRI itself): {crictl_ready, crictl_handler} as yes/no;
    {} when crictl is missing, fails or prints no JSON."""
    if result is None or result[0] != 0:
        return {}
    try:
        info = json.loads(result[1])
    except ValueError:
        return {}
    if not isinstance(info, dict):
        return {}
    conditions = (info.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "RuntimeReady" and c.get("status") for c in conditions if isinstance(c, dict))
    runtimes = ((info.get("config") or {}).get("containerd") or {}).get("runtimes") or {}
    return {"crictl_ready": "yes" if ready else "no", "crictl_handler": "yes" if runtime_name in runtimes else "no"}


# RKE2 and k3s run their own containerd (gpu_node_facts' installer facts): its binary and ctr in the installer's
# bin directory, its socket, the config the agent generates at every start from the template and the agent
# config (so those are the files that must be older than the running daemon), and the agent unit that starts it.
# kubespray runs containerd as containerd.service but renders config.toml at every kubespray run.
def agent_managed(installer: dict) -> bool:
    """RKE2/k3s: gpu_node_facts says the installer's agent regenerates containerd's config at every start."""
    return ((installer or {}).get("containerd") or {}).get("config_regenerated") == "agent start"


def containerd_site(node: dict, host: Node, config: str = CONTAINERD_CONFIG) -> dict:
    """Where this node's containerd is and how to reach it: the installer's (RKE2/k3s) or the system's (whose root
    config file is ``config``)."""
    installer = node.get("installer") or {}
    name = installer.get("name") or "unknown"
    agent_containerd = installer.get("containerd") or {}
    if agent_managed(installer) and agent_containerd.get("binary"):
        bin_dir = installer.get("bin_dir") or os.path.dirname(agent_containerd["binary"])
        socket = agent_containerd.get("socket") or ""
        config = agent_containerd.get("config")
        ctr = f"{bin_dir}/ctr" if host.lstat(f"{bin_dir}/ctr") is not None else "ctr"
        crictl = f"{bin_dir}/crictl" if host.lstat(f"{bin_dir}/crictl") is not None else host.which("crictl", [])
        kubelet = installer.get("kubelet") or {}
        dropins = kubelet.get("dropin_dir") or ""
        watched = [*(agent_containerd.get("templates") or []), kubelet.get("config") or ""]
        watched += sorted(host.glob(f"{dropins}/*.yaml") + host.glob(f"{dropins}/*.yml")) if dropins else []
        unit = installer.get("service") or f"{name}.service"
        template = agent_containerd.get("template") or (agent_containerd.get("templates") or [""])[-1]
        return {
            "installer": name,
            "config": config or "",
            "dump": [agent_containerd["binary"], "--config", config or "", "config", "dump"],
            "ctr": [ctr, "--address", socket],
            "crictl": [crictl, "--runtime-endpoint", f"unix://{socket}"] if crictl else None,
            "unit": unit,
            "watched": [path for path in watched if path],
            "running": truthy(agent_containerd.get("running")),
            "start": f"Start {name}'s agent (systemctl start {unit})",
            "restart": f"Restart {name}'s agent (systemctl restart {unit}): it regenerates config.toml at start",
            "fix_config": f"Fix {template} or the agent config ({name} generates {config} from them at"
            " start; containerd config dump names the problem)",
            "register": f"Run site.yml --tags runtime: it writes {template} or leaves the runtime to {name}'s own"
            " nvidia detection, and restarts the agent",
            "journal": f"journalctl -u {unit}",
        }
    facts = (node.get("runtimes") or {}).get("containerd") or {}
    site = {
        "installer": name,
        "config": config,
        "dump": [facts.get("binary") or "containerd", "config", "dump"],
        "ctr": ["ctr"],
        "crictl": ["crictl", "--runtime-endpoint", CONTAINERD_SOCKET] if host.which("crictl", []) else None,
        "unit": "containerd",
        "watched": [CONTAINERD_CONFIG, *host.glob(CONTAINERD_DROPINS)],
        "running": truthy(facts.get("running")),
        "start": "Start containerd (systemctl start containerd)",
        "restart": "Restart containerd (systemctl restart containerd), or rerun site.yml --tags runtime: it"
        " finishes a restart an interrupted run left pending",
        "fix_config": f"Fix {CONTAINERD_CONFIG} (containerd config dump names the problem)",
        "register": "Run site.yml --tags runtime",
        "journal": "journalctl -u containerd",
    }
    if name == "kubespray":
        # kubespray renders config.toml from its template at every run (roles/container-engine/containerd,
        # task "Containerd | Copy containerd config file"): what runtime_config merged in is gone after it, unless
        # kubespray's inventory lists the runtime (containerd_additional_runtimes; roles/runtime_config README).
        site["register"] = (
            "kubespray renders /etc/containerd/config.toml at every kubespray run: add the runtime to"
            " containerd_additional_runtimes in the kubespray inventory (see the runtime_config README) so that"
            " its runs keep it, and rerun site.yml --tags runtime now"
        )
    return site


def config_versions(root: str, host: Node) -> dict:
    """The config files containerd reads, as they are on disk: {"root", "files": [(path, version)] in containerd's
    load order (containerd_versions.load_order; version 0: no version key), "unreadable": [paths that are missing
    or not TOML]}. The files, not `config dump`: containerd 2.3 dumps version 4 whatever they say."""
    unreadable = []

    def read_parsed(path):
        text = host.read(path)
        if text is not None:
            try:
                return toml_tables(text)
            except TomlError:
                pass
        unreadable.append(path)
        return None

    order = load_order(root, read_parsed, host.glob) if root else []
    files = [(path, file_version(parsed)) for path, parsed in order if parsed is not None]
    return {"root": root, "files": files, "unreadable": unreadable}


def containerd_state(params: dict, node: dict, host: Node) -> dict:
    """What containerd reports: its configuration dump, the running daemon (CRI plugin, start time against the
    config files' mtime, crictl) and whether the test image is there."""
    site = containerd_site(node, host, params.get("containerd_config") or CONTAINERD_CONFIG)
    running = site["running"]
    rc, out, err = host.run(site["dump"])
    config = runtime_config(out)
    state = {
        "ok": rc == 0,
        "error": truncate(err.strip()),
        "runtimes": config["runtimes"],
        "default": config["default"] or "",
        "default_entry": config["default_entry"],
        "registered": params["runtime_name"] in config["runtimes"],
        "running": running,
        "site": site,
        "image": False,
        "cri": {},
        # cdi_spec_dirs of the CRI plugin, for the cdi family (none without a dump)
        "cdi_spec_dirs": cdi_spec_dirs(out) if rc == 0 else [],
        # enable_cdi of the CRI plugin, for the dra family (None: no dump, or a containerd without the key)
        "enable_cdi": cdi_enabled(out) if rc == 0 else None,
        # pod_annotations / container_annotations of the nvidia runtime (None: no dump)
        "passthrough": annotation_passthrough(out, params["runtime_name"]) if rc == 0 else None,
        "id": new_run_id(),
        "versions": config_versions(site["config"], host),
    }
    if not running:
        return state
    # The kubelet's view: the CRI plugin can fail to load while containerd runs and `ctr` works (then no pod
    # can run), and a config written after the daemon started is not what it runs.
    rc, out, err = host.run([*site["ctr"], "plugins", "ls"])
    cri = cri_plugins((rc, out, err))
    # when systemd started containerd's main process (RKE2/k3s: the agent's), as seconds since the epoch
    rc, out, err = host.run(main_start_argv(site["unit"]))
    started_us = main_start_us(rc, out)
    if started_us is None:
        # The check itself failed: the CRI plugin row says so (with systemctl's message), and the start time
        # of the running config is unknown.
        state["cri"] = {"check_error": err.strip() or f"systemctl printed {out.strip() or '0'!r}, not microseconds"}
    else:
        cri["started"] = f"{host.boot_time() + started_us / 1e6:.6f}"
    newest, newest_file = 0.0, ""
    for path in site["watched"]:
        mtime = host.mtime(path)
        if mtime is not None and mtime > newest:
            newest, newest_file = mtime, path
    cri["written"] = f"{newest:.9f}"
    cri["written_file"] = newest_file
    if site["crictl"]:
        cri.update(crictl_facts(host.run([*site["crictl"], "info"]), params["runtime_name"]))
    if "check_error" not in state["cri"]:
        state["cri"] = cri
    if params["containerd_test_image"]:
        rc, out, _err = host.run(
            [*site["ctr"], "--namespace", params["containerd_namespace"], "images", "ls", "--quiet"]
        )
        state["image"] = params["containerd_test_image"] in out.splitlines()
    return state


def _ctr_run(params: dict, host: Node, containerd: dict, suffix: str, runtime: list, command: list, env=()) -> tuple:
    argv = [
        *(containerd.get("site") or {}).get("ctr", ["ctr"]),
        "--namespace",
        params["containerd_namespace"],
        "run",
        "--rm",
        *runtime,
        *env,
    ]
    argv += [
        *params["containerd_run_options"],
        params["containerd_test_image"],
        f"{containerd['id']}-{suffix}",
        *command,
    ]
    result = container_run(params, host, argv)
    if command[-1:] == [COUNT_DEVICES] and result[0] == 0 and not result[1].strip():
        # the count always prints a number: nothing at all is output ctr lost, as it can for a task that exits
        # right after printing (containerd/containerd#770, concourse/concourse#6775; seen once in molecule
        # default on containerd 2.1): run it once more before the row says it did not run
        result = container_run(params, host, argv)
    return result


def _not_running(site: dict) -> tuple:
    return "containerd is not running", site.get("start", "Start containerd (systemctl start containerd)")


def containerd_rows(params: dict, node: dict, containerd: dict, run, isolation, toolkit_installed: bool) -> list:
    """containerd: containerd_state(); run / isolation: (rc, out, err) of the ctr containers through the nvidia binary
    (plain, and counting devices with NVIDIA_VISIBLE_DEVICES=all), None when they did not run."""
    rows = [
        containerd_cri_row(containerd),
        containerd_registered_row(params, node, containerd, toolkit_installed),
        containerd_live_row(params, containerd),
    ]
    if not containerd["ok"]:
        rows.append(table_row("containerd: default runtime", "skipped", "containerd config dump failed"))
    else:
        rows.append(
            default_runtime_row(
                params,
                "containerd",
                containerd["default"],
                "default_runtime_name is {default}: every pod whose image sets",
                ALLOWED_DEFAULT_FIX,
                binary=(containerd.get("default_entry") or {}).get("binary") or None,
            )
        )
    rows.append(containerd_versions_row(node, containerd))
    return rows + containerd_container_rows(params, node, containerd, run, isolation)


def _version_said(version: int) -> str:
    return f"version {version}" if version > 0 else "no version key (1)"


def containerd_versions_row(node: dict, containerd: dict) -> dict:
    """No imported file (drop-in) with a higher config version than the root file that imports it, on disk
    (containerd_versions: containerd 2.3 refuses to start then; NVIDIA's toolkit <= 1.19.1 wrote such files)."""
    check = "containerd: drop-in versions"
    versions = containerd.get("versions") or {}
    root, files = versions.get("root") or CONTAINERD_CONFIG, versions.get("files") or []
    if not files:
        return table_row(check, "skipped", f"{root} does not exist or cannot be read: no drop-ins to compare")
    conflicts = dropin_version_conflicts([(path, version) for path, version in files if version >= 0])
    if conflicts:
        path, version, above = conflicts[0]
        running = version_tuple(((node.get("runtimes") or {}).get("containerd") or {}).get("version"))
        effect = (
            f"containerd {'.'.join(map(str, running))} refuses to start (drop-in config version {version} higher than"
            f" root config version {above})"
            if running is not None and running[:2] >= DROPIN_RULE_SINCE
            else f"containerd 2.3 refuses to start with it; 2.0 to 2.2 merge the files as version {version} and leave"
            " the root file's tables unmigrated (the reason given in containerd commit 21248d00)"
        )
        unit = (containerd.get("site") or {}).get("unit") or "containerd"
        more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
        return table_row(
            check,
            "fail",
            f"{path}{more} has config version {version} on disk, above {above} of {root} that imports it: {effect}",
            f"Write version = {above} in {path} with version {above}'s table names (or migrate {root} with"
            f" containerd config migrate), then restart {unit}; {AICR_1688}. Upgrade the toolkit, or let site.yml"
            " --tags runtime write the runtime (its drop-in takes the root file's version)",
        )
    unreadable = versions.get("unreadable") or []
    said = f"; cannot read {', '.join(unreadable)}" if unreadable else ""
    status = "warn" if unreadable else "ok"
    imported = len(files) - 1
    if not imported:
        return table_row(check, status, f"{root}: {_version_said(files[0][1])}, imports no file{said}")
    return table_row(
        check,
        status,
        f"{root}: {_version_said(files[0][1])}; its {imported} imported file(s) are not above it (on disk){said}",
    )


def containerd_cri_row(containerd: dict) -> dict:
    """Whether the kubelet can run pods: the CRI plugin as ctr plugins ls and crictl info see it."""
    cri = containerd["cri"]
    site = containerd.get("site") or {}
    check = "containerd: CRI plugin"
    if not containerd["running"]:
        return table_row(check, "warn", *_not_running(site))
    if "check_error" in cri:
        return table_row(check, "fail", "the check failed: " + truncate(cri["check_error"], 200))
    if cri.get("crictl_ready", "yes") != "yes":
        return table_row(check, "fail", "crictl info: the runtime is not RuntimeReady")
    if cri.get("cri") == "ok":
        said = "crictl info: RuntimeReady" if "crictl_ready" in cri else "ctr plugins ls: cri ok"
        return table_row(check, "ok", f"{said} (the kubelet can run pods)")
    if cri.get("cri") == "unreachable":
        return table_row(check, "fail", f"ctr cannot reach containerd: {cri.get('cri_detail', '')}")
    return table_row(
        check,
        "fail",
        "containerd runs but its CRI plugin did not load, so the kubelet can run no pod: " + cri.get("cri_detail", ""),
        f"{site.get('journal', 'journalctl -u containerd')} | grep 'failed to load plugin' names the config"
        " problem (e.g. default_runtime_name naming a runtime that is not configured); fix it and restart"
        f" {site.get('unit', 'containerd')}, or run site.yml --tags runtime",
    )


def containerd_registered_row(params: dict, node: dict, containerd: dict, toolkit_installed: bool) -> dict:
    """The nvidia runtime in containerd's effective configuration (config dump)."""
    name = params["runtime_name"]
    site = containerd.get("site") or {}
    check = "containerd: nvidia runtime"
    if not containerd["ok"]:
        return table_row(
            check,
            "fail",
            f"containerd config dump failed: {containerd['error']}",
            site.get("fix_config", f"Fix {CONTAINERD_CONFIG} (containerd config dump names the problem)"),
        )
    if containerd["registered"]:
        return table_row(check, "ok", f"runtimes.{name} in the effective configuration")
    if truthy(node.get("has_gpu")) or toolkit_installed:
        installer = site.get("installer", "")
        cause = f" ({installer} node)" if installer not in ("unknown", "kubeadm", "") else ""
        return table_row(
            check,
            "fail",
            f"no runtimes.{name} in containerd config dump{cause} (runtimes: {', '.join(containerd['runtimes'])})",
            site.get("register", "Run site.yml --tags runtime"),
        )
    return table_row(check, "skipped", "no GPU (and no toolkit installed)")


def containerd_live_row(params: dict, containerd: dict) -> dict:
    """Whether the running daemon runs what its config files say (its start against their mtime, crictl's handlers)."""
    name = params["runtime_name"]
    cri = containerd["cri"]
    site = containerd.get("site") or {}
    check = "containerd: running config"
    restart = site.get(
        "restart",
        "Restart containerd (systemctl restart containerd), or rerun site.yml --tags runtime: it finishes"
        " a restart an interrupted run left pending",
    )
    started = cri.get("started", "")
    if not containerd["running"]:
        return table_row(check, "warn", "containerd is not running")
    if cri.get("crictl_handler", "yes") != "yes":
        return table_row(check, "fail", f"crictl info: the running containerd has no {name} runtime handler", restart)
    if not re.fullmatch(r"[0-9]+[.][0-9]+", started):
        return table_row(check, "warn", "the start time of containerd is unknown")
    if float(cri.get("written") or 0) >= float(started):
        started_by = "containerd" if site.get("unit", "containerd") == "containerd" else site["unit"]
        detail = f"{cri.get('written_file', '')} was written after {started_by} started: the running daemon does not"
        return table_row(check, "warn", detail + " run what the file says", restart)
    handler = f"crictl info lists the {name} handler; " if "crictl_handler" in cri else ""
    started_by = "containerd" if site.get("unit", "containerd") == "containerd" else site["unit"]
    return table_row(check, "ok", f"{handler}{started_by} started after its config files were last written")


def containerd_container_rows(params: dict, node: dict, containerd: dict, run, isolation) -> list:
    """The containers through ctr: one through the nvidia binary, one counting devices (run, isolation)."""
    name, image, ns = params["runtime_name"], params["containerd_test_image"], params["containerd_namespace"]
    not_running = _not_running(containerd.get("site") or {})
    rows = []
    check = "containerd: container via nvidia"
    if not image:
        state = "no_image"
        rows.append(table_row(check, "skipped", "no test image (gpu_validate_containerd_test_image)"))
    elif not containerd["running"]:
        state = "not_running"
        rows.append(table_row(check, "warn", *not_running))
    elif not containerd["registered"]:
        state = "not_registered"
        rows.append(table_row(check, "skipped", f"the {name} runtime is not registered"))
    elif not containerd["image"]:
        state = "image_missing"
        rows.append(
            table_row(
                check,
                "warn",
                f"image {image} is not in ctr namespace {ns} (never pulled)",
                f"ctr -n {ns} images pull (or import) {image}, or name an image the node has",
            )
        )
    else:
        state = "ran"
        rows.append(
            container_run_row(
                params,
                check,
                run,
                f"ctr run --runc-binary {params['runtime_binary']} {image} true",
                "containerd",
                "gpu_validate_containerd_run_options",
            )
        )
    check = f"containerd: GPU isolation ({name})"
    if not truthy(node.get("has_gpu")):
        rows.append(table_row(check, "skipped", "no GPU"))
    elif state == "no_image":
        rows.append(table_row(check, "skipped", "no test image (gpu_validate_containerd_test_image)"))
    elif state == "not_running":
        rows.append(table_row(check, "warn", *not_running))
    elif state == "not_registered":
        rows.append(table_row(check, "skipped", f"the {name} runtime is not registered"))
    elif state == "image_missing":
        rows.append(
            table_row(
                check,
                "warn",
                f"image {image} is not in ctr namespace {ns}",
                "Pull or import the image into that namespace (it needs sh, ls and wc)",
            )
        )
    else:
        rows.append(envvar_isolation_row(check, isolation))
    return rows


def check_containerd(params: dict, node: dict, host: Node, toolkit_installed: bool, containerd: dict) -> list:
    run = isolation = None
    nvidia = ["--runtime", RUNC_SHIM, "--runc-binary", params["runtime_binary"]]
    if params["containerd_test_image"] and containerd["image"] and containerd["registered"]:
        run = _ctr_run(params, host, containerd, "run", nvidia, ["true"])
        if truthy(node.get("has_gpu")):
            env = ["--env", "NVIDIA_VISIBLE_DEVICES=all"]
            isolation = _ctr_run(params, host, containerd, "count", nvidia, ["sh", "-c", COUNT_DEVICES], env)
    return containerd_rows(params, node, containerd, run, isolation, toolkit_installed)


# Pods without a RuntimeClass get the CRI plugin's default runtime (default_runtime_name in
# `containerd config dump`), not ctr's own default (plain runc): ctr runs the container through that
# runtime's shim (runtime_type) and OCI binary (options.BinaryName), as the CRI plugin would.
def cri_default(containerd: dict) -> tuple:
    """(name, shim, OCI binary or '') of the runtime that pods without a RuntimeClass get."""
    entry = containerd.get("default_entry") or {}
    return containerd.get("default") or "runc", entry.get("runtime_type") or RUNC_SHIM, entry.get("binary") or ""


def containerd_sys_admin_row(params: dict, node: dict, containerd: dict, result) -> dict:
    check = "containerd: GPU isolation (default, CAP_SYS_ADMIN)"
    image, ns = params["containerd_test_image"], params["containerd_namespace"]
    default, shim, binary = cri_default(containerd)
    said = f"CRI's default runtime {default} ({shim}, {binary or 'runc'})"
    like = "a FUSE-like container (CAP_SYS_ADMIN, NVIDIA_VISIBLE_DEVICES=all, no GPU requested)"
    if not truthy(node.get("has_gpu")):
        return table_row(check, "skipped", "no GPU")
    if not image:
        return table_row(check, "skipped", "no test image (gpu_validate_containerd_test_image)")
    if not containerd["running"]:
        return table_row(check, "warn", "containerd is not running", "Start containerd (systemctl start containerd)")
    if not containerd["ok"]:
        return table_row(
            check,
            "fail",
            f"containerd config dump failed, so CRI's default runtime is unknown: {containerd['error']}",
            "Fix /etc/containerd/config.toml (containerd config dump names the problem)",
        )
    if not containerd["image"]:
        return table_row(
            check,
            "warn",
            f"image {image} is not in ctr namespace {ns}",
            "Pull or import the image into that namespace (it needs sh, ls and wc)",
        )
    return sys_admin_row(
        check,
        result,
        like,
        f" through {said}",
        "every pod without a RuntimeClass that has CAP_SYS_ADMIN can get GPUs",
        f"Make runc CRI's default (nvidia_container_toolkit_set_as_default: false, or fix default_runtime_name and"
        f" runtimes.{default} in config.toml), run site.yml --tags runtime; FUSE pods must not use RuntimeClass"
        " nvidia unless they request GPUs",
        no_run_fix="Read the error; the test image needs sh, ls and wc, and gpu_validate_containerd_run_options"
        " apply to this container too",
    )


def check_containerd_isolation(params: dict, node: dict, host: Node, containerd: dict) -> list:
    result = None
    if truthy(node.get("has_gpu")) and containerd["running"] and containerd["ok"] and containerd["image"]:
        _default, shim, binary = cri_default(containerd)
        runtime = ["--runtime", shim]
        if binary and re.match(r"io[.]containerd[.]runc[.]", shim):
            runtime += ["--runc-binary", binary]
        env = ["--cap-add", "CAP_SYS_ADMIN", "--env", "NVIDIA_VISIBLE_DEVICES=all"]
        result = _ctr_run(params, host, containerd, "sys-admin", runtime, ["sh", "-c", COUNT_DEVICES], env)
    return [containerd_sys_admin_row(params, node, containerd, result)]
