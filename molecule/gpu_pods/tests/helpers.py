"""Shared by the gpu_pods scenario's tests (issue 25)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
from playbook_runner import recap, run_playbook

RERUN = SCENARIO / "rerun.yml"
MIGRATE = SCENARIO / "migrate.yml"
REPORT = "/var/lib/gpu-node-provisioning/validate.json"
# Every file a run could touch: /etc, the keyrings, the project's state and reports, the package database.
FILES_DIGEST = (
    "set -o pipefail; find /etc /usr/share/keyrings /var/lib/gpu-node-provisioning -xdev -type f -print0 2>/dev/null"
    " | sort -z | xargs -0 sha256sum; sha256sum /var/lib/dpkg/status"
)


def said(result) -> str:
    """What ansible-playbook printed, as one line: a refusal is a list item of the role_variables task's msg, which
    the YAML callback quotes (an apostrophe doubled) and folds at about 80 columns."""
    return " ".join((result.stdout + result.stderr).replace("''", "'").split())


# A result line of the default callback names its node ("fatal: [gp-cns]: FAILED! =>", "ok: [gp-cns -> localhost]");
# the lines indented under it are that result (callback_result_format = yaml).
_RESULT_LINE = re.compile(r"^[a-z]+: \[([^\]\s]+)(?: -> [^\]]+)?\]")


def said_to(stdout: str, node: str) -> str:
    """What a run on several nodes printed about one of them (its results), as one line, as said() does."""
    lines, owner = [], None
    for line in stdout.splitlines():
        if line[:1].isspace():
            if owner == node:
                lines.append(line)
            continue
        match = _RESULT_LINE.match(line)
        owner = match.group(1) if match else None
        if owner == node:
            lines.append(line)
    return " ".join("\n".join(lines).replace("''", "'").split())


def name(host) -> str:
    return host.backend.get_hostname()


def digest(host) -> str:
    result = host.run(f"bash -c '{FILES_DIGEST}'")
    assert result.rc == 0, result.stderr
    return result.stdout


def set_strategy(host, strategy: str) -> None:
    """Move the stand-in device plugin to another strategy, as a Helm upgrade or the operator would."""
    cmd = (
        f"printf 'DEVICE_LIST_STRATEGY={strategy}\\nPLUGIN_ARGS=\\n' > /etc/default/gp-standin-device-plugin"
        " && systemctl restart gp-standin-device-plugin"
    )
    assert host.run(cmd).rc == 0


def site(host, extra_vars: dict | None = None, *args: str):
    return run_playbook(host, RERUN, extra_vars, *args)


def migrate(host, step: str):
    """playbooks/migrate_gpu_isolation.yml on the node, which is in no cluster (the scenario has no
    kube_control_plane host): migrate_gpu_isolation_drain=false, or the rollout stops before any change."""
    return run_playbook(host, MIGRATE, {"migrate_gpu_isolation_step": step, "migrate_gpu_isolation_drain": False})


def failure_of(run, host) -> str:
    """Why the node's part of a shared run (conftest.py) failed, or "" where it ran clean: its recap line says no
    failed or unreachable task."""
    counters = run.recap.get(name(host))
    if counters is None or counters["failed"] or counters["unreachable"]:
        return f"{name(host)}: {counters}\n{run.stdout[-6000:]}"
    return ""


def rows(host) -> dict:
    report = json.loads(host.file(REPORT).content_string)
    return {row["check"]: row for row in report["checks"]}


def containerd_runtimes(host) -> tuple[dict, str]:
    """The effective runtimes and default of containerd (`containerd config dump`), config v2."""
    import tomllib

    dump = tomllib.loads(host.check_output("containerd config dump"))
    cri = dump["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]
    return cri["runtimes"], cri["default_runtime_name"]


# gp-gpuop (test_gpuop_node.py): the GPU Operator's toolkit directory and NVIDIA's runtime's own lines
TOOLKIT = "/usr/local/nvidia/toolkit/nvidia-container-runtime"
OPERATOR_CONFIG = "/usr/local/nvidia/toolkit/.config/nvidia-container-runtime/config.toml"
LOG = "/var/log/nvidia-container-runtime.log"  # only the Operator's config names it (prepare.yml)
IMAGE = "docker.io/gpunode-test/busybox:latest"
ENVVAR_KEY = "accept-nvidia-visible-devices-envvar-when-unprivileged"
# toolkit 1.20: internal/config/image/cuda_image.go, internal/runtime
IGNORED_ENVVAR = "Ignoring devices requested by environment variable(s) in unprivileged container"
STARTED = "Create command detected; applying OCI specification modifications"
ENTRIES = {"nvidia-cdi": f"{TOOLKIT}.cdi", "nvidia-legacy": f"{TOOLKIT}.legacy"}


def through(host, binary: str, tag: str):
    """An unprivileged container (ctr's default capabilities: no CAP_SYS_ADMIN) with NVIDIA_VISIBLE_DEVICES=all and no
    device requested, run by containerd through `binary`: (its result, NVIDIA's runtime's log meanwhile)."""
    offset = int(host.check_output(f"stat -c %s {LOG} 2>/dev/null || echo 0"))
    run = host.run(
        f"timeout 120 ctr run --rm --runtime io.containerd.runc.v2 --runc-binary {binary}"
        f" --env NVIDIA_VISIBLE_DEVICES=all {IMAGE} gpuop-{tag} sh -c 'ls /dev'"
    )
    return run, host.check_output(f"tail -c +{offset + 1} {LOG} 2>/dev/null || true")


__all__ = ["recap", "run_playbook"]
