"""plugins/filter/rollout.py: the serial: list of site.yml's batches with a canary and of upgrade_driver.yml."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from conftest import load_module

rollout = load_module("rollout", subdir="plugins/filter")


@pytest.mark.parametrize(
    ("canary", "batches", "serial"),
    [
        (None, None, []),  # today's behaviour: every node in one batch
        ("", "", []),
        (0, None, []),
        (1, None, [1, "100%"]),  # the canary, then the rest at once
        (2, ["25%", "50%"], [2, "25%", "50%"]),
        ("1", "25 %", [1, "25%"]),
        (None, "3", [3]),
        (None, ["10%", 5], ["10%", 5]),
        (None, "12.5%", ["12.5%"]),
    ],
)
def test_the_serial_list_of_a_canary_and_batches(canary, batches, serial):
    assert rollout.gpu_rollout_serial(canary, batches) == serial


@pytest.mark.parametrize(
    ("canary", "batches", "message"),
    [
        ("25%", None, r"gpu_nodes_canary: '25%': the canary is a number of nodes \(1\), not a percentage"),
        (-1, None, r"gpu_nodes_canary: -1 is no batch size"),
        (True, None, r"gpu_nodes_canary: True is no batch size"),
        (None, "0%", r"gpu_nodes_batches: '0%' is no batch size; write a number of nodes greater than 0"),
        (None, "150%", r"gpu_nodes_batches: '150%' is no batch size"),
        (None, ["25%", "half"], r"gpu_nodes_batches\[1\]: 'half' is no batch size"),
        (None, [], r"gpu_nodes_batches: an empty list"),
    ],
)
def test_a_bad_value_is_refused_naming_the_variable(canary, batches, message):
    with pytest.raises(AnsibleFilterError, match=message):
        rollout.gpu_rollout_serial(canary, batches)


def test_upgrade_driver_names_its_own_variable():
    assert rollout.gpu_rollout_serial(None, "25%", batches_name="upgrade_driver_batch") == ["25%"]
    with pytest.raises(AnsibleFilterError, match="upgrade_driver_batch: 'x' is no batch size"):
        rollout.gpu_rollout_serial(None, "x", batches_name="upgrade_driver_batch")
