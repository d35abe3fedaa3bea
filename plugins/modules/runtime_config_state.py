#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: runtime_config_state
short_description: Read what the runtime_config role decides on, in one call
description:
  - The node-side read of the C(runtime_config) role, done once before the role writes anything.
  - Refuses a runtime binary that does not exist or is not executable (in check mode it only warns), before
    anything changes.
  - Returns, per runtime, whether its config file exists and its mode, owner and group (symlinks followed), and
    docker's current C(default-runtime).
  - Finds config changes an earlier run wrote but did not apply (a C(pending-restart-<runtime>.json) marker in
    O(state_dir)). A marker whose runtime's main process started after the marker was written is applied, so it is
    removed (in check mode only reported). The others are returned, to be restarted and checked.
  - Runs on the managed node with the Python standard library only.
version_added: "0.2.0"
author: gpu-node-provisioning contributors (!UNKNOWN)
options:
  runtimes:
    description: The runtimes to read (their systemd units have the same names).
    type: list
    elements: str
    choices: [docker, containerd, crio]
    required: true
  files:
    description: The config file of each runtime in O(runtimes).
    type: dict
    required: true
  binary:
    description: The runtime binary to register, as an absolute path or a command name.
    type: str
    required: true
  name:
    description: The name the binary is registered under (for the message only).
    type: str
    required: true
  state_dir:
    description: Directory of the pending-restart markers.
    type: path
    required: true
  agents:
    description:
      - Installer agent units (RKE2/k3s, e.g. C(k3s.service)) whose restart applies a config change of this role;
        their C(pending-restart-<unit>.json) markers are read like the runtimes' (the agent regenerates its
        containerd's config when it starts).
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reports the applied markers it would remove and removes nothing; a missing binary is a warning.
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Every supported systemd has C(ExecMainStartTimestampMonotonic); C(--timestamp=unix) needs systemd 251, newer than
    Debian 11's 247 and Ubuntu 22.04's 249, so the monotonic time is turned into wall-clock time here.
"""

EXAMPLES = r"""
- name: Read the runtime binary, the config files and the pending restarts
  runtime_config_state:
    runtimes: [docker, containerd]
    files:
      docker: /etc/docker/daemon.json
      containerd: /etc/containerd/config.toml
    binary: /usr/bin/nvidia-container-runtime
    name: nvidia
    state_dir: /var/lib/gpu-node-provisioning
  register: state
"""

RETURN = r"""
binary_found:
  description: Whether the binary exists and is executable.
  returned: success
  type: bool
files:
  description:
    - Per runtime, its config file as C(ansible.builtin.stat) would report it (C(mode) as four octal digits).
    - Docker's also has C(content), the file's text, where it is UTF-8 and at most 1 MiB, so that the controller can
      tell whether docker_daemon_config would change it without running it (issue 47).
  returned: success
  type: dict
  sample: {containerd: {path: /etc/containerd/config.toml, exists: true, mode: "0600", owner: root, group: root}}
docker_default_runtime:
  description: The C(default-runtime) of docker's config file; null when it has none or cannot be read as JSON.
  returned: success
  type: str
docker_nvidia_entries:
  description:
    - The entries of docker's C(runtimes) that are NVIDIA's runtime, whatever their name (their C(path) is
      C(nvidia-container-runtime), C(.cdi) or C(.legacy) in any directory; plugins/module_utils/nvidia/runtime.py),
      each name with its path; the entry named like the runtime (option O(name)) counts when it names no path.
  returned: success
  type: dict
  sample: {gpu: /usr/bin/nvidia-container-runtime}
docker_default_nvidia:
  description: Whether docker's C(default-runtime) is NVIDIA's runtime, under any name (RV(docker_nvidia_entries)).
  returned: success
  type: bool
pending:
  description: Per runtime, the rollback entry of a change an earlier run wrote and the runtime has not applied yet.
  returned: success
  type: dict
applied:
  description: Runtimes whose marker was removed (in check mode, would be) because the runtime started since.
  returned: success
  type: list
  elements: str
