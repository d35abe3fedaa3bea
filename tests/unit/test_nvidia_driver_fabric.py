"""The NVLink fabric services of the nvidia_driver role (issue 39): NVIDIA IMEX pinned and held with the driver,
checked in lockstep like the fabric manager, its unit configured (host) or masked (dra); nvlsm and its kernel modules
on NVLink5 systems; the fact that tells NVLink5 (plugins/module_utils/node_facts/fabric.py); the merge of IMEX's
config.cfg (plugins/filter/nvidia_driver.py key_value_config).

The role's variables are rendered as in test_nvidia_driver_render.py (its Role); the sysfs trees are TEST STAND-INs
laid out in tmp_path as the kernel lays out /sys/bus/pci/devices."""

from __future__ import annotations

import pytest
import yaml
from ansible.template import trust_as_template
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts import fabric as node_facts_fabric
from conftest import gather_node_facts, load_module
from test_nvidia_driver_render import ROLE, Role

nvidia_filters = load_module("nvidia_driver", subdir="plugins/filter")
HGX = {"gpu_node": {"nvswitch_count": 4}}
NVL5 = {"gpu_node": {"nvswitch_count": 4, "nvlink_fabric": {"nvl5": True, "switch_management_functions": ["x"]}}}
DRIVER = "580.178.04-0ubuntu0.24.04.1"


def _role(platform: str, driver: str | None = None, imex: str | None = None, facts: dict | None = None, **variables):
    probe = Role(platform, facts=facts or HGX, **variables)
    packages = {}
    if driver:
        packages[probe["__nvidia_driver_version_package"]] = [{"version": driver}]
    if imex:
        packages[probe["__nvidia_driver_imex_package"]] = [{"version": imex}]
    return Role(platform, facts={**(facts or HGX), "packages": packages}, **variables)


# ---- IMEX packages -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("platform", "variables", "package"),
    [
        ("ubuntu2404", {"nvidia_driver_branch": "580"}, "nvidia-imex-580"),  # Ubuntu's archive keeps the branch
        ("ubuntu2204", {"nvidia_driver_branch": "570"}, "nvidia-imex-570"),
        ("ubuntu2404", {"nvidia_driver_branch": "580", "nvidia_driver_ubuntu_cuda_repo": True}, "nvidia-imex"),
        ("ubuntu2404", {"nvidia_driver_branch": "570", "nvidia_driver_ubuntu_cuda_repo": True}, "nvidia-imex-570"),
        ("rocky9", {"nvidia_driver_branch": "580"}, "nvidia-imex"),
        ("rocky9", {"nvidia_driver_branch": "570"}, "nvidia-imex-570"),
        ("debian12", {}, ""),
    ],
)
def test_imex_package_names(platform, variables, package):
    assert Role(platform, nvidia_driver_imex="host", **variables)["__nvidia_driver_imex_package"] == package


@pytest.mark.parametrize("choice", ["host", "dra"])
def test_imex_is_pinned_to_the_driver_and_held_with_it(choice):
    role = _role("ubuntu2404", DRIVER, nvidia_driver_imex=choice, nvidia_driver_branch="580")
    assert role["__nvidia_driver_fabric_services_specs"] == ["nvidia-imex-580=580.178.04-*"]
    assert "nvidia-imex-580" in role["__nvidia_driver_hold_packages"]
    exact = Role("rocky9", facts=HGX, nvidia_driver_imex=choice, nvidia_driver_version="580.95.05")
    assert exact["__nvidia_driver_imex_spec"] == "nvidia-imex-580.95.05"


def test_imex_none_changes_nothing():
    role = _role("ubuntu2404", DRIVER, nvidia_driver_branch="580")
    assert role["__nvidia_driver_imex_enabled"] is False
    assert role["__nvidia_driver_fabric_services_specs"] == []
    assert not [name for name in role["__nvidia_driver_hold_packages"] if "imex" in name]
    # and the GPU Operator's driver container (operator mode) gets no host IMEX either
    assert (
        Role("ubuntu2404", nvidia_driver_imex="host", nvidia_driver_managed_by="operator")[
            "__nvidia_driver_imex_enabled"
        ]
        is False
    )


@pytest.mark.parametrize(
    ("driver", "imex", "apart"),
    [
        (DRIVER, DRIVER, False),
        (DRIVER, "580.95.05-0ubuntu1", True),
        (DRIVER, None, False),  # not installed yet: the role installs it at the driver's version
    ],
)
def test_imex_apart_from_the_driver_is_found_and_refused(driver, imex, apart):
    role = _role(
        "ubuntu2404",
        driver,
        imex,
        nvidia_driver_imex="host",
        nvidia_driver_version_change="refuse",
        nvidia_driver_branch="580",
        nvidia_driver_imex_nodes=["10.0.0.1"],
    )
    assert role["__nvidia_driver_imex_apart"] is apart
    assert role.check("imex_with_driver") is (not apart)
    if apart:
        message = role.check_message("imex_with_driver")
        assert message.startswith("node1 has NVIDIA IMEX 580.95.05 (nvidia-imex-580) but NVIDIA driver 580.178.04.")
        assert message.endswith(
            "apt-get install --allow-change-held-packages --allow-downgrades nvidia-imex-580=580.178.04-*"
        )


