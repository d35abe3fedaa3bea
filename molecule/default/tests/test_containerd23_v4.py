"""site.yml end to end on containerd 2.3.4 with config version 4 (issue 36), on site-ubuntu2404: the node's
config.toml becomes what containerd 2.3.4 itself writes, `containerd config default` (version 4, `imports =
['/etc/containerd/conf.d/*.toml']`, ../shared/upstream/containerd/BUILD.md), and the whole play the scenario runs
(converge.yml: site.yml) goes over it with the in-place method. As the kubelet sees it: the CRI plugin is ok, nvidia
is in the running binary's effective config (`config dump`) as runc's whole entry with NVIDIA's binary and is not the
default, a pod through the nvidia handler runs NVIDIA's real runtime (its debug log) and one through the default
handler does not, and a second run of site.yml changes nothing. The drop-in method on the same `config default` of the
same containerd, with the same checks, is runtime_config's (molecule/runtime_config/tests/test_containerd23.py, on
rc-containerd23); it was run here through site.yml as well until 2026-11-30, two more site.yml runs that proved
nothing the role's own run there does not. The node gets back the file test_containerd23_v2.py left (the admin's
version 2 file with nvidia in place), its doctor reports and no conf.d, so the tests after this one find it as the
converge left it.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
sys.path.insert(0, str(SCENARIO.parents[1]))
from playbook_runner import recap, run_playbook

from tests.cri.containerd import (
    CRI_RUNTIME,
    NVIDIA_RUNTIME,
    cri_plugin_ok,
    cri_ready,
    effective,
    nvidia_is_runc_with_only_the_binary_replaced,
    pods_run_through_the_right_runtime,
)

testinfra_hosts = ["ansible://site-ubuntu2404"]
NODE = "site-ubuntu2404"
CONFIG = "/etc/containerd/config.toml"
CONF_D = "/etc/containerd/conf.d"
DROPIN = f"{CONF_D}/99-nvidia.toml"
REPORTS = "/var/lib/gpu-node-provisioning/validate"  # .json and .txt, site.yml's doctor
DEFAULT_V4 = "/var/tmp/gpunode-test-config-default-v4.toml"
# the node containers are not privileged: CRI pods must not lower their oom_score_adj (molecule.yml); the scenario's
# host_vars name the version 2 table of the admin's file, a version 4 file has the CRI runtime table of version 3
V4_SETTINGS = {"runtime_config_containerd_settings": {"plugins": {CRI_RUNTIME: {"restrict_oom_score_adj": True}}}}


def _effective_images(host) -> dict:
    """The CRI images table of `containerd config dump` (2.3 moves a version 2 file's sandbox_image there)."""
    return tomllib.loads(host.check_output("containerd config dump"))["plugins"]["io.containerd.cri.v1.images"]


def _site(host, extra_vars: dict):
    """converge.yml (the stand-in repository's key, then site.yml), as the scenario's converge runs it."""
    return run_playbook(host, SCENARIO / "converge.yml", extra_vars)


def _on_disk(host, path: str) -> dict:
    return tomllib.loads(host.file(path).content_string)


def _nvidia_binary_on_disk(config: dict) -> str:
    return config["plugins"][CRI_RUNTIME]["containerd"]["runtimes"]["nvidia"]["options"]["BinaryName"]


def _start_from_config_default(host) -> None:
    """config.toml = containerd 2.3.4's own `config default`, nothing in conf.d, containerd restarted on it."""
    host.check_output(f"cat {DEFAULT_V4} > {CONFIG} && rm -rf {CONF_D} && systemctl restart containerd")
    cri_ready(host)
    assert "nvidia" not in effective(host, 4)["runtimes"]


def _served_as_the_kubelet_needs_and_the_second_run_changes_nothing(host, extra_vars: dict) -> None:
    assert cri_plugin_ok(host), host.check_output("ctr plugins ls")
    nvidia_is_runc_with_only_the_binary_replaced(host, 4)
    pods_run_through_the_right_runtime(host)
    files = host.check_output(f"sha256sum {CONFIG} {CONF_D}/*.toml 2>/dev/null || true")
    again = _site(host, extra_vars)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr
    assert recap(again.stdout)[NODE]["changed"] == 0, again.stdout[-3000:]
    assert host.check_output(f"sha256sum {CONFIG} {CONF_D}/*.toml 2>/dev/null || true") == files


@pytest.fixture(scope="module")
def config_default_v4(host):
    """containerd 2.3.4's `config default` kept for the test; the node as test_containerd23_v2.py left it after."""
    saved = host.check_output(f"base64 -w0 {CONFIG}")
    reports = {ext: host.check_output(f"base64 -w0 {REPORTS}.{ext}") for ext in ("json", "txt")}
    assert not host.file(CONF_D).exists, host.check_output(f"ls -A {CONF_D}")
    host.check_output(f"containerd config default > {DEFAULT_V4}")
    default = _on_disk(host, DEFAULT_V4)
    assert default["version"] == 4 and default["imports"] == [f"{CONF_D}/*.toml"], default.get("imports")
    # the node's pause image (cri_images.yml: the admin's file names it) under the name 2.3's default pins
    pause = default["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"]
    ours = _effective_images(host)["pinned_images"]["sandbox"]
    host.check_output(f"ctr -n k8s.io images tag --force {ours} {pause}")
    yield
    host.check_output(f"ctr -n k8s.io images rm {pause}")
    host.check_output(f"rm -rf {CONF_D} {DEFAULT_V4} && echo {saved} | base64 -d > {CONFIG}")
    for ext, text in reports.items():
        host.check_output(f"echo {text} | base64 -d > {REPORTS}.{ext}")
    host.check_output("systemctl restart containerd")
    cri_ready(host)
    assert effective(host, 4)["runtimes"]["nvidia"]["options"]["BinaryName"] == NVIDIA_RUNTIME


@pytest.mark.usefixtures("config_default_v4")
def test_site_yml_in_place_on_2_3s_config_default(host):
    _start_from_config_default(host)
    run = _site(host, V4_SETTINGS)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr
    assert recap(run.stdout)[NODE]["changed"] > 0, run.stdout[-3000:]
    on_disk = _on_disk(host, CONFIG)
    assert on_disk["version"] == 4, "the file keeps the version containerd 2.3 wrote"
    assert on_disk["imports"] == [f"{CONF_D}/*.toml"]
    assert _nvidia_binary_on_disk(on_disk) == NVIDIA_RUNTIME
    assert not host.file(DROPIN).exists
    _served_as_the_kubelet_needs_and_the_second_run_changes_nothing(host, V4_SETTINGS)
