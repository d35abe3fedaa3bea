"""Pods that request no GPU against NVIDIA's REAL runtime (toolkit 1.20.0 from GPUNODE_UPSTREAM_DIR, carried by the
stand-in packages) and the config.toml the toolkit role leaves: issue 24 items 4 and 5. Shared by
molecule/nvidia_runtime (docker, and the CRI of containerd 1.7 and 2.2) and molecule/runtime_config (the CRI of
CRI-O 1.35, node rc-crio).

The GPU is a fake CDI spec (molecule/resources/tasks/fake_cdi_gpu.yml: kind nvidia.com/gpu, device all = /dev/null
as /dev/gpunode-fake-gpu0 and GPUNODE_FAKE_GPU=injected); NVIDIA's runtime injects it like a real one when asked
by a CDI name. Requests that NVIDIA's runtime resolves itself (NVIDIA_VISIBLE_DEVICES=all, a /dev/null mount at
.../all) need the driver: on these GPU-less nodes they fail with "failed to initialize NVML" (what the runtime
does before injecting). The runtime's debug log (debug and log-level in config.toml, set by the scenario) shows
each decision.
"""

from __future__ import annotations

import json

from tests.doctor_params import shared_doctor_params

LOG = "/var/log/nvidia-container-runtime.log"
CONFIG = "/etc/nvidia-container-runtime/config.toml"
CRI_IMAGE = "docker.io/gpunode-test/busybox:latest"
FAKE_DEVICE = "/dev/gpunode-fake-gpu0"
# exit 0: no GPU; 3: the fake GPU's device or variable is there
PROBE = ["sh", "-c", f'if [ -e {FAKE_DEVICE} ] || [ -n "$GPUNODE_FAKE_GPU" ]; then exit 3; fi; exit 0']
CDI_ANNOTATION = {"cdi.k8s.io/gpunode-test": "nvidia.com/gpu=all"}
DEVICES_ROOT = "/var/run/nvidia-container-devices"
EMPTY_DIR = "/var/lib/gpunode-test/empty-dir"
# NVIDIA's runtime's own lines (internal/config/image/cuda_image.go, internal/modifier/cdi.go)
IGNORED_ENVVAR = "Ignoring devices requested by environment variable(s) in unprivileged container"
NO_DEVICES = "No devices requested; no modification required."
JIT_CDI = "Using automatic CDI modfier for devices [runtime.nvidia.com/gpu=all]"
NO_DRIVER = "failed to initialize NVML"
INJECTED = "Injecting devices using CDI: [nvidia.com/gpu=all]"
STARTED = "Create command detected; applying OCI specification modifications"
FORWARDED = "Forwarding command to runtime"
# the toolkit role's lines in config.toml (nvidia_container_toolkit defaults)
ENVVAR_CLOSED = "accept-nvidia-visible-devices-envvar-when-unprivileged = false"
VOLUMES_CLOSED = "accept-nvidia-visible-devices-as-volume-mounts = false"
PREFIXES_CLOSED = "annotation-prefixes = []"

# (pod name, what the pod asks, kwargs of CriClient.run_probe): what any pod may ask for without requesting a GPU
REQUESTS = {
    "pod-annotation": {"pod_annotations": CDI_ANNOTATION},
    "empty-dir": {"mounts": ((EMPTY_DIR, f"{DEVICES_ROOT}/all"),)},
    "host-path-dev-null": {"mounts": (("/dev/null", f"{DEVICES_ROOT}/cdi/nvidia.com/gpu/all"),)},
}


def log_size(host) -> int:
    return int(host.check_output(f"stat -c %s {LOG} 2>/dev/null || echo 0"))


def log_since(host, offset: int) -> str:
    return host.check_output(f"tail -c +{offset + 1} {LOG}")


def pod(host, cri, name: str, handler: str, **kwargs) -> tuple[str, str]:
    """('clean' | 'gpu' | 'error: ...', NVIDIA's log meanwhile) of a pod running PROBE through the CRI."""
    host.check_output(f"mkdir -p {EMPTY_DIR}")
    offset = log_size(host)
    code, detail = cri.run_probe(name, handler, CRI_IMAGE, PROBE, **kwargs)
    outcome = (
        {0: "clean", 3: "gpu"}.get(code, f"error: exit {code} {detail}") if code is not None else f"error: {detail}"
    )
    return outcome, log_since(host, offset)


PREFIXES_OPEN = 'annotation-prefixes = ["cdi.k8s.io/"]'  # NVIDIA's default


def set_in_config(host, old: str, new: str) -> None:
    """Replace a whole line of config.toml, in place (a mutation); fails when the line is not there."""
    tmp = f"/var/tmp/gpunode-test-{CONFIG.rsplit('/', 1)[1]}"
    host.check_output(
        f"grep -qxF '{old}' {CONFIG} && awk -v old='{old}' -v new='{new}' '$0 == old {{ $0 = new }} 1' {CONFIG} > {tmp}"
        f" && cat {tmp} > {CONFIG} && rm {tmp}"
    )


def doctor(host, runtimes: list[str], families=("toolkit", "doors"), **more) -> dict:
    """The doctor's rows of these families on this node, as the gpu_validate role runs the module."""
    facts = host.ansible("gpu_node_facts", check=False)["ansible_facts"]["gpu_node"]
    args = {"families": list(families), "node": facts, "runtimes": runtimes, **shared_doctor_params(), **more}
    result = host.ansible("gpu_validate_checks", json.dumps(args), check=False)
    return {row["check"]: row for row in result["checks"]}