def test_the_install_ends_with_imex_at_the_drivers_version():
    """The lockstep check of tasks/install.yml (its include of fabric_check.yml) holds IMEX to the driver's version."""
    tasks = yaml.safe_load((ROLE / "tasks" / "install.yml").read_text())
    include = next(
        task for task in tasks if task["name"] == "Check that the fabric manager is at the driver's exact version"
    )
    check = yaml.safe_load((ROLE / "tasks" / include["ansible.builtin.include_tasks"]).read_text())[1]
    assert check["when"] == "__nvidia_driver_plan.imex_enabled"
    that = check["ansible.builtin.assert"]["that"]
    together = _role("ubuntu2404", DRIVER, DRIVER, nvidia_driver_imex="dra", nvidia_driver_branch="580")
    assert together.condition(include["when"][0]) and all(together.condition(term) for term in that)
    for imex in ("580.95.05-0ubuntu1", None):  # another version, or not installed at all
        apart = _role("ubuntu2404", DRIVER, imex, nvidia_driver_imex="dra", nvidia_driver_branch="580")
        assert not all(apart.condition(term) for term in that)
    message = " ".join(
        _role("ubuntu2404", DRIVER, "580.95.05-0ubuntu1", nvidia_driver_imex="dra", nvidia_driver_branch="580")
        .templar.template(trust_as_template(check["ansible.builtin.assert"]["fail_msg"]))
        .split()
    )
    assert message.startswith(
        "NVIDIA IMEX must be at the driver's exact version, but node1 has nvidia-imex-580 580.95.05"
    )


def test_debian_refuses_imex_it_does_not_package():
    role = Role("debian12", nvidia_driver_imex="dra")
    assert not role.check("imex_packaged")
    assert "Debian does not package it" in role.check_message("imex_packaged")
    assert Role("debian12").check("imex_packaged")


# ---- IMEX variables ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variables", "said"),
    [
        ({"nvidia_driver_imex": "host"}, "but nvidia_driver_imex_nodes is empty"),
        (
            {"nvidia_driver_imex_nodes": ["10.0.0.1", "node-b"]},
            "nvidia_driver_imex_nodes has node-b, which is not an IP",
        ),
        (
            {"nvidia_driver_imex_settings": {"SERVER_PORT": 50000, "IMEX_PORT": 1}},
            "sets IMEX_PORT, which the config.cfg",
        ),
        ({"nvidia_driver_imex_settings": {"LOG_LEVEL": "4\nDAEMONIZE=0"}}, "spans lines"),
    ],
)
def test_bad_imex_variables_are_refused_naming_the_fix(variables, said):
    errors = Role("ubuntu2404", **variables).variable_errors()
    assert len(errors) == 1 and said in " ".join(errors[0].split()), errors


def test_good_imex_variables_pass():
    role = Role(
        "ubuntu2404",
        nvidia_driver_imex="host",
        nvidia_driver_imex_nodes=["10.0.0.1", "10.0.0.2", "fd00::3"],
        nvidia_driver_imex_settings={"IMEX_CMD_PORT": 50005, "IMEX_ENABLE_AUTH_ENCRYPTION": False},
    )
    assert role.variable_errors() == []
    assert role["__nvidia_driver_imex_settings"] == {
        "IMEX_NODE_CONFIG_FILE": "/etc/nvidia-imex/nodes_config.cfg",
        "IMEX_CMD_PORT": 50005,
        "IMEX_ENABLE_AUTH_ENCRYPTION": False,
    }


def test_the_imex_keys_are_the_argument_spec_s_word():
    """The check's keys are a list in vars/main.yml; the argument spec documents the choices."""
    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["variables"]["options"]
    assert spec["nvidia_driver_imex"]["choices"] == ["none", "host", "dra"]
    assert spec["nvidia_driver_nvlsm"]["choices"] == ["auto", "always", "never"]


# ---- IMEX's config.cfg ---------------------------------------------------------------------------------------------

SHIPPED = """# An admin's note
#   Description: log level
LOG_LEVEL=4
SERVER_PORT=50000

#   Description: the nodes file
IMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg
IMEX_CMD_ENABLED=1
"""


