# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's CRI-O rows: `crio config` and the running daemon, its CRI (crictl info), pods through crictl
with the nvidia handler, and the isolation family's CAP_SYS_ADMIN pod through CRI-O's default handler.

The node-side module gpu_validate_checks imports this file as module_utils.gpu_validate.crio.
Stdlib only, Python 3.8+ (the node's python3).
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.containers import (
    COUNT_DEVICES,
    container_run,
    container_run_row,
    default_runtime_row,
    envvar_isolation_row,
    new_run_id,
    sys_admin_row,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import (
    Node,
    table_row,
    truncate,
    truthy,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.logic import runtime_config

CRIO_ENDPOINT = "unix:///var/run/crio/crio.sock"
# Pod and container of the CRI-O test runs, in crictl's JSON form: the node's network (no CNI), a PID namespace per
# container (the kubelet's default: CRI-O then starts no pause container).
CRIO_NAMESPACES = {"network": 2, "pid": 1}


def crio_state(params: dict, node: dict, host: Node) -> dict:
    """What CRI-O reports: `crio config` (the files: crio.conf with its drop-ins), and where it runs, the running
    daemon (`crio status config` over its socket), its CRI (`crictl info`) and whether the test image is there."""
    facts = (node.get("runtimes") or {}).get("crio") or {}
    binary = facts.get("binary") or "crio"
    rc, out, err = host.run([binary, "config"])
    config = runtime_config(out)
    state = {
        "dump": (rc, out, err),
        "ok": rc == 0,
        "error": truncate(err.strip()),
        "runtimes": config["runtimes"],
        "default": config["default"] or "",
        "registered": params["runtime_name"] in config["runtimes"],
        "running": truthy(facts.get("running")),
        "live": None,
        "cri": None,
        "crictl": None,
        "image": False,
        "cgroup_parent": "gpu_validate.slice",
        "id": new_run_id(),
    }
    if not state["running"]:
        return state
    rc, out, err = host.run([binary, "status", "config"])
    live = runtime_config(out) if rc == 0 else None
    state["live"] = {"ok": rc == 0, "error": truncate(err.strip()), **(live or {"runtimes": [], "default": ""})}
    if rc == 0 and re.search(r'(?m)^\s*cgroup_manager\s*=\s*"cgroupfs"', out):
        state["cgroup_parent"] = "/gpu_validate"  # CRI-O refuses a systemd slice as parent with cgroupfs
    state["crictl"] = host.which("crictl", [])
    if state["crictl"]:
        state["cri"] = crio_cri_conditions(host.run([state["crictl"], "--runtime-endpoint", CRIO_ENDPOINT, "info"]))
        if params["crio_test_image"]:
            inspect = [state["crictl"], "--image-endpoint", CRIO_ENDPOINT, "inspecti", params["crio_test_image"]]
            state["image"] = host.run(inspect)[0] == 0
    return state


def crio_cri_conditions(result) -> dict:
    """The RuntimeReady and NetworkReady conditions of `crictl info`: {condition: (status, reason and message)};
    {} when crictl failed or printed no JSON. The kubelet reports a node NotReady unless both are true."""
    if result is None or result[0] != 0:
        return {}
    try:
        info = json.loads(result[1])
    except ValueError:
        return {}
    conditions = ((info.get("status") or {}).get("conditions") or []) if isinstance(info, dict) else []
    return {
        c.get("type"): (bool(c.get("status")), f"{c.get('reason') or ''} {c.get('message') or ''}".strip())
        for c in conditions
        if isinstance(c, dict)
    }


def _crictl_run(
    params: dict, host: Node, crio: dict, suffix: str, handler: str, command: list, env=(), caps=()
) -> tuple:
    """A pod of one container through CRI-O's CRI (crictl run, as the kubelet would start it) with runtime handler
    ``handler`` ("" for CRI-O's default): (exit code, its log, error) once it exited; the pod is removed."""
    crictl = [crio["crictl"], "--runtime-endpoint", CRIO_ENDPOINT, "--image-endpoint", CRIO_ENDPOINT]
    name = f"{crio['id']}-{suffix}"
    pod = {
        "metadata": {"name": name, "namespace": "gpu-validate", "uid": name},
        "log_directory": f"/var/log/pods/gpu-validate_{name}",
        "linux": {"cgroup_parent": crio["cgroup_parent"], "security_context": {"namespace_options": CRIO_NAMESPACES}},
    }
    container = {
        "metadata": {"name": "check"},
        "image": {"image": params["crio_test_image"]},
        "command": list(command),
        "envs": [{"key": k, "value": v} for k, v in env],
        "log_path": "check.log",
        "linux": {
            "security_context": {
                "namespace_options": CRIO_NAMESPACES,
                "capabilities": {"add_capabilities": list(caps)},
            }
        },
    }
    directory = host.temp_dir()
    try:
        host.write(os.path.join(directory, "pod.json"), json.dumps(pod))
        host.write(os.path.join(directory, "container.json"), json.dumps(container))
        runtime = ["--runtime", handler] if handler else []
        argv = [
            *crictl,
            "run",
            "--no-pull",  # the test image must be there (crictl pulls by default)
            *runtime,
            os.path.join(directory, "container.json"),
            os.path.join(directory, "pod.json"),
        ]
        rc, out, err = container_run(params, host, argv)
        if rc != 0:
            return rc, out, err
        container_id = out.strip().splitlines()[-1] if out.strip() else ""
        deadline = int(params["container_timeout"])
        for _attempt in range(deadline * 2):
            rc, out, err = host.run([*crictl, "inspect", container_id])
            status = (json.loads(out).get("status") or {}) if rc == 0 and out.startswith("{") else {}
            if status.get("state") == "CONTAINER_EXITED":
                logs = host.run([*crictl, "logs", container_id])
                return int(status.get("exitCode") or 0), logs[1], status.get("reason", "") + " " + logs[2]
            host.sleep(0.5)
        return 124, "", f"the container did not exit within {deadline} s"
    finally:
        for pod_id in host.run([*crictl, "pods", "--name", name, "--quiet"])[1].split():
            host.run([*crictl, "rmp", "--force", pod_id])
        host.remove_tree(directory)


def crio_rows(
    params: dict, node: dict, dump, toolkit_installed: bool, crio: dict | None = None, run=None, isolation=None
) -> list:
    """dump: (rc, out, err) of `crio config` (CRI-O's effective configuration, crio.conf with its drop-ins).
    crio: crio_state() where CRI-O runs (None: only the configuration is checked); run / isolation: (rc, out, err) of
    the test pods through the nvidia handler (plain, and counting devices with NVIDIA_VISIBLE_DEVICES=all)."""
    name = params["runtime_name"]
    rc, out, err = dump
    config = runtime_config(out)
    rows = []
    if crio is not None:
        rows.append(crio_cri_row(crio))
    if rc != 0:
        registered = table_row(
            "crio: nvidia runtime",
            "fail",
            "crio config failed: " + truncate(err.strip()),
            "Fix the CRI-O configuration (crio config names the problem)",
        )
        return [*rows, registered, table_row("crio: default runtime", "skipped", "crio config failed")]
    if name in config["runtimes"]:
        registered = table_row(
            "crio: nvidia runtime", "ok", f"crio.runtime.runtimes.{name} in the effective configuration"
        )
    elif truthy(node.get("has_gpu")) or toolkit_installed:
        registered = table_row(
            "crio: nvidia runtime",
            "fail",
            f"no crio.runtime.runtimes.{name} (runtimes: {', '.join(config['runtimes'])})",
            "Run site.yml --tags runtime",
        )
    else:
        registered = table_row("crio: nvidia runtime", "skipped", "no GPU (and no toolkit installed)")
    rows.append(registered)
    if crio is not None:
        rows.append(crio_live_row(params, crio))
    live = (crio or {}).get("live") or {}
    judged = live if live.get("ok") else config  # the running daemon where it answers, else the files
    default = judged["default"]
    rows.append(
        default_runtime_row(
            params,
            "crio",
            default,
            "default_runtime is {default}: every pod whose image sets",
            "Intended (nvidia_container_toolkit_set_as_default): give GPU pods devices through CDI",
            binary=(judged.get("default_entry") or {}).get("binary") or None,
        )
    )
    if crio is not None:
        rows += crio_container_rows(params, node, crio, run, isolation)
    return rows


def crio_cri_row(crio: dict) -> dict:
    check = "crio: CRI"
    if not crio["running"]:
        return table_row(check, "warn", "CRI-O is not running", "Start CRI-O (systemctl start crio)")
    if not crio["crictl"]:
        return table_row(check, "warn", "crictl is not installed: the CRI is not checked", "Install cri-tools (crictl)")
    if not crio["cri"]:
        return table_row(
            check, "fail", f"crictl info failed on {CRIO_ENDPOINT}", "journalctl -u crio names the problem"
        )
    ready, why = crio["cri"].get("RuntimeReady", (False, "not reported"))
    if not ready:
        return table_row(check, "fail", f"crictl info: the runtime is not RuntimeReady ({why})", "journalctl -u crio")
    ready, why = crio["cri"].get("NetworkReady", (False, "not reported"))
    if not ready:
        return table_row(
            check,
            "fail",
            f"crictl info: NetworkReady is false ({truncate(why, 200)}): the kubelet reports the node NotReady",
            "Install a CNI network configuration in CRI-O's network_dir (/etc/cni/net.d) and its plugins",
        )
    return table_row(check, "ok", "crictl info: RuntimeReady and NetworkReady (the kubelet can run pods)")


def crio_live_row(params: dict, crio: dict) -> dict:
    name = params["runtime_name"]
    check = "crio: running config"
    live = crio.get("live")
    if not crio["running"] or live is None:
        return table_row(check, "warn", "CRI-O is not running")
    if not live["ok"]:
        return table_row(check, "fail", "crio status config failed: " + live["error"], "journalctl -u crio")
    if crio["registered"] and name not in live["runtimes"]:
        return table_row(
            check,
            "fail",
            f"the running CRI-O has no {name} runtime handler (crio status config), though its files have one",
            "Restart CRI-O (systemctl restart crio), or rerun site.yml --tags runtime: it finishes a restart an"
            " interrupted run left pending; journalctl -u crio says why a handler was dropped",
        )
    if name in live["runtimes"]:
        return table_row(check, "ok", f"the running CRI-O serves the {name} handler (crio status config)")
    return table_row(check, "skipped", f"no {name} runtime configured")


def crio_container_rows(params: dict, node: dict, crio: dict, run, isolation) -> list:
    name, image = params["runtime_name"], params["crio_test_image"]
    live_handler = name in ((crio.get("live") or {}).get("runtimes") or [])
    reason = None
    if not image:
        reason = ("skipped", "no test image (gpu_validate_crio_test_image)", "")
    elif not crio["running"]:
        reason = ("warn", "CRI-O is not running", "Start CRI-O (systemctl start crio)")
    elif not crio["crictl"]:
        reason = ("warn", "crictl is not installed", "Install cri-tools (crictl)")
    elif not live_handler:
        reason = ("skipped", f"the running CRI-O has no {name} handler", "")
    elif not crio["image"]:
        reason = ("warn", f"image {image} is not in CRI-O's image store (never pulled)", f"crictl pull {image}")
    rows = []
    check = "crio: container via nvidia"
    if reason:
        rows.append(table_row(check, *reason))
    else:
        rows.append(
            container_run_row(params, check, run, f"crictl run --runtime {name} {image} true", "crio", "the crio logs")
        )
    check = f"crio: GPU isolation ({name})"
    if not truthy(node.get("has_gpu")):
        rows.append(table_row(check, "skipped", "no GPU"))
    elif reason:
        rows.append(table_row(check, *reason))
    else:
        rows.append(envvar_isolation_row(check, isolation, "pod"))
    return rows


def crio_sys_admin_row(params: dict, node: dict, crio: dict, result) -> dict:
    """result: (exit code, log, error) of the CAP_SYS_ADMIN pod through CRI-O's default handler, or None."""
    check = "crio: GPU isolation (default, CAP_SYS_ADMIN)"
    default = ((crio.get("live") or {}).get("default")) or crio.get("default") or "crun"
    like = "a FUSE-like pod (CAP_SYS_ADMIN, NVIDIA_VISIBLE_DEVICES=all, no GPU requested, no RuntimeClass)"
    if not truthy(node.get("has_gpu")):
        return table_row(check, "skipped", "no GPU")
    if not params["crio_test_image"]:
        return table_row(check, "skipped", "no test image (gpu_validate_crio_test_image)")
    if not crio["running"]:
        return table_row(check, "warn", "CRI-O is not running", "Start CRI-O (systemctl start crio)")
    if not crio["crictl"]:
        return table_row(check, "warn", "crictl is not installed", "Install cri-tools (crictl)")
    if not crio["image"]:
        return table_row(
            check, "warn", f"image {params['crio_test_image']} is not in CRI-O's image store", "crictl pull it"
        )
    return sys_admin_row(
        check,
        result,
        like,
        f" through CRI-O's default runtime {default}",
        "every pod without a RuntimeClass that has CAP_SYS_ADMIN can get GPUs",
        "Make runc (or crun) CRI-O's default (nvidia_container_toolkit_set_as_default: false, or fix default_runtime"
        " in crio.conf.d), run site.yml --tags runtime; FUSE pods must not use RuntimeClass nvidia unless they"
        " request GPUs",
        what="pod",
    )


def check_crio_isolation(params: dict, node: dict, host: Node, crio: dict) -> list:
    result = None
    if truthy(node.get("has_gpu")) and crio["running"] and crio["crictl"] and crio["image"]:
        env = [("NVIDIA_VISIBLE_DEVICES", "all")]
        result = _crictl_run(params, host, crio, "sys-admin", "", ["sh", "-c", COUNT_DEVICES], env, ["SYS_ADMIN"])
    return [crio_sys_admin_row(params, node, crio, result)]


def check_crio(params: dict, node: dict, host: Node, toolkit_installed: bool, crio: dict) -> list:
    dump = crio["dump"]
    if not crio["running"]:
        return crio_rows(params, node, dump, toolkit_installed)
    run = isolation = None
    if (
        params["crio_test_image"]
        and crio["crictl"]
        and crio["image"]
        and params["runtime_name"] in (crio["live"] or {}).get("runtimes", [])
    ):
        run = _crictl_run(params, host, crio, "run", params["runtime_name"], ["true"])
        if truthy(node.get("has_gpu")):
            env = [("NVIDIA_VISIBLE_DEVICES", "all")]
            isolation = _crictl_run(
                params, host, crio, "count", params["runtime_name"], ["sh", "-c", COUNT_DEVICES], env
            )
    return crio_rows(params, node, dump, toolkit_installed, crio, run, isolation)
