"""containerd config.toml editing: the pure logic behind the ``containerd_config`` action.

This file runs on the CONTROLLER only (it imports tomlkit, which nodes do not
need): plugins/action/containerd_config.py loads it by path. No module may
import it. Unit tests import it directly (tests/unit/conftest.py puts
plugins/module_utils on sys.path).

Every change goes through the project's merge engine (config_merge.merge_into)
into a tomlkit document, so comments and the layout of everything we do not
touch survive; only new items are laid out (indentation and blank lines copied
from the file's own style).

Tables per config version (see shared REFERENCE.md):

=======  ===========================================  ===============================  ==================
version  CRI table (enable_cdi, cdi_spec_dirs)        runtimes / default_runtime_name  written by
=======  ===========================================  ===============================  ==================
1        ``plugins.cri``                              ``<cri>.containerd.runtimes`` /  containerd < 1.3
                                                      ``<cri>.containerd``
2        ``plugins."io.containerd.grpc.v1.cri"``      same, under the CRI table        containerd 1.3-1.7
3        ``plugins."io.containerd.cri.v1.runtime"``   same, under the CRI table        containerd 2.0-2.2
4        ``plugins."io.containerd.cri.v1.runtime"``   same, under the CRI table        containerd 2.3+
=======  ===========================================  ===============================  ==================

(written by: ``containerd config default``, cmd/containerd/command/config.go at v1.3.0 and v1.7.0 sets version 2;
version/version.go ``ConfigVersion`` is 3 at v2.0.0 and v2.2.7, 4 at v2.3.0 and v2.3.4.)

A file without a ``version`` key is version 1; an empty file (nothing but
comments and blank lines) counts as the version the node's containerd writes
(containerd_versions.config_version_for: 2, 3 from containerd 2.0, 4 from 2.3).

Version 4 (containerd v2.3.4, commit db8809540e1a7a9da5d518876894933ff55692ab):

- The CRI tables keep version 3's names: ``containerd config default`` of 2.3.4 writes
  ``plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc`` (the build and its output in
  shared/upstream/containerd, config-default-v4.toml), and plugins/cri/runtime/plugin.go registers the same
  plugin (type io.containerd.cri.v1, id runtime). What version 4 moves are the server properties:
  cmd/containerd/server/config/config.go ``serviceMigrate`` takes the top-level ``grpc``, ``ttrpc``, ``debug``
  and ``metrics`` tables of a version 3 file to the plugins ``io.containerd.server.v1.{grpc,grpc-tcp,ttrpc,
  debug,metrics}`` and ``io.containerd.metrics.v1.grpc-prometheus`` (SERVICE_PLUGINS below).
- Every file (root and each import) is migrated on its own, in memory, before it is merged
  (``LoadConfigWithPlugins``); the CRI plugins' ``ConfigMigration`` (plugins/cri/runtime/plugin.go and
  plugins/cri/cri.go) moves a version 2 file's ``io.containerd.grpc.v1.cri`` settings to
  ``io.containerd.cri.v1.runtime`` (images settings to ``io.containerd.cri.v1.images``). So ``config dump`` of
  2.3 prints version 4 with ``io.containerd.cri.v1.*`` tables whatever the files say: the daemon-verified
  reading (verify_reading) reads the dump by the dump's version, the edit writes the file's own version.
- ``imports``: relative to the importing file, globbed (``resolveImports``); the default config imports
  ``/etc/containerd/conf.d/*.toml``, and the dump lists that pattern in ``imports`` even where no file imports it
  (cmd/containerd/command/config.go, ``platformAgnosticDefaultConfig``).
- A drop-in must not carry a higher version than its root file on disk: 2.3 refuses to start
  (containerd_versions.py). method=dropin writes the root file's own version into the drop-in.
"""

from __future__ import annotations

import copy
import fnmatch
import importlib.util
import posixpath
import re
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import tomlkit
from tomlkit.container import Container
from tomlkit.exceptions import ParseError, TOMLKitError
from tomlkit.items import AoT, Comment, Table, Whitespace

try:  # unit tests: plugins/module_utils is on sys.path
    import containerd_versions
    import nvidia_runtime

    import config_merge
