# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's docker rows: the nvidia runtime in docker info, the default runtime, a container through nvidia,
and the GPU isolation containers (the isolation family's CAP_SYS_ADMIN container too).

The node-side module gpu_validate_checks imports this file as module_utils.gpu_validate.docker.
Stdlib only, Python 3.8+ (the node's python3).
"""

from __future__ import annotations

import json

from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.containers import (
    ALLOWED_DEFAULT_FIX,
    COUNT_DEVICES,
    container_run,
    container_run_row,
    default_runtime_row,
    envvar_isolation_row,
    sys_admin_row,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import (
    Node,
    table_row,
    truncate,
    truthy,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.runtime import entry_binary

# docker info as one JSON document: its runtimes and its default runtime (a Go template).
DOCKER_INFO_FORMAT = '{"runtimes": {{json .Runtimes}}, "default": {{json .DefaultRuntime}}}'


def docker_info(info) -> dict:
    """What `docker info` said: {ok, error, runtimes, default}."""
    rc, out, err = info
    data = None
    if rc == 0 and out.startswith("{"):
        try:
            data = json.loads(out)
        except ValueError as exc:
            err = f"docker info printed no JSON ({exc})"
    if not isinstance(data, dict):
        return {"ok": False, "error": truncate(err.strip()), "runtimes": {}, "default": ""}
    return {"ok": True, "error": "", "runtimes": data.get("runtimes") or {}, "default": data.get("default") or ""}


def docker_rows(
    params: dict, node: dict, docker: dict, image: bool, run, isolation: dict, toolkit_installed: bool
) -> list:
    """docker: docker_info(); image: the test image is in docker; run: (rc, out, err) of the container through the
    nvidia runtime or None; isolation: {"nvidia"/"default": (rc, out, err) or None} of the counting containers."""
    return docker_runtime_rows(params, node, docker, toolkit_installed) + docker_container_rows(
        params, node, docker, image, run, isolation
    )


def docker_runtime_rows(params: dict, node: dict, docker: dict, toolkit_installed: bool) -> list:
    """The nvidia runtime in docker info, and docker's default runtime."""
    name = params["runtime_name"]
    check = "docker: nvidia runtime"
    if not docker["ok"]:
        return [
            table_row(
                check,
                "fail",
                f"docker info failed: {docker['error']}",
                "Check docker: systemctl status docker; journalctl -u docker",
            ),
            table_row("docker: default runtime", "skipped", "docker info failed"),
        ]
    if name in docker["runtimes"]:
        entry = docker["runtimes"][name]
        path = entry.get("path") if isinstance(entry, dict) and entry.get("path") else "?"
        rows = [table_row(check, "ok", f"{name} -> {path}")]
    elif truthy(node.get("has_gpu")) or toolkit_installed:
        runtimes = ", ".join(sorted(docker["runtimes"]))
        rows = [
            table_row(
                check,
                "fail",
                f"no {name} runtime in docker info (runtimes: {runtimes})",
                "Run site.yml --tags runtime",
            )
        ]
    else:
        rows = [table_row(check, "skipped", "no GPU (and no toolkit installed)")]
    entry = docker["runtimes"].get(docker["default"]) if isinstance(docker["runtimes"], dict) else None
    default = default_runtime_row(
        params,
        "docker",
        docker["default"],
        "{default} is the default runtime: every container that sets",
        ALLOWED_DEFAULT_FIX,
        unnamed="",
        binary=entry_binary("docker", entry),
    )
    return [*rows, default]


def docker_container_rows(params: dict, node: dict, docker: dict, image: bool, run, isolation: dict) -> list:
    """The containers through docker: one through the nvidia runtime (run), and one counting devices through nvidia
    and one through the default runtime (isolation)."""
    name, test_image = params["runtime_name"], params["test_image"]
    has_gpu = truthy(node.get("has_gpu"))
    registered = docker["ok"] and name in docker["runtimes"]
    rows = []
    missing_image = (
        f"image {test_image} is not in docker (never pulled)",
        f"Load or pull {test_image} on the node, or name an image it has",
    )
    check = "docker: container via nvidia"
    if not test_image:
        rows.append(table_row(check, "skipped", "no test image (gpu_validate_test_image)"))
    elif not registered:
        rows.append(table_row(check, "skipped", f"the {name} runtime is not registered"))
    elif not image:
        rows.append(table_row(check, "warn", *missing_image))
    else:
        rows.append(
            container_run_row(
                params,
                check,
                run,
                f"docker run --runtime {name} {test_image} true",
                "docker",
                "docker run options (gpu_validate_docker_run_options)",
            )
        )
    for item in ("nvidia", "default"):
        check = f"docker: GPU isolation ({name if item == 'nvidia' else 'default'})"
        if not has_gpu:
            rows.append(table_row(check, "skipped", "no GPU"))
        elif not test_image:
            rows.append(table_row(check, "skipped", "no test image (gpu_validate_test_image)"))
        elif item == "nvidia" and not registered:
            rows.append(table_row(check, "skipped", f"the {name} runtime is not registered"))
        elif not image:
            rows.append(
                table_row(
                    check, "warn", missing_image[0], f"Load or pull {test_image} on the node (it needs sh, ls and wc)"
                )
            )
        elif item == "nvidia":
            rows.append(envvar_isolation_row(check, isolation.get(item)))
        else:
            fix = "Make runc the default (nvidia_container_toolkit_set_as_default: false), run site.yml --tags runtime"
            rows.append(envvar_isolation_row(check, isolation.get(item), fix=fix))
    return rows


def _docker_not_running(node: dict) -> list:
    installed = truthy(((node.get("runtimes") or {}).get("docker") or {}).get("installed"))
    state = "installed but not running" if installed else "not installed"
    return [
        table_row(
            "docker: nvidia runtime",
            "warn",
            f"docker is {state}: nothing checked",
            "Start docker (systemctl start docker), or leave docker out of gpu_validate_runtimes",
        )
    ]


def _docker_running(node: dict) -> bool:
    return truthy(((node.get("runtimes") or {}).get("docker") or {}).get("running"))


def check_docker(params: dict, node: dict, host: Node, toolkit_installed: bool) -> list:
    if not _docker_running(node):
        return _docker_not_running(node)
    name, test_image, options = params["runtime_name"], params["test_image"], list(params["docker_run_options"])
    docker = docker_info(host.run(["docker", "info", "--format", DOCKER_INFO_FORMAT]))
    registered = docker["ok"] and name in docker["runtimes"]
    image = bool(test_image) and host.run(["docker", "image", "inspect", test_image])[0] == 0
    run = None
    if image and registered:
        run = container_run(params, host, ["docker", "run", "--rm", "--runtime", name, *options, test_image, "true"])
    isolation = {}
    for item in ("nvidia", "default"):
        if truthy(node.get("has_gpu")) and image and (item == "default" or registered):
            runtime = ["--runtime", name] if item == "nvidia" else []
            argv = ["docker", "run", "--rm", *runtime, "--env", "NVIDIA_VISIBLE_DEVICES=all", *options]
            isolation[item] = container_run(params, host, [*argv, test_image, "sh", "-c", COUNT_DEVICES])
    return docker_rows(params, node, docker, image, run, isolation, toolkit_installed)


def docker_sys_admin_row(params: dict, node: dict, result) -> dict:
    """result: (rc, out, err) of the CAP_SYS_ADMIN container through docker's default runtime, or None."""
    check = "docker: GPU isolation (default, CAP_SYS_ADMIN)"
    like = "a FUSE-like container (CAP_SYS_ADMIN, NVIDIA_VISIBLE_DEVICES=all, no GPU requested)"
    if not truthy(node.get("has_gpu")):
        return table_row(check, "skipped", "no GPU")
    if not params["test_image"]:
        return table_row(check, "skipped", "no test image (gpu_validate_test_image)")
    return sys_admin_row(
        check,
        result,
        like,
        "",
        "the default runtime hands out GPUs",
        "Make runc the default (nvidia_container_toolkit_set_as_default: false), run site.yml --tags runtime;"
        " FUSE pods must not use RuntimeClass nvidia unless they request GPUs",
    )


def check_docker_isolation(params: dict, node: dict, host: Node) -> list:
    if "docker" not in params["runtimes"] or not _docker_running(node):
        return []
    result = None
    if truthy(node.get("has_gpu")) and params["test_image"]:
        argv = ["docker", "run", "--rm", "--cap-add", "SYS_ADMIN", "--env", "NVIDIA_VISIBLE_DEVICES=all"]
        argv += [*params["docker_run_options"], params["test_image"], "sh", "-c", COUNT_DEVICES]
        result = container_run(params, host, argv)
    return [docker_sys_admin_row(params, node, result)]
