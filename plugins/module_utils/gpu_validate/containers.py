# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""What the runtime families (docker, containerd, CRI-O) share: a test container under timeout and its row, the
device count a counting container prints, the "<runtime>: default runtime" row, the runtime family's row (a node
without a container runtime) and the isolation family's "device plugin vs node" row.

The node-side module gpu_validate_checks imports this file as module_utils.gpu_validate.containers.
Stdlib only, Python 3.8+ (the node's python3).
"""

from __future__ import annotations

import random
import re
import string

from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import Node, table_row, truncate
from ansible_collections.gpunode.provisioning.plugins.module_utils.kubernetes.gpu_pods import (
    doctor_row as gpu_pods_doctor_row,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.kubernetes.gpu_pods import toolkit_config_facts
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.runtime import describe, is_nvidia_entry

# What a test container runs to count the NVIDIA device nodes it can see.
COUNT_DEVICES = "ls /dev/nvidia* 2>/dev/null | wc -l"


NO_SH = "Read the error; the test image needs sh, ls and wc"


def container_run(params: dict, host: Node, argv: list) -> tuple:
    """A test container under `timeout <gpu_validate_container_timeout>` (rc 124 when it hangs)."""
    timeout = int(params["container_timeout"])
    return host.run(["timeout", str(timeout), *argv], timeout=timeout + 15)


def container_run_row(params: dict, check: str, run, ran: str, service: str, options: str) -> dict:
    """The row of a test container run through a runtime: ok, no answer in time (124 from timeout), or its error."""
    if run[0] == 0:
        return table_row(check, "ok", ran)
    if run[0] == 124:
        timeout = params["container_timeout"]
        return table_row(
            check, "fail", f"no answer within {timeout} s", f"Look for a hanging runtime hook: journalctl -u {service}"
        )
    return table_row(
        check,
        "fail",
        f"exit code {run[0]}: " + truncate(run[2].strip(), 200),
        f"Read the error; check {params['toolkit_config']} and {options}",
    )


def device_count(result) -> str | None:
    """The device count a test container printed; None when it did not run or printed something else."""
    if result is None or result[0] != 0:
        return None
    count = result[1].strip()
    return count if re.fullmatch(r"[0-9]+", count) else None


# NVIDIA's runtime treats a container with CAP_SYS_ADMIN in its bounding set as privileged and then
# honours NVIDIA_VISIBLE_DEVICES whatever its config says: FUSE pods (SYS_ADMIN) are exactly those.
# Through the runtime that pods without a RuntimeClass get, such a container must still see no GPU.
# What follows from NVIDIA's semantics (toolkit 1.20, internal/config/image/privileged.go: CAP_SYS_ADMIN in the
# bounding set is "privileged", and then NVIDIA_VISIBLE_DEVICES counts whatever config.toml says).
SYS_ADMIN_NOTE = (
    "; through RuntimeClass nvidia NVIDIA's runtime would count it as privileged and honour the variable whatever"
    " config.toml says, so SYS_ADMIN pods must use nvidia only when they request GPUs"
)


ENVVAR_FIX = "Set nvidia_container_toolkit_accept_envvar_when_unprivileged: false, run site.yml --tags toolkit"


def envvar_isolation_row(check: str, result, what: str = "container", fix: str = ENVVAR_FIX) -> dict:
    """The row of a counting container (docker, ctr) or pod (CRI-O) run with NVIDIA_VISIBLE_DEVICES=all and no GPU
    requested, once it could run: ok when it saw no /dev/nvidia* device, fail when it saw some or did not run.
    result: its (rc, out, err), None when it did not run."""
    count = device_count(result)
    if count is None:
        rc, _out, err = result if result is not None else ("", "", "")
        return table_row(check, "fail", f"the {what} did not run: exit code {rc} " + truncate(err.strip(), 200), NO_SH)
    if int(count) == 0:
        return table_row(check, "ok", "NVIDIA_VISIBLE_DEVICES=all, no GPU requested: no /dev/nvidia* device")
    detail = f"NVIDIA_VISIBLE_DEVICES=all, no GPU requested: {count} /dev/nvidia* devices visible"
    return table_row(check, "fail", detail, fix)


# The runtimes' *_sys_admin_row keep their own checks before this one (by design: what must be there before the
# container can run differs: docker nothing more, containerd its dump and ctr namespace, CRI-O crictl and its store).
def sys_admin_row(check: str, result, like: str, through: str, consequence: str, fix: str, **did_not_run) -> dict:
    """The row of the FUSE-like CAP_SYS_ADMIN container (or pod) through a runtime's default, once it could run:
    like: what ran; through: " through <the default runtime>" ("" for docker); consequence: what a GPU it sees
    means; did_not_run: what="pod" and no_run_fix where they differ from a container's."""
    count = device_count(result)
    if count is None:
        rc, _out, err = result if result is not None else ("", "", "")
        detail = f"the {did_not_run.get('what', 'container')} did not run{through}: exit code {rc} "
        return table_row(check, "fail", detail + truncate(err.strip(), 200), did_not_run.get("no_run_fix", NO_SH))
    if int(count) == 0:
        return table_row(check, "ok", f"{like}{through}: no /dev/nvidia* device{SYS_ADMIN_NOTE}")
    return table_row(check, "fail", f"{like}{through} sees {count} /dev/nvidia* devices: {consequence}", fix)


# The fix of a "<runtime>: default runtime" warn (nvidia the default, as asked) where the runtime's pods can also get
# GPUs by NVIDIA_VISIBLE_DEVICES (docker, containerd; CRI-O's row says less, its own text).
ALLOWED_DEFAULT_FIX = (
    "Intended (nvidia_container_toolkit_set_as_default): give GPU pods devices through CDI and keep"
    " NVIDIA_VISIBLE_DEVICES hardening on"
)


def new_run_id() -> str:
    """The name prefix of one doctor run's test containers and pods (gpu-validate-<12 random characters>)."""
    return "gpu-validate-" + "".join(random.choice(string.ascii_lowercase + string.digits) for _char in range(12))


def default_runtime_row(
    params: dict, runtime: str, default, said: str, allowed_fix: str, unnamed: str = "runc", binary=None
) -> dict:
    """The "<runtime>: default runtime" row: NVIDIA's runtime as the default, under any name (its binary, `binary`,
    is NVIDIA's: plugins/module_utils/nvidia/runtime.py; an entry named like the project's runtime whose binary is
    not known counts too), is a fail, or a warn when it was asked for. said: how the detail starts, "{default}"
    standing for the default entry and its binary ("default_runtime is {default}: every pod whose image sets");
    unnamed: what an empty default is shown as (runc, which containerd and CRI-O then use; docker's row shows what
    it said)."""
    name = params["runtime_name"]
    check = f"{runtime}: default runtime"
    if not default or not is_nvidia_entry(default, binary, name):
        return table_row(check, "ok", f"{default or unnamed} ({name} is not the default)")
    detail = f"{said.format(default=describe(default, binary))} NVIDIA_VISIBLE_DEVICES (all CUDA images do) can get"
    detail += " GPUs, also pods that request none"
    if params["nvidia_default_allowed"]:
        return table_row(check, "warn", detail, allowed_fix)
    return table_row(
        check, "fail", detail, "Set nvidia_container_toolkit_set_as_default: false and run site.yml --tags runtime"
    )


def check_runtime(params: dict, node: dict, host: Node) -> list:
    """The runtime family: a "container runtime" row that warns when the doctor has no container runtime to check
    (params["runtimes"] is empty); no row otherwise (the runtimes' own families check them)."""
    if params["runtimes"]:
        return []
    return [
        table_row(
            "container runtime",
            "warn",
            "none of docker, containerd and CRI-O is installed",
            "Install the cluster's container runtime, then run site.yml --tags runtime",
        )
    ]


def device_plugin_row(params: dict, node: dict) -> dict:
    """The "device plugin vs node" row (issue 25) from the gpu_node facts read when the doctor started: NVIDIA's
    device plugin and its strategy, the runtimes' defaults (of params["runtimes"]) and the toolkit config's keys."""
    defaults = node.get("runtime_defaults") or {}
    runtimes = {name: defaults[name] for name in params["runtimes"] if name in defaults}
    return gpu_pods_doctor_row(
        node.get("device_plugin") or {},
        runtimes,
        node.get("toolkit_config") or toolkit_config_facts("/", None),
        params["runtime_name"],
        len(node.get("gpu_workloads") or []),
    )