except ImportError:  # pragma: no cover - controller: load the sibling file by path

    def _load_sibling(name: str):
        module_name = f"gpu_node_provisioning_{name}"
        if module_name in sys.modules:
            return sys.modules[module_name]
        spec = importlib.util.spec_from_file_location(module_name, Path(__file__).with_name(f"{name}.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        return module

    config_merge = _load_sibling("config_merge")
    containerd_versions = _load_sibling("containerd_versions")
    nvidia_runtime = _load_sibling("nvidia_runtime")

DEFAULT_PATH = "/etc/containerd/config.toml"
DEFAULT_DROPIN_DIR = "/etc/containerd/conf.d"
DEFAULT_RUNTIME_TYPE = "io.containerd.runc.v2"
SUPPORTED_VERSIONS = (1, 2, 3, 4)
CRI_TABLES = {
    1: ("plugins", "cri"),
    2: ("plugins", "io.containerd.grpc.v1.cri"),
    3: ("plugins", "io.containerd.cri.v1.runtime"),
    4: ("plugins", "io.containerd.cri.v1.runtime"),  # same names as 3 (see the module docstring)
}
SUPPORTED_TEXT = (
    "1 (no version key, containerd 1.x), 2 (containerd 1.x and 2.x), 3 (containerd 2.x) and 4 (containerd 2.3+)"
)
# serviceMigrate (cmd/containerd/server/config/config.go, v2.3.4): the top-level tables of a file below version 4
# that containerd reads as these plugins' tables instead
SERVICE_PLUGINS = {
    "grpc": ("io.containerd.server.v1.grpc", "io.containerd.server.v1.grpc-tcp", "io.containerd.server.v1.ttrpc"),
    "ttrpc": ("io.containerd.server.v1.ttrpc",),
    "debug": ("io.containerd.server.v1.debug",),
    "metrics": ("io.containerd.server.v1.metrics", "io.containerd.metrics.v1.grpc-prometheus"),
}
DROPIN_MIN_CONTAINERD = (2, 0)
DROPIN_HEADER = (
    "# Managed by Ansible (containerd_config, method=dropin). Local changes are overwritten.\n"
    "# containerd 2.x deep-merges this file into {root}.\n"
)

__all__ = [
    "CRI_TABLES",
    "DEFAULT_PATH",
    "DEFAULT_RUNTIME_TYPE",
    "SUPPORTED_VERSIONS",
    "ContainerdConfigError",
    "Outcome",
    "Request",
    "TablePaths",
    "build_changes",
    "check_dropin_allowed",
    "check_effective",
    "config_version",
    "default_dropin_path",
    "dotted_key",
    "empty_version_for",
    "ensure_import",
    "parse_containerd_version",
    "parse_document",
    "plan_dropin",
    "plan_inplace",
    "render_dropin",
    "table_paths",
    "verify_reading",
]


class ContainerdConfigError(Exception):
    """A problem the user has to fix; the message names the file, the problem and the fix."""


@dataclass(frozen=True)
class TablePaths:
    """Key paths (lists of keys) of the tables this action edits, for one config version."""

    cri: tuple
    containerd: tuple
    runtimes: tuple

    def runtime(self, name: str) -> tuple:
        return (*self.runtimes, name)


@dataclass
class Request:
    """What the user asked for (the action's options, already type-checked)."""

    runtime: Mapping | None = None
    default_runtime: str | None = None
    enable_cdi: bool | None = None
    cdi_spec_dirs: list | None = None
    settings: Mapping = field(default_factory=dict)
    list_strategy: str = "replace"
    # remove default_runtime_name when it names runtime.name (nvidia must not silently stay the default)
    unset_default: bool = False
    # what containerd itself says (parsed TOML, plain dicts): the effective config of the file,
    # imports included (`containerd --config <path> config dump`), and `containerd config default`
    effective: Mapping | None = None
    defaults: Mapping | None = None


@dataclass
class Outcome:
    """The result of planning one file: texts before and after, and what we learned."""

    path: str
    before: str
    after: str
    changed: bool
    version: int
    runtime_table: str | None = None
    options_copied_from: str | None = None
    existed: bool = True
    default_table_written: str | None = None
    # NVIDIA's runtime in the file under other names, the default moved away from or kept (nvidia_summary)
    nvidia: dict = field(default_factory=dict)

    def diff(self) -> dict:
        return {"before_header": self.path, "after_header": self.path, "before": self.before, "after": self.after}


# --------------------------------------------------------------------------- parsing


def _dotted_comments(item, path=()) -> dict:
    """{key path: (whitespace before the comment, the comment)} of the values under a dotted key's table item."""
    found = {}
    body = item.value.body if isinstance(item, Table) else []
    for key, child in body:
        if key is None:
            continue
        if isinstance(child, Table):
            found.update(_dotted_comments(child, (*path, key.key)))
        elif getattr(child, "trivia", None) is not None and child.trivia.comment:
            found[(*path, key.key)] = (child.trivia.comment_ws, child.trivia.comment)
    return found


def undot_tables(container) -> bool:
    """Rewrite the dotted keys of ``container`` (a tomlkit document or table, and its tables, recursively) as
    standard tables holding the same values; return True when there was one.

    ``plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options.SystemdCgroup = true`` is valid TOML,
    but tomlkit cannot add keys next to a dotted key and still render parseable TOML. The tree under such a
    key is written back as ``[a.b.c]`` tables, its values kept with their inline comments
    (``SystemdCgroup = true   # keep systemd cgroups``, issue 37); comment lines stay where they were.
    """
    body = container.body if isinstance(container, Container) else container.value.body
    names = []
    comments: dict = {}
    for key, item in body:
        if key is not None and key.is_dotted():
            if key.key not in names:
                names.append(key.key)
            for path, comment in _dotted_comments(item).items():
                comments[(key.key, *path)] = comment
    for name in names:
        value = container.unwrap()[name]
        container.remove(name)
        container.append(name, value)
    for path, (space, comment) in comments.items():
        leaf = container
        for part in path:
            leaf = leaf.item(part) if hasattr(leaf, "item") else None
        if leaf is not None and getattr(leaf, "trivia", None) is not None:
            leaf.trivia.comment_ws, leaf.trivia.comment = space or "  ", comment
    found = bool(names)
    for key, item in list(body):
        if key is not None and isinstance(item, Table):
            found = undot_tables(item) or found
    return found


def parse_document(text: str, path: str) -> tomlkit.TOMLDocument:
    """Parse ``text`` (the content of ``path``) with dotted keys as tables (see ``undot_tables``); raise
    ContainerdConfigError naming file and position."""
    try:
        doc = tomlkit.parse(text)
        undot_tables(doc)
        return doc
    except ParseError as exc:
        raise ContainerdConfigError(
            f"{path} is not valid TOML (line {exc.line}, column {exc.col}): {exc}. "
            "containerd cannot read it either: fix the file by hand or restore a backup, then run again."
        ) from exc
    except TOMLKitError as exc:
        raise ContainerdConfigError(
            f"{path} is not valid TOML: {exc}. Fix the file by hand or restore a backup, then run again."
        ) from exc


def _is_empty(doc) -> bool:
    return len(doc) == 0


def config_version(doc, path: str, empty_version: int = 2) -> int:
    """Return the config version of ``doc`` (see the module docstring); raise for unsupported versions."""
    if _is_empty(doc):
        return empty_version
    if "version" not in doc:
        return 1
    version = doc["version"].unwrap() if hasattr(doc["version"], "unwrap") else doc["version"]
    supported = SUPPORTED_TEXT
    if isinstance(version, bool) or not isinstance(version, int):
        raise ContainerdConfigError(
            f"{path}: the top-level 'version' must be an integer, found {version!r}. "
            f"Supported config versions are {supported}; fix the 'version' line."
        )
    if version not in SUPPORTED_VERSIONS:
        raise ContainerdConfigError(
            f"{path} uses containerd config version {version}, which containerd_config does not support "
            f"(supported: {supported}). Its table layout is unknown to this action, so nothing was changed: "
            "edit the file by hand, or add the version's table mapping to plugins/module_utils/containerd_toml.py."
        )
    return version


def table_paths(version: int) -> TablePaths:
    """Key paths of the CRI table, its ``containerd`` table and the runtimes table for ``version``."""
    if version not in CRI_TABLES:
        raise ContainerdConfigError(
            f"containerd config version {version} is not supported (supported: {SUPPORTED_TEXT})"
        )
    cri = CRI_TABLES[version]
    return TablePaths(cri=cri, containerd=(*cri, "containerd"), runtimes=(*cri, "containerd", "runtimes"))


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def dotted_key(path) -> str:
    """Render a key path the way a TOML table header names it: plugins."io.containerd.grpc.v1.cri".containerd."""
    return ".".join(
        key if _BARE_KEY.fullmatch(key) else '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"' for key in path
    )


def parse_containerd_version(text: str | None) -> tuple[int, int, int] | None:
    """Version of containerd from ``containerd --version`` output or a version string; None if none is found.

    Understands e.g. ``containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3``,
    ``containerd containerd.io 1.7.27 05044ec...``, ``... containerd/v2 v2.1.4 ...`` and ``2.0``.
    """
    if not text:
        return None
    for token in str(text).split():
        match = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", token)
        if match:
            return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)
    return None


def check_dropin_allowed(containerd_version: tuple | None, path: str) -> None:
    """Raise unless drop-ins are safe for this containerd (2.0+ deep-merges imported plugin tables)."""
    if containerd_version is None:
        raise ContainerdConfigError(
            f"method=dropin needs to know containerd's version, and it could not be found (containerd --version "
            f"failed and containerd_version is not set). Set containerd_version, or use method=inplace to edit {path}."
        )
    if tuple(containerd_version[:2]) < DROPIN_MIN_CONTAINERD:
        found = ".".join(str(part) for part in containerd_version)
        raise ContainerdConfigError(
            f"method=dropin is refused for containerd {found}: containerd 1.x replaces a whole plugins.<id> table "
            f"with the one from an imported file, so a drop-in that only adds a runtime would wipe the CRI settings "
            f"of {path} (runc's SystemdCgroup among them). Use method=inplace, which merges into {path} itself; "
            "drop-ins are only safe from containerd 2.0, which deep-merges imported tables."
        )


def empty_version_for(containerd_version: tuple | None) -> int:
    """The config version an empty or new file gets where ``containerd_version`` runs (containerd_versions)."""
    return containerd_versions.config_version_for(containerd_version)


def default_dropin_path(runtime: Mapping | None) -> str:
    name = (runtime or {}).get("name") or "gpu-node"
    return f"{DEFAULT_DROPIN_DIR}/99-{name}.toml"


# --------------------------------------------------------------------------- changes


def _plain(value):
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if callable(unwrap) else copy.deepcopy(value)


def _cri_runtimes(config: Mapping | None) -> tuple[dict, str | None]:
    """(runtimes, default_runtime_name) of a parsed containerd config of any supported version, or ({}, None)."""
    if not isinstance(config, Mapping):
        return {}, None
    version = config.get("version", 1)
    if version not in CRI_TABLES:
        return {}, None
    paths = table_paths(version)
    runtimes = config_merge.get_path(config, list(paths.runtimes), {})
    default = config_merge.get_path(config, [*paths.containerd, "default_runtime_name"])
    runtimes = _plain(runtimes) if isinstance(runtimes, Mapping) else {}
    return runtimes, (_plain(default) if isinstance(_plain(default), str) and _plain(default) else None)


def _runtime_entry(name: str, sources) -> tuple[dict | None, str | None]:
    """The whole table of runtime ``name`` from the first source (label, runtimes) that has it."""
    for label, runtimes in sources:
        entry = runtimes.get(name)
        if isinstance(entry, Mapping):
            return copy.deepcopy(dict(entry)), label
    return None, None


def nvidia_default(name, runtimes_sources, project_name: str | None) -> tuple[str | None, str | None]:
    """(name, binary) of ``name`` when that runtime is NVIDIA's runtime (plugins/module_utils/nvidia_runtime.py: its
    BinaryName, in the first of ``runtimes_sources`` that has its table; an entry named like the project's runtime
    without a BinaryName counts), else (None, None)."""
    if not isinstance(name, str) or not name:
        return None, None
    entry = next((runtimes[name] for runtimes in runtimes_sources if isinstance(runtimes.get(name), Mapping)), None)
    binary = nvidia_runtime.entry_binary("containerd", entry)
    if nvidia_runtime.is_nvidia_entry(name, binary, project_name or "nvidia"):
        return name, binary
    return None, None


def _file_nvidia_default(doc, paths: TablePaths, request: Request) -> tuple[str | None, str | None]:
    """The default_runtime_name of ``doc`` when it names NVIDIA's runtime, under any name, and its binary."""
    name = request.runtime["name"] if request.runtime else None
    file_default = _plain(config_merge.get_path(doc, [*paths.containerd, "default_runtime_name"]))
    file_runtimes = _plain(config_merge.get_path(doc, list(paths.runtimes), {}))
    file_runtimes = file_runtimes if isinstance(file_runtimes, Mapping) else {}
    effective_runtimes, _default = _cri_runtimes(request.effective)
    return nvidia_default(file_default, [file_runtimes, effective_runtimes], name)


def keep_nvidia_default(doc, version: int, request: Request) -> Request:
    """``request`` as it applies to ``doc``: asked to make the runtime the default where NVIDIA's runtime is the
    default already under another name (nvidia-container-runtime, nvidia-cdi ...), the default stays that entry
    (nvidia_container_toolkit_keep_gpu_pod_access; no second, unused NVIDIA default)."""
    name = request.runtime["name"] if request.runtime else None
    if request.default_runtime is None or request.default_runtime != name:
        return request
    current, _binary = _file_nvidia_default(doc, table_paths(version), request)
    if current is None:
        effective_runtimes, effective_default = _cri_runtimes(request.effective)
        current, _binary = nvidia_default(effective_default, [effective_runtimes], name)
    if current is None or current == name:
        return request
    return replace(request, default_runtime=None, unset_default=False)


def nvidia_summary(doc, version: int, request: Request, plan_request: Request) -> dict:
    """What the user is told about NVIDIA's runtime in this file: its entries under other names (kept: RuntimeClasses
    name them), the default that moved away from one (and whose settings runc got), the default that was kept."""
    paths = table_paths(version)
    name = request.runtime["name"] if request.runtime else None
    file_runtimes = _plain(config_merge.get_path(doc, list(paths.runtimes), {}))
    file_runtimes = file_runtimes if isinstance(file_runtimes, Mapping) else {}
    effective_runtimes, _default = _cri_runtimes(request.effective)
    entries = {}
    for runtimes in (effective_runtimes, file_runtimes):
        for entry_name, binary in nvidia_runtime.nvidia_entries("containerd", runtimes, name or "nvidia").items():
            if entry_name != name:
                entries[entry_name] = binary
    current, binary = _file_nvidia_default(doc, paths, request)
    moved = (
        current if current is not None and plan_request.unset_default and plan_request.default_runtime is None else None
    )
    kept = None
    if plan_request.default_runtime is None and request.default_runtime == name and name is not None:
        kept = current or _cri_runtimes(request.effective)[1]
    notes = []
    if entries:
        notes.append(
            "NVIDIA's runtime is also registered as "
            + ", ".join(nvidia_runtime.describe(n, b) for n, b in sorted(entries.items()))
            + ": kept (RuntimeClasses name it)"
        )
    if moved:
        notes.append(
            f"the default runtime was NVIDIA's runtime {nvidia_runtime.describe(current, binary)}: it is no longer the"
            " default, and runc's table keeps its settings (all but BinaryName)"
        )
    if kept:
        notes.append(f"NVIDIA's runtime {kept} stays the default (no second default named {name} is made)")
    return {"entries": entries, "moved_from": moved, "kept": kept, "note": "; ".join(notes)}


def _default_runtime_plan(doc, paths: TablePaths, request: Request) -> dict:
    """Work out, from the file, containerd's effective config and its defaults, which runtime is the default
    once this request is applied, whose table the new runtime copies, and whether the default runtime's own
    table must be written into the file (it is not there, so a runtimes table without it would drop it)."""
    name = request.runtime["name"] if request.runtime else None
    runtime_type = (request.runtime or {}).get("runtime_type") or DEFAULT_RUNTIME_TYPE
    file_runtimes = _plain(config_merge.get_path(doc, list(paths.runtimes), {}))
    file_runtimes = file_runtimes if isinstance(file_runtimes, Mapping) else {}
    file_default = _plain(config_merge.get_path(doc, [*paths.containerd, "default_runtime_name"]))
    effective_runtimes, effective_default = _cri_runtimes(request.effective)
    default_runtimes, builtin_default = _cri_runtimes(request.defaults)
    # the default is NVIDIA's runtime under whatever name (issue 37): nvidia, nvidia-container-runtime, nvidia-cdi ...
    nvidia_file_default, _binary = nvidia_default(file_default, [file_runtimes, effective_runtimes], name)
    if request.default_runtime is not None:
        target = request.default_runtime
    elif request.unset_default and nvidia_file_default is not None:
        target = builtin_default or "runc"
    else:
        target = effective_default or (file_default if isinstance(file_default, str) else None)
        target = target or builtin_default or "runc"
    sources = [
        ("the effective config", effective_runtimes),
        ("the file", file_runtimes),
        ("containerd config default", default_runtimes),
    ]
    source_name = source = None
    # The default moves away from the runtime (it was the default, it is no longer asked to be): the new default's
    # table and the runtime's own keep every key of the old default's effective table (SystemdCgroup above all, or
    # every pod gets another cgroup driver than the kubelet's); only the binary differs (issue 25).
    old_default = None
    if (
        name is not None
        and request.default_runtime is None
        and request.unset_default
        and nvidia_file_default is not None
        and target not in file_runtimes
    ):
        old_default, _label = _runtime_entry(nvidia_file_default, sources[:2])
    if old_default is not None:
        # containerd 2.x lays the file's runc table over its built-in one: copy what runc will be once written
        builtin_runc = default_runtimes.get("runc")
        if isinstance(builtin_runc, Mapping):
            source = config_merge.merge(copy.deepcopy(dict(builtin_runc)), old_default, "replace")
        else:
            source = old_default
        source_name = nvidia_file_default
        entry = copy.deepcopy(old_default)
        options = entry.get("options") if isinstance(entry.get("options"), Mapping) else {}
        entry["options"] = {key: value for key, value in options.items() if key.lower() != "binaryname"}
        entry["runtime_type"] = DEFAULT_RUNTIME_TYPE
        return {
            "target": target,
            "source_name": source_name,
            "source": source,
            "write_default": (target, entry),
            "file_default": file_default,
            "effective_default": effective_default,
            "effective_runtimes": effective_runtimes,
            "file_runtimes": file_runtimes,
        }
    for candidate in (target, "runc") if source is None else ():
        if candidate == name:
            continue
        if candidate == "runc" and target == name and "runc" not in file_runtimes:
            # the runtime stays the default and the file has no runc: its own table is what pods run with today
            own, _label = _runtime_entry(name, sources[:2])
            if own is not None:
                source_name, source = name, own
                break
        entry, _label = _runtime_entry(candidate, sources)
        if entry is None:
            continue
        if entry.get("runtime_type") not in (None, "", runtime_type):
            continue  # a kata runtime's table means nothing to runc
        source_name, source = candidate, entry
        break
    write_default = None
    if name is not None and target != name and target not in file_runtimes:
        entry, _label = _runtime_entry(target, [sources[0], sources[2]])
        if entry is not None:
            write_default = (target, entry)
    return {
        "target": target,
        "source_name": source_name,
        "source": source,
        "write_default": write_default,
        "file_default": file_default,
        "effective_default": effective_default,
        "effective_runtimes": effective_runtimes,
        "file_runtimes": file_runtimes,
    }


# containerd decodes a runtime's ``options`` into the shim's options struct case-insensitively (containerd 1.7:
# pkg/cri/sbserver/helpers.go generateRuntimeOptions, toml.Marshal + toml.Unmarshal with pelletier/go-toml,
# whose Unmarshal falls back to a case-insensitive key match; 2.x: go-toml v2, "case-insensitive" field
# matching, see its README). kubespray's template renders the spellings of its inventory (docs/containerd.md:
# ``binaryName``, ``systemdCgroup``), so ``binaryName`` and ``BinaryName`` in one table are the same field and
# which one containerd takes is undefined: option keys are compared, copied and replaced case-insensitively.


def option_keys(options: Mapping | None, key: str) -> list:
    """The keys of ``options`` that containerd reads as option ``key`` (case-insensitive), in file order."""
    if not isinstance(options, Mapping):
        return []
    return [name for name in options if isinstance(name, str) and name.lower() == key.lower()]


def option_value(options: Mapping | None, key: str):
    """The value containerd would give option ``key``: None when absent; a set of the values when the table
    spells it more than once with different values (containerd's pick is undefined then)."""
    values = [options[name] for name in option_keys(options, key)]
    if not values:
        return None
    distinct = []
    for value in values:
        if value not in distinct:
            distinct.append(value)
    return distinct[0] if len(distinct) == 1 else frozenset(map(str, distinct))


def fold_options(*layers: Mapping) -> dict:
    """Merge option tables, later layers winning, keys compared case-insensitively: a key of a later layer
    replaces every spelling of it in the earlier ones, so the result spells each option once (the later
    layer's spelling)."""
    result: dict = {}
    for layer in layers:
        for key, value in (layer or {}).items():
            for other in option_keys(result, key):
                if other != key:
                    del result[other]
            if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
                result[key] = config_merge.merge(result[key], dict(value), "replace")
            else:
                result[key] = copy.deepcopy(value)
    return result


def drop_option_variants(doc, options_path, options: Mapping) -> bool:
    """Remove from the options table at ``options_path`` of ``doc`` every key that spells one of ``options``'
    keys differently (``binaryName`` next to our ``BinaryName``); return True when one was removed."""
    table = config_merge.get_path(doc, list(options_path))
    if not isinstance(table, Mapping):
        return False
    stale = [[*options_path, name] for key in options for name in option_keys(table, key) if name != key]
    return config_merge.remove_paths(doc, stale) if stale else False


# containerd's reading of one CRI runtime entry (issue 36): the CRI plugin decodes runtimes.<name> into its Runtime
# struct, so a key left out and a key at its Go zero value ('', 0, false, [], {}) read the same (containerd v2.3.4
# internal/cri/config/config.go, type Runtime; v1.7.34 pkg/cri/config/config.go); ValidateRuntimeConfig gives an empty
# `sandboxer` (1.7: `sandbox_mode`) "podsandbox", and an empty `io_type` means named pipes, "fifo" (same files; v2.3.4
# internal/cri/server/container_create.go switches on IOType with fifo as the default). `config dump` prints the
# built-in runc entry filled in (sandboxer 'podsandbox', runc's options at their zero values) and any other entry
# with what its file says, so the same runtime reads differently in the dump by name alone. The options of an
# io.containerd.runc.v2 entry are decoded into runc's Options message (GenerateRuntimeOptions, getRuntimeOptionsType):
# zero and absent read the same there too, keys case-insensitively (see option_keys). Any other runtime type gets its
# options table passed on as written (runtimeoptions ConfigBody): compared as it is.
_RUNTIME_DEFAULTS = {"sandboxer": "podsandbox", "sandbox_mode": "podsandbox", "io_type": "fifo"}


def _zero(value) -> bool:
    """Go's zero value of the field a TOML value decodes into: false, 0, '', an empty list or table (or nothing)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value == 0
    return value is None or (isinstance(value, (str, list, tuple, Mapping)) and len(value) == 0)


def runtime_reading(entry: Mapping | None) -> dict | None:
    """The runtime entry as containerd's CRI plugin reads it: keys at their zero or default value dropped, a runc
    entry's options folded to lower case without their zero values. Two entries that read the same run pods the same.
    """
    if not isinstance(entry, Mapping):
        return None
    runc = entry.get("runtime_type") == DEFAULT_RUNTIME_TYPE
    reading = {}
    for key, value in _plain(entry).items():
        if key == "options" and isinstance(value, Mapping) and runc:
            options = {str(name).lower(): item for name, item in value.items() if not _zero(item)}
            if options:
                reading[key] = options
        elif not _zero(value) and _RUNTIME_DEFAULTS.get(key) != value:
            reading[key] = value
    return reading


def check_effective(path: str, plan: dict, request: Request) -> None:
    """Refuse when containerd's effective config (imports included) overrides what this request writes to
    ``path``: an imported file that makes the runtime the default, or gives it another binary."""
    if request.effective is None or request.runtime is None:
        return
    name, binary = request.runtime["name"], request.runtime["path"]
    imports = (request.effective or {}).get("imports") or []
    where = f"a file it imports ({', '.join(map(str, imports))})" if imports else "an imported file"
    if plan["effective_default"] == name and plan["file_default"] != name and request.default_runtime != name:
        raise ContainerdConfigError(
            f"containerd's effective config (`containerd --config {path} config dump`, imports included) makes "
            f"{name!r} the default runtime, but {path} does not: {where} sets default_runtime_name = {name!r}. "
            f"Every pod without a RuntimeClass would run through {name}. Remove default_runtime_name from that "
            f"file (or set runtime_config_set_as_default: true if you really want it), then run again. "
            f"Nothing was changed."
        )
    other, other_binary = nvidia_default(plan["effective_default"], [plan["effective_runtimes"]], name)
    if (
        request.unset_default
        and request.default_runtime is None
        and other not in (None, name)
        and plan["file_default"] != other
    ):
        raise ContainerdConfigError(
            f"containerd's effective config (`containerd --config {path} config dump`, imports included) makes "
            f"NVIDIA's runtime {nvidia_runtime.describe(other, other_binary)} the default runtime, but {path} does "
            f"not: {where} sets default_runtime_name = {other!r}. Every pod without a RuntimeClass would run through "
            f"it. Remove default_runtime_name from that file (keep its runtimes.{other} table: RuntimeClasses name "
            f"it), or set runtime_config_set_as_default: true to keep it the default, then run again. Nothing was "
            f"changed."
        )
    effective_entry = plan["effective_runtimes"].get(name)
    file_entry = plan["file_runtimes"].get(name)
    effective_binary = option_value((effective_entry or {}).get("options"), "BinaryName") if effective_entry else None
    file_binary = (
        option_value((file_entry or {}).get("options"), "BinaryName") if isinstance(file_entry, Mapping) else None
    )
    if effective_entry is not None and effective_binary != file_binary:
        raise ContainerdConfigError(
            f"containerd's effective config (`containerd --config {path} config dump`, imports included) runs the "
            f"{name!r} runtime as BinaryName = {effective_binary!r}, but {path} says {file_binary!r}: {where} "
            f"defines runtimes.{name} and wins over {path}. Remove runtimes.{name} from that file (or make it "
            f"BinaryName = {binary!r}), then run again. Nothing was changed."
        )


def _check_request(request: Request) -> None:
    runtime = request.runtime
    if runtime is not None:
        for key in ("name", "path"):
            if not isinstance(runtime.get(key), str) or not runtime.get(key):
                raise ContainerdConfigError(f"runtime.{key} must be a non-empty string, got {runtime.get(key)!r}")
        if runtime.get("options") is not None and not isinstance(runtime.get("options"), Mapping):
            raise ContainerdConfigError("runtime.options must be a dict of runtime options (e.g. SystemdCgroup: true)")
    if request.settings is not None and not isinstance(request.settings, Mapping):
        raise ContainerdConfigError("settings must be a dict of TOML tables and keys to merge at the top level")
    if request.list_strategy not in config_merge.LIST_STRATEGIES:
        raise ContainerdConfigError(
            f"list_strategy {request.list_strategy!r} is unknown: use one of {', '.join(config_merge.LIST_STRATEGIES)}"
        )


def build_changes(
    source_doc, version: int, request: Request, keep_read_alike: bool = False
) -> tuple[dict, str | None, str | None]:
    """Return (changes, runtime_table, options_copied_from) for ``request`` against ``source_doc``.

    ``changes`` is a plain nested dict for config_merge.merge_into: ``settings`` first, then the typed
    options on top (they win where both name the same key). The runtime's ``options`` are copied from the
    default/runc runtime of ``source_doc``, then ``runtime.options`` is merged over them and ``BinaryName``
    set to ``runtime.path``, option keys compared case-insensitively (fold_options). Where there is nothing
    to copy, only the given options are written: pass ``SystemdCgroup: true`` in ``runtime.options`` then.

    ``keep_read_alike`` (method=inplace): where ``source_doc`` has the runtime's table already and containerd's
    effective config reads it as the entry this would write (runtime_reading), the table is left as it is. Another
    tool may write the entry without the values `config dump` fills in (kubespray's render of the printed
    containerd_additional_runtimes entry): rewriting it would change the file at each run of either, for nothing.
    """
    _check_request(request)
    paths = table_paths(version)
    typed: dict = {}
    runtime_table = None
    copied_from = None

    def put(path, value):
        node = typed
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value

    plan = _default_runtime_plan(source_doc, paths, request)
    if request.runtime is not None:
        runtime = request.runtime
        runtime_type = runtime.get("runtime_type") or DEFAULT_RUNTIME_TYPE
        copied_from, table = plan["source_name"], plan["source"] or {}
        options = table.get("options") if isinstance(table.get("options"), Mapping) else {}
        # one spelling per option (see fold_options): ours win, kubespray's binaryName does not survive
        options = fold_options(options, dict(runtime.get("options") or {}), {"BinaryName": runtime["path"]})
        entry = {**table, "runtime_type": runtime_type, "options": options}
        if plan["write_default"] is not None:
            put(paths.runtime(plan["write_default"][0]), plan["write_default"][1])
        read_alike = (
            keep_read_alike
            and isinstance(plan["file_runtimes"].get(runtime["name"]), Mapping)
            and runtime_reading(plan["effective_runtimes"].get(runtime["name"])) == runtime_reading(entry)
        )
        if not read_alike:
            put(paths.runtime(runtime["name"]), entry)
        runtime_table = dotted_key(paths.runtime(runtime["name"]))
    if request.default_runtime is not None:
        put((*paths.containerd, "default_runtime_name"), request.default_runtime)
    if request.enable_cdi is not None:
        put((*paths.cri, "enable_cdi"), bool(request.enable_cdi))
    if request.cdi_spec_dirs is not None:
        put((*paths.cri, "cdi_spec_dirs"), list(request.cdi_spec_dirs))
    changes = config_merge.merge(dict(request.settings or {}), typed, "replace")
    return changes, runtime_table, copied_from


def _drop_stale_spellings(doc, version: int, request: Request, changes: Mapping) -> bool:
    """Remove the other spellings of the runtime's options from its table in ``doc`` (a file written by
    kubespray, or by an older run, may hold ``binaryName`` where we now write ``BinaryName``)."""
    if request.runtime is None:
        return False
    options_path = (*table_paths(version).runtime(request.runtime["name"]), "options")
    options = config_merge.get_path(changes, list(options_path))
    return drop_option_variants(doc, options_path, options) if isinstance(options, Mapping) else False


def _unset_default(doc, version: int, request: Request) -> bool:
    """Remove default_runtime_name from ``doc`` when it names NVIDIA's runtime (under any name: the runtime's own, or
    another entry whose binary is NVIDIA's) and the runtime is not asked to be the default. That entry stays."""
    if not request.unset_default or request.runtime is None or request.default_runtime is not None:
        return False
    key = [*table_paths(version).containerd, "default_runtime_name"]
    if _file_nvidia_default(doc, table_paths(version), request)[0] is None:
        return False
    return config_merge.remove_paths(doc, [key])


