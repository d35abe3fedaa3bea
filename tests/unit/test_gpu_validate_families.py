"""plugins/module_utils/gpu_validate/families.py, the one registry of the doctor's families (issue 51): the module's
choices and order, the family each row carries, the role's families, the fleet report's order and fallback, and the
families table of roles/gpu_validate/README.md."""

from __future__ import annotations

import re

import pytest
import yaml
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import families as registry
from conftest import GPU_NODE, ROOT, FakeNode, documented_options, load_module, params

checks = load_module("gpu_validate_checks")
fleet = load_module("fleet_report", subdir="plugins/filter")
validate = load_module("validate", subdir="plugins/filter")
README = ROOT / "roles" / "gpu_validate" / "README.md"

# A node on which every family builds rows: a GPU, the three runtimes running, test images, IMEX on the host, DCGM.
EVERYTHING = {
    "node": {**GPU_NODE, "runtimes": {name: {"running": True} for name in ("docker", "containerd", "crio")}},
    "runtimes": ["docker", "containerd", "crio"],
    "test_image": "busybox",
    "containerd_test_image": "busybox",
    "crio_test_image": "busybox",
    "imex": "host",
    "dcgm_diag": True,
}


def _fake():
    return FakeNode(devices=["/dev/fuse"], commands={("docker", "image", "inspect", "busybox"): (0, "", "")})


def _rows(families, **overrides):
    return checks.run_checks(params(families=list(families), **{**EVERYTHING, **overrides}), _fake())["checks"]


def test_the_registry_names_each_family_once_with_a_description_and_a_known_switch():
    assert len(set(registry.NAMES)) == len(registry.NAMES) == len(registry.FAMILIES)
    assert all(re.fullmatch(r"[a-z]+", name) for name in registry.NAMES)
    assert all(description.strip() for description in registry.DESCRIPTIONS.values())
    role_switches = {"gpu_validate_check_fuse", "gpu_validate_check_security", "gpu_validate_check_kubelet"}
    assert set(registry.SWITCHES.values()) == {None, *role_switches}
    spec = yaml.safe_load((ROOT / "roles" / "gpu_validate" / "meta" / "argument_specs.yml").read_text())
    assert role_switches <= set(spec["argument_specs"]["variables"]["options"])


def test_the_module_takes_and_documents_the_registrys_families():
    assert checks.FAMILIES == registry.NAMES
    assert checks.ARGUMENT_SPEC["families"]["choices"] == list(registry.NAMES)
    assert documented_options(checks)["families"]["choices"] == list(registry.NAMES)
    returned = yaml.safe_load(checks.RETURN)["checks"]
    assert "family" in " ".join(returned["description"]) and returned["sample"][0]["family"] == "driver"


@pytest.mark.parametrize("family", registry.NAMES)
def test_each_familys_rows_carry_that_family(family):
    overrides = {"runtimes": []} if family == "runtime" else {}  # its row: a node with no runtime to check
    rows = _rows([family], **overrides)
    assert rows, f"no row of {family} on the test node"
    assert {row["family"] for row in rows} == {family}, [(row["check"], row["family"]) for row in rows]


def test_a_run_of_every_family_lists_the_families_in_the_registrys_order():
    runs = (_rows(registry.NAMES, runtimes=[]), _rows(list(reversed(registry.NAMES))))
    for run in runs:
        order = [registry.NAMES.index(row["family"]) for row in run]
        assert order == sorted(order)
    assert {row["family"] for run in runs for row in run} == set(registry.NAMES)


def test_the_role_asks_for_the_registrys_families_in_order_as_its_switches_say():
    assert validate.gpu_validate_families() == list(registry.NAMES)
    off = validate.gpu_validate_families(check_fuse=False, check_security=True, check_kubelet=False)
    assert off == [n for n in registry.NAMES if n not in ("fuse", "confinement", "kubelet", "dra")]


def test_validate_json_keeps_each_rows_family():
    rows = _rows(["driver", "fuse"])
    report = validate.gpu_validate_report(rows, "gpu-1")
    assert [(c["check"], c["family"]) for c in report["checks"]] == [(r["check"], r["family"]) for r in rows]
    # a row without one (a caller's own row) stays without
    assert "family" not in validate.gpu_validate_report([{"check": "x", "status": "ok"}])["checks"][0]


# ---- the fallback for rows of an older version: its name rules give every row of today's doctor its family --------

OTHER_ROWS = [  # rows the run above does not build on its fake node, with the family whose checks build them
    ("crio: running config", "crio"),
    ("crio: container via nvidia", "crio"),
    ("crio: GPU isolation (nvidia)", "crio"),
    ("docker: nvidia runtime", "docker"),
    ("door: containerd runtime nvidia", "doors"),
    ("door: crio runtime nvidia-cdi", "doors"),
    ("containerd: CDI annotations of pods", "doors"),
    ("crio: CDI annotations of pods", "doors"),
    ("AppArmor profile gpu-fuse", "security"),
    ("seccomp profile no-such-profile", "security"),
]


def test_the_legacy_name_rules_give_each_row_of_todays_doctor_its_family():
    rows = _rows(registry.NAMES) + _rows(["runtime"], runtimes=[])
    named = [(row["check"], row["family"]) for row in rows] + OTHER_ROWS
    assert len(named) >= 50
    wrong = [(check, family, fleet.gpu_fleet_family(check)) for check, family in named]
    assert [w for w in wrong if w[1] != w[2]] == []
    assert {family for _pattern, family in fleet.LEGACY_FAMILY_RULES} == set(registry.NAMES)


# ---- the README's families table ---------------------------------------------------------------------------------


def _readme_families() -> list[tuple[str, str, str]]:
    """The rows of the table under "## What it checks" whose header is "| Family | Its rows check | Runs |"."""
    lines = README.read_text().splitlines()
    start = lines.index("| Family | Its rows check | Runs |")
    assert lines[start + 1] == "|---|---|---|"
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        assert len(cells) == 3, line
        rows.append(tuple(cells))
    return rows


def test_the_readme_lists_every_family_once_in_the_registrys_order_with_its_description_and_switch():
    table = _readme_families()
    names = [re.fullmatch(r"`([a-z]+)`", name).group(1) for name, _description, _runs in table]
    assert len(names) == len(set(names)), "a family listed twice"
    assert set(names) - set(registry.NAMES) == set(), "a family the registry does not know"
    assert names == list(registry.NAMES)
    expected = [
        (f"`{name}`", description, "always" if switch is None else f"with `{switch}`")
        for name, description, switch in registry.FAMILIES
    ]
    assert table == expected
