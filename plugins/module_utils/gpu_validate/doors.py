# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's doors family (issue 24): the ways a pod that requests no GPU could still get one through NVIDIA's
runtime (a /dev/null volume mount, CDI annotations through containerd or CRI-O).

The node-side module gpu_validate_checks imports this file as module_utils.gpu_validate.doors.
Stdlib only, Python 3.8+ (the node's python3).
"""

from __future__ import annotations

import re

from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd.tables import (
    TomlError,
    cri_runtimes,
    toml_tables,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import (
    Node,
    table_row,
    truncate,
    truthy,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.kubernetes.gpu_pods import (
    CDI_PREFIXES_DEFAULT,
    ENVVAR_KEY,
    OPERATOR_SETTING,
    TOOLKIT_DEFAULTS,
    VOLUME_MOUNTS_KEY,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.runtime import (
    cdi_annotation_prefixes,
    config_read_by,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia.runtime import describe as describe_entry

# NVIDIA's runtime (toolkit 1.20, internal/config/image/cuda_image.go, CUDA.VisibleDevices) takes device requests
# from three places besides NVIDIA_VISIBLE_DEVICES: CDI annotations whose keys start with one of
# nvidia-container-runtime.modes.cdi.annotation-prefixes (default ["cdi.k8s.io/"], api/config/v1/config.go),
# and, with accept-nvidia-visible-devices-as-volume-mounts = true, bind mounts of /dev/null under
# /var/run/nvidia-container-devices (requestsFromMounts). Neither is gated by the envvar hardening.

VOLUME_MOUNT_ROOT = "/var/run/nvidia-container-devices"


def _toolkit_config(text) -> tuple:
    """(parsed config.toml, error text); ({}, '') when the file is not there."""
    if text is None:
        return {}, ""
    try:
        return toml_tables(text), ""
    except TomlError as exc:
        return {}, str(exc)


def volume_mount_row(params: dict, text) -> dict:
    """Whether NVIDIA's runtime takes GPUs from /dev/null mounts under /var/run/nvidia-container-devices, which any
    pod allowed a hostPath volume can make."""
    check = "toolkit: GPU by volume mount"
    config, error = _toolkit_config(text)
    if error:
        return table_row(
            check, "fail", f"{params['toolkit_config']} is not TOML: {truncate(error)}", "Run site.yml --tags toolkit"
        )
    if config.get("accept-nvidia-visible-devices-as-volume-mounts") is not True:
        return table_row(
            check,
            "ok",
            f"NVIDIA's runtime ignores /dev/null mounts under {VOLUME_MOUNT_ROOT} "
            "(accept-nvidia-visible-devices-as-volume-mounts is not true)",
        )
    detail = (
        f"accept-nvidia-visible-devices-as-volume-mounts = true in {params['toolkit_config']}: a pod with RuntimeClass "
        f"{params['runtime_name']} and a hostPath volume of /dev/null at {VOLUME_MOUNT_ROOT}/<GPU> gets that GPU "
        "without requesting one"
    )
    admission = (
        f"an admission policy must deny hostPath volumes of /dev/null (and any mount under {VOLUME_MOUNT_ROOT}) "
        "to pods that request no nvidia.com/gpu"
    )
    if truthy(params.get("volume_mounts_allowed")):
        return table_row(
            check,
            "warn",
            detail + " (asked for: the device plugin's volume-mounts strategy)",
            admission[0].upper() + admission[1:],
        )
    return table_row(
        check,
        "fail",
        detail,
        "Run site.yml --tags toolkit (nvidia_container_toolkit_accept_volume_mounts: false; GPU pods get their "
        f"devices through CDI). Only for the device plugin's volume-mounts strategy set it true; then {admission}",
    )


def _path_match(pattern: str, name: str) -> bool:
    """Go's path.Match, which containerd uses for pod_annotations / container_annotations: * and ? never match
    '/', [...] is a class."""
    regex, i = "", 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            regex += "[^/]*"
        elif char == "?":
            regex += "[^/]"
        elif char == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end]
            body = body.replace("\\", "\\\\").replace("[", "\\[")
            regex += "[" + body + "]"
            i = end
        elif char == "\\" and i + 1 < len(pattern):
            i += 1
            regex += re.escape(pattern[i])
        else:
            regex += re.escape(char)
        i += 1
    return re.fullmatch(regex, name) is not None


# Walks a pattern as _path_match does (by design: one parses it into a regex, this one builds a name it matches).
def _witness(pattern: str) -> str:
    """A name that a path.Match pattern matches, if it matches any: * -> '', ? -> 'x', a class -> one of its
    characters (a character outside it when negated)."""
    out, i = "", 0
    while i < len(pattern):
        char = pattern[i]
        if char == "*":
            pass
        elif char == "?":
            out += "x"
        elif char == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end]
            if body[:1] == "^":
                out += next((c for c in "xyzabc0123456789" if _path_match(pattern[i : end + 1], c)), "x")
            else:
                out += body[:1]
            i = end
        elif char == "\\" and i + 1 < len(pattern):
            i += 1
            out += pattern[i]
        else:
            out += char
        i += 1
    return out


def _passes_prefix(pattern: str, prefix: str) -> bool:
    """Whether an allow-list pattern lets through some annotation key <prefix><name> (a name has no '/')."""
    candidates = [prefix + "x", _witness(pattern)]
    if pattern.startswith(prefix):
        candidates.append(prefix + _witness(pattern[len(prefix) :]))
    return any(
        key.startswith(prefix)
        and len(key) > len(prefix)
        and "/" not in key[len(prefix) :]
        and _path_match(pattern, key)
        for key in candidates
    )


def annotation_passthrough(dump_text, runtime_name: str) -> dict:
    """pod_annotations and container_annotations of one runtime in `containerd config dump` (its CRI table,
    containerd/tables.py cri_runtimes); {} when the dump is not TOML."""
    try:
        runtimes, _default = cri_runtimes(toml_tables(dump_text))
    except TomlError:
        return {}
    entry = runtimes.get(runtime_name) or {}
    return {key: string_list(entry.get(key)) for key in ("pod_annotations", "container_annotations")}


def string_list(value) -> list:
    """The strings of a TOML array (containerd 2.x dumps ['literal', 'strings']); [] for anything else."""
    return [str(v) for v in value] if isinstance(value, list) else []


def check_doors(params: dict, node: dict, host: Node, toolkit_installed: bool, containerd, crio=None) -> list:
    """The doors family: one row per way a pod that requests no GPU could still get one through NVIDIA's runtime
    (containerd: containerd_state(), crio: crio_state(); None when that runtime is not among the runtimes)."""
    rows = entry_rows(params, node, host)
    if not toolkit_installed:
        return [*rows, table_row("toolkit: GPU by volume mount", "skipped", "no toolkit installed")]
    text = host.read(params["toolkit_config"])
    rows.append(volume_mount_row(params, text))
    if containerd is not None:
        rows.append(cdi_annotation_row(params, containerd, text))
    if crio is not None:
        rows.append(crio_cdi_annotation_row(params, crio, text))
    return rows


def entry_rows(params: dict, node: dict, host: Node) -> list:
    """One door row per NVIDIA runtime entry of every runtime the node has (the facts' nvidia_runtimes, issue 46),
    judged by the toolkit config that entry's runtime really reads, resolved again now from its binary
    (nvidia_runtime.config_read_by): a door is open where that config accepts NVIDIA_VISIBLE_DEVICES from
    unprivileged containers (or, unasked, /dev/null volume mounts)."""
    rows = []
    for entry in (node or {}).get("nvidia_runtimes") or []:
        rows.append(entry_row(params, entry, host))
    return rows


def entry_row(params: dict, entry: dict, host: Node) -> dict:
    """The door row of one NVIDIA runtime entry ({runtime, name, binary} of the facts)."""
    runtime, name, binary = entry.get("runtime"), entry.get("name"), entry.get("binary")
    check = f"door: {runtime} runtime {name}"
    what = f"{runtime} runtime {describe_entry(name, binary)}"

    def read(path):
        text = host.read(path)
        return None if text is None else text.encode("utf-8", "surrogateescape")

    found = config_read_by(binary, read)
    if found["problem"]:
        return table_row(
            check,
            "fail",
            f"{what} runs NVIDIA's runtime, but which config it reads cannot be told: {found['problem']}",
            f"Make it a plain NVIDIA runtime or a wrapper that sets NVIDIA_CTK_CONFIG_FILE_PATH to a file with "
            f"{ENVVAR_KEY} = false, or remove the entry (and the RuntimeClasses naming {name})",
        )
    if not found["path"]:
        return table_row(
            check,
            "warn",
            f"{what}: the binary is not there, so every container through it fails to start",
            f"Remove the {name} entry or install its binary",
        )
    config = found["config"]
    if config is None:  # a wrapper that hands every call to runc or crun (nvidia_runtime.plain_oci_runtime)
        return table_row(check, "ok", f"{what}: {found['via']}; it injects no device")
    text = host.read(config)
    parsed, error = _toolkit_config(text)
    if error:
        return table_row(
            check, "fail", f"{what} reads {config}, which is not TOML: {truncate(error)}", "Run site.yml --tags toolkit"
        )
    opened = []
    doors = (
        (ENVVAR_KEY, "envvar_allowed", "with NVIDIA_VISIBLE_DEVICES=all (CUDA images set it) gets every GPU"),
        (VOLUME_MOUNTS_KEY, "volume_mounts_allowed", f"with a /dev/null volume at {VOLUME_MOUNT_ROOT}/<GPU> gets it"),
    )
    for key, allowed, how in doors:
        if parsed.get(key, TOOLKIT_DEFAULTS[key]) is True:
            said = f"{key} = true" if key in parsed else f"{key} unset (NVIDIA's default: true)"
            opened.append((said, truthy(params.get(allowed)), how))
    where = f"{config} ({found['via']}{'' if text is not None else '; the file does not exist: NVIDIA defaults'})"
    if not opened:
        return table_row(check, "ok", f"{what} reads {where}: {ENVVAR_KEY} and {VOLUME_MOUNTS_KEY} are false")
    own = config == params.get("toolkit_config")
    fix = (
        f"Run site.yml --tags toolkit (it merges {ENVVAR_KEY} = false and {VOLUME_MOUNTS_KEY} = false into {config})"
        + ("" if own else f"; {OPERATOR_SETTING}")
    )
    status = "warn" if all(allowed for _said, allowed, _how in opened) else "fail"
    return table_row(
        check,
        status,
        f"{what} reads {where}: {', '.join(said for said, _allowed, _how in opened)}: an unprivileged pod that requests"
        f" no GPU and names RuntimeClass {name} {' or '.join(how for _said, _allowed, how in opened)}"
        + (
            " (asked for: nvidia_container_toolkit_keep_gpu_pod_access or the accept-* variables)"
            if status == "warn"
            else ""
        ),
        fix,
    )


def _annotation_prefixes(toolkit_text) -> list:
    """The prefixes of OCI annotations NVIDIA's runtime reads CDI device requests from (its default when
    config.toml names none)."""
    prefixes = cdi_annotation_prefixes(toolkit_text)
    return list(CDI_PREFIXES_DEFAULT) if prefixes is None else prefixes


def _no_prefix_text(prefixes: list) -> str:
    return ", ".join(prefixes) if prefixes else "none (annotation-prefixes = [])"


def cdi_annotation_row(params: dict, containerd: dict, toolkit_text) -> dict:
    """Whether containerd hands a pod's CDI annotations to NVIDIA's runtime, which injects the devices they name
    (containerd copies pod annotations into the OCI spec only where the runtime's pod_annotations match them)."""
    check = "containerd: CDI annotations of pods"
    name = params["runtime_name"]
    passthrough = containerd.get("passthrough")
    if not containerd.get("registered") or passthrough is None:
        return table_row(check, "skipped", f"no {name} runtime in containerd's configuration")
    prefixes = _annotation_prefixes(toolkit_text)
    opened = sorted(
        {
            pattern
            for pattern in passthrough["pod_annotations"]
            for prefix in prefixes
            if _passes_prefix(pattern, prefix)
        }
    )
    if opened:
        return table_row(
            check,
            "fail",
            f"pod_annotations {opened} of runtime {name} pass a pod's {', '.join(prefixes)} annotations to NVIDIA's "
            f"runtime, which injects the CDI devices they name: any pod with RuntimeClass {name} gets a GPU by "
            "annotation",
            f"Remove those patterns from pod_annotations of the {name} runtime in containerd's config (device plugins "
            "hand CDI devices to containerd through the CRI, not through pod annotations), or deny "
            f"{', '.join(prefixes)} pod annotations in admission",
        )
    return table_row(
        check,
        "ok",
        f"no pod annotation reaches NVIDIA's runtime as a CDI request (prefixes {_no_prefix_text(prefixes)}; "
        f"pod_annotations of {name}: {passthrough['pod_annotations'] or 'none'})",
    )


# A row of its own, not cdi_annotation_row with a flag (by design): CRI-O has no per-runtime annotation filter, so
# only the toolkit's prefixes decide, and its texts name other fixes.
def crio_cdi_annotation_row(params: dict, crio: dict, toolkit_text) -> dict:
    """Whether a pod's CDI annotations reach NVIDIA's runtime through CRI-O. CRI-O copies every pod annotation
    into the OCI spec of each of the pod's containers (cri-o v1.35.6 internal/factory/container/container.go,
    SpecAddAnnotations: "Preserve the sandbox annotations"); its allowed_annotations filter only CRI-O's own
    annotations (server/utils.go FilterDisallowedAnnotations; pkg/config validates them against
    v2.AllAllowedAnnotations), so no CRI-O setting keeps cdi.k8s.io/ keys away from a runtime handler. Only
    NVIDIA's runtime can ignore them: annotation-prefixes = []. CRI-O's own CDI reads container annotations
    (device plugins) and the CRI's CDI devices, not pod annotations (internal/factory/container/device_linux.go)."""
    check = "crio: CDI annotations of pods"
    name = params["runtime_name"]
    if not crio.get("ok") or not crio.get("registered"):
        return table_row(check, "skipped", f"no {name} runtime handler in CRI-O's configuration")
    prefixes = _annotation_prefixes(toolkit_text)
    if prefixes:
        return table_row(
            check,
            "fail",
            f"CRI-O copies every pod annotation into the OCI spec of the pod's containers, and NVIDIA's runtime reads "
            f"those with prefix {', '.join(prefixes)} as CDI device requests: any pod with RuntimeClass {name} gets a "
            "GPU by annotation",
            "Run site.yml --tags toolkit (nvidia_container_toolkit_cdi_annotation_prefixes: []; GPU pods get their "
            "devices from CRI-O's own CDI through the CRI), or deny "
            f"{', '.join(prefixes)} pod annotations in admission",
        )
    return table_row(
        check,
        "ok",
        f"NVIDIA's runtime reads no OCI annotation as a CDI request (prefixes {_no_prefix_text(prefixes)}), so the "
        f"pod annotations CRI-O passes to the {name} handler request no GPU",
    )
