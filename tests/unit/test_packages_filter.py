"""plugins/filter/packages.py: "is this package available, at which version?" asked one way (nvidia_driver's headers
and kernel packages, fuse's crun). The roles' own tests render it through their vars; these pin the two package
managers' answers."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from conftest import load_module

packages = load_module("packages", subdir="plugins/filter")


def lookup(manager: str, name: str, stdout: str) -> dict:
    return {"cmd": packages.package_query(name, manager), "rc": 0, "stdout": stdout}


def test_the_query_names_the_package_last_and_other_managers_are_not_asked():
    assert packages.package_query("crun", "apt") == ["apt-cache", "policy", "crun"]
    assert packages.package_query("kernel-devel-5.14.0-427.el9.x86_64", "dnf") == [
        "dnf", "-q", "repoquery", "--latest-limit=1", "--qf", "%{version}\n", "kernel-devel-5.14.0-427.el9.x86_64",
    ]  # fmt: skip
    assert packages.package_query("crun", "zypper") == []


@pytest.mark.parametrize(
    ("manager", "stdout", "found"),
    [
        ("apt", "crun:\n  Installed: (none)\n  Candidate: 1:1.14.1-1\n  Version table:\n", {"crun": "1.14.1"}),
        ("apt", "crun:\n  Installed: 1.8.1-1+deb12u1\n  Candidate: 1.8.1-1+deb12u1\n", {"crun": "1.8.1"}),
        ("apt", "crun:\n  Installed: (none)\n  Candidate: (none)\n", {}),
        ("apt", "", {}),  # apt-cache policy prints nothing for a name no source knows
        ("dnf", "1.14.3\n", {"crun": "1.14.3"}),
        ("dnf", "", {}),
        ("zypper", "1.14.3\n", {}),
    ],
)
def test_candidates_of_each_package_manager(manager, stdout, found):
    assert packages.package_candidates(lookup(manager, "crun", stdout), manager) == found


def test_a_loop_gives_the_packages_with_a_candidate_in_order_and_skipped_lookups_are_left_out():
    results = [
        lookup("apt", "linux-headers-6.1.0-31-amd64", "x:\n  Candidate: 6.1.128-1\n"),
        lookup("apt", "linux-headers-6.1.0-999-amd64", ""),
        {"skipped": True, "item": "6.1.0-32-amd64"},
        lookup("apt", "linux-headers-6.1.0-30-amd64", "x:\n  Candidate: 6.1.124-1\n"),
    ]
    assert list(packages.package_candidates(results, "apt")) == [
        "linux-headers-6.1.0-31-amd64",
        "linux-headers-6.1.0-30-amd64",
    ]


def test_a_lookup_without_its_command_is_refused():
    with pytest.raises(AnsibleFilterError, match="names no package"):
        packages.package_candidates({"rc": 0, "stdout": "x:\n  Candidate: 1.0-1\n"}, "apt")
