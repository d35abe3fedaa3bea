"""inventories/example, the template users copy, stays current and complete: every driver pin on a branch the project
supports this month (roles/nvidia_driver/vars/main.yml __nvidia_driver_branches), containerd 2.x and Kubernetes 1.34 or
later on every node, a GB200 (aarch64, IMEX, nvlsm), a DRA and a Secure Boot node, and every node in a platform group
whose column of the README's support matrix is tested in CI (the one group that is only rendered says so)."""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import load_module

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventories" / "example"
branches = load_module("nvidia_driver_branches", subdir="plugins/filter")
BRANCHES = yaml.safe_load((ROOT / "roles" / "nvidia_driver" / "vars" / "main.yml").read_text())[
    "__nvidia_driver_branches"
]
THIS_MONTH = datetime.datetime.now(datetime.UTC).strftime("%Y-%m")
# The platform groups of the example and the support matrix's columns they stand for.
COLUMNS = {
    "debian12": "Debian 12",
    "debian13": "Debian 13",
    "ubuntu2404": "Ubuntu 24.04",
    "ubuntu2604": "Ubuntu 26.04",
    "ubuntu2404_arm64": "Ubuntu 24.04 arm64 (Grace)",
}
# Groups whose platform the matrix marks as rendered only, not run in CI: the inventory says so in a comment.
ONLY_RENDERED = {"ubuntu2404_arm64"}
# The roles a GPU node runs whose matrix cell must say CI for the node's column.
ROLES = ("nvidia_driver", "nvidia_container_toolkit", "runtime_config", "kubelet", "fuse", "security_profiles")


@pytest.fixture(scope="module")
def inventory() -> dict:
    listing = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(EXAMPLE), "--list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(listing.stdout)


def _gpu_nodes(inventory) -> dict[str, dict]:
    """Every GPU node with its variables (group_vars included) and its platform group."""
    nodes = {}
    for group in inventory["gpu_nodes"]["children"]:
        for host in inventory[group]["hosts"]:
            nodes[host] = dict(inventory["_meta"]["hostvars"][host], platform_group=group)
    return nodes


def _matrix() -> dict[str, dict[str, str]]:
    """The README's support matrix: role -> column -> cell."""
    lines = (ROOT / "README.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| role | Debian 11 |"))
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    matrix = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        matrix[cells[0]] = dict(zip(header, cells, strict=True))
    return matrix


def test_every_node_has_a_platform_group(inventory):
    nodes = _gpu_nodes(inventory)
    assert len(nodes) >= 6
    assert inventory["gpu_nodes"].get("hosts", []) == []  # every node in a platform group
    assert {node["platform_group"] for node in nodes.values()} <= set(COLUMNS)


def test_every_driver_pin_is_on_a_supported_branch(inventory):
    supported = branches.nvidia_driver_supported_branches(BRANCHES, THIS_MONTH)
    for host, node in _gpu_nodes(inventory).items():
        version = str(node.get("nvidia_driver_version", ""))
        branch = str(node.get("nvidia_driver_branch", "")) or version.split(".")[0]
        assert branch in supported, f"{host}: branch {branch!r} is not one of {supported} this month"
        assert branches.nvidia_driver_branch_warning(branch, BRANCHES, THIS_MONTH) == ""
        assert version == "" or version.split(".")[0] == branch, host


def test_kubelet_is_1_34_or_later(inventory):
    for host, node in _gpu_nodes(inventory).items():
        version = tuple(int(part) for part in str(node["kubelet_assumed_version"]).split("."))
        assert version >= (1, 34), f"{host}: kubelet_assumed_version {node['kubelet_assumed_version']}"


def test_every_node_runs_containerd_2():
    """Every host's comment says containerd 2.x, and none names an older containerd."""
    text = (EXAMPLE / "hosts.yml").read_text()
    assert not re.search(r"containerd 1\.", text)
    hosts = yaml.safe_load(text)["all"]["children"]["gpu_nodes"]["children"]
    lines = text.splitlines()
    for group in hosts.values():
        for host in group["hosts"]:
            at = next(i for i, line in enumerate(lines) if line.strip() == f"{host}:")
            comment = []
            for line in reversed(lines[:at]):
                if not line.strip().startswith("#"):
                    break
                comment.append(line)
            assert "containerd 2.x" in " ".join(comment), host


def test_the_example_has_a_gb200_a_dra_and_a_secure_boot_node(inventory):
    nodes = _gpu_nodes(inventory)
    gb200 = [node for node in nodes.values() if node["platform_group"].endswith("_arm64")]
    assert any(
        node.get("nvidia_driver_imex", "none") != "none"
        and node.get("nvidia_driver_nvlsm") == "always"
        and node.get("nvidia_driver_ubuntu_cuda_repo") is True  # nvlsm comes from NVIDIA's repository only
        for node in gb200
    ), gb200
    assert any(node.get("gpu_node_facts_gpu_allocation") == "dra" for node in nodes.values())
    text = (EXAMPLE / "hosts.yml").read_text()
    secure = [host for host, node in nodes.items() if node.get("nvidia_driver_ubuntu_precompiled") is True]
    assert secure
    for host in secure:
        before = text[: text.index(f"{host}:")]
        assert "Secure Boot on" in before[before.rindex("\n\n") :], host


def test_every_node_is_a_platform_the_matrix_marks_as_tested(inventory):
    matrix = _matrix()
    for host, node in _gpu_nodes(inventory).items():
        column = COLUMNS[node["platform_group"]]
        for role in ROLES:
            cell = matrix[role][column]
            if node["platform_group"] in ONLY_RENDERED:
                assert not cell.startswith("CI:"), (
                    f"{column} is run in CI now: take {node['platform_group']} off ONLY_RENDERED"
                )
            else:
                assert cell.startswith("CI:"), f"{host}: the matrix says {role} on {column} is {cell!r}, not CI"
    text = (EXAMPLE / "hosts.yml").read_text()
    for group in ONLY_RENDERED:
        before = text[: text.index(f"{group}:")]
        assert "ONLY RENDERED" in before[before.rindex("\n\n") :], group
