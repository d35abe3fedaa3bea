"""The doctor's cdi family (plugins/module_utils/gpu_validate/cdi.py, issue 38): the row "CDI spec", each CDI spec in
the runtimes' spec directories checked against stand-in device nodes and the loaded driver, each case failing and
passing. FakeNode (conftest.py) gives the device nodes (with their major and minor numbers) and the files.

The synthetic specs have the shape of what nvidia-ctk 1.20.0 writes (cncf-tags/container-device-interface
specs-go/config.go for the fields; NVIDIA/nvidia-container-toolkit v1.20.0 internal/edits/device.go for the device
nodes' numbers, internal/discover/compat_libs.go for `--host-driver-version`), in the YAML layouts of
gopkg.in/yaml.v3 (what nvidia-ctk writes) and sigs.k8s.io/yaml, and as JSON."""

from __future__ import annotations

import json
import sys

import pytest
import yaml
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import cdi
from conftest import GPU_NODE, FakeNode, load_module, node, params

ROW = "CDI spec"
NODES = {
    "/dev/nvidia0": (195, 0),
    "/dev/nvidiactl": (195, 255),
    "/dev/nvidia-uvm": (507, 0),
    "/dev/dri/card1": (226, 1),
}
LOADED = {"/sys/module/nvidia/version": "580.95.05\n"}
RUN = "/var/run/cdi/nvidia.yaml"
ETC = "/etc/cdi/nvidia.yaml"

# gopkg.in/yaml.v3's layout (indent 4, sequences indented), as nvidia-ctk 1.20.0 writes /var/run/cdi/nvidia.yaml;
# /dev/nvidia0 is 195:0, so its minor is left out (omitempty)
V3_SPEC = """---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
    - name: "0"
      containerEdits:
        deviceNodes:
            - path: /dev/nvidia0
              major: 195
            - path: /dev/dri/card1
              major: 226
              minor: 1
    - name: all
      containerEdits:
        deviceNodes:
            - path: /dev/nvidia0
              major: 195
containerEdits:
    env:
        - NVIDIA_VISIBLE_DEVICES=void
    deviceNodes:
        - path: /dev/nvidiactl
          major: 195
          minor: 255
        - path: /dev/nvidia-uvm
          major: 507
    hooks:
        - hookName: createContainer
          path: /usr/bin/nvidia-cdi-hook
          args:
            - nvidia-cdi-hook
            - enable-cuda-compat
            - --host-driver-version=580.95.05
        - hookName: createContainer
          path: /usr/bin/nvidia-cdi-hook
          args:
            - nvidia-cdi-hook
            - create-symlinks
            - --link
            - libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so  # a comment
    mounts:
        - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05
          containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05
          options:
            - ro
            - nosuid
"""
# sigs.k8s.io/yaml's layout (sequences not indented), as the molecule fixtures write specs; a hostPath device node
V2_SPEC = """# TEST FIXTURE: no real device.
cdiVersion: 0.6.0
kind: example.com/fake
devices:
- name: all
  containerEdits:
    env: []
    deviceNodes:
    - path: /dev/fake0
      hostPath: /dev/nvidia0
      type: c
- name: 'it''s'
  containerEdits: {}
"""


def spec_json(**changes) -> str:
    spec = yaml.safe_load(V3_SPEC)
    spec.update(changes)
    return json.dumps(spec)


def check(files, devices=NODES, facts=GPU_NODE, **overrides) -> dict:
    fake = FakeNode(files={**LOADED, **files}, devices=devices)
    rows = cdi.check_cdi(params(**overrides), facts, fake)
    assert len(rows) == 1 and rows[0]["check"] == ROW, rows
    return rows[0]


# ---- reading a spec ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [V3_SPEC, V2_SPEC], ids=["yaml.v3", "sigs.k8s.io-yaml"])
def test_the_fallback_yaml_reader_reads_what_go_writes_as_pyyaml_does(text):
    assert cdi.read_yaml(text) == yaml.safe_load(text)