# --------------------------------------------------------------------------- layout of new items


def _renders_header(table: Table) -> bool:
    if not table.is_super_table():
        return True
    return any(not isinstance(item, (Table, AoT, Whitespace, Comment)) for _, item in table.value.body)


def _spaces(indent: str) -> str:
    """The indentation part of a trivia indent (what follows its last newline)."""
    return indent.rsplit("\n", 1)[-1]


def _snapshot(doc) -> tuple[list, dict, set]:
    """Items of ``doc`` before a merge: (references that keep them alive, {id: table indent or None}, ids of
    tables that print a header)."""
    keep, old, rendered = [], {}, set()

    def walk(container):
        for _key, item in container.body:
            keep.append(item)
            old[id(item)] = item.trivia.indent if isinstance(item, Table) else None
            if isinstance(item, Table):
                if _renders_header(item):
                    rendered.add(id(item))
                walk(item.value)

    walk(doc)
    return keep, old, rendered


def _style(doc, text: str) -> tuple[str, bool]:
    """(indent step, blank line before table headers) as the file does it; ('', True) for an empty file."""
    steps: Counter = Counter()

    def walk(container):
        for _key, item in container.body:
            if isinstance(item, Table):
                header = _spaces(item.trivia.indent)
                if _renders_header(item):
                    for key, child in item.value.body:
                        if key is not None and not isinstance(child, (Table, AoT)):
                            kv = _spaces(child.trivia.indent)
                            if kv.startswith(header):
                                steps[kv[len(header) :]] += 1
                            break
                walk(item.value)

    walk(doc)
    step = steps.most_common(1)[0][0] if steps else ""
    blank = len(re.findall(r"\n[ \t]*\n[ \t]*\[", text))
    tight = len(re.findall(r"[^\n]\n[ \t]*\[", text))
    return step, blank >= tight


