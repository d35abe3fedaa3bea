# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's fabric family (issue 39): the rows "IMEX" and "NVLink fabric".

"IMEX": the state of the host's nvidia-imex.service against the node's choice (nvidia_driver_imex, the module's
option imex). host: the unit is loaded, enabled and active; dra: it is masked and not running, because NVIDIA's DRA
driver runs IMEX in its ComputeDomain daemons and wants the host's unit disabled and masked (GPU Operator, "NVIDIA DRA
Driver for GPUs" prerequisites; NVIDIA/cloud-native-docs#453); none: the row is skipped.

"NVLink fabric": each GPU's fabric registration as nvidia-smi reports it,
`nvidia-smi --query-gpu=index,fabric.state,fabric.status --format=csv,noheader` (the query the GPU driver container
uses to see whether the fabric is up, NVIDIA/gpu-driver-container#909; the fields are the Fabric section of
`nvidia-smi -q`). A GPU of an NVLink fabric goes "Not Started" -> "In Progress" -> "Completed" and is usable when
the state is "Completed" with status "Success" (NVIDIA/NVSentinel#1382, health-monitors/system-services-monitor
fabric_state_check.py). A GPU on no fabric answers "N/A" (or "Not Supported"). Until the fabric is up CUDA fails with
error 802 while nvidia-smi looks healthy (NVIDIA/gpu-operator#2781).

The node-side module gpu_validate_checks imports this file as module_utils.gpu_validate.fabric.
Stdlib only, Python 3.8+ (the node's python3).
"""

from __future__ import annotations

from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import Node, table_row

IMEX = "IMEX"
FABRIC = "NVLink fabric"
IMEX_UNIT = "nvidia-imex.service"
UNIT_PROPERTIES = ["systemctl", "show", "--property=LoadState,UnitFileState,ActiveState", IMEX_UNIT]
SMI_QUERY = ["--query-gpu=index,fabric.state,fabric.status", "--format=csv,noheader"]
NOT_ON_A_FABRIC = ("n/a", "not supported", "[n/a]", "[not supported]")
IMEX_FIX = "Run site.yml --tags driver (roles/nvidia_driver, nvidia_driver_imex)"
FABRIC_FIX = (
    "Check nvidia-fabricmanager (systemctl status nvidia-fabricmanager; on NVLink5 also nvlsm with ib_umad and "
    "mlx5_ib loaded, nvidia_driver_nvlsm) or, on a multi-node NVLink rack, the NVLink switch trays; then run "
    "site.yml --tags driver"
)


def unit_properties(text: str) -> dict:
    """`systemctl show --property=...` output (KEY=value lines) as a dict."""
    found = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            found[key.strip()] = value.strip()
    return found


def imex_row(choice: str, properties: dict) -> dict:
    """The IMEX row from the choice (host or dra) and the unit's LoadState, UnitFileState and ActiveState."""
    load = properties.get("LoadState", "")
    file_state = properties.get("UnitFileState", "")
    active = properties.get("ActiveState", "")
    seen = f"{IMEX_UNIT}: {load or 'unknown'}, {file_state or 'no unit file'}, {active or 'unknown'}"
    if choice == "dra":
        if load == "masked" and active not in ("active", "activating", "reloading"):
            return table_row(IMEX, "ok", f"masked for the DRA driver's ComputeDomains ({seen})")
        return table_row(
            IMEX,
            "fail",
            f"nvidia_driver_imex is dra, so NVIDIA's DRA driver runs IMEX and the host's unit must be stopped and "
            f"masked, but {seen}",
            IMEX_FIX,
        )
    if load in ("not-found", ""):
        return table_row(IMEX, "fail", f"nvidia_driver_imex is host, but {IMEX_UNIT} is not installed", IMEX_FIX)
    problems = []
    if load == "masked":
        problems.append("masked")
    elif file_state not in ("enabled", "enabled-runtime", "static"):
        problems.append(f"not enabled ({file_state or 'unknown'})")
    if active != "active":
        problems.append(f"not running ({active or 'unknown'}; journalctl -u nvidia-imex says why)")
    if problems:
        return table_row(
            IMEX, "fail", f"nvidia_driver_imex is host, but {IMEX_UNIT} is " + ", ".join(problems), IMEX_FIX
        )
    return table_row(IMEX, "ok", f"run by the host ({seen})")


def fabric_gpus(text: str) -> list:
    """nvidia-smi's answer to SMI_QUERY: [{index, state, status}] per GPU."""
    gpus = []
    for line in (text or "").splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) >= 3 and fields[0].isdigit():
            gpus.append({"index": int(fields[0]), "state": fields[1], "status": fields[2]})
    return gpus


def fabric_row(gpus: list) -> dict:
    """The NVLink fabric row from each GPU's fabric state and status."""
    if not gpus:
        return table_row(FABRIC, "fail", "nvidia-smi reports no GPU", FABRIC_FIX)
    on_fabric = [gpu for gpu in gpus if gpu["state"].lower() not in NOT_ON_A_FABRIC]
    if not on_fabric:
        return table_row(FABRIC, "skipped", f"none of the {len(gpus)} GPU(s) is on an NVLink fabric (fabric.state N/A)")
    problems = [
        f"GPU {gpu['index']}: {gpu['state']}, {gpu['status']}"
        for gpu in on_fabric
        if gpu["state"] != "Completed" or gpu["status"] != "Success"
    ]
    if problems:
        return table_row(
            FABRIC,
            "fail",
            "the fabric is not up, so CUDA fails with error 802 (system not yet initialized) while nvidia-smi looks "
            "fine: " + "; ".join(problems),
            FABRIC_FIX,
        )
    return table_row(FABRIC, "ok", f"{len(on_fabric)} GPU(s) registered: Completed, Success")


def check_fabric(params: dict, node: dict, host: Node) -> list:
    """The IMEX and NVLink fabric rows: both skipped without a GPU."""
    if not node.get("has_gpu") or not node.get("nvidia_smi"):
        return [table_row(IMEX, "skipped", "no GPU"), table_row(FABRIC, "skipped", "no GPU")]
    rows = []
    choice = params.get("imex") or "none"
    if choice == "none":
        rows.append(table_row(IMEX, "skipped", "not asked for (nvidia_driver_imex is none)"))
    else:
        rc, out, err = host.run(UNIT_PROPERTIES)
        if rc != 0:
            rows.append(table_row(IMEX, "fail", f"systemctl show {IMEX_UNIT} failed: {(err or out).strip()}", IMEX_FIX))
        else:
            rows.append(imex_row(choice, unit_properties(out)))
    rc, out, err = host.run([node["nvidia_smi"], *SMI_QUERY])
    if rc != 0:
        message = (err or out).strip()
        if "not a valid field" in message:
            rows.append(table_row(FABRIC, "skipped", f"this driver's nvidia-smi has no fabric.state ({message})"))
        else:
            rows.append(table_row(FABRIC, "fail", f"nvidia-smi failed: {message}", FABRIC_FIX))
    else:
        rows.append(fabric_row(fabric_gpus(out)))
    return rows
