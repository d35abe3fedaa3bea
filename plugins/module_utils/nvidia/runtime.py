# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""What "NVIDIA's runtime" is: the one definition the facts, the GPU-pods guard, the merges and the doctor use.

An entry of a container runtime's config (docker `runtimes.<name>.path`, containerd
`runtimes.<name>.options.BinaryName`, CRI-O `runtimes.<name>.runtime_path`) is NVIDIA's runtime when its binary
is NVIDIA's runtime, whatever the entry is called and whatever directory holds the binary:

- `nvidia-container-runtime`, and its mode-specific executables `nvidia-container-runtime.cdi` and
  `nvidia-container-runtime.legacy` (NVIDIA/nvidia-container-toolkit v1.20.0: cmd/nvidia-container-runtime.cdi,
  cmd/nvidia-container-runtime.legacy; cmd/nvidia-ctk-installer/container/operator/operator.go registers the
  runtimes `nvidia`, `nvidia-cdi` and `nvidia-legacy` with the binaries "nvidia-container-runtime" and
  "nvidia-container-runtime."+mode for the modes "cdi" and "legacy", under the toolkit directory).
- The GPU Operator installs them under `/usr/local/nvidia/toolkit/` (NVIDIA/gpu-operator v26.7.0:
  controllers/object_controls.go DefaultToolkitInstallDir = "/usr/local/nvidia"; the installer's toolkit
  sub-directory, cmd/nvidia-ctk-installer/main.go toolkitSubDir = "toolkit") and its RuntimeClasses name
  `nvidia-cdi` and `nvidia-legacy` (assets/pre-requisites/0210_runtime_class_legacy.yaml, 0220_runtime_class_cdi.yaml).
- AKS and microk8s call the entry `nvidia-container-runtime`, k3s `nvidia`, `nvidia-experimental`, `nvidia-cdi`
  (shared REFERENCE.md, fourth wave): only the binary tells.

An entry named like the project's runtime (`nvidia`) whose binary cannot be read still counts, as before: the
project itself registers that name with NVIDIA's binary.

The toolkit config an entry's runtime really reads (issue 46; `config_read_by`), checked in
NVIDIA/nvidia-container-toolkit v1.20.0:
- NVIDIA's runtime reads the file GetConfigFilePath names (api/config/v1/config.go): `NVIDIA_CTK_CONFIG_FILE_PATH`
  when set (FilePathOverrideEnvVar), else `$XDG_CONFIG_HOME/nvidia-container-runtime/config.toml` when
  XDG_CONFIG_HOME is set, else `/etc/nvidia-container-runtime/config.toml`. A missing file means NVIDIA's defaults,
  which accept NVIDIA_VISIBLE_DEVICES from unprivileged containers.
- The GPU Operator's toolkit installer does not register the binary itself: each runtime is a `#! /bin/sh` wrapper
  that runs `<name>.real` with `NVIDIA_CTK_CONFIG_FILE_PATH=<install dir>/.config/nvidia-container-runtime/config.toml`
  and `PATH=<install dir>:$PATH` set before the command, one `KEY=value` line each, continued with a backslash
  (cmd/nvidia-ctk-installer/toolkit/installer/executables.go, collectExecutables and the wrapper template; the
  config written there by cmd/nvidia-ctk-installer/toolkit/toolkit.go, Install). So an entry's binary is read: a
  script (`#!`) is a wrapper and the config is the one its environment names; an executable is the runtime itself
  and reads the lookup order above with no override.
- Not followed: an XDG_CONFIG_HOME or NVIDIA_CTK_CONFIG_FILE_PATH in the container runtime's own environment (a
  systemd Environment= of containerd), which the runtime would inherit.

Stdlib only, Python 3.8+: node-side modules and controller-side plugins import it by the same package path.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Mapping

from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd.tables import (
    cri_config,
    crio_config,
    get_path,
    read_tables,
)

RUNTIME_BINARY = "nvidia-container-runtime"
MODES = ("cdi", "legacy")
BINARIES = frozenset([RUNTIME_BINARY] + [f"{RUNTIME_BINARY}.{mode}" for mode in MODES])


