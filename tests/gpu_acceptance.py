#!/usr/bin/env python3
"""GPU acceptance check: what CI cannot prove, on a machine with a REAL NVIDIA GPU and a loaded driver.

Run it as root from the project root, with the project's venv (ansible) and NVIDIA's toolkit binaries in
$GPUNODE_UPSTREAM_DIR/nvidia-container-toolkit (the upstream builds, default ../shared/upstream; or
NVIDIA_TOOLKIT_BINARIES=<dir>):

    sudo .venv/bin/python tests/gpu_acceptance.py            # exit 0: every step passed

It needs only python3 with ansible-core (a bare machine: `pip install ansible-core`), runc, busybox (busybox-static)
and nvidia-smi on PATH.

Steps (each prints PASS or FAIL with what it compared):
  1. gpu_node_facts on the real sysfs: its GPUs (PCI address and device ID) are those of /sys/bus/pci with vendor
     0x10de and a display/3D class, and the flavour nvidia_driver_flavour=auto picks for them (open or
     proprietary, plugins/filter/nvidia_driver.py) is printed with its reason.
  2. The doctor's GPU rows (gpu_validate_checks, family driver) against the real nvidia-smi: "NVIDIA driver" and
     "nvidia-smi" are ok, and the GPU count matches `nvidia-smi --query-gpu`.
  3. NVIDIA's `nvidia-ctk cdi generate` against the real driver, the spec checked: kind nvidia.com/gpu, one device
     per GPU by index and by UUID, an `all` device, each GPU's /dev/nvidiaN among its device nodes and present on
     the host, /dev/nvidiactl in the common edits.
  4. The doctor's "CDI spec" row (gpu_validate_checks, family cdi) on the generated spec: ok (its device nodes'
     major and minor numbers are those in /dev, it was generated for the loaded driver); control: a copy with one
     device node's minor number changed, in a directory of its own, fails the row (so the check above can fail).
  5. Containers through NVIDIA's real nvidia-container-runtime (mode cdi, the generated spec, the toolkit role's
     hardened settings) and runc, root filesystem busybox-static's busybox:
     - one with a CDI GPU request (annotation cdi.k8s.io/...=nvidia.com/gpu=0) sees /dev/nvidia0 and, on a
       machine with several GPUs, not /dev/nvidia1;
     - two that request none, one with NVIDIA_VISIBLE_DEVICES=all, one with a volume at
       /var/run/nvidia-container-devices/all, see no /dev/nvidia* and the runtime injects nothing;
     - control: the envvar one with accept-nvidia-visible-devices-envvar-when-unprivileged = true is injected,
       so the check above can fail.
  6. The doctor's "MIG" row (family mig) where the node's MIG manager selects a layout (roles/nvidia_mig:
     MIG_PARTED_SELECTED_CONFIG of nvidia-mig-manager.service): ok, the GPUs are in it as nvidia-smi reports them;
     where no layout is asked for the step says so and passes. Control on any GPU machine: a layout that wants GPU 0
     in the other MIG mode fails the row on the real nvidia-smi output (so the check above can fail).
  7. The doctor's GPU health rows (family health, issue 49): every row is there with a status; each row's status and
     detail are printed (a sick GPU fails its row: the step reports it, it is not the script's failure).
  8. GPU settings (modules/gpu_settings.py, its files in the temporary directory): a power limit on GPU 0 below the
     current one (within power.min_limit) is set and read back with nvidia-smi, then the original limit restored and
     read back; persistence mode through nvidia-persistenced is set (the unit's enabled/active state put back after);
     a change of application clocks in check mode lists the change and leaves the GPU's clocks as they were.
  GPU_ACCEPTANCE_KEEP=<dir> keeps the generated spec and the runtime's configs and debug logs there.

Without an NVIDIA GPU and loaded driver it refuses (exit 2) and says what is missing; it never runs in CI.
Nothing on the machine is changed outside a temporary directory (the container is removed).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.doctor_params import shared_doctor_params
from tests.upstream import upstream_dir

# the upstream builds' directory: GPUNODE_UPSTREAM_DIR, as scripts/lib.sh resolves it (default ../shared/upstream)
UPSTREAM_DIR = upstream_dir()
BINARIES = Path(os.environ.get("NVIDIA_TOOLKIT_BINARIES", UPSTREAM_DIR / "nvidia-container-toolkit"))
# where the PCI functions are (tests point it at an empty directory to see the refusal on any machine)
PCI_ROOT = os.environ.get("GPU_ACCEPTANCE_PCI_ROOT", "/sys/bus/pci/devices")
GPU_CLASSES = ("0x0300", "0x0302")  # VGA compatible / 3D controller, as gpu_node_facts counts GPUs
REFUSED = 2


# ---------------------------------------------------------------------------------------------- pure parts


def sysfs_gpus(pci_root: str = PCI_ROOT) -> list[dict]:
    """NVIDIA GPUs on PCI, read straight from sysfs: [{pci_address, device_id}] sorted by address."""
    found = []
    for entry in sorted(Path(pci_root).glob("*")):
        try:
            vendor = (entry / "vendor").read_text().strip()
            pci_class = (entry / "class").read_text().strip()
            device = (entry / "device").read_text().strip()
        except OSError:
            continue
        if vendor == "0x10de" and pci_class[:6] in GPU_CLASSES and not (entry / "physfn").exists():
            found.append({"pci_address": entry.name, "device_id": device})
    return found


def smi_gpus(text: str) -> list[dict]:
    """`nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv,noheader` -> [{index, uuid, pci_bus_id}]."""
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 3 and fields[0].isdigit():
            gpus.append({"index": fields[0], "uuid": fields[1], "pci_bus_id": fields[2]})
    return gpus


def check_cdi_spec(spec: dict, gpus: list[dict], exists=os.path.exists) -> list[str]:
    """Problems of a CDI spec from `nvidia-ctk cdi generate` for these GPUs (smi_gpus); [] when it is right."""
    problems = []
    if not isinstance(spec, dict):
        return ["the spec is not a mapping"]
    if spec.get("kind") != "nvidia.com/gpu":
        problems.append(f"kind is {spec.get('kind')!r}, not 'nvidia.com/gpu'")
    if not str(spec.get("cdiVersion", "")):
        problems.append("no cdiVersion")
    devices = {str(d.get("name")): d for d in spec.get("devices") or [] if isinstance(d, dict)}
    if "all" not in devices:
        problems.append("no device 'all'")
    for gpu in gpus:
        node = f"/dev/nvidia{gpu['index']}"
        for name in (gpu["index"], gpu["uuid"]):
            device = devices.get(name)
            if device is None:
                problems.append(f"no device {name!r} for GPU {gpu['index']} ({gpu['pci_bus_id']})")
                continue
            paths = [n.get("path") for n in (device.get("containerEdits") or {}).get("deviceNodes") or []]
            if node not in paths:
                problems.append(f"device {name!r} does not carry {node} (it has {paths})")
        if not exists(node):
            problems.append(f"{node} is not on the host")
    common = [n.get("path") for n in (spec.get("containerEdits") or {}).get("deviceNodes") or []]
    if "/dev/nvidiactl" not in common:
        problems.append(f"the common containerEdits lack /dev/nvidiactl (they have {common})")
    return problems


def refusal(has_gpu: bool, driver_loaded: bool, tools: dict[str, bool]) -> str:
    """'' when the machine can run the acceptance check, else what is missing (the check refuses)."""
    missing = []
    if not has_gpu:
        missing.append("no NVIDIA GPU on PCI (vendor 0x10de, display or 3D class)")
    if not driver_loaded:
        missing.append("the NVIDIA driver is not loaded (/proc/driver/nvidia/version is missing)")
    missing += [f"{name} is missing" for name, found in tools.items() if not found]
    return "; ".join(missing)


# ---------------------------------------------------------------------------------------------- the steps


def _ansible(module: str, args: dict) -> dict:
    """Run one of the project's modules on this machine through ansible (the project's ansible.cfg).

    ansible-core alone does: the minimal callback prints `localhost | SUCCESS => {result as JSON}`."""
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    argv = [shutil.which("ansible") or str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local"]
    argv += ["-i", "localhost,", "-e", f"ansible_python_interpreter={sys.executable}"]
    argv += ["-m", module] + (["-a", json.dumps(args)] if args else [])
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    try:
        result = json.loads(proc.stdout.split(" => ", 1)[1])
    except (ValueError, IndexError):
        raise RuntimeError(f"ansible -m {module} failed: {proc.stdout[-2000:]} {proc.stderr[-2000:]}") from None
    if result.get("failed"):
        raise RuntimeError(f"{module} failed: {result.get('msg')}")
    return result


def _flavour(gpus: list[dict]) -> dict:
    sys.path.insert(0, str(ROOT / "plugins" / "filter"))
    from nvidia_driver import nvidia_kernel_module

    return nvidia_kernel_module(gpus, "auto", "", None, os.uname().machine)


def step_facts(report) -> dict:
    facts = _ansible("gpu_node_facts", {})["ansible_facts"]["gpu_node"]
    mine = sysfs_gpus()
    theirs = sorted(
        ({"pci_address": g.get("pci_address"), "device_id": g.get("device_id")} for g in facts["gpus"]),
        key=lambda g: str(g["pci_address"]),
    )
    report("gpu_node_facts: GPUs from sysfs", theirs == mine, f"facts {theirs}, sysfs {mine}")
    choice = _flavour(facts["gpus"])
    report(
        "gpu_node_facts: flavour auto picks",
        not choice["error"],
        f"{choice['flavour']} ({choice['reason'] or choice['error']}); driver loaded: {facts['driver']}",
    )
    return facts


def step_doctor(report, facts: dict, gpus: list[dict]) -> None:
    args = {"families": ["driver"], "node": facts, **shared_doctor_params()}
    rows = {r["check"]: r for r in _ansible("gpu_validate_checks", args)["checks"]}
    for name in ("NVIDIA driver", "nvidia-smi"):
        row = rows.get(name, {})
        report(
            f"doctor: {name}", row.get("status") == "ok", f"{row.get('status')}: {row.get('detail')} {row.get('fix')}"
        )
    report(
        "doctor: GPU count",
        int(facts.get("gpu_count") or 0) == len(gpus),
        f"facts {facts.get('gpu_count')}, nvidia-smi {len(gpus)}",
    )


def step_cdi(report, work: Path, gpus: list[dict]) -> Path:
    import yaml

    spec_dir = work / "cdi"
    spec_dir.mkdir()
    out = spec_dir / "nvidia.yaml"
    env = dict(os.environ, PATH=f"{BINARIES}:{os.environ.get('PATH', '')}")
    proc = subprocess.run(
        [
            str(BINARIES / "nvidia-ctk"),
            "cdi",
            "generate",
            f"--output={out}",
            f"--nvidia-cdi-hook-path={BINARIES / 'nvidia-cdi-hook'}",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    _keep(out)
    if proc.returncode != 0:
        report("nvidia-ctk cdi generate", False, proc.stderr[-1500:])
        return spec_dir
    problems = check_cdi_spec(yaml.safe_load(out.read_text()), gpus)
    report("nvidia-ctk cdi generate: spec checked", not problems, "; ".join(problems) or f"{out} ({len(gpus)} GPUs)")
    return spec_dir


def step_cdi_row(report, work: Path, spec_dir: Path, facts: dict) -> None:
    """The doctor's "CDI spec" row on the spec nvidia-ctk generated, and on a stale copy of it (the control)."""
    import yaml

    def row(directory: Path) -> dict:
        args = {
            "families": ["cdi"],
            "node": facts,
            "cdi_spec_dirs": [str(directory)],
            # only this directory: not the machine's docker or toolkit config
            "docker_daemon_json": str(work / "no-daemon.json"),
            "toolkit_config": str(work / "no-config.toml"),
            **shared_doctor_params(),
        }
        found = [r for r in _ansible("gpu_validate_checks", args)["checks"] if r["check"] == "CDI spec"]
        return found[0] if found else {}

    good = row(spec_dir)
    report(
        "doctor: CDI spec", good.get("status") == "ok", f"{good.get('status')}: {good.get('detail')} {good.get('fix')}"
    )
    specs = sorted(spec_dir.glob("*.yaml"))
    spec = yaml.safe_load(specs[0].read_text()) if specs else {}
    nodes = ((spec or {}).get("containerEdits") or {}).get("deviceNodes") or []
    if not nodes:
        report("doctor: CDI spec control", False, f"no device node in the common containerEdits of {specs}")
        return
    stale_dir = work / "cdi-stale"
    stale_dir.mkdir()
    nodes[0]["minor"] = int(nodes[0].get("minor") or 0) + 1
    (stale_dir / "stale.json").write_text(json.dumps(spec))
    stale = row(stale_dir)
    report(
        "doctor: CDI spec control (a stale minor number fails the row)",
        stale.get("status") == "fail" and nodes[0]["path"] in str(stale.get("detail")),
        f"{stale.get('status')}: {stale.get('detail')}",
    )


