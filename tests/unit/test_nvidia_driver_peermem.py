"""nvidia_driver_peermem: nvidia-peermem (GPUDirect RDMA) loaded at boot through modules-load.d, and now when the
driver is loaded. No kernel module can be loaded on the build machines, so the tasks' decisions and the file are
tested here by rendering them with Ansible's Templar (test_nvidia_driver_render's Role helper)."""

from __future__ import annotations

import pytest
import yaml
from test_nvidia_driver_render import ROLE, Role, _render_template

CONFIGURE = yaml.safe_load((ROLE / "tasks" / "configure.yml").read_text())


def _task(name: str) -> dict:
    """The task of configure.yml, or of the file one of its includes names, with the include's conditions first."""
    for task in CONFIGURE:
        if task["name"] == name:
            return task
        included = task.get("ansible.builtin.include_tasks")
        inner_tasks = yaml.safe_load((ROLE / "tasks" / included).read_text()) if included else task.get("block", [])
        for inner in inner_tasks:
            if inner["name"] == name:
                return {**inner, "when": _as_list(task.get("when")) + _as_list(inner.get("when"))}
    raise AssertionError(name)


def _as_list(value) -> list:
    return [] if value is None else value if isinstance(value, list) else [value]


def _runs(role: Role, name: str) -> bool:
    return all(role.condition(condition) for condition in _as_list(_task(name)["when"]))


def test_the_boot_time_file_names_the_module():
    assert _render_template(Role("ubuntu2404"), "etc/modules-load.d/nvidia-peermem.conf.j2") == (
        "#\n# Ansible managed\n#\n# GPUDirect RDMA: NICs read and write GPU memory directly (nvidia_driver_peermem).\n"
        "nvidia-peermem\n"
    )


@pytest.mark.parametrize(
    ("peermem", "loaded", "container", "boot_file", "modprobe", "report", "remove"),
    [
        (True, True, False, True, True, False, False),  # bare metal with the driver loaded: load it now too
        (True, False, False, True, False, True, False),  # first install: the driver loads at the reboot
        (True, True, True, True, False, True, False),  # a container loads no kernel modules
        (False, True, False, False, False, False, True),  # not wanted: the role's file is removed
    ],
)
def test_when_nvidia_peermem_is_loaded(peermem, loaded, container, boot_file, modprobe, report, remove):
    role = Role(
        "ubuntu2404",
        nvidia_driver_peermem=peermem,
        facts={"gpu_node": {"container": container, "driver": {"loaded": loaded, "version": "580.95.05"}}},
    )
    assert _runs(role, "Load nvidia-peermem at every boot") is boot_file
    assert _runs(role, "Load nvidia-peermem now, next to the loaded driver") is modprobe
    assert _runs(role, "Report that nvidia-peermem loads with the driver at the next boot") is report
    assert _runs(role, "Remove the nvidia-peermem boot-time load when it is not wanted") is remove
    assert role["__nvidia_driver_peermem_file"] == "/etc/modules-load.d/nvidia-peermem.conf"
