# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's health family (issue 49): is each GPU fit to run work, and are its declared settings in effect?

Rows (each skipped without a GPU; "GPU health: ..." rows are the ones the fleet report counts as reasons to drain):

- "GPU health: Xid events": the driver's Xid lines since boot in the kernel log (``journalctl -k -b 0``, else
  ``dmesg``), in the driver's form ``NVRM: Xid (PCI:0000:10:1c): 63, pid=..., ...`` (with `` GPU-I:<n>`` after the
  address on a MIG GPU; NVIDIA, "A100 GPU memory error management", User Visible Statistics, Table 3). Judged by
  NVIDIA's Xid catalogue (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, its "Resolution
  Bucket (Immediate Action)"): the Xids in ``xid_fail`` (default 48 double-bit ECC, 64 row remapping failed, 79
  fallen off the bus, 94/95 contained/uncontained ECC, 119/120 GSP timeout/error, 154 recovery action changed) fail the
  node (reset, drain or replace); any other Xid warns.
- "GPU health: row remapping": ``--query-remapped-rows`` fields ``remapped_rows.pending`` (a remap waits for a GPU
  reset) and ``remapped_rows.failure`` (the bank has no spare row left: NVIDIA's RMA criteria), NVML
  ``nvmlDeviceGetRemappedRows`` (corrected, uncorrected, isPending, failureOccurred); on GPUs before Ampere
  ``retired_pages.pending`` (dynamic page retirement waits for a reset or a driver reload;
  https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/row-remapping.html and ../dynamic-page-retirement).
- "GPU health: ECC errors": ``ecc.errors.uncorrected.volatile.total`` (uncorrectable errors since the driver loaded).
- "GPU health: PCIe link": ``pcie.link.width.current`` below ``pcie.link.width.max`` warns (a degraded slot, riser or
  retimer); ``pcie.link.gen.current`` below ``pcie.link.gen.max`` (the most this GPU and system reach) warns only
  while the GPU is not idle (``clocks_event_reasons.gpu_idle``): an idle GPU lowers its link generation to save power.
- "GPU health: GPUs on PCI": the GPUs the facts read from sysfs PCI (vendor 0x10de) that nvidia-smi does not list
  (``pci.bus_id``) fail: the driver lost them or never bound them.
- "GPU health: clock slowdown": ``clocks_event_reasons.hw_slowdown``, ``hw_thermal_slowdown``,
  ``hw_power_brake_slowdown`` and ``sw_thermal_slowdown`` Active warn (NVML nvmlClocksEventReasons: hardware slowdown
  halves the clocks or more, on temperature, an external power brake or a power draw too high).
- "GPU health: NVLink": ``nvidia-smi nvlink -s`` (per GPU, ``Link <n>: <speed>`` or ``<inactive>``): an inactive
  link on a GPU that has NVLinks fails.
- "GPU settings": the settings the gpu_settings role declared (its record, ``settings_record``) against what the driver
  reports now (plugins/module_utils/nvidia/settings.py compares them, the one comparison the role's --check uses too).
- "GPU health: DCGM diagnostics" (only with ``dcgm_diag``): ``dcgmi diag -r 1`` (level 1, quick deployment checks;
  https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-diag.html) exits 0.

The node-side module gpu_validate_checks imports this file as module_utils.gpu_validate.health.
Stdlib only, Python 3.8+ (the node's python3).
"""

from __future__ import annotations

import json
import re

from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import (
    Node,
    table_row,
    truncate,
    truthy,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.logic import HEALTH_PREFIX
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.settings import compare_record
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.smi import (
    active,
    available,
    bus_id,
    invalid_field,
    number,
    parse_query,
    query_argv,
    yes,
)

XID = HEALTH_PREFIX + "Xid events"
REMAP = HEALTH_PREFIX + "row remapping"
ECC = HEALTH_PREFIX + "ECC errors"
PCIE = HEALTH_PREFIX + "PCIe link"
MISSING = HEALTH_PREFIX + "GPUs on PCI"
SLOWDOWN = HEALTH_PREFIX + "clock slowdown"
NVLINK = HEALTH_PREFIX + "NVLink"
SETTINGS = "GPU settings"
DCGM = HEALTH_PREFIX + "DCGM diagnostics"
HEALTH_ROWS = (XID, REMAP, ECC, PCIE, MISSING, SLOWDOWN, NVLINK, SETTINGS, DCGM)

# Xids whose immediate action in NVIDIA's catalogue is a GPU reset, a node reboot/drain or a replacement (the
# module's default of xid_fail; the role's gpu_validate_xid_fail).
XID_FAIL = (48, 64, 79, 94, 95, 119, 120, 154)

HEALTH_FIELDS = (
    "index",
    "pci.bus_id",
    "ecc.errors.uncorrected.volatile.total",
    "retired_pages.pending",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "clocks_event_reasons.gpu_idle",
    "clocks_event_reasons.hw_slowdown",
    "clocks_event_reasons.hw_thermal_slowdown",
    "clocks_event_reasons.hw_power_brake_slowdown",
    "clocks_event_reasons.sw_thermal_slowdown",
)
REMAP_FIELDS = ("gpu_bus_id", "remapped_rows.pending", "remapped_rows.failure")
SLOWDOWN_REASONS = (
    ("clocks_event_reasons.hw_slowdown", "HW slowdown"),
    ("clocks_event_reasons.hw_thermal_slowdown", "HW thermal slowdown"),
    ("clocks_event_reasons.hw_power_brake_slowdown", "HW power brake slowdown"),
    ("clocks_event_reasons.sw_thermal_slowdown", "SW thermal slowdown"),
)
KERNEL_LOG_COMMANDS = (
    ["journalctl", "--dmesg", "--boot=0", "--output=cat", "--no-pager", "--quiet"],
    ["dmesg"],
)
_XID_LINE = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)(?:\s+[^)]*)?\): (\d+),\s*(.*)$")
_NVLINK_GPU = re.compile(r"^GPU (\d+):")
_NVLINK_LINK = re.compile(r"^\s*Link (\d+):\s*(.*?)\s*$")

DRAIN_FIX = "Drain the node, reset the GPU (nvidia-smi -r -i <GPU>) or reboot; replace it if it fails again"
RESET_FIX = "Drain the node and reset the GPU (nvidia-smi -r -i <GPU>) or reboot it, then run the doctor again"


def xid_events(text: str) -> list:
    """[{gpu, xid, message}] of each NVRM Xid line of a kernel log, in order."""
    events = []
    for line in (text or "").splitlines():
        match = _XID_LINE.search(line)
        if match:
            events.append(
                {"gpu": match.group(1).lower(), "xid": int(match.group(2)), "message": match.group(3).strip()}
            )
    return events


def xid_row(events: list, fail_xids, source: str) -> dict:
    if not events:
        return table_row(XID, "ok", f"no Xid since boot ({source})")
    failing = sorted({(e["gpu"], e["xid"]) for e in events if e["xid"] in fail_xids})
    others = sorted({(e["gpu"], e["xid"]) for e in events if e["xid"] not in fail_xids})

    def said(pairs):
        return ", ".join(f"Xid {xid} on {gpu}" for gpu, xid in pairs)

    if failing:
        first = next(e for e in events if e["xid"] in fail_xids)
        return table_row(
            XID,
            "fail",
            f"{said(failing)} since boot: the GPU needs a reset, a drain or a replacement (NVIDIA's Xid catalogue); "
            f"first: {truncate(first['message'], 100)}" + (f"; also {said(others)}" if others else ""),
            DRAIN_FIX,
        )
    return table_row(
        XID,
        "warn",
        f"{said(others)} since boot ({len(events)} line(s)): an application error or a recovered event",
        "Look up each Xid in NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors); restart the application",
    )


def remap_row(remapped: list | None, gpus: list) -> dict:
    problems, pending = [], []
    for row in remapped or []:
        if yes(row.get("remapped_rows.failure")):
            problems.append(f"{bus_id(row['gpu_bus_id'])}: row remapping failed (no spare row left)")
        elif yes(row.get("remapped_rows.pending")):
            pending.append(f"{bus_id(row['gpu_bus_id'])}: a row remap is pending")
    for gpu in gpus:
        if yes(gpu.get("retired_pages.pending")):
            pending.append(f"{bus_id(gpu['pci.bus_id'])}: a retired page is pending")
    if problems:
        return table_row(
            REMAP, "fail", "; ".join(problems + pending), "Drain the node and replace the GPU (NVIDIA's RMA policy)"
        )
    if pending:
        return table_row(REMAP, "fail", "; ".join(pending) + ": it takes effect at the next GPU reset", RESET_FIX)
    checked = "remapped rows" if remapped else "retired pages"
    return table_row(REMAP, "ok", f"{len(gpus)} GPU(s): no pending or failed {checked}")


def ecc_row(gpus: list) -> dict:
    found = []
    for gpu in gpus:
        count = number(gpu.get("ecc.errors.uncorrected.volatile.total"))
        if count:
            found.append(f"{bus_id(gpu['pci.bus_id'])}: {int(count)}")
    if found:
        return table_row(
            ECC, "fail", "volatile uncorrectable ECC errors since the driver loaded: " + ", ".join(found), RESET_FIX
        )
    supported = sum(1 for gpu in gpus if available(gpu.get("ecc.errors.uncorrected.volatile.total")))
    return table_row(ECC, "ok", f"no volatile uncorrectable ECC error ({supported} of {len(gpus)} GPU(s) report ECC)")


def pcie_row(gpus: list) -> dict:
    found = []
    for gpu in gpus:
        where = bus_id(gpu["pci.bus_id"])
        width, width_max = number(gpu.get("pcie.link.width.current")), number(gpu.get("pcie.link.width.max"))
        gen, gen_max = number(gpu.get("pcie.link.gen.current")), number(gpu.get("pcie.link.gen.max"))
        if width and width_max and width < width_max:
            found.append(f"{where}: x{int(width)} of x{int(width_max)}")
        if gen and gen_max and gen < gen_max and not active(gpu.get("clocks_event_reasons.gpu_idle")):
            found.append(f"{where}: gen {int(gen)} of {int(gen_max)} while busy")
    if found:
        return table_row(
            PCIE,
            "warn",
            "PCIe link below its maximum: " + "; ".join(found),
            "Reseat the GPU or its riser and check the slot's BIOS settings; lspci -vv shows LnkSta against LnkCap",
        )
    return table_row(PCIE, "ok", f"{len(gpus)} GPU(s) at their maximum width (an idle GPU may lower its generation)")


def missing_row(node: dict, gpus: list) -> dict:
    on_pci = [bus_id(g.get("pci_address")) for g in node.get("gpus") or [] if g.get("pci_address")]
    seen = {bus_id(g.get("pci.bus_id")) for g in gpus}
    missing = [address for address in on_pci if address not in seen]
    if missing:
        return table_row(
            MISSING,
            "fail",
            f"{len(missing)} of {len(on_pci)} GPU(s) on PCI not seen by the driver: {', '.join(missing)}",
            DRAIN_FIX + " (dmesg | grep -i -e xid -e NVRM says why)",
        )
    return table_row(MISSING, "ok", f"the driver sees all {len(on_pci) or len(gpus)} GPU(s) on PCI")


def slowdown_row(gpus: list) -> dict:
    found = []
    for gpu in gpus:
        reasons = [name for field, name in SLOWDOWN_REASONS if active(gpu.get(field))]
        if reasons:
            found.append(f"{bus_id(gpu['pci.bus_id'])}: {', '.join(reasons)}")
    if found:
        return table_row(
            SLOWDOWN,
            "warn",
            "clocks slowed down by hardware or temperature: " + "; ".join(found),
            "Check cooling, fans and power supply (nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER)",
        )
    return table_row(SLOWDOWN, "ok", f"{len(gpus)} GPU(s): no hardware or thermal slowdown")


def nvlink_links(text: str) -> dict:
    """`nvidia-smi nvlink -s` as {gpu index: {link: state text}}."""
    links, gpu = {}, None
    for line in (text or "").splitlines():
        head = _NVLINK_GPU.match(line)
        if head:
            gpu = int(head.group(1))
            links[gpu] = {}
            continue
        link = _NVLINK_LINK.match(line)
        if link and gpu is not None:
            links[gpu][int(link.group(1))] = link.group(2)
    return links


def nvlink_row(links: dict) -> dict:
    with_links = {gpu: states for gpu, states in links.items() if states}
    if not with_links:
        return table_row(NVLINK, "skipped", "no GPU with NVLink")
    down = [
        f"GPU {gpu} link {link}"
        for gpu, states in sorted(with_links.items())
        for link, state in sorted(states.items())
        if "inactive" in state.lower() or not re.search(r"\d", state)
    ]
    total = sum(len(states) for states in with_links.values())
    if down:
        return table_row(
            NVLINK,
            "fail",
            f"{len(down)} of {total} NVLink(s) down: " + ", ".join(down),
            "Drain the node; check nvidia-fabricmanager and the NVLink error counters (nvidia-smi nvlink -e); "
            "reset or reboot",
        )
    return table_row(NVLINK, "ok", f"{total} NVLink(s) up on {len(with_links)} GPU(s)")


def settings_row(record_text: str | None, gpus_now: list, processes=None) -> dict:
    """The declared settings (the gpu_settings role's record, JSON) against the driver's values now."""
    if record_text is None:
        return table_row(SETTINGS, "skipped", "no GPU settings declared (roles/gpu_settings)")
    try:
        record = json.loads(record_text)
    except ValueError as exc:
        return table_row(
            SETTINGS, "fail", f"the settings record is not JSON: {exc}", "Run site.yml --tags gpu_settings"
        )
    differences, pending = compare_record(record, gpus_now)
    if differences:
        return table_row(
            SETTINGS,
            "fail",
            "declared but not in effect: " + "; ".join(differences),
            "Run site.yml --tags gpu_settings (a reset-bound change goes through the rollout: playbooks/, drained)",
        )
    if pending:
        return table_row(SETTINGS, "warn", "pending until a GPU reset or reboot: " + "; ".join(pending), RESET_FIX)
    return table_row(SETTINGS, "ok", f"{len(record.get('gpus') or [])} GPU(s) as declared")


def dcgm_row(result) -> dict:
    if result is None:
        return table_row(DCGM, "skipped", "not asked for (gpu_validate_dcgm_diag is false)")
    rc, out, err = result
    if rc == 2 and "No such file" in err:
        return table_row(
            DCGM, "warn", "dcgmi is not installed", "Install NVIDIA DCGM (datacenter-gpu-manager) or turn the row off"
        )
    if rc != 0:
        return table_row(
            DCGM, "fail", f"dcgmi diag -r 1 exit code {rc}: " + truncate(f"{out} {err}".strip(), 200), DRAIN_FIX
        )
    return table_row(DCGM, "ok", "dcgmi diag -r 1 passed")


def _kernel_log(host: Node) -> tuple:
    """(text, source) of the kernel log since boot; (None, why) where none can be read."""
    problems = []
    for argv in KERNEL_LOG_COMMANDS:
        rc, out, err = host.run(argv)
        if rc == 0:
            return out, " ".join(argv[:2]) if argv[0] == "journalctl" else argv[0]
        problems.append(f"{argv[0]}: {truncate((err or out).strip(), 80)}")
    return None, "; ".join(problems)


def check_health(params: dict, node: dict, host: Node) -> list:
    names = HEALTH_ROWS if params.get("dcgm_diag") else HEALTH_ROWS[:-1]
    smi = node.get("nvidia_smi")
    if not truthy(node.get("has_gpu")) or not smi:
        why = "no GPU" if not truthy(node.get("has_gpu")) else "no nvidia-smi (the driver is not installed)"
        return [table_row(name, "skipped", why) for name in names]
    rows = []
    text, source = _kernel_log(host)
    if text is None:
        rows.append(table_row(XID, "warn", f"cannot read the kernel log: {source}", "Run the doctor as root"))
    else:
        rows.append(xid_row(xid_events(text), set(params.get("xid_fail") or XID_FAIL), source))
    rc, out, err = host.run(query_argv(smi, HEALTH_FIELDS))
    if rc != 0:
        message = truncate((err or out).strip(), 160)
        fix = "Upgrade the driver (its nvidia-smi lacks a field)" if invalid_field(err or out) else DRAIN_FIX
        rows += [
            table_row(name, "fail", f"nvidia-smi failed: {message}", fix)
            for name in (REMAP, ECC, PCIE, MISSING, SLOWDOWN)
        ]
        gpus = []
    else:
        gpus = parse_query(out, HEALTH_FIELDS)
        rc, remap_out, _err = host.run(query_argv(smi, REMAP_FIELDS, kind="remapped-rows"))
        remapped = (
            [r for r in parse_query(remap_out, REMAP_FIELDS) if available(r.get("remapped_rows.pending"))]
            if rc == 0
            else []
        )
        rows += [remap_row(remapped, gpus), ecc_row(gpus), pcie_row(gpus), missing_row(node, gpus), slowdown_row(gpus)]
    rc, out, err = host.run([smi, "nvlink", "-s"])
    rows.append(
        nvlink_row(nvlink_links(out))
        if rc == 0
        else table_row(NVLINK, "skipped", "nvidia-smi nvlink -s: " + truncate((err or out).strip(), 80))
    )
    record = host.read(params["settings_record"]) if params.get("settings_record") else None
    if record is None:
        rows.append(settings_row(None, []))
    else:
        from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.settings import READ_FIELDS

        rc, out, err = host.run(query_argv(smi, READ_FIELDS))
        rows.append(
            settings_row(record, parse_query(out, READ_FIELDS))
            if rc == 0
            else table_row(SETTINGS, "fail", f"nvidia-smi failed: {truncate((err or out).strip(), 120)}", DRAIN_FIX)
        )
    if params.get("dcgm_diag"):
        rows.append(
            dcgm_row(host.run(["dcgmi", "diag", "-r", "1"], timeout=max(int(params.get("command_timeout") or 60), 300)))
        )
    return rows