def step_mig(report, work: Path, facts: dict) -> None:
    """The doctor's "MIG" row on the layout the node's MIG manager selects, and a control layout that must fail."""
    import yaml

    def row(**args) -> dict:
        args = {"families": ["mig"], "node": facts, **shared_doctor_params(), **args}
        found = [r for r in _ansible("gpu_validate_checks", args)["checks"] if r["check"] == "MIG"]
        return found[0] if found else {}

    asked = row()
    detail = f"{asked.get('status')}: {asked.get('detail')} {asked.get('fix') or ''}".strip()
    if asked.get("status") == "skipped" and "no MIG layout asked for" in str(asked.get("detail")):
        report("doctor: MIG (no layout asked for on this node)", True, detail)
    else:
        report("doctor: MIG", asked.get("status") == "ok", detail)
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,mig.mode.current", "--format=csv,noheader"], capture_output=True, text=True
    )
    first = (smi.stdout.splitlines() or ["0, [N/A]"])[0].split(",")
    enabled = first[-1].strip().lower() == "enabled"
    control = work / "mig-control.yaml"
    control.write_text(
        yaml.safe_dump(
            {
                "version": "v1",
                "mig-configs": {
                    "acceptance-control": [
                        {"devices": [0], "mig-enabled": not enabled, "mig-devices": {}},
                    ]
                },
            },
            default_flow_style=False,
        )
    )
    wrong = row(mig_selected="acceptance-control", mig_config=str(control))
    report(
        "doctor: MIG control (GPU 0 wanted in the other MIG mode fails the row)",
        wrong.get("status") == "fail" and "GPU 0: MIG mode" in str(wrong.get("detail")),
        f"{wrong.get('status')}: {wrong.get('detail')}",
    )


