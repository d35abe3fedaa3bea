# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""containerd's config versions: the CRI table of each, which version a containerd writes, the drop-in version rule,
and containerd's own version as ``containerd --version`` prints it.

One home for these facts, shared by the controller-side merge (containerd/config.py and its parts), the node-side
reader of containerd's configs (containerd/tables.py: the facts, the GPU-pods guard, the doctor) and the doctor's
containerd rows (gpu_validate/containerd.py). A new config version is one entry in CRI_TABLES (and
CONFIG_VERSION_NOTES, CONFIG_VERSION_SINCE when a containerd writes it) plus tests. Pure functions, standard library
only, Python 3.8+.

Facts (containerd v2.3.4, commit db8809540e1a7a9da5d518876894933ff55692ab, unless another tag is named):

- version/version.go: ``ConfigVersion = 4`` (3 at v2.0.0 and v2.2.7); ``containerd config default`` writes it.
  containerd 1.3 to 1.7 write version 2 (cmd/containerd/command/config.go at v1.3.0 and v1.7.0).
- cmd/containerd/server/config/config.go, ``LoadConfigWithPlugins``: the root file, then its ``imports`` (each
  path cleaned, a relative one joined to the importing file's directory, a ``*`` pattern globbed,
  ``resolveImports``), breadth first, each file once. Every file is migrated on its own, in memory, up to
  ``ConfigVersion`` before it is merged (``MigrateConfigTo`` + each plugin's ``ConfigMigration``; the log says
  "Configuration migrated from version N"), so ``config dump`` prints version 4 whatever the files say.
  A file without a ``version`` key has Version 0 (treated as 1).
