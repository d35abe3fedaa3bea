# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Which versions of some packages are installed, and which the sources offer, from the package managers' answers.

- `dpkg_installed(lines)`: {package: {version, selection}} from lines "<package> <version> <selection>" (what
  `dpkg-query --showformat='${Package} ${Version} ${Status}'` prints, kept where the status is "installed").
- `apt_madison_versions(lines)`: {package: [versions]} from `apt-cache madison` lines
  ("<package> | <version> | <source>"), in its order (newest first).
- `dnf_repoquery_versions(lines)`: {package: [versions]} from `dnf repoquery --showduplicates --queryformat
  '%{name}\\t%{version}-%{release}'` lines, each version once, newest first (community.general's version_sort order).
- `rpm_installed_versions(packages, names)`: {package: {version: "<version>-<release>"}} of those of `names` that
  ansible.builtin.package_facts found (its last entry where several are installed).
- `packages_missing_at(names, target, installed, available)`: those of `names` neither installed at `target`
  (`installed`: {package: {version}}) nor offered at it (`available`: {package: [versions]}), in `names`' order.

Callers: nvidia_container_toolkit (tasks/packages_apt.yml, tasks/packages_dnf.yml); tasks/version.yml settles on
one version from what these say.
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.module_utils.compat.version import LooseVersion


def dpkg_installed(lines) -> dict:
    """{package: {version, selection}} from "<package> <version> <selection>" lines."""
    found = {}
    for line in lines:
        fields = line.split()
        if len(fields) != 3:
            raise AnsibleFilterError(f"dpkg_installed: expects '<package> <version> <selection>' lines, not {line!r}")
        name, version, selection = fields
        found[name] = {"version": version, "selection": selection}
    return found


def _versions(pairs) -> dict:
    found = {}
    for name, version in pairs:
        found[name] = [*found.get(name, []), version]
    return found


def apt_madison_versions(lines) -> dict:
    """{package: [versions]} from `apt-cache madison` lines (lines of fewer than three fields are not versions)."""
    rows = [[field.strip() for field in line.split("|")] for line in lines]
    return _versions((row[0], row[1]) for row in rows if len(row) >= 3)


def _unique(values: list) -> list:
    """Each value once, the first seen kept (Ansible's unique filter: case-insensitive)."""
    seen, kept = set(), []
    for value in values:
        key = value.lower() if isinstance(value, str) else value
        if key not in seen:
            seen.add(key)
            kept.append(value)
    return kept


def dnf_repoquery_versions(lines) -> dict:
    """{package: [versions]} from tab-separated "<package>\\t<version>-<release>" lines, unique, newest first."""
    rows = [line.split("\t") for line in lines]
    found = _versions((row[0], row[1]) for row in rows if len(row) == 2)
    # sorted, then reversed (as version_sort | reverse): versions LooseVersion holds equal stay in reverse order
    return {name: sorted(_unique(versions), key=LooseVersion)[::-1] for name, versions in found.items()}


def rpm_installed_versions(packages, names) -> dict:
    """{package: {version}} of the `names` in package_facts' `packages` ("<version>-<release>" of its last entry)."""
    if not isinstance(packages, Mapping):
        raise AnsibleFilterError(f"rpm_installed_versions: expects package_facts' packages, not {type(packages)}")
    found = {}
    for name in names:
        if name in packages:
            package = packages[name][-1]
            found[name] = {"version": f"{package['version']}-{package['release']}"}
    return found


def packages_missing_at(names, target: str, installed: Mapping, available: Mapping) -> list:
    """Those of `names` that can be had at `target` neither from the node nor from its package sources."""
    return [
        name
        for name in names
        if (installed.get(name) or {}).get("version") != target and target not in (available.get(name) or [])
    ]


class FilterModule:
    """Package version filters (see the module docstring)."""

    def filters(self):
        return {
            "dpkg_installed": dpkg_installed,
            "apt_madison_versions": apt_madison_versions,
            "dnf_repoquery_versions": dnf_repoquery_versions,
            "rpm_installed_versions": rpm_installed_versions,
            "packages_missing_at": packages_missing_at,
        }