def step_health(report, facts: dict) -> None:
    args = {"families": ["health"], "node": facts, **shared_doctor_params()}
    rows = [r for r in _ansible("gpu_validate_checks", args)["checks"]]
    health = [r for r in rows if r["check"].startswith("GPU health: ") or r["check"] == "GPU settings"]
    # Xid events, row remapping, ECC errors, PCIe link, GPUs on PCI, clock slowdown, NVLink, and GPU settings
    report("doctor: GPU health rows", len(health) >= 8, f"{len(health)} rows: {[r['check'] for r in health]}")
    for row in health:
        print(f"      {row['check']}: {row['status']}: {row['detail']}")


def _smi_value(field: str, index: str = "0") -> str:
    out = subprocess.run(
        ["nvidia-smi", "-i", index, f"--query-gpu={field}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.strip()


def settings_args(work: Path, settings: dict, systemctl: str = "true") -> dict:
    """gpu_settings' arguments with every file it writes in ``work`` (nothing on the machine outside it)."""
    return {
        "settings": settings,
        "has_gpu": True,
        "nvidia_smi": shutil.which("nvidia-smi") or "nvidia-smi",
        "unit_path": str(work / "gpu-settings.service"),
        "record_path": str(work / "gpu-settings.json"),
        "modprobe_path": str(work / "gpu-settings-modprobe.conf"),
        "systemctl": systemctl,
    }


def step_settings(report, work: Path) -> None:
    original = float(_smi_value("power.limit"))
    low = float(_smi_value("power.min_limit"))
    target = max(low, round(original * 0.9))
    try:
        _ansible("gpu_settings", settings_args(work, {"per_gpu": {"0": {"power_limit": f"{target:g}"}}}))
        now = float(_smi_value("power.limit"))
        report("settings: power limit set", abs(now - target) < 1, f"asked {target:g} W, nvidia-smi reads {now:g} W")
    finally:
        subprocess.run(["nvidia-smi", "-i", "0", "-pl", f"{original:g}"], capture_output=True, check=False)
    back = float(_smi_value("power.limit"))
    report("settings: power limit restored", abs(back - original) < 1, f"{back:g} W, was {original:g} W")
    unit = "nvidia-persistenced.service"
    enabled = subprocess.run(["systemctl", "is-enabled", unit], capture_output=True, text=True).stdout.strip()
    active = subprocess.run(["systemctl", "is-active", unit], capture_output=True, text=True).stdout.strip()
    try:
        _ansible("gpu_settings", settings_args(work / "persistence", {"persistence": True}, "systemctl"))
        mode = _smi_value("persistence_mode")
        report("settings: persistence through nvidia-persistenced", mode == "Enabled", f"persistence_mode {mode}")
    finally:
        if enabled not in ("enabled", "static"):
            subprocess.run(["systemctl", "disable", unit], capture_output=True, check=False)
        if active != "active":
            subprocess.run(["systemctl", "stop", unit], capture_output=True, check=False)
    before = (_smi_value("clocks.applications.memory"), _smi_value("clocks.applications.graphics"))
    clocks = f"{_smi_value('clocks.max.memory')},{_smi_value('clocks.max.graphics')}"
    result = check_mode_settings(work / "check", {"per_gpu": {"0": {"application_clocks": clocks}}})
    after = (_smi_value("clocks.applications.memory"), _smi_value("clocks.applications.graphics"))
    listed = [c for c in result.get("changes", []) if c["setting"] == "application clocks"]
    same = before == after and not (work / "check" / "gpu-settings.service").exists()
    report(
        "settings: --check of a clock change",
        same and (bool(listed) or before == tuple(clocks.split(","))),
        f"listed {listed}; clocks before {before}, after {after}",
    )


def check_mode_settings(work: Path, settings: dict) -> dict:
    """gpu_settings in check mode (ansible --check) with its files in ``work``."""
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.minimal", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    argv = [
        shutil.which("ansible") or str(Path(sys.executable).parent / "ansible"),
        "localhost",
        "-c",
        "local",
        "--check",
    ]
    argv += ["-i", "localhost,", "-e", f"ansible_python_interpreter={sys.executable}"]
    argv += ["-m", "gpu_settings", "-a", json.dumps(settings_args(work, settings))]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    try:
        return json.loads(proc.stdout.split(" => ", 1)[1])
    except (ValueError, IndexError):
        raise RuntimeError(
            f"ansible --check -m gpu_settings failed: {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
        ) from None


def _keep(path: Path) -> None:
    """Copy a file the check made to $GPU_ACCEPTANCE_KEEP (when set), to read after the run."""
    keep = os.environ.get("GPU_ACCEPTANCE_KEEP")
    if keep and path.exists():
        shutil.copy(path, Path(keep) / path.name)


def _container(
    work: Path, spec_dir: Path, name: str, script: str, annotations=None, env=None, mounts=None, accept_envvar=False
):
    """Run one container through NVIDIA's real runtime (mode cdi, the generated spec) and runc.

    The runtime's config is the hardened one the toolkit role writes (envvar and volume-mount doors shut,
    CDI annotations only with the prefix given) unless accept_envvar opens the envvar door (the control).
    The script prints OK as its last line when the container saw what it should.
    Returns (exit code of `create`, the container's output, the runtime's debug log)."""
    rootfs = work / "rootfs"
    if not rootfs.exists():
        (rootfs / "bin").mkdir(parents=True)
        shutil.copy(shutil.which("busybox"), rootfs / "bin" / "busybox")
        for tool in ("sh", "ls", "env", "grep"):
            (rootfs / "bin" / tool).symlink_to("busybox")
    bundle = work / name
    bundle.mkdir()
    subprocess.run(["runc", "spec", "--bundle", str(bundle)], check=True)
    spec = json.loads((bundle / "config.json").read_text())
    spec["process"]["terminal"] = False
    spec["process"]["args"] = ["sh", "-c", script]
    spec["process"]["env"] += [f"{k}={v}" for k, v in (env or {}).items()]
    # writable, as a pod's is: the CDI spec's update-ldcache hook writes the container's /etc/ld.so.cache
    spec["root"] = {"path": str(rootfs), "readonly": False}
    spec["mounts"] += mounts or []
    spec["annotations"] = annotations or {}
    (bundle / "config.json").write_text(json.dumps(spec))
    log = work / f"{name}.log"
    config = work / f"{name}.toml"
    config.write_text(
        f"accept-nvidia-visible-devices-envvar-when-unprivileged = {str(accept_envvar).lower()}\n"
        "accept-nvidia-visible-devices-as-volume-mounts = false\n"
        "[nvidia-container-runtime]\n"
        f'debug = "{log}"\nlog-level = "debug"\nmode = "cdi"\nruntimes = ["runc"]\n'
        "[nvidia-container-runtime.modes.cdi]\n"
        f'annotation-prefixes = ["cdi.k8s.io/"]\ndefault-kind = "nvidia.com/gpu"\nspec-dirs = ["{spec_dir}"]\n'
    )
    run_env = dict(os.environ, NVIDIA_CTK_CONFIG_FILE_PATH=str(config), PATH=f"{BINARIES}:{os.environ.get('PATH', '')}")
    cid = f"gpunode-acceptance-{os.getpid()}-{name}"
    output_file = work / f"{name}.out"
    # `create`, not `run`: the runtime edits the OCI spec on `create` only (as containerd, docker and CRI-O
    # call it) and passes every other command to runc unchanged
    try:
        with output_file.open("w") as output:
            proc = subprocess.run(
                [str(BINARIES / "nvidia-container-runtime"), "create", "--bundle", str(bundle), cid],
                env=run_env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                timeout=120,
            )
        if proc.returncode == 0:
            subprocess.run(["runc", "start", cid], capture_output=True, timeout=60)
            for _ in range(600):
                state = subprocess.run(["runc", "state", cid], capture_output=True, text=True)
                if state.returncode != 0 or json.loads(state.stdout).get("status") == "stopped":
                    break
                time.sleep(0.1)
    finally:
        subprocess.run(["runc", "delete", "--force", cid], capture_output=True)
    _keep(log)
    _keep(config)
    return proc.returncode, output_file.read_text().strip()[-800:], log.read_text() if log.exists() else ""


INJECTED = "Injecting devices using CDI"
# what a container without a GPU prints: no NVIDIA device node at all
SEES_NONE = "ls /dev/nvidia* 2>/dev/null || echo OK"


def step_container(report, work: Path, spec_dir: Path, gpus: list[dict]) -> None:
    """A CDI GPU request gets GPU 0 (and not GPU 1); containers that request none get no device by either
    door (NVIDIA_VISIBLE_DEVICES=all, a volume at /var/run/nvidia-container-devices/all); the control shows
    the envvar check can fail: with the envvar door opened the same container IS injected."""
    rc, out, log = _container(
        work,
        spec_dir,
        "cdi-request",
        "ls /dev/nvidia0 && ! ls /dev/nvidia1 2>/dev/null && echo OK",
        annotations={"cdi.k8s.io/gpunode-acceptance": "nvidia.com/gpu=0"},
    )
    report(
        "container with a CDI GPU request through NVIDIA's runtime",
        rc == 0 and out.endswith("OK") and f"{INJECTED}: [nvidia.com/gpu=0]" in log,
        f"exit {rc}: {out}",
    )
    env_all = {"NVIDIA_VISIBLE_DEVICES": "all"}
    rc, out, log = _container(work, spec_dir, "no-request-envvar", SEES_NONE, env=env_all)
    report(
        "no GPU for an unprivileged container with NVIDIA_VISIBLE_DEVICES=all",
        rc == 0 and out.endswith("OK") and INJECTED not in log,
        f"exit {rc}: {out}",
    )
    volume = {"destination": "/var/run/nvidia-container-devices/all", "type": "tmpfs", "source": "tmpfs"}
    rc, out, log = _container(work, spec_dir, "no-request-volume", SEES_NONE, mounts=[volume])
    report(
        "no GPU for a container with a volume at /var/run/nvidia-container-devices/all",
        rc == 0 and out.endswith("OK") and INJECTED not in log,
        f"exit {rc}: {out}",
    )
    rc, out, log = _container(
        work, spec_dir, "control-envvar-open", "ls /dev/nvidia0 && echo OK", env=env_all, accept_envvar=True
    )
    report(
        "control: with the envvar door opened the same container is injected (the check above can fail)",
        rc == 0 and out.endswith("OK") and INJECTED in log,
        f"exit {rc}: {out}",
    )


def main() -> int:
    has_gpu = bool(sysfs_gpus())
    driver = os.path.exists("/proc/driver/nvidia/version")
    tools = {
        "nvidia-smi": bool(shutil.which("nvidia-smi")),
        "runc": bool(shutil.which("runc")),
        "busybox (busybox-static)": bool(shutil.which("busybox")),
        f"{BINARIES}/nvidia-ctk": os.access(BINARIES / "nvidia-ctk", os.X_OK),
        f"{BINARIES}/nvidia-container-runtime": os.access(BINARIES / "nvidia-container-runtime", os.X_OK),
        "root": os.geteuid() == 0,
    }
    why = refusal(has_gpu, driver, tools)
    if why:
        print(f"gpu_acceptance: REFUSED, this machine cannot run the GPU acceptance check: {why}.", file=sys.stderr)
        print("Run it on a machine with an NVIDIA GPU and a loaded driver (CI has none).", file=sys.stderr)
        return REFUSED
    failed = []

    def report(name: str, ok: bool, detail: str) -> None:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
        if not ok:
            failed.append(name)

    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader"], capture_output=True, text=True
    )
    gpus = smi_gpus(smi.stdout)
    report("nvidia-smi lists the GPUs", smi.returncode == 0 and bool(gpus), smi.stdout.strip() or smi.stderr.strip())
    # a step that breaks is a FAIL with its error, and the steps after it still run
    try:
        facts = step_facts(report)
    except Exception as error:
        report("gpu_node_facts", False, repr(error))
        facts = {}
    try:
        step_doctor(report, facts, gpus)
    except Exception as error:
        report("doctor", False, repr(error))
    with tempfile.TemporaryDirectory(prefix="gpunode-acceptance-") as tmp:
        work = Path(tmp)
        spec_dir = step_cdi(report, work, gpus)
        try:
            step_cdi_row(report, work, spec_dir, facts)
        except Exception as error:
            report("doctor: CDI spec", False, repr(error))
        try:
            step_mig(report, work, facts)
        except Exception as error:
            report("doctor: MIG", False, repr(error))
        try:
            step_container(report, work, spec_dir, gpus)
        except Exception as error:
            report("containers", False, repr(error))
        try:
            step_health(report, facts)
        except Exception as error:
            report("doctor: GPU health", False, repr(error))
        try:
            step_settings(report, work)
        except Exception as error:
            report("GPU settings", False, repr(error))
    print(f"gpu_acceptance: {'FAILED: ' + ', '.join(failed) if failed else 'all steps passed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
