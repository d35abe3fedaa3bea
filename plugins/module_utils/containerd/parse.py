"""containerd config.toml editing, part 1 of 4: constants, the request and outcome types, parsing, a file's version.

CONTROLLER only, like every part: config.py (the entry point, which documents the tables per config
version) imports the parts; the other parts read this one's names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import versions as containerd_versions

TOMLKIT_MISSING = (
    "editing TOML needs the Python package tomlkit on the Ansible controller (pip install -r requirements.txt)"
)
try:
    import tomlkit
    from tomlkit.container import Container
    from tomlkit.exceptions import ParseError, TOMLKitError
    from tomlkit.items import Table
except ImportError as _exc:  # nodes and ansible-test's import test have no tomlkit: fail where it is used
    TOMLKIT_IMPORT_ERROR = _exc

    class _MissingTomlkit:
        def __getattr__(self, name):
            raise ImportError(f"{TOMLKIT_MISSING}: {TOMLKIT_IMPORT_ERROR}") from TOMLKIT_IMPORT_ERROR

    class NoTomlkitType:
        """Stands in for tomlkit's types without tomlkit: nothing is an instance of it."""

    class TOMLKitError(Exception):
        """Stands in for tomlkit's error without tomlkit: never raised."""

    class ParseError(TOMLKitError):
        """Stands in for tomlkit's parse error without tomlkit: never raised."""

    tomlkit = _MissingTomlkit()
    Container = Table = NoTomlkitType
else:
    TOMLKIT_IMPORT_ERROR = None


def require_tomlkit() -> None:
    """Raise ImportError, saying what to install, when tomlkit is missing."""
    if TOMLKIT_IMPORT_ERROR is not None:
        raise ImportError(f"{TOMLKIT_MISSING}: {TOMLKIT_IMPORT_ERROR}") from TOMLKIT_IMPORT_ERROR


DEFAULT_PATH = "/etc/containerd/config.toml"
DEFAULT_DROPIN_DIR = "/etc/containerd/conf.d"
DEFAULT_RUNTIME_TYPE = "io.containerd.runc.v2"
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
    require_tomlkit()
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
    supported = containerd_versions.supported_text()
    if isinstance(version, bool) or not isinstance(version, int):
        raise ContainerdConfigError(
            f"{path}: the top-level 'version' must be an integer, found {version!r}. "
            f"Supported config versions are {supported}; fix the 'version' line."
        )
    if containerd_versions.cri_table(version) is None:
        raise ContainerdConfigError(
            f"{path} uses containerd config version {version}, which containerd_config does not support "
            f"(supported: {supported}). Its table layout is unknown to this action, so nothing was changed: "
            "edit the file by hand, or add the version's table to CRI_TABLES in "
            "plugins/module_utils/containerd/versions.py."
        )
    return version


def table_paths(version: int) -> TablePaths:
    """Key paths of the CRI table, its ``containerd`` table and the runtimes table for ``version``."""
    cri = containerd_versions.cri_table(version)
    if cri is None:
        raise ContainerdConfigError(
            f"containerd config version {version} is not supported (supported: {containerd_versions.supported_text()})"
        )
    return TablePaths(cri=cri, containerd=(*cri, "containerd"), runtimes=(*cri, "containerd", "runtimes"))


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def dotted_key(path) -> str:
    """Render a key path the way a TOML table header names it: plugins."io.containerd.grpc.v1.cri".containerd."""
    return ".".join(
        key if _BARE_KEY.fullmatch(key) else '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"' for key in path
    )


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