def test_the_standin_specs_of_the_tests_read_the_same_without_pyyaml():
    for path in ("tests/fixtures/nvidia-container-toolkit-standin/files/nvidia-ctk-simulated-gpu",):
        script = (load_module.__globals__["ROOT"] / path).read_text()
        text = script.split("<<SPEC\n", 1)[1].split("\nSPEC\n", 1)[0].replace("$2", "1.20.0")
        assert cdi.read_yaml(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    "text",
    ["a: |\n  block\n", "a: &x 1\nb: *x\n", "a: [1,\n  2]\n", "a: 1\n  b: 2\n", "a: 'open\n", "\ta: 1\n"],
    ids=["block scalar", "anchor", "multi-line flow", "indentation", "unclosed quote", "tab"],
)
def test_the_fallback_yaml_reader_refuses_what_it_does_not_read(text):
    with pytest.raises(cdi.YamlError):
        cdi.read_yaml(text)


def test_a_node_without_pyyaml_reads_the_spec_with_the_fallback(monkeypatch):
    monkeypatch.setitem(sys.modules, "yaml", None)  # `import yaml` raises ImportError
    assert cdi.parse_spec(RUN, V3_SPEC)["devices"][0]["name"] == "0"
    assert check({RUN: V3_SPEC})["status"] == "ok"
    assert check({RUN: V3_SPEC.replace("minor: 255", "minor: 254")})["status"] == "fail"


def test_the_fields_nvidia_writes():
    spec = cdi.parse_spec(RUN, V3_SPEC)
    assert cdi.spec_device_nodes(spec) == [
        {"path": "/dev/nvidiactl", "host_path": "/dev/nvidiactl", "type": "", "major": 195, "minor": 255},
        {"path": "/dev/nvidia-uvm", "host_path": "/dev/nvidia-uvm", "type": "", "major": 507, "minor": 0},
        {"path": "/dev/nvidia0", "host_path": "/dev/nvidia0", "type": "", "major": 195, "minor": 0},
        {"path": "/dev/dri/card1", "host_path": "/dev/dri/card1", "type": "", "major": 226, "minor": 1},
    ]
    assert cdi.spec_driver_version(spec) == "580.95.05"  # the enable-cuda-compat hook's argument
    del spec["containerEdits"]["mounts"]
    assert cdi.spec_driver_version(spec) == "580.95.05"  # the hook alone
    no_hook = V3_SPEC.replace("--host-driver-version=580.95.05", "--host-cuda-version=13.0")
    assert cdi.spec_driver_version(cdi.parse_spec(RUN, no_hook)) == "580.95.05"  # libcuda.so.<version>
    assert cdi.spec_driver_version(cdi.parse_spec("/etc/cdi/x.yaml", V2_SPEC)) == ""


@pytest.mark.parametrize(
    ("files", "facts", "version"),
    [
        (LOADED, GPU_NODE, "580.95.05"),
        (
            {"/proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.195.03  Thu Sep\n"},
            GPU_NODE,
            "570.195.03",
        ),
        (
            {"/proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  "},
            GPU_NODE,
            "580.159.04",
        ),
        ({}, GPU_NODE, "580.95.05"),  # the facts
        ({}, node(driver={"loaded": False, "version": "580.95.05"}), ""),
    ],
)
def test_the_loaded_driver_version(files, facts, version):
    assert cdi.loaded_driver_version(FakeNode(files=files), facts) == version


# ---- the row -------------------------------------------------------------------------------------------------

FIX = "systemctl restart nvidia-cdi-refresh.service"


