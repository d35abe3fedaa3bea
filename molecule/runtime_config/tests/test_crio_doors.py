"""NVIDIA's REAL runtime through CRI-O 1.35's CRI on rc-crio, with the config.toml the toolkit role leaves (issue 24
items 4 and 5 on CRI-O; the same helpers and fake GPU as molecule/nvidia_runtime: tests/cri/doors.py).

What CRI-O does with each door (cri-o v1.35.6):
- pod annotations: CRI-O copies every pod annotation into the OCI spec of each of the pod's containers, whatever
  the handler (internal/factory/container/container.go, SpecAddAnnotations, "Preserve the sandbox annotations").
  `allowed_annotations` of a handler filter only CRI-O's own experimental annotations (server/utils.go
  FilterDisallowedAnnotations; pkg/config rejects any other name as "invalid allowed_annotation"). So CRI-O cannot
  keep cdi.k8s.io/ pod annotations from NVIDIA's runtime, which injects what they name while its
  annotation-prefixes include cdi.k8s.io/ (NVIDIA's default): the toolkit role writes annotation-prefixes = [].
- container annotations: CRI-O's own CDI injects cdi.k8s.io/ container annotations (the device plugins' channel,
  which a pod cannot use) whatever the handler (internal/factory/container/device_linux.go SpecInjectCDIDevices).
- volume mounts: only NVIDIA's runtime reads them (accept-nvidia-visible-devices-as-volume-mounts).
Each door is opened once (a mutation) to show that the test and the doctor's row see it.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parents[1]))
from tests.cri.client import crio_client
from tests.cri.doors import (
    CDI_ANNOTATION,
    CONFIG,
    ENVVAR_CLOSED,
    FORWARDED,
    IGNORED_ENVVAR,
    INJECTED,
    JIT_CDI,
    LOG,
    NO_DEVICES,
    NO_DRIVER,
    PREFIXES_CLOSED,
    PREFIXES_OPEN,
    REQUESTS,
    STARTED,
    VOLUMES_CLOSED,
    doctor,
    pod,
    set_in_config,
)

testinfra_hosts = ["ansible://rc-crio"]
RUNTIMES = ["crio"]
ANNOTATION_ROW = "crio: CDI annotations of pods"
VOLUME_ROW = "toolkit: GPU by volume mount"


@pytest.fixture
def cri(host):
    manager = tomllib.loads(host.check_output("crio status config 2>/dev/null"))["crio"]["runtime"]
    with crio_client(host.backend.get_hostname(), manager.get("cgroup_manager", "systemd")) as client:
        yield client


@pytest.fixture
def saved_config(host):
    """config.toml as the toolkit role left it, back after each mutation (NVIDIA's runtime reads it per call)."""
    saved = host.check_output(f"base64 -w0 {CONFIG}")
    yield
    host.check_output(f"echo {saved} | base64 -d > {CONFIG}")


# ---------------------------------------------------------------------------------------------- item 4


def test_nvidia_is_nvidias_real_runtime_reading_the_projects_config(host):
    assert "NVIDIA Container Runtime version 1.20.0" in host.check_output("nvidia-container-runtime --version")
    config = host.file(CONFIG).content_string
    assert ENVVAR_CLOSED in config and VOLUMES_CLOSED in config and PREFIXES_CLOSED in config
    assert f'debug = "{LOG}"' in config


def test_a_pod_through_nvidia_starts_with_the_projects_config(host, cri):
    outcome, log = pod(host, cri, "plain", "nvidia")
    assert outcome == "clean", outcome
    # the log file and its level come from config.toml only: the runtime read the project's file
    assert STARTED in log and NO_DEVICES in log and FORWARDED in log, log


def test_unprivileged_envvar_all_through_nvidia_gets_no_device_and_no_cdi_edit(host, cri):
    outcome, log = pod(host, cri, "envvar", "nvidia", envs={"NVIDIA_VISIBLE_DEVICES": "all"})
    assert outcome == "clean", outcome
    assert IGNORED_ENVVAR in log and NO_DEVICES in log, log
    assert "Injecting devices using CDI" not in log and JIT_CDI not in log, log


def test_cap_sys_admin_through_nvidia_counts_as_privileged(host, cri):
    """Upstream semantics (internal/config/image/privileged.go): CAP_SYS_ADMIN in the bounding set is privileged,
    NVIDIA_VISIBLE_DEVICES counts whatever config.toml says; without a driver the runtime fails the container where
    a GPU node would hand it every GPU."""
    outcome, log = pod(
        host, cri, "sys-admin", "nvidia", envs={"NVIDIA_VISIBLE_DEVICES": "all"}, add_capabilities=("SYS_ADMIN",)
    )
    assert outcome.startswith("error"), outcome
    assert JIT_CDI in log and NO_DRIVER in outcome + log, (outcome, log)
    assert IGNORED_ENVVAR not in log, log


def test_mutation_accepting_the_envvar_when_unprivileged_injects(host, cri, saved_config):
    set_in_config(host, ENVVAR_CLOSED, ENVVAR_CLOSED.replace("false", "true"))
    outcome, log = pod(host, cri, "envvar", "nvidia", envs={"NVIDIA_VISIBLE_DEVICES": "all"})
    assert outcome.startswith("error"), outcome
    assert JIT_CDI in log and NO_DRIVER in outcome + log and IGNORED_ENVVAR not in log, (outcome, log)


# ---------------------------------------------------------------------------------------------- item 5


def test_the_doctor_finds_every_door_shut(host):
    rows = doctor(host, RUNTIMES)
    assert rows[VOLUME_ROW]["status"] == "ok", rows[VOLUME_ROW]
    assert rows[ANNOTATION_ROW]["status"] == "ok", rows[ANNOTATION_ROW]


@pytest.mark.parametrize("handler", ["", "nvidia"])
@pytest.mark.parametrize("request_name", sorted(REQUESTS))
def test_a_pod_that_requests_no_gpu_sees_neither_the_device_nor_the_variable(host, cri, handler, request_name):
    outcome, log = pod(host, cri, request_name, handler, **REQUESTS[request_name])
    assert outcome == "clean", (request_name, handler or "default", outcome, log)
    if handler == "nvidia":
        assert NO_DEVICES in log, log  # NVIDIA's runtime saw the container and found no request
    else:
        assert STARTED not in log, log  # CRI-O's default handler (runc) never calls NVIDIA's runtime


@pytest.mark.parametrize("handler", ["", "nvidia"])
def test_the_device_plugins_channel_container_annotations_does_inject(host, cri, handler):
    """Control: the fake spec is a working GPU, and GPU pods keep their channel: CRI-O's own CDI injects container
    annotations (what device plugins return through the kubelet) whatever the handler."""
    outcome, _log = pod(host, cri, "container-annotation", handler, annotations=CDI_ANNOTATION)
    assert outcome == "gpu", outcome


def test_mutation_nvidias_default_annotation_prefixes_inject_and_the_doctor_fails(host, cri, saved_config):
    """With NVIDIA's default prefixes the pod annotation that CRI-O passes on is a GPU request: open through nvidia,
    and the doctor's row fails; the default handler still ignores it."""
    set_in_config(host, PREFIXES_CLOSED, PREFIXES_OPEN)
    outcome, log = pod(host, cri, "pod-annotation", "nvidia", **REQUESTS["pod-annotation"])
    assert outcome == "gpu", (outcome, log)
    assert INJECTED in log, log
    row = doctor(host, RUNTIMES)[ANNOTATION_ROW]
    assert row["status"] == "fail" and "with prefix cdi.k8s.io/" in row["detail"], row
    outcome, _log = pod(host, cri, "pod-annotation", "", **REQUESTS["pod-annotation"])
    assert outcome == "clean", outcome


def test_mutation_volume_mounts_accepted_inject_and_the_doctor_fails(host, cri, saved_config):
    set_in_config(host, VOLUMES_CLOSED, VOLUMES_CLOSED.replace("false", "true"))
    outcome, log = pod(host, cri, "host-path-dev-null", "nvidia", **REQUESTS["host-path-dev-null"])
    assert outcome == "gpu", (outcome, log)
    assert INJECTED in log, log
    row = doctor(host, RUNTIMES)[VOLUME_ROW]
    assert row["status"] == "fail" and "hostPath volume of /dev/null" in row["detail"], row


def test_the_doors_are_shut_again_after_the_mutations(host):
    rows = doctor(host, RUNTIMES)
    assert rows[VOLUME_ROW]["status"] == "ok" and rows[ANNOTATION_ROW]["status"] == "ok", rows
