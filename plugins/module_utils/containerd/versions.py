# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""containerd's config versions: which version a containerd writes, and the drop-in version rule.

One home for these facts, shared by the controller-side merge (containerd/config.py, on the controller) and the doctor
on the node (gpu_validate_containerd, as module_utils.containerd.versions). Pure functions, standard
library only, Python 3.8+.

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
- NVIDIA's toolkit up to 1.19.1 wrote its drop-in with the version ``config dump`` reports, so on containerd 2.3
  a version 2 root got a version 4 drop-in and the node went NotReady (NVIDIA/aicr#1688).
"""

from __future__ import annotations

import posixpath
import re

# (first containerd version, the config version it writes: `containerd config default`, an empty file)
CONFIG_VERSION_SINCE = (((2, 3), 4), ((2, 0), 3), ((0, 0), 2))
# the drop-in rule's first release (cmd/containerd/server/config/config.go, v2.3.0)
DROPIN_RULE_SINCE = (2, 3)
DROPIN_REFUSAL = re.compile(r"drop-in config version (\d+) higher than root config version (\d+)")
AICR_1688 = "NVIDIA's toolkit <= 1.19.1 wrote such drop-ins from config dump's version (NVIDIA/aicr#1688)"


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