def _tidy(doc, old: dict, old_rendered: set, step: str, blank: bool) -> None:
    """Give the items the merge added the file's indentation and blank-line style.

    ``old`` and ``old_rendered`` come from _snapshot() taken before the merge. Old tables get back the
    indentation they had (tomlkit adds a newline to the table after an inserted key). The document is
    walked in rendering order, tracking whether the text so far ends with an empty line: a new table header
    gets the indentation of its old sibling tables (else its parent's plus ``step``) and, in a file that
    separates tables by empty lines, one empty line before it; so does an old header that follows new keys.
    """
    state = {"blank": True, "after_new": False}

    def walk(container, owner_indent):
        kv = next(
            (
                _spaces(item.trivia.indent)
                for key, item in container.body
                if key is not None and not isinstance(item, (Table, AoT)) and id(item) in old
            ),
            "" if owner_indent is None else owner_indent + step,
        )
        sibling = next((item for _k, item in container.body if id(item) in old_rendered), None)
        for key, item in container.body:
            if isinstance(item, Whitespace):
                state["blank"] = state["blank"] or "\n" in item.s
                continue
            if isinstance(item, Table):
                renders = _renders_header(item)
                if id(item) in old_rendered:
                    header = _spaces(old[id(item)])
                    item.trivia.indent = old[id(item)]
                    if blank and state["after_new"] and not state["blank"] and "\n" not in item.trivia.indent:
                        item.trivia.indent = "\n" + item.trivia.indent
                else:
                    header = (
                        _spaces(sibling.trivia.indent)
                        if sibling is not None
                        else ("" if owner_indent is None else owner_indent + step)
                    )
                    if renders:  # new, or an old implicit table that now holds keys
                        item.trivia.indent = ("\n" if blank and not state["blank"] else "") + header
                    elif id(item) in old:
                        item.trivia.indent = old[id(item)]
                    else:
                        item.trivia.indent = ""  # tomlkit prints a header-less table's indent when it is "\n"
                if renders:
                    state.update(blank=False, after_new=id(item) not in old_rendered)
                elif item.trivia.indent == "\n":
                    state["blank"] = True
                walk(item.value, header)
                continue
            state["blank"] = False
            state["after_new"] = False
            if key is not None and not isinstance(item, AoT) and id(item) not in old:
                item.trivia.indent = kv
                state["after_new"] = True

    walk(doc, None)


