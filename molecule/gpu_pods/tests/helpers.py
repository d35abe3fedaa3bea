"""Shared by the gpu_pods scenario's tests (issue 25)."""

from __future__ import annotations

import json
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


def rows(host) -> dict:
    report = json.loads(host.file(REPORT).content_string)
    return {row["check"]: row for row in report["checks"]}


def containerd_runtimes(host) -> tuple[dict, str]:
    """The effective runtimes and default of containerd (`containerd config dump`), config v2."""
    import tomllib

    dump = tomllib.loads(host.check_output("containerd config dump"))
    cri = dump["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]
    return cri["runtimes"], cri["default_runtime_name"]


__all__ = ["recap", "run_playbook"]
