"""plugins/filter/mig.py: whether nvidia_mig_configs is in mig-parted's format, which was a Jinja program in
roles/nvidia_mig/vars/main.yml. The expected problems are what that program rendered for the same inputs (checked
with Ansible's Templar when the filter replaced it); the last tests render the role's own vars through the filter."""

from __future__ import annotations

import pytest
import yaml
from conftest import ROOT, load_module, render_role_value

mig = load_module("mig", subdir="plugins/filter")
ROLE = ROOT / "roles" / "nvidia_mig"
KEYS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__nvidia_mig_entry_keys"]
GOOD = {
    "all-disabled": [{"devices": "all", "mig-enabled": False}],
    "inference": [
        {"device-filter": ["0x233010DE", "0x233110DE"], "devices": [0, 1], "mig-enabled": True,
         "mig-devices": {"1g.10gb": 7}},
        {"device-filter": "0x20B010DE", "devices": "all", "mig-enabled": True,
         "mig-devices": {"1g.10gb+me": 1, "1c.3g.40gb": 2, "3g.40gb": "1"}},
    ],
}  # fmt: skip

CASES = [
    ({"a": []}, ["a: not a list of entries"]),
    ({"a": "all"}, ["a: not a list of entries"]),
    ({"a": None}, ["a: not a list of entries"]),
    ({"a": ["all"]}, ["a entry 1: not a mapping"]),
    ({"a": [{"devices": "all", "mig-enabled": False, "mig-devcies": {}, "x": 1}]},
     ["a entry 1: unknown keys mig-devcies, x"]),
    ({"a": [{"mig-enabled": False}]}, ["a entry 1: devices must be all or a list of GPU indexes"]),
    ({"a": [{"devices": "0", "mig-enabled": False}]}, ["a entry 1: devices must be all or a list of GPU indexes"]),
    ({"a": [{"devices": [0, "one"], "mig-enabled": False}]},
     ["a entry 1: devices must be all or a list of GPU indexes"]),
    ({"a": [{"devices": "all"}]}, ["a entry 1: mig-enabled must be true or false"]),
    ({"a": [{"devices": "all", "mig-enabled": "yes"}]}, ["a entry 1: mig-enabled must be true or false"]),
    ({"a": [{"devices": "all", "mig-enabled": True, "mig-devices": ["1g.10gb"]}]},
     ["a entry 1: mig-devices must map MIG profiles (like 1g.10gb) to counts"]),
    ({"a": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10GB": 1}}]},
     ["a entry 1: mig-devices must map MIG profiles (like 1g.10gb) to counts"]),
    ({"a": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": -1}}]},
     ["a entry 1: mig-devices must map MIG profiles (like 1g.10gb) to counts"]),
    ({"a": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": True}}]},
     ["a entry 1: mig-devices must map MIG profiles (like 1g.10gb) to counts"]),
    ({"a": [{"devices": "all", "mig-enabled": False, "mig-devices": {"bad": "x"}}]}, []),  # MIG off: not read
    ({"a": [{"devices": "all", "mig-enabled": True}]}, []),  # MIG on, no instances
    ({"a": [{"devices": "all", "mig-enabled": False, "device-filter": "0x2330"}]},
     ["a entry 1: device-filter must be PCI device IDs like 0x233010DE"]),
    ({"a": [{"devices": "all", "mig-enabled": False, "device-filter": ["0x233010DE", "233010DE"]}]},
     ["a entry 1: device-filter must be PCI device IDs like 0x233010DE"]),
    ({"a": [{"devices": "all", "mig-enabled": False}, "x"], "b": [], "c": [{"devices": "all"}]},
     ["a entry 2: not a mapping", "b: not a list of entries", "c entry 1: mig-enabled must be true or false"]),
]  # fmt: skip


def test_well_formed_layouts_have_no_problems():
    assert mig.nvidia_mig_bad_entries(GOOD, KEYS) == []
    assert mig.nvidia_mig_bad_entries({}, KEYS) == []


@pytest.mark.parametrize(("configs", "expected"), CASES, ids=[str(i) for i in range(len(CASES))])
def test_each_problem_is_named_with_its_layout_and_entry(configs, expected):
    assert mig.nvidia_mig_bad_entries(configs, KEYS) == expected


def test_a_device_filter_yaml_read_as_a_number_is_refused_not_an_error():
    # 0x233010DE unquoted is an integer to YAML: refused with the message (the Jinja program raised on it)
    configs = {"a": [{"devices": "all", "mig-enabled": False, "device-filter": 0x233010DE}]}
    assert mig.nvidia_mig_bad_entries(configs, KEYS) == [
        "a entry 1: device-filter must be PCI device IDs like 0x233010DE"
    ]


@pytest.mark.parametrize(("configs", "expected"), [(GOOD, []), *CASES[-3:]])
def test_the_roles_check_renders_through_the_filter(configs, expected):
    variables = {
        **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
        **yaml.safe_load((ROLE / "vars" / "main.yml").read_text()),
        "nvidia_mig_configs": configs,
    }
    assert render_role_value("{{ __nvidia_mig_bad_entries }}", variables) == expected


# ---- the package read (tasks/install.yml), which was a Jinja program with a {% set %} in vars/main.yml ---------------

OLD_INSTALLED = (
    "{%- set found = __nvidia_mig_package_read.stdout_lines | map('split') | selectattr('0', 'equalto', 'installed')"
    " | list -%}\n{{ {'version': found[0][1], 'selection': found[0][2]} if found else {} }}"
)  # roles/nvidia_mig/vars/main.yml at commit 233085d
OLD_OFFERED = (
    "{{ __nvidia_mig_package_read.stdout_lines | map('split') | selectattr('0', 'equalto', 'offered')"
    " | map(attribute='1') | list }}"
)
READS = [
    [],
    ["installed 0.15.0-1 hold"],
    ["installed 0.15.0-1 install", "offered 0.15.0-1", "offered 0.14.0-1"],
    ["offered 0.15.0-1", "offered 0.14.0-1"],
    ["installed 0.14.0-1 install"],
    ["offered 0.15.0~rc.1-1"],
]


@pytest.mark.parametrize("lines", READS, ids=[str(i) for i in range(len(READS))])
def test_the_package_read_is_what_the_jinja_program_read(lines):
    variables = {"__nvidia_mig_package_read": {"stdout_lines": lines}}
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    for old, name in ((OLD_INSTALLED, "__nvidia_mig_installed"), (OLD_OFFERED, "__nvidia_mig_offered")):
        assert render_role_value(role_vars[name], variables) == render_role_value(old, variables), name


def test_the_package_read_skips_lines_of_other_forms():
    assert mig.nvidia_mig_package_read(["installed 1-1", "offered", "noise x y", "offered 2-1"]) == {
        "installed": {},
        "offered": ["2-1"],
    }