def _merge_document(doc, text: str, changes: Mapping, list_strategy: str) -> bool:
    """config_merge.merge_into, then lay out what it added like the rest of the file."""
    keep, old, rendered = _snapshot(doc)  # keep: old items stay alive, so their ids stay unique
    step, blank = _style(doc, text)
    changed = config_merge.merge_into(doc, changes, list_strategy)
    if changed:
        _tidy(doc, old, rendered, step, blank)
    del keep
    return changed


# --------------------------------------------------------------------------- plans


def _finish(path: str, text: str, original, doc, changed: bool, existed: bool) -> tuple[str, bool]:
    """Return (after text, changed). Unchanged when the parsed value is the same, whatever the text;
    a file that does not exist yet is always written."""
    if changed and not config_merge.values_equal(original, doc.unwrap()):
        after = tomlkit.dumps(doc)
        # Our own output must read back as what we meant; anything else is a bug and is never written.
        if not config_merge.values_equal(tomlkit.parse(after).unwrap(), doc.unwrap()):  # pragma: no cover
            raise ContainerdConfigError(f"{path}: internal error, the rendered TOML does not parse back")
        return after, True
    return text, not existed


def plan_inplace(
    text: str,
    path: str,
    request: Request,
    empty_version: int = 2,
    existed: bool = True,
    source_label: str | None = None,
) -> Outcome:
    """Merge ``request`` into the config ``text`` of ``path`` (method=inplace); nothing is written here.

    ``empty_version`` is the version an empty file is written as (empty_version_for: the node's containerd's);
    its ``version`` key is written too, because containerd reads a file without one as version 1.
    ``source_label`` names the text in error messages when it is not the file itself (e.g. the output of
    ``containerd config default``). ``existed=False`` marks a file that is created (always changed).
    """
    label = source_label or path
    doc = parse_document(text if text.strip() else "", label)  # whitespace only: start from a clean document
    version = config_version(doc, label, empty_version)
    original = doc.unwrap()
    asked, request = request, keep_nvidia_default(doc, version, request)
    nvidia = nvidia_summary(doc, version, asked, request)
    check_effective(path, _default_runtime_plan(doc, table_paths(version), request), request)
    default_written = _default_written(doc, version, request)
    changes, runtime_table, copied_from = build_changes(doc, version, request, keep_read_alike=True)
    if _is_empty(doc) and changes and version >= 2:
        changes = {"version": version, **changes}
    changed = _drop_stale_spellings(doc, version, request, changes)
    changed |= _merge_document(doc, text, changes, request.list_strategy)
    changed |= _unset_default(doc, version, request)
    after, changed = _finish(path, text, original, doc, changed, existed)
    return Outcome(path, text, after, changed, version, runtime_table, copied_from, existed, default_written, nvidia)


