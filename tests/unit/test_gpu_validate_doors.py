"""Unit tests of the doctor's "doors" family (plugins/module_utils/gpu_validate/doors.py, issue 24): the ways a pod
that requests no GPU could still get one through NVIDIA's runtime. Table-driven like the other families' tests;
molecule/nvidia_runtime shows each failing row on a real node (NVIDIA's runtime injecting the fake GPU)."""

from __future__ import annotations

import pytest
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import tables
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.doors import (
    _path_match,
    annotation_passthrough,
    cdi_annotation_row,
    check_doors,
    crio_cdi_annotation_row,
    string_list,
    volume_mount_row,
)
from conftest import FakeNode, params

CONFIG = "/etc/nvidia-container-runtime/config.toml"
VOLUME = "toolkit: GPU by volume mount"
ANNOTATION = "containerd: CDI annotations of pods"
CRIO_ANNOTATION = "crio: CDI annotations of pods"


HARDENED = 'accept-nvidia-visible-devices-as-volume-mounts = false\n[nvidia-container-runtime]\nlog-level = "info"\n'
OPEN = HARDENED.replace("= false", "= true")
# what the toolkit role writes since CRI-O's door (issue 24): NVIDIA's runtime reads no CDI annotation
CLOSED = HARDENED + "[nvidia-container-runtime.modes.cdi]\nannotation-prefixes = []\n"
CRIO = {"ok": True, "registered": True}


@pytest.mark.parametrize(
    ("text", "allowed", "status", "in_detail", "in_fix"),
    [
        (HARDENED, False, "ok", "ignores /dev/null mounts under /var/run/nvidia-container-devices", ""),
        ("", False, "ok", "is not true", ""),  # the key absent: NVIDIA's default, false
        (None, False, "ok", "is not true", ""),  # no config.toml at all: the runtime's defaults
        (OPEN, False, "fail", "hostPath volume of /dev/null", "nvidia_container_toolkit_accept_volume_mounts: false"),
        (OPEN, True, "warn", "asked for: the device plugin's volume-mounts strategy", "admission policy must deny"),
        ("accept-nvidia-visible-devices-as-volume-mounts = \n", False, "fail", "is not TOML", "--tags toolkit"),
    ],
)
def test_the_volume_mount_row(text, allowed, status, in_detail, in_fix):
    row = volume_mount_row(params(volume_mounts_allowed=allowed), text)
    assert row["check"] == VOLUME
    assert row["status"] == status, row
    assert in_detail in row["detail"], row
    assert in_fix in row["fix"], row


def _dump(pod_annotations=None, container_annotations=None, version=2) -> str:
    plugin = "io.containerd.cri.v1.runtime" if version == 3 else "io.containerd.grpc.v1.cri"
    lines = [f"version = {version}", f"[plugins.'{plugin}'.containerd]", "  default_runtime_name = 'runc'"]
    for name in ("runc", "nvidia"):
        lines.append(f"[plugins.'{plugin}'.containerd.runtimes.{name}]")
        lines.append("  runtime_type = 'io.containerd.runc.v2'")
        if name == "nvidia" and pod_annotations is not None:
            lines.append(f"  pod_annotations = {pod_annotations!r}".replace("'", '"'))
        if name == "nvidia" and container_annotations is not None:
            lines.append(f"  container_annotations = {container_annotations!r}".replace("'", '"'))
    return "\n".join(lines) + "\n"


def _state(dump: str) -> dict:
    return {"registered": True, "passthrough": annotation_passthrough(dump, "nvidia")}


@pytest.mark.parametrize(
    ("dump", "toolkit", "status", "in_detail"),
    [
        (_dump(), HARDENED, "ok", "pod_annotations of nvidia: none"),
        (_dump([], ["cdi.k8s.io/*"]), HARDENED, "ok", "prefixes cdi.k8s.io/"),  # what nvidia-ctk's installer sets
        (_dump(["io.kubernetes.cri-o.*"], version=3), HARDENED, "ok", "io.kubernetes.cri-o.*"),
        (_dump(["*"]), HARDENED, "ok", "['*']"),  # path.Match: * never matches the / of cdi.k8s.io/<name>
        (_dump(["cdi.k8s.io/*"]), HARDENED, "fail", "any pod with RuntimeClass nvidia gets a GPU by annotation"),
        (_dump(["cdi.k8s.io/*"], version=3), HARDENED, "fail", "['cdi.k8s.io/*']"),
        (_dump(["cdi.k8s.io/gpu-?"]), HARDENED, "fail", "cdi.k8s.io/gpu-?"),
        (_dump(["cdi.k8s.io/[a-z]*"]), None, "fail", "cdi.k8s.io/"),  # no config.toml: the runtime's default prefix
        # the toolkit ignores CDI annotations when it has no prefix at all
        (
            _dump(["cdi.k8s.io/*"]),
            HARDENED + "[nvidia-container-runtime.modes.cdi]\nannotation-prefixes = []\n",
            "ok",
            "annotation-prefixes = []",
        ),
        # ... and honours its own prefixes
        (
            _dump(["example.com/*"]),
            HARDENED + '[nvidia-container-runtime.modes.cdi]\nannotation-prefixes = ["example.com/"]\n',
            "fail",
            "example.com/",
        ),
    ],
)
def test_the_cdi_annotation_row(dump, toolkit, status, in_detail):
    row = cdi_annotation_row(params(), _state(dump), toolkit)
    assert row["check"] == ANNOTATION
    assert row["status"] == status, row
    assert in_detail in row["detail"], row
    if status == "fail":
        assert "pod_annotations of the nvidia runtime" in row["fix"], row


