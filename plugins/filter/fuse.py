# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The fuse role's one read of the node, and what it says is left to do (roles/fuse/tasks/main.yml).

`fuse_differences(read, wanted)`
    What on the node differs from what the role would make it, one short phrase each; [] when nothing does, and
    then the role's changing tasks (tasks/configure.yml) are skipped as a whole. ``read`` is the registered result
    of the read task, whose lines are:

        stat <octal mode> <uid> <gid> <sha1 or -> <path>    one per path that exists (- for a non-regular file)
        installed <package> <status>                        dpkg's db:Status-Abbrev (second letter i: installed)
                                                            or "ii" from rpm, per package that is installed
        conf <line>                                         each line of fuse.conf like "#user_allow_other"

    (other lines, such as the package index's answer about crun, are ignored). ``wanted`` is
    ``{"packages": [names], "files": [{path, mode, root, content?}], "conf": {"path", "allow_other"}}``: each file
    with its octal mode, whether root must own it, and its text where it is a file the role writes;
    ``allow_other`` true: the last line like "user_allow_other" (also commented out) is exactly that, in a file
    of mode 0644 owned by root; false: no active "user_allow_other" line (what the lineinfile task makes).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

CONF_LINE = "user_allow_other"
_ACTIVE = re.compile(r"^[ \t]*user_allow_other[ \t]*$")


def _read(read) -> tuple:
    """(stats {path: (mode, uid, gid, sha1)}, installed packages, fuse.conf lines) of the read's output."""
    if not isinstance(read, Mapping) or "stdout_lines" not in read:
        raise AnsibleFilterError("fuse_differences: expects the registered result of the read task (stdout_lines)")
    stats, installed, conf = {}, set(), []
    for line in read["stdout_lines"]:
        if line.startswith("stat "):
            fields = line.split(" ", 5)
            if len(fields) == 6:
                stats[fields[5]] = (int(fields[1], 8), int(fields[2]), int(fields[3]), fields[4])
        elif line.startswith("installed "):
            fields = line.split()
            if len(fields) >= 3 and len(fields[2]) > 1 and fields[2][1] == "i":
                installed.add(fields[1])
        elif line.startswith("conf "):
            conf.append(line[len("conf ") :])
    return stats, installed, conf


def _file_differs(stat, item: Mapping) -> str:
    path = item["path"]
    if stat is None:
        return f"{path} is missing"
    mode, uid, gid, sha1 = stat
    if mode != int(str(item["mode"]), 8):
        return f"{path} has mode {mode:04o}"
    if item.get("root") and (uid, gid) != (0, 0):
        return f"{path} is not owned by root"
    if "content" in item and sha1 != hashlib.sha1(str(item["content"]).encode("utf-8")).hexdigest():
        return f"{path} has other content"
    return ""


def fuse_differences(read, wanted: Mapping) -> list:
    """What differs between the node (``read``) and what the role makes of it (``wanted``); [] when nothing."""
    stats, installed, conf = _read(read)
    found = [f"package {name} is not installed" for name in wanted.get("packages", []) if name not in installed]
    found += [d for d in (_file_differs(stats.get(item["path"]), item) for item in wanted.get("files", [])) if d]
    settings = wanted["conf"]
    if settings["allow_other"]:
        if not conf or conf[-1] != CONF_LINE:
            found.append(f"{settings['path']} does not allow {CONF_LINE}")
        else:
            found += [
                d for d in [_file_differs(stats.get(settings["path"]), {**settings, "mode": "0644", "root": True})] if d
            ]
    elif any(_ACTIVE.match(line) for line in conf):
        found.append(f"{settings['path']} allows {CONF_LINE}")
    return found


class FilterModule:
    """Filters of the fuse role."""

    def filters(self):
        return {"fuse_differences": fuse_differences}