def _default_written(doc, version: int, request: Request) -> str | None:
    if request.runtime is None:
        return None
    plan = _default_runtime_plan(doc, table_paths(version), request)
    return plan["write_default"][0] if plan["write_default"] else None


def ensure_import(doc, root_path: str, dropin_path: str) -> bool:
    """Make the top-level ``imports`` of ``doc`` cover ``dropin_path``; return True when it changed.

    An entry covers the drop-in when it names it, or is a glob in the same directory whose pattern matches
    its file name (relative entries are relative to the root config's directory, as containerd reads them).
    Otherwise ``<drop-in dir>/*.toml`` is appended (the drop-in path itself when it does not end in .toml);
    the entries already there are kept.
    """
    current = config_merge.get_path(doc, ["imports"], [])
    current = _plain(current)
    if not isinstance(current, list):
        raise ContainerdConfigError(
            f"{root_path}: the top-level 'imports' must be a list of paths, found {current!r}; fix it by hand."
        )
    root_dir = posixpath.dirname(root_path)
    target_dir, target_name = posixpath.split(posixpath.normpath(dropin_path))
    for entry in current:
        if not isinstance(entry, str):
            continue
        full = entry if posixpath.isabs(entry) else posixpath.join(root_dir, entry)
        entry_dir, entry_name = posixpath.split(posixpath.normpath(full))
        if entry_dir == target_dir and fnmatch.fnmatchcase(target_name, entry_name):
            return False
    wanted = posixpath.join(target_dir, "*.toml") if target_name.endswith(".toml") else dropin_path
    return _merge_document(doc, "", {"imports": [wanted]}, "append_unique")