"""

import grp
import json
import os
import pwd
import shutil
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.runtime import (
    entry_binary,
    is_nvidia_entry,
    nvidia_entries,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.system.units import (
    boot_time,
    main_start_argv,
    main_start_us,
)


def binary_found(binary: str) -> bool:
    """Like `command -v`: a path must be an executable file; a name is looked up in PATH."""
    if "/" in binary:
        return os.path.isfile(binary) and os.access(binary, os.X_OK)
    return shutil.which(binary) is not None


def file_facts(path: str) -> dict:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return {"path": path, "exists": False}
    try:
        owner = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        owner = str(info.st_uid)
    try:
        group = grp.getgrgid(info.st_gid).gr_name
    except KeyError:
        group = str(info.st_gid)
    mode = f"{stat.S_IMODE(info.st_mode):04o}"
    return {"path": path, "exists": True, "mode": mode, "owner": owner, "group": group}


def small_text(path: str, limit: int = 1 << 20) -> str | None:
    """The text of ``path`` where it is UTF-8 and at most ``limit`` bytes; None otherwise (or unreadable)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
        return data.decode("utf-8") if len(data) <= limit else None
    except (OSError, UnicodeDecodeError):
        return None


def docker_runtimes(path: str, name: str) -> tuple:
    """(default-runtime or None, {name: path} of the NVIDIA entries of `runtimes`, whether the default is NVIDIA's
    runtime) of docker's daemon.json."""
    try:
        with open(path, encoding="utf-8-sig") as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        return None, {}, False  # docker_daemon_config refuses the file with its line and fix
    if not isinstance(config, dict):
        return None, {}, False
    runtimes = config.get("runtimes") if isinstance(config.get("runtimes"), dict) else {}
    default = config.get("default-runtime")
    nvidia = bool(default) and is_nvidia_entry(default, entry_binary("docker", runtimes.get(default)), name)
    return default, nvidia_entries("docker", runtimes, name), nvidia


def started_after(started_us: int, mtime: float) -> bool:
    """Whether a main process started `started_us` µs of CLOCK_MONOTONIC after boot (0: never) is newer than mtime."""
    return started_us > 0 and boot_time() + started_us / 1e6 > mtime


def main():
    module = AnsibleModule(
        argument_spec=dict(
            runtimes=dict(type="list", elements="str", choices=["docker", "containerd", "crio"], required=True),
            files=dict(type="dict", required=True),
            binary=dict(type="str", required=True),
            name=dict(type="str", required=True),
            state_dir=dict(type="path", required=True),
            agents=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    found = binary_found(params["binary"])
    if not found and params["runtimes"]:
        if not module.check_mode:
            module.fail_json(
                msg=f"runtime_config_binary={params['binary']} does not exist (or is not executable) on the node: "
                f"registering it would make every container of the {params['name']} runtime fail. Install the "
                "NVIDIA container toolkit first (role nvidia_container_toolkit), or set runtime_config_binary to the "
                "runtime's path on the node. Nothing was changed."
            )
        module.warn(
            f"runtime_config_binary={params['binary']} does not exist on the node yet; a real run refuses to register "
            "it unless it is installed first (by the nvidia_container_toolkit role in site.yml)."
        )
    missing = [rt for rt in params["runtimes"] if not params["files"].get(rt)]
    if missing:
        module.fail_json(msg=f"files has no config file for {', '.join(missing)}.")

    result = dict(
        changed=False,
        binary_found=found,
        files={},
        docker_default_runtime=None,
        docker_nvidia_entries={},
        docker_default_nvidia=False,
        pending={},
        applied=[],
    )
    for runtime in [*params["runtimes"], *params["agents"]]:
        if runtime in params["runtimes"]:
            path = params["files"][runtime]
            result["files"][runtime] = file_facts(path)
            if runtime == "docker" and result["files"][runtime]["exists"]:
                content = small_text(path)
                if content is not None:
                    result["files"][runtime]["content"] = content
                (
                    result["docker_default_runtime"],
                    result["docker_nvidia_entries"],
                    result["docker_default_nvidia"],
                ) = docker_runtimes(path, params["name"])
        marker = os.path.join(params["state_dir"], f"pending-restart-{runtime}.json")
        if not os.path.exists(marker):
            continue
        rc, out, err = module.run_command(main_start_argv(runtime))
        started_us = main_start_us(rc, out)
        if started_us is None:
            module.fail_json(msg=f"cannot ask systemd when {runtime} started: {(err or out).strip()}", rc=rc)
        if started_after(started_us, os.stat(marker).st_mtime):
            result["applied"].append(runtime)
            if not module.check_mode:
                os.unlink(marker)
            continue
        try:
            with open(marker, encoding="utf-8") as handle:
                result["pending"][runtime] = json.load(handle)
        except ValueError as exc:
            module.fail_json(
                msg=f"{marker} is not the JSON this role writes ({exc}). Restart {runtime} by hand, check it, and "
                "remove the file."
            )
    result["changed"] = bool(result["applied"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