def is_nvidia_binary(path) -> bool:
    """True when ``path`` (a name or a path in any directory) is NVIDIA's runtime or one of its mode executables."""
    if not isinstance(path, str):
        return False
    name = posixpath.basename(path.strip().strip("\"'").rstrip("/"))
    return name in BINARIES


def entry_binary(kind: str, entry):
    """The OCI runtime binary of one runtime entry (a dict), or None where the entry does not name one.

    kind: docker (`path`), containerd (`options.BinaryName`, spelled in any case, as containerd decodes options
    case-insensitively), crio (`runtime_path`)."""
    if not isinstance(entry, Mapping):
        return None
    if kind == "docker":
        value = entry.get("path")
    elif kind == "containerd":
        options = entry.get("options") if isinstance(entry.get("options"), Mapping) else {}
        value = next((v for k, v in options.items() if isinstance(k, str) and k.lower() == "binaryname"), None)
    elif kind == "crio":
        value = entry.get("runtime_path")
    else:
        raise ValueError(f"unknown runtime kind {kind!r}")
    return value if isinstance(value, str) and value else None


def is_nvidia_entry(name, binary, project_name: str = "nvidia") -> bool:
    """Whether the runtime entry ``name`` with ``binary`` (None: not known) is NVIDIA's runtime."""
    if binary:
        return is_nvidia_binary(binary)
    return bool(name) and name == project_name


def nvidia_entries(kind: str, runtimes, project_name: str = "nvidia") -> dict:
    """{name: binary} of the entries of ``runtimes`` ({name: entry}) that are NVIDIA's runtime."""
    found = {}
    for name, entry in (runtimes or {}).items() if isinstance(runtimes, Mapping) else ():
        binary = entry_binary(kind, entry)
        if is_nvidia_entry(name, binary, project_name):
            found[str(name)] = binary
    return found


# GetConfigFilePath's inputs and default (api/config/v1/config.go: FilePathOverrideEnvVar, configRootOverride,
# RelativeFilePath, the "/etc" config root).
CONFIG_FILE_ENV = "NVIDIA_CTK_CONFIG_FILE_PATH"
CONFIG_ROOT_ENV = "XDG_CONFIG_HOME"
CONFIG_RELATIVE = "nvidia-container-runtime/config.toml"
CONFIG_DEFAULT = "/etc/" + CONFIG_RELATIVE
# Where a BinaryName without a directory is looked up (the PATH a systemd service gets).
SEARCH_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
_ASSIGNMENT = re.compile(r"""^([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|'[^']*'|[^ \t"'`]*)$""")


def config_file_path(env) -> str:
    """The config file NVIDIA's runtime reads in environment ``env`` (GetConfigFilePath)."""
    env = env if isinstance(env, Mapping) else {}
    if env.get(CONFIG_FILE_ENV):
        return env[CONFIG_FILE_ENV]
    return posixpath.join(env.get(CONFIG_ROOT_ENV) or "/etc", CONFIG_RELATIVE)


def _logical_lines(text: str) -> list:
    """The script's lines with backslash continuations joined, comments and blank lines left out."""
    lines = re.sub(r"\\[ \t]*\n", " ", text).splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def parse_wrapper(text) -> dict | None:
    """The command of a shell wrapper that runs NVIDIA's runtime and the environment it sets for it:
    {"exec": the runtime's path (`...nvidia-container-runtime.real` in the installer's wrappers), "env": {name: value},
    "unresolved": names of the config variables whose value the script computes ($..., `...`)}. None when no line of
    the script runs NVIDIA's runtime (then it is no wrapper this definition can follow)."""
    if not isinstance(text, str):
        return None
    exported: dict = {}
    for line in _logical_lines(text):
        words = line.split()
        if words and words[0] in ("exec", "export"):
            words = words[1:]
        env = dict(exported)
        while words and _ASSIGNMENT.match(words[0]):
            key, value = _ASSIGNMENT.match(words[0]).groups()
            env[key] = value[1:-1] if value[:1] in "\"'" and len(value) >= 2 else value
            words = words[1:]
        if not words:  # assignments alone (or `export K=V`): the environment of what follows
            exported = env
            continue
        command = words[0].strip("\"'")
        base = posixpath.basename(command)
        if base.endswith(".real"):
            base = base[: -len(".real")]
        if base in BINARIES:
            unresolved = [k for k in (CONFIG_FILE_ENV, CONFIG_ROOT_ENV) if any(c in env.get(k, "") for c in "$`")]
            return {"exec": command, "env": env, "unresolved": unresolved}
    return None