def render_dropin(root_path: str, version: int, changes: Mapping, list_strategy: str = "replace") -> str:
    """The drop-in's text: a header comment, ``version`` (none for version 1) and ``changes``, nothing else."""
    doc = tomlkit.parse(DROPIN_HEADER.format(root=root_path))
    if version >= 2:
        doc["version"] = version
    config_merge.merge_into(doc, changes, list_strategy)
    return tomlkit.dumps(doc)


def plan_dropin(
    root_text: str,
    root_path: str,
    dropin_text: str | None,
    dropin_path: str,
    request: Request,
    empty_version: int = 3,
    root_existed: bool = True,
    root_label: str | None = None,
) -> tuple[Outcome, Outcome]:
    """Plan method=dropin: returns (root outcome, drop-in outcome); nothing is written here.

    The root file only gets its top-level ``imports`` extended to cover the drop-in (and ``version`` when
    it was empty). The drop-in is ours: it is rendered from scratch with the root file's version and only
    our tables, and rewritten only when its parsed value differs (``dropin_text`` None: it does not exist).
    The runtime's options are copied from the root file's default/runc runtime.
    Call check_dropin_allowed() first: on containerd 1.x a drop-in wipes the root file's plugin tables.
    """
    label = root_label or root_path
    root_doc = parse_document(root_text if root_text.strip() else "", label)
    version = config_version(root_doc, label, empty_version)
    root_original = root_doc.unwrap()
    asked, request = request, keep_nvidia_default(root_doc, version, request)
    nvidia = nvidia_summary(root_doc, version, asked, request)
    # The drop-in is ours: what it says is what this module wrote, not an import that overrides the root file.
    owned = copy.deepcopy(root_original)
    if dropin_text is not None and dropin_text.strip():
        config_merge.merge_into(owned, parse_document(dropin_text, dropin_path).unwrap())
    check_effective(root_path, _default_runtime_plan(owned, table_paths(version), request), request)
    changes, runtime_table, copied_from = build_changes(root_doc, version, request)

    root_changed = _unset_default(root_doc, version, request)
    root_changed |= _drop_stale_spellings(root_doc, version, request, changes)  # 2.x deep-merges both spellings
    if _is_empty(root_doc) and version >= 2:
        root_changed |= config_merge.merge_into(root_doc, {"version": version})
    root_changed |= ensure_import(root_doc, root_path, dropin_path)
    root_after, root_changed = _finish(root_path, root_text, root_original, root_doc, root_changed, root_existed)
    root = Outcome(root_path, root_text, root_after, root_changed, version, None, None, root_existed)

    rendered = render_dropin(root_path, version, changes, request.list_strategy)
    default_written = _default_written(root_doc, version, request)
    if dropin_text is None:
        dropin = Outcome(
            dropin_path, "", rendered, True, version, runtime_table, copied_from, False, default_written, nvidia
        )
    else:
        same = config_merge.values_equal(
            parse_document(dropin_text, dropin_path).unwrap(), tomlkit.parse(rendered).unwrap()
        )
        after = dropin_text if same else rendered
        dropin = Outcome(
            dropin_path,
            dropin_text,
            after,
            not same,
            version,
            runtime_table,
            copied_from,
            True,
            default_written,
            nvidia,
        )
    return root, dropin


# --------------------------------------------------------------------------- the daemon's reading


def _leaves(value, path=()):
    """(key path, value) of every leaf of a parsed config; a list is a leaf."""
    if isinstance(value, Mapping):
        if not value:
            yield path, {}
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    else:
        yield path, value


def _differences(before: Mapping, after: Mapping) -> list:
    """Key paths whose value differs between two parsed configs (added, removed or changed leaves)."""
    left, right = dict(_leaves(before)), dict(_leaves(after))
    return sorted(p for p in set(left) | set(right) if not config_merge.values_equal(left.get(p), right.get(p)))


def _settings_tails(settings: Mapping | None) -> list:
    """The key paths of ``settings`` below their plugin table (``plugins.<id>.a.b`` -> ``(a, b)``), and whole
    paths of top-level settings: containerd 2.x moves a version 2 file's CRI settings to other plugin ids
    (``io.containerd.grpc.v1.cri`` -> ``io.containerd.cri.v1.runtime`` / ``.images``) when it reads it, and
    containerd 2.3 a file's top-level ``grpc``/``ttrpc``/``debug``/``metrics`` to its server plugins
    (SERVICE_PLUGINS)."""
    tails = []
    for path, _value in _leaves(dict(settings or {})):
        if len(path) >= 3 and path[0] == "plugins":
            tails.append(("plugins", None, *path[2:]))
        elif path:
            tails.append(tuple(path))
            tails.extend(("plugins", plugin) for plugin in SERVICE_PLUGINS.get(path[0], ()))
    return tails


def _covered(path: tuple, allowed: list) -> bool:
    """Whether ``path`` lies in (or above) one of the ``allowed`` paths; None in an allowed path matches any key."""
    for prefix in allowed:
        size = min(len(prefix), len(path))
        if all(want is None or want == got for want, got in zip(prefix[:size], path[:size])):
            return True
    return False


def _file_runtime_tables(doc: Mapping | None) -> list:
    """Dotted names of the tables in a config file that hold a ``runtimes`` table (under any plugin id)."""
    found = []
    for plugin, table in ((doc or {}).get("plugins") or {}).items():
        runtimes = config_merge.get_path(table, ["containerd", "runtimes"]) if isinstance(table, Mapping) else None
        if isinstance(runtimes, Mapping):
            found.append(f"{dotted_key(('plugins', plugin, 'containerd', 'runtimes'))} ({', '.join(runtimes)})")
    return found


def reading_as(reading: Mapping, staged: str, path: str) -> dict:
    """containerd's reading of a staged copy as if it were ``path``: `config dump` lists the file it was given
    (the staged copy's own name) in the top-level ``imports`` (containerd 1.6/1.7; seen with 1.6.20), so two
    readings of two staged copies would differ there although the files are read alike. Pure."""
    result = dict(reading)
    imports = result.get("imports")
    if isinstance(imports, list):
        result["imports"] = [path if item == staged else item for item in imports]
    return result


