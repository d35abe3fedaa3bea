# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Asked one way for every role: is this package available, and at which version?

`package_query(name, manager)`: the read-only command that asks the package index for one package (a name or, on dnf,
a spec such as kernel-devel-<release>): `apt-cache policy <name>` or `dnf -q repoquery --latest-limit=1 --qf
'%{version}\\n' <name>`; [] for any other package manager (not asked). The name is the command's last word.

`package_candidates(lookups, manager)`: {name: upstream version} of the packages the index offers, read from one
registered result of that command or a loop's `results` (skipped lookups are left out). apt's candidate is the
"Candidate:" line ("(none)": no source has it); dnf prints a version line, or nothing. The version is the candidate's
upstream part, epoch and package revision dropped, its leading numbers where it starts with them (1:1.14.1-1 -> 1.14.1).

Callers: nvidia_driver (the running kernel's headers, tasks/install.yml; each kernel's headers or precompiled modules,
tasks/kernels.yml) and fuse (the crun the distribution offers, tasks/main.yml).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

# package manager -> (the command before the name, the regex of the candidate version in its output)
QUERIES = {
    "apt": (["apt-cache", "policy"], r"^\s*Candidate:\s*(?!\(none\))(\S+)"),
    "dnf": (["dnf", "-q", "repoquery", "--latest-limit=1", "--qf", "%{version}\n"], r"^([0-9]\S*)"),
}


def package_query(name, manager) -> list[str]:
    """The argv that asks `manager`'s index for `name` ([] where the manager is not one this project asks)."""
    if manager not in QUERIES:
        return []
    return [*QUERIES[manager][0], str(name)]


def _upstream(version: str) -> str:
    upstream = re.sub(r"^[0-9]+:", "", version)
    leading = re.match(r"[0-9]+(\.[0-9]+)*", upstream)
    return leading.group(0) if leading else upstream.rsplit("-", 1)[0]


def package_candidates(lookups, manager) -> dict[str, str]:
    """{name: upstream version} of the looked-up packages the index offers (see the module docstring)."""
    if isinstance(lookups, Mapping):
        lookups = [lookups]
    if not isinstance(lookups, list):
        raise AnsibleFilterError(
            f"package_candidates: expects a registered result or a list of them, not {type(lookups)}"
        )
    if manager not in QUERIES:
        return {}
    found = {}
    for lookup in lookups:
        if not isinstance(lookup, Mapping) or lookup.get("skipped") or "stdout" not in lookup:
            continue
        if not lookup.get("cmd"):
            raise AnsibleFilterError("package_candidates: a lookup without its command (cmd) names no package")
        candidate = re.search(QUERIES[manager][1], lookup["stdout"], re.MULTILINE)
        if candidate:
            found[lookup["cmd"][-1]] = _upstream(candidate.group(1))
    return found


class FilterModule:
    """Package index filters (see the module docstring)."""

    def filters(self):
        return {"package_query": package_query, "package_candidates": package_candidates}
