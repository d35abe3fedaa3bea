"""Match paths against the rules of an installed AppArmor profile with AppArmor's own matcher.

Runs ON THE NODE with the distribution's python3 and python3-apparmor (apparmor.aare.AARE is the
glob matcher aa-logprof and aa-genprof use). Reads the profile file named by argv[1] and a JSON
list of queries on stdin: {"kind": "umount", "path": "/proc/sys"} or {"kind": "write", "path": ...}.
Prints a JSON list of {"kind", "path", "allowed"}. A deny rule wins over an allow rule, as in the
kernel; a directory is also tried with a trailing slash (the kernel names directories that way).
"""

import json
import re
import sys

from apparmor.aare import AARE

# tunables/proc: @{PROC}=/proc/ ; AppArmor collapses the double slash that follows.
VARIABLES = {"@{PROC}": "/proc"}
UMOUNT = re.compile(r"^(?P<deny>deny\s+)?umount(?:\s+(?P<path>/\S*))?\s*,$")
FILE = re.compile(r"^(?P<deny>deny\s+)?(?P<path>[@/]\S*)\s+(?P<perms>[rwklmxa]+)\s*,$")


def expand(path):
    for name, value in VARIABLES.items():
        path = path.replace(name, value)
    return path


def rules(text):
    umount, write = [], []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        m = UMOUNT.match(line)
        if m:
            umount.append((bool(m.group("deny")), AARE(expand(m.group("path") or "/**"), True)))
            continue
        m = FILE.match(line)
        if m and ("w" in m.group("perms") or "a" in m.group("perms")):
            write.append((bool(m.group("deny")), AARE(expand(m.group("path")), True)))
    return {"umount": umount, "write": write}


def allowed(ruleset, path):
    candidates = {path, path.rstrip("/") + "/"}
    hits = [deny for deny, aare in ruleset for p in candidates if aare.match(p)]
    return bool(hits) and not any(hits)


def main():
    with open(sys.argv[1]) as f:
        by_kind = rules(f.read())
    # "file," (no path) allows every file: a write is allowed unless a deny rule matches.
    by_kind["write"].append((False, AARE("/**", True)))
    out = [{**q, "allowed": allowed(by_kind[q["kind"]], q["path"])} for q in json.load(sys.stdin)]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