@pytest.mark.parametrize(
    ("files", "devices", "facts", "status", "detail"),
    [
        (
            {RUN: V3_SPEC},
            NODES,
            GPU_NODE,
            "ok",
            "device nodes as in /dev; driver 580.95.05 loaded: /var/run/cdi/nvidia.yaml (nvidia.com/gpu, 2 devices)",
        ),
        ({RUN.replace(".yaml", ".json"): spec_json()}, NODES, GPU_NODE, "ok", "(nvidia.com/gpu, 2 devices)"),
        ({ETC.replace("nvidia", "fake"): V2_SPEC}, NODES, GPU_NODE, "ok", "/etc/cdi/fake.yaml (example.com/fake"),
        ({}, NODES, GPU_NODE, "skipped", "no CDI spec in /etc/cdi, /var/run/cdi"),
        ({RUN.replace(".yaml", ".yml"): V3_SPEC}, NODES, GPU_NODE, "skipped", "no CDI spec"),  # CDI reads no .yml
        # a device node gone from /dev, or with other numbers than the spec's
        ({RUN: V3_SPEC}, {**NODES, "/dev/nvidia0": None}, GPU_NODE, "fail", f"{RUN}: /dev/nvidia0 is missing"),
        (
            {RUN: V3_SPEC},
            {**NODES, "/dev/nvidiactl": (195, 254)},
            GPU_NODE,
            "fail",
            f"{RUN}: /dev/nvidiactl is 195:254 in /dev, 195:255 in the spec",
        ),
        (
            {RUN: V3_SPEC},
            {**NODES, "/dev/nvidia-uvm": (508, 0)},
            GPU_NODE,
            "fail",
            "/dev/nvidia-uvm is 508:0 in /dev, 507:0 in the spec",
        ),
        (
            {ETC: V2_SPEC},  # hostPath is what is looked up
            {k: v for k, v in NODES.items() if k != "/dev/nvidia0"},
            GPU_NODE,
            "fail",
            f"{ETC}: /dev/nvidia0 is missing",
        ),
        ({ETC: V2_SPEC.replace("type: c", "type: b")}, NODES, GPU_NODE, "fail", "is not a block device (type b"),
        # the driver: another version loaded, or none
        (
            {RUN: V3_SPEC, "/sys/module/nvidia/version": "590.48.01\n"},
            NODES,
            GPU_NODE,
            "fail",
            f"{RUN}: generated for driver 580.95.05, but 590.48.01 is loaded",
        ),
        (
            {RUN: V3_SPEC, "/sys/module/nvidia/version": ""},
            NODES,
            node(driver={"loaded": False}),
            "fail",
            "generated for driver 580.95.05, but no NVIDIA driver is loaded",
        ),
        # a file the runtimes cannot use
        ({RUN: "cdiVersion: 0.5.0\nkind: gpu\ndevices: []\n"}, NODES, GPU_NODE, "fail", "kind 'gpu' is not vendor/"),
        ({RUN: "{"}, NODES, GPU_NODE, "fail", f"{RUN}: not a CDI spec ("),
        ({RUN: V3_SPEC.replace("major: 507", "major: x")}, NODES, GPU_NODE, "fail", f"{RUN}: not a CDI spec ("),
        # one device name in two specs: across directories /var/run/cdi wins (warn); in one directory CDI drops it
        (
            {ETC: V3_SPEC, RUN: V3_SPEC},
            NODES,
            GPU_NODE,
            "warn",
            f"two specs claim the same device: nvidia.com/gpu=0 is in {ETC} and {RUN} (the runtimes use {RUN})",
        ),
        (
            {RUN: V3_SPEC, "/var/run/cdi/old.json": spec_json(devices=[{"name": "all", "containerEdits": {}}])},
            NODES,
            GPU_NODE,
            "fail",
            "nvidia.com/gpu=all is in /var/run/cdi/nvidia.yaml and /var/run/cdi/old.json (one directory: CDI drops",
        ),
    ],
)
def test_the_cdi_spec_row(files, devices, facts, status, detail):
    devices = {k: v for k, v in devices.items() if v is not None}
    row = check(files, devices, facts)
    assert row["status"] == status, row
    assert detail in row["detail"], row
    assert (FIX in row["fix"]) == (status == "fail"), row