@pytest.mark.parametrize("with_tomllib", [True, False], ids=["tomllib", "small reader"])
def test_annotation_lists_are_lists_with_either_reader(monkeypatch, with_tomllib):
    """Python < 3.11 on the node has no tomllib (nv-ubuntu2204: Python 3.10, containerd 2.2): the small reader of
    containerd/tables.py reads arrays as lists, as tomllib does (it used to keep their text, issue 51)."""
    if not with_tomllib:
        monkeypatch.setattr(tables, "tomllib", None)
    state = _state(_dump(["example.com/*"]))
    assert state["passthrough"]["pod_annotations"] == ["example.com/*"]
    assert cdi_annotation_row(params(), state, None)["status"] == "ok"  # default prefix cdi.k8s.io/ only
    row = cdi_annotation_row(
        params(), state, "[nvidia-container-runtime.modes.cdi]\nannotation-prefixes = ['example.com/']\n"
    )
    assert row["status"] == "fail" and "example.com/" in row["detail"], row
    assert string_list(["a", 1]) == ["a", "1"] and string_list("['a']") == []


def test_the_cdi_annotation_row_is_skipped_without_the_nvidia_runtime():
    row = cdi_annotation_row(params(), {"registered": False, "passthrough": {}}, HARDENED)
    assert row["status"] == "skipped" and "no nvidia runtime" in row["detail"], row


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("cdi.k8s.io/*", "cdi.k8s.io/x", True),
        ("*", "cdi.k8s.io/x", False),
        ("cdi.k8s.io/?", "cdi.k8s.io/x", True),
        ("cdi.k8s.io/[!a]", "cdi.k8s.io/x", False),  # Go's class negation is ^, not !
        ("cdi.k8s.io/[^a]", "cdi.k8s.io/x", True),
        ("cdi.k8s.io/[a-z]", "cdi.k8s.io/x", True),
        ("cdi.k8s.io.*", "cdi.k8s.io/x", False),
        ("cdi\\.k8s.io/*", "cdi.k8s.io/x", True),
    ],
)
def test_path_match_follows_gos_path_match(pattern, name, matches):
    assert _path_match(pattern, name) is matches


def test_the_doors_family_reads_config_toml_once_and_checks_containerd_when_it_is_a_runtime():
    rows = check_doors(params(), {}, FakeNode(files={CONFIG: OPEN}), True, _state(_dump(["cdi.k8s.io/*"])))
    assert [(r["check"], r["status"]) for r in rows] == [(VOLUME, "fail"), (ANNOTATION, "fail")]
    rows = check_doors(params(), {}, FakeNode(files={CONFIG: HARDENED}), True, None)
    assert [(r["check"], r["status"]) for r in rows] == [(VOLUME, "ok")]
    rows = check_doors(params(), {}, FakeNode(files={}), False, None)
    assert [(r["check"], r["status"]) for r in rows] == [(VOLUME, "skipped")]


@pytest.mark.parametrize(
    ("state", "toolkit", "status", "in_detail"),
    [
        (CRIO, CLOSED, "ok", "prefixes none (annotation-prefixes = [])"),
        # CRI-O passes every pod annotation on: any prefix is a door
        (CRIO, HARDENED, "fail", "with prefix cdi.k8s.io/ as CDI device requests"),  # the runtime's default
        (CRIO, None, "fail", "any pod with RuntimeClass nvidia gets a GPU by annotation"),  # no config.toml
        (
            CRIO,
            HARDENED + '[nvidia-container-runtime.modes.cdi]\nannotation-prefixes = ["example.com/"]\n',
            "fail",
            "example.com/",
        ),
        ({"ok": True, "registered": False}, HARDENED, "skipped", "no nvidia runtime handler"),
        ({"ok": False, "registered": False}, HARDENED, "skipped", "no nvidia runtime handler"),
    ],
)
def test_the_crio_cdi_annotation_row(state, toolkit, status, in_detail):
    row = crio_cdi_annotation_row(params(), state, toolkit)
    assert row["check"] == CRIO_ANNOTATION
    assert row["status"] == status, row
    assert in_detail in row["detail"], row
    if status == "fail":
        assert "nvidia_container_toolkit_cdi_annotation_prefixes: []" in row["fix"], row


def test_the_doors_family_checks_crio_when_it_is_a_runtime():
    rows = check_doors(params(), {}, FakeNode(files={CONFIG: HARDENED}), True, None, CRIO)
    assert [(r["check"], r["status"]) for r in rows] == [(VOLUME, "ok"), (CRIO_ANNOTATION, "fail")]
    rows = check_doors(params(), {}, FakeNode(files={CONFIG: CLOSED}), True, _state(_dump(["cdi.k8s.io/*"])), CRIO)
    assert [(r["check"], r["status"]) for r in rows] == [(VOLUME, "ok"), (ANNOTATION, "ok"), (CRIO_ANNOTATION, "ok")]