PLAIN_OCI_RUNTIMES = ("runc", "crun")


def plain_oci_runtime(text) -> str | None:
    """The OCI runtime (runc, crun) a script hands every call to with a literal `exec <runtime> "$@"` as its last
    command, where no command of it names NVIDIA's runtime or a variable: such a script is that runtime, it reads no
    toolkit config and injects no device. None otherwise (the script cannot be followed)."""
    lines = _logical_lines(text) if isinstance(text, str) else []
    if not lines or any("$" in line.replace('"$@"', "").replace('"${1:-}"', "") for line in lines[-1:]):
        return None
    words = lines[-1].split()
    if len(words) < 2 or words[0] != "exec" or words[-1] != '"$@"':
        return None
    runtime = posixpath.basename(words[1].strip("\"'"))
    if runtime not in PLAIN_OCI_RUNTIMES or len(words) != 3:
        return None
    named = {posixpath.basename(w.strip("\"'")) for line in lines for w in line.split()}
    named |= {n[: -len(".real")] for n in named if n.endswith(".real")}
    return None if named & set(BINARIES) else words[1]


def resolve_binary(binary, exists) -> str | None:
    """The path of an entry's binary: as given when absolute, else the first of SEARCH_PATH where ``exists`` (a
    callable on a path) finds it; None when it cannot be found."""
    if not isinstance(binary, str) or not binary.strip():
        return None
    binary = binary.strip().strip("\"'")
    if binary.startswith("/"):
        return binary if exists(binary) else None
    return next((path for path in (posixpath.join(d, binary) for d in SEARCH_PATH) if exists(path)), None)


def config_read_by(binary, read) -> dict:
    """The toolkit config the runtime of an entry with ``binary`` really reads. ``read``: a callable returning a
    file's bytes (None when it cannot be read), on the node's paths.

    {"binary": as the entry names it, "path": where it was found (None: not there), "wrapper": whether it is a
    script, "exec": what the wrapper runs, "config": the file the runtime reads (None where it cannot be told),
    "via": how that was found, "problem": why the config cannot be told ("" when it can)}."""
    found = resolve_binary(binary, lambda path: read(path) is not None)
    result = {"binary": binary, "path": found, "wrapper": False, "exec": None, "config": None, "via": "", "problem": ""}
    if found is None:
        # no such file: every container through the entry fails to start, none gets a device
        result["via"] = "binary not found"
        return result
    head = read(found) or b""
    if not head.startswith(b"#!"):
        result.update(config=config_file_path({}), via="NVIDIA's lookup order (no override)")
        return result
    result["wrapper"] = True
    text = head.decode("utf-8", "replace")
    wrapper = parse_wrapper(text)
    if wrapper is None:
        plain = plain_oci_runtime(text)
        if plain:  # e.g. the project's TEST STAND-IN script: it hands every call to runc and injects nothing
            result.update(exec=plain, via=f"wrapper {found} runs {plain}, not NVIDIA's runtime: no toolkit config")
            return result
        result["problem"] = f"{found} is a script that runs no NVIDIA runtime this project can follow"
        return result
    result["exec"] = wrapper["exec"]
    if wrapper["unresolved"]:
        result["problem"] = f"{found} computes {', '.join(wrapper['unresolved'])} at run time"
        return result
    env = wrapper["env"]
    named = CONFIG_FILE_ENV if env.get(CONFIG_FILE_ENV) else (CONFIG_ROOT_ENV if env.get(CONFIG_ROOT_ENV) else "")
    result["config"] = config_file_path(env)
    result["via"] = f"wrapper {found} sets {named}" if named else f"wrapper {found} sets no config variable"
    return result


def nvidia_binaries(binaries, project_name: str = "nvidia") -> dict:
    """{name: binary} of the entries of ``binaries`` ({name: binary or None}) that are NVIDIA's runtime."""
    if not isinstance(binaries, Mapping):
        return {}
    return {
        str(n): b for n, b in binaries.items() if is_nvidia_entry(n, b if isinstance(b, str) else None, project_name)
    }