def stage_imports(root_text: str, root_path: str, dropin_path: str, stage_dir: str) -> str:
    """The root config, to be read from anywhere with a staged drop-in directory: every ``imports`` entry made
    absolute (relative entries are relative to the root file's directory, as containerd reads them), and the
    entries in the drop-in's directory moved to ``stage_dir``, which holds a copy of that directory with the
    candidate drop-in in it. Pure."""
    doc = parse_document(root_text if root_text.strip() else "", root_path)
    imports = _plain(config_merge.get_path(doc, ["imports"], []))
    if not isinstance(imports, list) or not imports:
        return root_text
    root_dir = posixpath.dirname(root_path)
    dropin_dir = posixpath.dirname(posixpath.normpath(dropin_path))
    staged = []
    for entry in imports:
        if isinstance(entry, str):
            full = posixpath.normpath(entry if posixpath.isabs(entry) else posixpath.join(root_dir, entry))
            directory, name = posixpath.split(full)
            entry = posixpath.join(stage_dir, name) if directory == dropin_dir else full
        staged.append(entry)
    doc["imports"] = staged
    return tomlkit.dumps(doc)


def unstage_reading(reading: Mapping, staged_root: str, root_path: str, stage_dir: str, dropin_path: str) -> dict:
    """containerd's reading of a staged root config (stage_imports) as if it were read in place: the files its
    dump lists in ``imports`` get their own paths back. Pure."""
    result = dict(reading)
    imports = result.get("imports")
    if isinstance(imports, list):
        dropin_dir = posixpath.dirname(posixpath.normpath(dropin_path))
        result["imports"] = [
            root_path
            if item == staged_root
            else posixpath.join(dropin_dir, item[len(stage_dir) + 1 :])
            if isinstance(item, str) and item.startswith(stage_dir + "/")
            else item
            for item in imports
        ]
    return result


def verify_reading(
    path: str,
    before: Mapping | None,
    after: Mapping,
    request: Request,
    written: Mapping | None = None,
    written_table: str | None = None,
    expected: tuple = (),
) -> None:
    """Refuse a candidate file that containerd reads otherwise than this request meant.

    ``before`` and ``after`` are containerd's own reading (`containerd --config <file> config dump`, parsed) of
    the current file and of the candidate (None for ``before`` when there was no file: then only the runtime
    and the default are compared). Meant: the runtime of ``request`` in the CRI plugin's runtimes with its
    binary (options.BinaryName) and runtime_type; the default runtime as asked (the request's, else not the
    runtime unless it already was and stays so); nothing else changed in the reading but the runtime's entry,
    the default, CDI, what ``request.settings`` names and the key paths in ``expected`` (method=dropin: the root
    file's ``imports``). ``written`` is the candidate file (parsed), whose runtimes tables the message names;
    ``written_table`` the table the plan wrote the runtime to.
    Pure: no I/O. Raises ContainerdConfigError naming the tables and the fix; the file is then left as it was.
    """
    problems = []
    read_version = after.get("version", 1) if isinstance(after, Mapping) else 1
    if read_version not in CRI_TABLES:
        raise ContainerdConfigError(
            f"containerd reads the new {path} as config version {read_version!r}, whose tables this action does not "
            f"know: nothing was changed. Edit {path} by hand."
        )
    paths = table_paths(read_version)
    runtimes, default = _cri_runtimes(after)
    read_runtimes = dotted_key(paths.runtimes)
    if request.runtime is not None:
        name, binary = request.runtime["name"], request.runtime["path"]
        runtime_type = request.runtime.get("runtime_type") or DEFAULT_RUNTIME_TYPE
        entry = runtimes.get(name)
        if not isinstance(entry, Mapping):
            problems.append(
                f"containerd's reading has no {read_runtimes}.{name} (runtimes it reads: "
                f"{', '.join(runtimes) or 'none'})"
            )
        else:
            got_binary = option_value(entry.get("options"), "BinaryName")
            if got_binary != binary:
                problems.append(f"{read_runtimes}.{name}.options.BinaryName is {got_binary!r}, not {binary!r}")
            if entry.get("runtime_type") != runtime_type:
                problems.append(
                    f"{read_runtimes}.{name}.runtime_type is {entry.get('runtime_type')!r}, not {runtime_type!r}"
                )
    _before_runtimes, before_default = _cri_runtimes(before) if before is not None else ({}, None)
    name = (request.runtime or {}).get("name")
    default_key = f"{dotted_key(paths.containerd)}.default_runtime_name"
    kept, _binary = nvidia_default(before_default, [_before_runtimes], name)
    if request.default_runtime is not None and request.default_runtime == name and kept not in (None, name):
        # asked to be the default where NVIDIA's runtime already is under another name: that one stays (issue 37)
        request = replace(request, default_runtime=None, unset_default=False)
        if default != kept:
            problems.append(f"{default_key} is {default!r}, not NVIDIA's runtime {kept!r} as it was")
    if request.default_runtime is not None:
        if default != request.default_runtime:
            problems.append(f"{default_key} is {default!r}, not {request.default_runtime!r} as asked")
    elif name is not None and default == name and (request.unset_default or before_default != name):
        problems.append(f"{default_key} is {name!r}: every pod without a RuntimeClass would run through it")
    elif request.unset_default and nvidia_default(default, [runtimes], name)[0] not in (None, name):
        binary = nvidia_runtime.entry_binary("containerd", runtimes.get(default))
        problems.append(
            f"{default_key} is NVIDIA's runtime {nvidia_runtime.describe(default, binary)}: every pod without a"
            " RuntimeClass would run through it"
        )
    if before is not None:
        allowed = [
            (*paths.runtimes, name) if name else None,
            # a default that moves brings its own table: the runc table written from the old default's (issue 25)
            (*paths.runtimes, default) if default and default != before_default else None,
            (*paths.containerd, "default_runtime_name"),
            (*paths.cri, "enable_cdi"),
            (*paths.cri, "cdi_spec_dirs"),
            *_settings_tails(request.settings),
            *expected,
        ]
        allowed = [a for a in allowed if a]
        changed = [p for p in _differences(before, after) if not _covered(p, allowed)]
        if changed:
            shown = ", ".join(dotted_key(p) for p in changed[:5]) + (" ..." if len(changed) > 5 else "")
            problems.append(f"it also changes what was not asked for: {shown}")
    if not problems:
        return
    tables = _file_runtime_tables(written)
    said = f"; the runtimes tables of the new file: {'; '.join(tables)}" if tables else ""
    wrote = f"The plan wrote {written_table}" if written_table else "The plan wrote the runtime"
    raise ContainerdConfigError(
        f"containerd reads the new {path} otherwise than meant (`containerd --config <candidate> config dump`): "
        + "; ".join(problems)
        + f". {wrote}, but containerd reads its runtimes from {read_runtimes}{said}. A file whose 'version' does not"
        " match its table names (e.g. version = 2 with io.containerd.cri.v1.runtime tables, as some cloud images"
        " ship for containerd 2.x) is read otherwise than it looks: make 'version' match the table names (3, or 4"
        f" on containerd 2.3, for io.containerd.cri.v1.* tables), then run again. {path} was left as it was."
    )