- Same function: the first file with a non-zero version sets the root version (``rootConfigVersion``); a later
  file with a higher version stops containerd: "drop-in config version X higher than root config version Y".
  Added in v2.3.0 (commit 21248d00762ec572772c41e3bbb69a518e0a0eaf, whose message gives the reason: before,
  the merged config took the higher version and the root file's tables were not migrated); reverted on main
  after v2.3.4 (commit a8ed546687310b39c3779a784333e5bad7e8b516, in no tag yet). So a drop-in never carries a
  higher version than the root file that imports it, as written on disk (never the dump's version).
- The CRI plugin's table per config version (CRI_TABLES; shared REFERENCE.md):

  =======  ===========================================  ===============================  ==================
  version  CRI table (enable_cdi, cdi_spec_dirs)        runtimes / default_runtime_name  written by
  =======  ===========================================  ===============================  ==================
  1        ``plugins.cri``                              ``<cri>.containerd.runtimes`` /  containerd < 1.3
                                                        ``<cri>.containerd``
  2        ``plugins."io.containerd.grpc.v1.cri"``      same, under the CRI table        containerd 1.3-1.7
  3        ``plugins."io.containerd.cri.v1.runtime"``   same, under the CRI table        containerd 2.0-2.2
  4        ``plugins."io.containerd.cri.v1.runtime"``   same, under the CRI table        containerd 2.3+
  =======  ===========================================  ===============================  ==================

  Version 4 keeps version 3's CRI table names (containerd/config.py's docstring says what it moves instead).
- NVIDIA's toolkit up to 1.19.1 wrote its drop-in with the version ``config dump`` reports, so on containerd 2.3
  a version 2 root got a version 4 drop-in and the node went NotReady (NVIDIA/aicr#1688).
"""

from __future__ import annotations

import posixpath
import re

from ansible_collections.gpunode.provisioning.plugins.module_utils.system.versions import (
    parse_version_token,
    version_tuple,
)

# config version: the CRI plugin's table (key path) in a file of that version
CRI_TABLES = {
    1: ("plugins", "cri"),
    2: ("plugins", "io.containerd.grpc.v1.cri"),
    3: ("plugins", "io.containerd.cri.v1.runtime"),
    4: ("plugins", "io.containerd.cri.v1.runtime"),  # same names as 3 (see the module docstring)
}
# config version: which containerd reads or writes it (messages; a version without a note is named alone)
CONFIG_VERSION_NOTES = {
    1: "no version key, containerd 1.x",
    2: "containerd 1.x and 2.x",
    3: "containerd 2.x",
    4: "containerd 2.3+",
}
# (first containerd version, the config version it writes: `containerd config default`, an empty file)
CONFIG_VERSION_SINCE = (((2, 3), 4), ((2, 0), 3), ((0, 0), 2))
# the drop-in rule's first release (cmd/containerd/server/config/config.go, v2.3.0)
DROPIN_RULE_SINCE = (2, 3)
DROPIN_REFUSAL = re.compile(r"drop-in config version (\d+) higher than root config version (\d+)")
AICR_1688 = "NVIDIA's toolkit <= 1.19.1 wrote such drop-ins from config dump's version (NVIDIA/aicr#1688)"


def supported_versions() -> tuple:
    """The config versions whose tables are known (CRI_TABLES), in order."""
    return tuple(sorted(CRI_TABLES))


def supported_text() -> str:
    """The known config versions as a message names them: "1 (no version key, containerd 1.x), ... and 4 (...)"."""
    named = [
        f"{version} ({CONFIG_VERSION_NOTES[version]})" if version in CONFIG_VERSION_NOTES else str(version)
        for version in supported_versions()
    ]
    return ", ".join(named[:-1]) + " and " + named[-1] if len(named) > 1 else "".join(named)


def cri_table(version) -> tuple | None:
    """The key path of the CRI plugin's table in a config file of ``version``; None for an unknown version."""
    if isinstance(version, bool) or not isinstance(version, int):
        return None
    return CRI_TABLES.get(version)


def parse_containerd_version(text) -> tuple:
    """(version, as printed) of containerd from ``containerd --version`` output or a version given alone; (None,
    None) when there is none.

    ``containerd --version`` prints "containerd <package> <version> <revision>": the package is
    "github.com/containerd/containerd" (".../v2" from 2.0: not the version) from source builds and distributions,
    "containerd.io" from Docker's packages; the version may carry a "v" and a distribution suffix
    ("1.6.20~ds1" -> ("1.6.20", "1.6.20~ds1")). A version alone ("2.0", "v2.1.4") is read as such.
    """
    lines = str(text or "").splitlines()
    candidates = [line.split()[1:] for line in lines if line.split()[:1] == ["containerd"]]
    if len(lines) == 1 and len(lines[0].split()) == 1:
        candidates.append(lines[0].split())
    for tokens in candidates:
        for token in tokens:
            version = parse_version_token(token)
            if version[0]:
                return version
    return None, None


def containerd_version_tuple(text) -> tuple | None:
    """containerd's version (parse_containerd_version) as three numbers, (2, 0, 0) for "2.0"; None without one."""
    numbers = version_tuple(parse_containerd_version(text)[0])
    return None if numbers is None else (*numbers, 0, 0)[:3]


def config_version_for(containerd_version) -> int:
    """The config version ``containerd_version`` (a tuple such as (2, 3, 4)) writes; 2 when it is unknown."""
    if not containerd_version:
        return 2
    for since, version in CONFIG_VERSION_SINCE:
        if tuple(containerd_version[:2]) >= since:
            return version
    return 2


def file_version(parsed) -> int:
    """A parsed config file's ``version`` as containerd decodes it: 0 when there is none (containerd treats 0 as 1);
    -1 when it is not an integer (containerd cannot read the file)."""
    version = (parsed or {}).get("version", 0) if isinstance(parsed, dict) else 0
    if isinstance(version, bool) or not isinstance(version, int):
        return -1
    return version


def resolve_imports(parent: str, imports, glob) -> list:
    """The files an ``imports`` list of ``parent`` names, in containerd's order (resolveImports): relative entries
    joined to the parent's directory, entries with ``*`` globbed with ``glob(pattern)`` (sorted paths)."""
    found = []
    for entry in imports if isinstance(imports, list) else []:
        if not isinstance(entry, str) or not entry:
            continue
        path = posixpath.normpath(entry)
        if not posixpath.isabs(path):
            path = posixpath.join(posixpath.dirname(parent), path)
        if "*" in path:
            found.extend(glob(path))
        else:
            found.append(path)
    return found


def load_order(root: str, read_parsed, glob) -> list:
    """[(path, parsed file or None)] in the order containerd loads ``root`` and its imports (breadth first, each
    file once). ``read_parsed(path)`` returns the parsed file, or None when it cannot be read or parsed (its
    imports are then unknown)."""
    loaded, pending, order = set(), [root], []
    while pending:
        path, pending = pending[0], pending[1:]
        if path in loaded:
            continue
        parsed = read_parsed(path)
        order.append((path, parsed))
        loaded.add(path)
        if isinstance(parsed, dict):
            pending.extend(resolve_imports(path, parsed.get("imports"), glob))
    return order


def dropin_version_conflicts(versions) -> list:
    """containerd 2.3's drop-in rule over [(path, version)] in load order (root first): [(path, version, root
    version)] of every file whose version is above the root version (the first non-zero version seen)."""
    root_version, conflicts = 0, []
    for path, version in versions:
        if root_version == 0:
            root_version = version
        if version > root_version:
            conflicts.append((path, version, root_version))
    return conflicts


def dropin_refusal_hint(stderr) -> str:
    """A sentence on containerd's refusal of a drop-in above its root's version, when ``stderr`` holds it; ''."""
    match = DROPIN_REFUSAL.search(str(stderr or ""))
    if not match:
        return ""
    return (
        f"containerd refuses a drop-in (a file in imports) whose config version {match.group(1)} is above its root"
        f" file's {match.group(2)}: set that drop-in's version (and its table names) to version {match.group(2)}, or"
        f" migrate the root file (containerd config migrate). {AICR_1688}."
    )