def describe(name, binary) -> str:
    """How a message names an entry: `nvidia-cdi (/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi)`."""
    return f"{name} ({binary})" if binary else str(name)


# The toolkit's config.toml as the doctor and the guards read it (moved from gpu_pods.py, which re-exports it), through
# the same reader (containerd/tables.py).
ENVVAR_KEY = "accept-nvidia-visible-devices-envvar-when-unprivileged"
VOLUME_MOUNTS_KEY = "accept-nvidia-visible-devices-as-volume-mounts"
# The toolkit's own defaults for the two keys (REFERENCE.md).
TOOLKIT_DEFAULTS = {ENVVAR_KEY: True, VOLUME_MOUNTS_KEY: False}
# The OCI annotation prefixes NVIDIA's runtime reads CDI device requests from (table and key of config.toml), and
# its default when config.toml names none (toolkit 1.20, api/config/v1/config.go GetDefault: cdi.AnnotationPrefix).
# An empty list: the runtime takes no device request from annotations (internal/config/image/cuda_image.go,
# cdiDeviceRequestsFromAnnotations returns nil without prefixes).
CDI_TABLE = "nvidia-container-runtime.modes.cdi"
CDI_PREFIXES_KEY = "annotation-prefixes"
CDI_PREFIXES_DEFAULT = ["cdi.k8s.io/"]


def read_file(path: str, binary: bool = False):
    """A file's text (bytes with binary), None when it cannot be read."""
    try:
        with open(path, "rb" if binary else "r", **({} if binary else {"errors": "replace"})) as handle:
            return handle.read()
    except (OSError, ValueError):
        return None


def rooted(root: str, path: str) -> str:
    """path below root (a test's node tree; "/" on the node)."""
    return os.path.join(root, path.lstrip("/")) if root not in ("", "/") else path


def cdi_annotation_prefixes(text) -> list | None:
    """annotation-prefixes of config.toml's [nvidia-container-runtime.modes.cdi] table (None when unset or when the
    text is not TOML)."""
    value = get_path(read_tables(text)[0], (*CDI_TABLE.split("."), CDI_PREFIXES_KEY)) if text else None
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else None


def toolkit_config_facts(root: str, path: str | None) -> dict:
    """The two keys of the toolkit's config.toml at `path` (below `root`; None: no file known) and its CDI
    annotation prefixes as the file sets them (null when unset, or when the file is not TOML) and as they act (the
    toolkit's defaults for unset keys). The path's one home is __gpu_node_facts_toolkit_config
    (roles/gpu_node_facts/vars/main.yml)."""
    text = read_file(rooted(root, path)) if path else None
    tree = read_tables(text)[0] if text else {}
    facts = {"path": path, "exists": text is not None}
    for key, name in ((ENVVAR_KEY, "accept_envvar_when_unprivileged"), (VOLUME_MOUNTS_KEY, "accept_volume_mounts")):
        value = tree.get(key) if isinstance(tree.get(key), bool) else None
        facts[name] = value
        facts[name + "_effective"] = TOOLKIT_DEFAULTS[key] if value is None else value
    prefixes = cdi_annotation_prefixes(text)
    facts["cdi_annotation_prefixes"] = prefixes
    facts["cdi_annotation_prefixes_effective"] = list(CDI_PREFIXES_DEFAULT) if prefixes is None else prefixes
    return facts


