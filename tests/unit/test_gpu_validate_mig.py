"""The doctor's mig family (plugins/module_utils/gpu_validate/mig.py, issue 38): the row "MIG", the layout the MIG
manager's unit selects (MIG_PARTED_SELECTED_CONFIG, from `systemctl show`) in the config file the role writes,
against what nvidia-smi reports. FakeNode (conftest.py) answers systemctl and nvidia-smi and holds the config file.

nvidia-smi's output has the shape of `nvidia-smi --query-gpu=index,pci.device_id,mig.mode.current
--format=csv,noheader` and `nvidia-smi -L` with MIG devices; the config file is what roles/nvidia_mig renders
(to_nice_yaml of mig-parted's v1 format, api/spec/v1/spec.go at mig-parted v0.9.1)."""

from __future__ import annotations

import yaml
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import mig
from conftest import NO_GPU, FakeNode, load_module, node, params

SMI = "/usr/bin/nvidia-smi"
CONFIG = "/etc/nvidia-mig-manager/config.yaml"
SHOW = ("systemctl", "show", "--property=Environment", "--value", mig.UNIT)
LAYOUTS = {
    "version": "v1",
    "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        # a mixed node: H100 80GB (0x233010DE) in 1g.10gb, A100 40GB (0x20B010DE) in 2g.10gb
        "inference": [
            {"device-filter": ["0x233010DE"], "devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
            {"device-filter": "0x20B010DE", "devices": "all", "mig-enabled": True, "mig-devices": {"2g.10gb": 3}},
        ],
        "first-only": [
            {"devices": "all", "mig-enabled": False},
            {"devices": [0], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
        ],
    },
}


def listing(*gpus):
    lines = []
    for index, profiles in enumerate(gpus):
        lines.append(f"GPU {index}: NVIDIA H100 80GB HBM3 (UUID: GPU-{index})")
        number = 0
        for name, count in profiles.items():
            for _ in range(count):
                lines.append(f"  MIG {name:<12} Device {number:>2}: (UUID: MIG-{index}-{number})")
                number += 1
    return "\n".join(lines) + "\n"


def fake(selected="inference", query="0, 0x233010DE, Enabled\n1, 0x20B010DE, Enabled\n", gpus=None, text=None):
    gpus = gpus if gpus is not None else ({"1g.10gb": 7}, {"2g.10gb": 3})
    environment = (
        f"MIG_PARTED_SELECTED_CONFIG={selected} MIG_PARTED_CONFIG_FILE={CONFIG} "
        "MIG_PARTED_HOOKS_FILE=/etc/nvidia-mig-manager/hooks.yaml\n"
        if selected
        else "\n"
    )
    return FakeNode(
        commands={
            SHOW: (0, environment, ""),
            (SMI, *mig.SMI_QUERY): (0, query, ""),
            (SMI, "-L"): (0, listing(*gpus), ""),
        },
        files={CONFIG: text if text is not None else yaml.safe_dump(LAYOUTS, default_flow_style=False)},
    )


def check(host, facts=None):
    return mig.check_mig(params(), facts or node(), host)[0]


def test_a_mixed_node_in_the_layout_asked_for_is_ok():
    row = check(fake())
    assert (row["status"], row["detail"]) == ("ok", "layout inference on 2 of 2 GPU(s)")


def test_the_role_s_to_nice_yaml_rendering_is_read_by_the_node_side_parser():
    text = yaml.dump(LAYOUTS, default_flow_style=False, indent=2, sort_keys=True)
    assert check(fake(text=text))["status"] == "ok"


def test_a_gpu_with_other_mig_devices_fails_naming_both():
    row = check(fake(gpus=({"1g.10gb": 6}, {"2g.10gb": 3})))
    assert row["status"] == "fail"
    assert "GPU 0: MIG devices 6x 1g.10gb, wanted 7x 1g.10gb" in row["detail"]
    assert "--tags mig" in row["fix"]


def test_mig_mode_off_where_the_layout_wants_it_on_fails():
    row = check(fake(query="0, 0x233010DE, Disabled\n1, 0x20B010DE, Enabled\n", gpus=({}, {"2g.10gb": 3})))
    assert row["status"] == "fail"
    assert "GPU 0: MIG mode disabled, wanted enabled" in row["detail"]


def test_the_last_matching_entry_is_what_a_gpu_ends_with():
    query = "0, 0x233010DE, Enabled\n1, 0x233010DE, Disabled\n"
    assert check(fake(selected="first-only", query=query, gpus=({"3g.40gb": 2}, {})))["status"] == "ok"
    row = check(fake(selected="first-only", query=query.replace("Disabled", "Enabled"), gpus=({"3g.40gb": 2}, {})))
    assert "GPU 1: MIG mode enabled, wanted disabled" in row["detail"]


def test_a_gpu_no_entry_matches_is_left_alone():
    query = "0, 0x233010DE, Enabled\n1, 0x26B510DE, Disabled\n"
    row = check(fake(query=query, gpus=({"1g.10gb": 7}, {})))
    assert (row["status"], row["detail"]) == ("ok", "layout inference on 1 of 2 GPU(s)")


def test_a_layout_that_matches_no_gpu_of_the_node_fails():
    """An A100/H100 layout on an L40S node: mig-parted would apply nothing, so the node is not in the layout."""
    query = "0, 0x26B510DE, Disabled\n1, 0x26B510DE, Disabled\n"
    row = check(fake(query=query, gpus=({}, {})))
    assert row["status"] == "fail"
    assert row["detail"] == (
        "layout inference applies to none of the 2 GPU(s) (device IDs 0X26B510DE): its devices and device-filter"
        " entries match no GPU of this node"
    )


def test_a_layout_missing_from_the_config_fails():
    row = check(fake(selected="training"))
    assert (row["status"], row["detail"]) == ("fail", f"layout training is not in {CONFIG}")


def test_a_config_that_is_not_mig_parted_v1_fails():
    assert check(fake(text="version: v2\nmig-configs: {}\n"))["status"] == "fail"
    assert check(_without_config())["status"] == "fail"


def _without_config():
    host = fake()
    host.files.clear()
    return host


def test_skipped_without_a_layout_asked_for_and_without_a_gpu():
    row = check(fake(selected=""))
    assert row["status"] == "skipped" and "no MIG layout asked for" in row["detail"]
    host = fake()
    assert check(host, NO_GPU)["status"] == "skipped"
    assert host.ran == []


def test_the_family_runs_in_the_doctor_s_order_after_cdi():
    checks = load_module("gpu_validate_checks")
    assert checks.FAMILIES.index("mig") == checks.FAMILIES.index("cdi") + 1
    rows = checks.run_checks(params(families=["mig"], node=node()), fake())["checks"]
    assert [row["check"] for row in rows] == ["MIG"]