def test_a_failing_row_names_every_problem_up_to_a_limit():
    devices = {}  # every device node gone
    many = {f"/var/run/cdi/spec{n}.yaml": V3_SPEC.replace("nvidia.com/gpu", f"nvidia.com/gpu{n}") for n in range(3)}
    row = check(many, devices)
    assert row["status"] == "fail" and row["detail"].count("is missing") == cdi.MAX_PROBLEMS, row
    assert row["detail"].endswith(f"; and {3 * 4 - cdi.MAX_PROBLEMS} more"), row


# ---- the spec directories the runtimes name ------------------------------------------------------------------

CONTAINERD_V2 = (
    'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n'
    '  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi", "/opt/cdi"]\n'
)
CONTAINERD_V3 = "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n  cdi_spec_dirs = ['/etc/cdi', '/srv/cdi']\n"
CRIO = '[crio.runtime]\ncdi_spec_dirs = [\n  "/etc/cdi",\n  "/var/run/cdi",\n  "/crio/cdi",\n]\n'
TOOLKIT = '[nvidia-container-runtime.modes.cdi]\nspec-dirs = ["/etc/cdi", "/toolkit/cdi"]\n'


def test_the_runtimes_spec_dirs_come_from_their_configs():
    assert cdi.cdi_spec_dirs(CONTAINERD_V2) == ["/etc/cdi", "/var/run/cdi", "/opt/cdi"]
    assert cdi.cdi_spec_dirs(CONTAINERD_V3) == ["/etc/cdi", "/srv/cdi"]
    assert cdi.cdi_spec_dirs(CRIO) == ["/etc/cdi", "/var/run/cdi", "/crio/cdi"]
    assert cdi.cdi_spec_dirs("not = [toml") == []
    fake = FakeNode(
        files={
            "/etc/nvidia-container-runtime/config.toml": TOOLKIT,
            "/etc/docker/daemon.json": '{"cdi-spec-dirs": ["/docker/cdi/"]}',
        }
    )
    containerd = {"cdi_spec_dirs": cdi.cdi_spec_dirs(CONTAINERD_V2)}
    crio = {"ok": True, "dump": (0, CRIO, "")}
    assert cdi.spec_dirs(params(), fake, containerd, crio) == [
        "/etc/cdi",
        "/var/run/cdi",
        "/opt/cdi",
        "/crio/cdi",
        "/docker/cdi",
        "/toolkit/cdi",
    ]
    assert cdi.spec_dirs(params(cdi_spec_dirs=["/etc/cdi"]), FakeNode()) == ["/etc/cdi"]


def test_a_spec_in_a_directory_only_containerd_names_is_checked():
    fake = FakeNode(files={**LOADED, "/opt/cdi/nvidia.yaml": V3_SPEC}, devices={**NODES, "/dev/nvidia0": (195, 1)})
    assert cdi.check_cdi(params(), GPU_NODE, fake)[0]["status"] == "skipped"
    row = cdi.check_cdi(params(), GPU_NODE, fake, {"cdi_spec_dirs": ["/opt/cdi"]})[0]
    assert row["status"] == "fail" and "/opt/cdi/nvidia.yaml: /dev/nvidia0 is 195:1 in /dev, 195:0" in row["detail"]


def test_containerd_state_keeps_the_dumps_cdi_spec_dirs():
    checks = load_module("gpu_validate_checks")
    fake = FakeNode(
        commands={("containerd", "config", "dump"): (0, CONTAINERD_V2, "")},
        files={**LOADED, "/opt/cdi/nvidia.yaml": V3_SPEC},
        devices=NODES,
    )
    facts = node(runtimes={"containerd": {"installed": True, "running": False, "binary": "containerd"}})
    rows = checks.run_checks(params(families=["cdi"], runtimes=["containerd"], node=facts), fake)["checks"]
    assert rows[0]["status"] == "ok" and "/opt/cdi/nvidia.yaml" in rows[0]["detail"], rows