def _read_head(path: str, size: int = 65536):
    """The first bytes of a file (a wrapper script whole, an executable's header), None when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            return handle.read(size)
    except (OSError, ValueError):
        return None


def nvidia_runtime_facts(root: str, runtime_defaults: dict, own_config: str | None) -> list:
    """Every entry of the node's runtimes that is NVIDIA's runtime (runtime_defaults' nvidia_entries), with the
    toolkit config its runtime really reads (nvidia_runtime.config_read_by) and that config's isolation keys
    (toolkit_config_facts; null where no config can be told). own: the config is the one the toolkit role merges."""
    entries, configs = [], {}
    for runtime, state in sorted((runtime_defaults or {}).items()):
        for name, binary in sorted(((state or {}).get("nvidia_entries") or {}).items()):
            read = config_read_by(binary, lambda path: _read_head(rooted(root, path)))
            config = read["config"]
            if config and config not in configs:
                configs[config] = toolkit_config_facts(root, config)
            entries.append(
                {
                    "runtime": runtime,
                    "name": name,
                    **read,
                    "own": bool(config) and config == own_config,
                    "toolkit": configs.get(config),
                }
            )
    return entries


# The runtimes' config files as the facts read their entries, through the one reader of containerd's (and CRI-O's)
# TOML (containerd/tables.py): each file's CRI table (cri_config), CRI-O's [crio.runtime] (crio_config).
def _parsed(texts) -> list:
    """The parsed texts, in order; a text that is not TOML adds nothing (its runtime cannot read it either)."""
    return [read_tables(text)[0] for text in texts if text]


def _binaries(kind: str, runtimes) -> dict:
    """{name: binary} of the runtime tables that name their binary (entry_binary)."""
    found = {}
    for name, entry in runtimes.items():
        binary = entry_binary(kind, entry)
        if binary:
            found[name] = binary
    return found


def _with_binary(state: dict, binaries: dict, name: str = "nvidia") -> dict:
    """state plus the default entry's binary (null when the config does not name one) and whether the default is
    NVIDIA's runtime (plugins/module_utils/nvidia/runtime.py)."""
    default = state.get("default")
    state["default_binary"] = binaries.get(default) if default else None
    state["default_nvidia"] = bool(default) and is_nvidia_entry(default, state["default_binary"], name)
    # every entry that is NVIDIA's runtime, default or not (issue 46: each is held to the same isolation)
    state["nvidia_entries"] = nvidia_binaries(binaries, name)
    return state


def containerd_runtime_state(texts, version: str | None) -> dict:
    """{default, cdi, default_binary, default_nvidia, nvidia_entries} from containerd config texts (config.toml and
    its imports in containerd's order, or one `containerd config dump`; later wins), each read in its CRI table
    (containerd/tables.py cri_config): default_runtime_name (containerd's default runc),
    enable_cdi (default false before 2.0, true from 2.0; REFERENCE.md), the default entry's BinaryName and whether it
    is NVIDIA's runtime."""
    default, cdi, binaries = None, None, {}
    for tree in _parsed(texts):
        config = cri_config(tree)
        default = config["default"] or default
        cdi = cdi if config["enable_cdi"] is None else config["enable_cdi"]
        binaries.update(_binaries("containerd", config["runtimes"]))
    major = int(re.match(r"\d+", version or "0").group(0))
    state = {"default": default or "runc", "cdi": cdi if cdi is not None else major >= 2}
    return _with_binary(state, binaries)


def crio_runtime_state(texts) -> dict:
    """{default, cdi, default_binary, default_nvidia, nvidia_entries} of CRI-O from crio.conf and its drop-ins (in
    order, later wins; containerd/tables.py crio_config): [crio.runtime] default_runtime (crun from 1.31, runc before:
    an unset value is reported as null) and the runtime_path of each [crio.runtime.runtimes.<name>]; CDI is always on
    in CRI-O."""
    default, binaries = None, {}
    for tree in _parsed(texts):
        config = crio_config(tree)
        default = config["default"] or default
        binaries.update(_binaries("crio", config["runtimes"]))
    return _with_binary({"default": default, "cdi": True}, binaries)


def docker_runtime_state(text) -> dict:
    """{default, cdi, default_binary, default_nvidia} of docker: daemon.json default-runtime (runc when unset) and
    its `runtimes` entry's path; CDI reaches no pod through cri-dockerd, so it does not count."""
    try:
        data = json.loads(text) if text and text.strip() else {}
    except ValueError:
        data = {}
    data = data if isinstance(data, dict) else {}
    runtimes = data.get("runtimes") if isinstance(data.get("runtimes"), dict) else {}
    binaries = {name: entry_binary("docker", entry) for name, entry in runtimes.items()}
    return _with_binary({"default": data.get("default-runtime") or "runc", "cdi": False}, binaries)