def test_config_cfg_is_merged_not_overwritten():
    merged = nvidia_filters.key_value_config(SHIPPED, {"SERVER_PORT": 51000, "IMEX_CMD_PORT": 50005, "DAEMONIZE": True})
    assert merged == SHIPPED.replace("SERVER_PORT=50000", "SERVER_PORT=51000") + "IMEX_CMD_PORT=50005\nDAEMONIZE=1\n"
    # a second run changes nothing
    assert (
        nvidia_filters.key_value_config(merged, {"SERVER_PORT": 51000, "IMEX_CMD_PORT": 50005, "DAEMONIZE": True})
        == merged
    )
    # a commented key is not a setting: the first uncommented line of the key is rewritten
    assert (
        nvidia_filters.key_value_config("#LOG_LEVEL=1\nLOG_LEVEL=4\n", {"LOG_LEVEL": 2})
        == "#LOG_LEVEL=1\nLOG_LEVEL=2\n"
    )
    assert nvidia_filters.key_value_config("", {"LOG_LEVEL": 2}) == "LOG_LEVEL=2\n"


# ---- nvlsm on NVLink5 ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("facts", "variables", "enabled"),
    [
        (NVL5, {"nvidia_driver_branch": "580"}, True),
        (NVL5, {"nvidia_driver_branch": "570"}, True),
        (NVL5, {"nvidia_driver_branch": "565"}, False),  # before 570 the fabric manager does not run nvlsm
        (HGX, {"nvidia_driver_branch": "580"}, False),  # NVLink4 (HGX H100): no SW_MNG port
        (NVL5, {"nvidia_driver_branch": "580", "nvidia_driver_fabricmanager": "never"}, False),
        ({}, {"nvidia_driver_nvlsm": "always"}, True),
        (NVL5, {"nvidia_driver_branch": "580", "nvidia_driver_nvlsm": "never"}, False),
    ],
)
def test_nvlsm_and_its_modules_on_nvlink5(facts, variables, enabled):
    role = Role("ubuntu2404", facts=facts, **variables)
    assert role["__nvidia_driver_nvlsm_enabled"] is enabled
    assert ("nvlsm" in role["__nvidia_driver_fabric_services_specs"]) is enabled
    assert ("nvlsm" in role["__nvidia_driver_hold_packages"]) is enabled
    assert role["__nvidia_driver_nvlsm_modules"] == ["ib_umad", "mlx5_ib"]


def test_debian_refuses_nvlsm_it_does_not_package():
    role = Role("debian12", facts=NVL5, nvidia_driver_nvlsm="always")
    assert not role.check("nvlsm_packaged")
    assert "Debian does not package it" in role.check_message("nvlsm_packaged")
    # Debian 12's archive packages 535, before nvlsm
    assert Role("debian12", facts=NVL5, nvidia_driver_debian_cuda_repo=False).check("nvlsm_packaged")


# ---- the fact ----------------------------------------------------------------------------------------------------


def _function(root, address: str, vendor: str, vpd: bytes | None):
    path = root / "sys" / "bus" / "pci" / "devices" / address
    path.mkdir(parents=True)
    (path / "vendor").write_text(f"{vendor}\n")
    if vpd is not None:
        (path / "vpd").write_bytes(vpd)


def test_nvlink5_is_a_mellanox_function_whose_vpd_says_sw_mng(tmp_path):
    # TEST STAND-IN sysfs: a ConnectX NIC (no SW_MNG), an NVSwitch management port (SW_MNG in its VPD, binary
    # around it as VPD is), an NVIDIA GPU whose bytes happen to contain the word (not Mellanox: ignored)
    _function(tmp_path, "0000:01:00.0", "0x15b3", b"\x82\x10ConnectX-7 NIC\x90\x00")
    _function(tmp_path, "0000:03:00.0", "0x15b3", b"\x82\x08NVSwitch\x90\x04V0\x06SW_MNG\x78")
    _function(tmp_path, "0000:18:00.0", "0x10de", b"SW_MNG")
    _function(tmp_path, "0000:19:00.0", "0x15b3", None)  # no VPD at all
    assert node_facts_fabric.nvlink_fabric_facts(str(tmp_path)) == {
        "nvl5": True,
        "switch_management_functions": ["0000:03:00.0"],
    }
    # Mutation: the management port's VPD without the keyword -> not NVLink5
    (tmp_path / "sys/bus/pci/devices/0000:03:00.0/vpd").write_bytes(b"\x82\x08NVSwitch\x78")
    assert node_facts_fabric.nvlink_fabric_facts(str(tmp_path)) == {"nvl5": False, "switch_management_functions": []}
    assert node_facts_fabric.nvlink_fabric_facts(str(tmp_path / "nothing")) == {
        "nvl5": False,
        "switch_management_functions": [],
    }


def test_gpu_node_facts_returns_the_fabric_fact(tmp_path):
    facts = gather_node_facts(str(tmp_path), run_command=None)
    assert facts["nvlink_fabric"] == {"nvl5": False, "switch_management_functions": []}
