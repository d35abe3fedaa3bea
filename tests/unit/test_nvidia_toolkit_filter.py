"""plugins/filter/nvidia_toolkit.py: the toolkit role's messages, which were Jinja programs in its vars/main.yml and
tasks (issue 40). Each filter is compared here with the Jinja it replaced (the programs as they stood at commit
233085d, read from git), rendered by Ansible's Templar on the same inputs; the folded programs' line breaks and
template whitespace are normalised (a debug or fail_msg shows the words, not the folding)."""

from __future__ import annotations

import itertools
import subprocess

import pytest
import yaml
from conftest import ROOT, load_module, render_role_value

toolkit = load_module("nvidia_toolkit", subdir="plugins/filter")
ROLE = ROOT / "roles" / "nvidia_container_toolkit"
BEFORE = "233085d"  # the last commit with the Jinja programs


def _old(path: str) -> str:
    return subprocess.run(
        ["git", "show", f"{BEFORE}:roles/nvidia_container_toolkit/{path}"], cwd=ROOT, check=True,
        capture_output=True, text=True,
    ).stdout  # fmt: skip


def _words(text: str) -> str:
    return " ".join((text or "").split())  # the Templar renders an empty result as None


# ---- the left-out report (vars/main.yml __nvidia_container_toolkit_left_out) ---------------------------------------

OLD_LEFT_OUT = yaml.safe_load(_old("vars/main.yml"))["__nvidia_container_toolkit_left_out"]
NEW_VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
LEFT_OUT_CASES = list(itertools.product([True, False], repeat=6))  # 64: every combination of the six inputs


def _left_out_variables(force, driver_loaded, cdi_generate, configure, runtimes, installer) -> dict:
    return {
        "inventory_hostname": "gpu-1",
        "nvidia_container_toolkit_force": force,
        "ansible_facts": {
            "gpu_node": {
                "has_gpu": False,
                "driver": {"loaded": driver_loaded},
                "runtimes_installed": ["containerd"] if runtimes else [],
                "installer": {"containerd": {"config_regenerated": "agent start"}} if installer else {},
            }
        },
        "nvidia_container_toolkit_cdi_generate": cdi_generate,
        "nvidia_container_toolkit_configure_runtimes": configure,
        "nvidia_container_toolkit_runtimes": [],
        **{key: NEW_VARS[key] for key in (
            "__nvidia_container_toolkit_applies", "__nvidia_container_toolkit_driver_loaded",
            "__nvidia_container_toolkit_runtimes", "__nvidia_container_toolkit_installer_containerd")},
    }  # fmt: skip


@pytest.mark.parametrize("case", LEFT_OUT_CASES, ids=[str(i) for i in range(len(LEFT_OUT_CASES))])
def test_the_left_out_report_says_what_the_jinja_said(case):
    variables = _left_out_variables(*case)
    old = render_role_value(OLD_LEFT_OUT, variables)
    new = render_role_value(NEW_VARS["__nvidia_container_toolkit_left_out"], variables)
    assert _words(new) == _words(old)
    assert new == new.strip()


def test_the_left_out_report_names_each_thing_left_out():
    said = toolkit.nvidia_toolkit_left_out("gpu-1", True, False, True, True, False)
    assert said.startswith("Not generating the CDI spec on gpu-1") and "No container runtime to register" in said
    assert toolkit.nvidia_toolkit_left_out("gpu-1", True, True, True, True, True) == ""
    assert "nvidia_container_toolkit_force: true" in toolkit.nvidia_toolkit_left_out(
        "gpu-1", False, True, True, True, True
    )


# ---- who writes the CDI spec (tasks/cdi.yml's two reports) ---------------------------------------------------------

_OLD_CDI = yaml.safe_load(_old("tasks/cdi.yml"))[1]["block"]
OLD_NOT_LOADED = next(t for t in _OLD_CDI if t["name"].startswith("Report who writes"))["ansible.builtin.debug"]["msg"]
OLD_NO_UNITS = next(t for t in _OLD_CDI if t["name"].startswith("Report that this toolkit"))
UNIT_SETS = [[], ["nvidia-cdi-refresh.path"], ["nvidia-cdi-refresh.path", "nvidia-cdi-refresh.service"]]
CDI_CASES = list(itertools.product(
    ["-", "/tmp/x.nvidia-cdi"], ["/var/run/cdi/nvidia.yaml", "/run/cdi/nvidia.yaml", "/etc/cdi/nvidia.yaml"],
    [True, False], UNIT_SETS))  # fmt: skip  # 36


def _old_cdi_report(scratch, spec_path, refresh, units) -> str:
    variables = {
        "inventory_hostname": "gpu-1",
        "nvidia_container_toolkit_cdi_spec_path": spec_path,
        "nvidia_container_toolkit_cdi_refresh": refresh,
        "__nvidia_container_toolkit_refresh_units": units,
        "__nvidia_container_toolkit_cdi_scratch": scratch,
    }
    if scratch == "-":
        return render_role_value(OLD_NOT_LOADED, variables)
    when = " and ".join(f"({condition})" for condition in OLD_NO_UNITS["when"])
    if render_role_value("{{ " + when + " }}", variables):
        return render_role_value(OLD_NO_UNITS["ansible.builtin.debug"]["msg"], variables)
    return ""


@pytest.mark.parametrize("case", CDI_CASES, ids=[str(i) for i in range(len(CDI_CASES))])
def test_the_cdi_report_says_what_the_two_reports_said(case):
    scratch, spec_path, refresh, units = case
    new = render_role_value(
        NEW_VARS["__nvidia_container_toolkit_cdi_report"],
        {
            "inventory_hostname": "gpu-1",
            "nvidia_container_toolkit_cdi_spec_path": spec_path,
            "nvidia_container_toolkit_cdi_refresh": refresh,
            "__nvidia_container_toolkit_refresh_units": units,
            "__nvidia_container_toolkit_cdi_scratch": scratch,
        },
    )
    assert _words(new) == _words(_old_cdi_report(*case))


def test_nothing_is_reported_where_the_node_read_printed_nothing():
    # nvidia-ctk missing (check mode before the install): the old block was skipped
    assert toolkit.nvidia_cdi_report("", "gpu-1", "/var/run/cdi/nvidia.yaml", True, []) == ""


# ---- the refused repository key (tasks/key.yml) and the missing versions (tasks/version.yml) -----------------------

OLD_KEY = yaml.safe_load(_old("tasks/key.yml"))[2]
NEW_KEY = yaml.safe_load((ROLE / "tasks" / "key.yml").read_text())[2]
KEY_CASES = [[], ["A" * 40], ["A" * 40, "B" * 40], ["C" * 40, "A" * 40, "B" * 40]]
STDERRS = ["", "gpg: no valid OpenPGP data found.\ngpg: Total number processed: 0\n"]


@pytest.mark.parametrize(("fingerprints", "stderr"), list(itertools.product(KEY_CASES, STDERRS)))
def test_the_key_refusal_says_what_the_jinja_said(fingerprints, stderr):
    variables = {
        "nvidia_container_toolkit_repo_key_url": "https://example.test/gpgkey",
        "__nvidia_container_toolkit_fingerprint": "B" * 40,
        "__nvidia_container_toolkit_key_listing": {"stdout_lines": fingerprints, "stderr": stderr},
        "__nvidia_container_toolkit_key_fingerprints": fingerprints,
    }
    old = render_role_value(OLD_KEY["ansible.builtin.assert"]["fail_msg"], variables)
    new = render_role_value(NEW_KEY["ansible.builtin.assert"]["fail_msg"], variables)
    # The one difference: the program's replace('\n', '; ') left gpg's lines apart (the YAML-folded '\n' did not
    # reach Jinja as a newline); the filter joins them with "; " as the program meant.
    lines = stderr.strip()
    assert _words(new) == _words(old.replace(lines, lines.replace("\n", "; ")) if lines else old)


OLD_VERSION = yaml.safe_load(_old("tasks/version.yml"))[1]
NEW_VERSION = yaml.safe_load((ROLE / "tasks" / "version.yml").read_text())[1]
PACKAGES = ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
            "libnvidia-container1"]  # fmt: skip
AVAILABLE = [
    {},
    {name: ["1.17.8-1", "1.17.7-1"] for name in PACKAGES},
    {**{name: ["1.17.8-1"] for name in PACKAGES[:2]}, "libnvidia-container1": ["1.17.7-1"]},
]
VERSION_CASES = list(itertools.product(["", "1.17.8-1", "1.17.7-1"], AVAILABLE, [{}, {"libnvidia-container1":
                                       {"version": "1.17.7-1", "selection": "hold"}}]))  # fmt: skip  # 18


@pytest.mark.parametrize(("target", "available", "installed"), VERSION_CASES)
def test_the_version_refusal_says_what_the_jinja_said(target, available, installed):
    variables = {
        "inventory_hostname": "gpu-1",
        "__nvidia_container_toolkit_packages": PACKAGES,
        "__nvidia_container_toolkit_target": target,
        "__nvidia_container_toolkit_available": available,
        "__nvidia_container_toolkit_installed": installed,
    }
    variables["__nvidia_container_toolkit_missing"] = render_role_value(
        NEW_VERSION["vars"]["__nvidia_container_toolkit_missing"], variables
    )
    old = render_role_value(OLD_VERSION["ansible.builtin.assert"]["fail_msg"], variables)
    new = render_role_value(NEW_VERSION["ansible.builtin.assert"]["fail_msg"], variables)
    assert _words(new) == _words(old)


# ---- what GPU pods rely on (vars/main.yml: __nvidia_container_toolkit_nvidia_default_now, _config_settings) --------

_OLD_VARS = yaml.safe_load(_old("vars/main.yml"))
OLD_SETTINGS_VARS = {
    name: _OLD_VARS[name]
    for name in (
        "__nvidia_container_toolkit_nvidia_default_now",
        "__nvidia_container_toolkit_accept_envvar",
        "__nvidia_container_toolkit_accept_volume_mounts",
        "__nvidia_container_toolkit_cdi_annotation_prefixes",
        "__nvidia_container_toolkit_config_settings",
    )
}
DEFAULTS = [
    {},
    {"docker": {"name": "runc"}, "containerd": {"name": "nvidia", "default_nvidia": True}},
    {"docker": {"name": "nvidia-container-runtime", "default_nvidia": True}, "crio": {"default_nvidia": False}},
]
DEFAULT_CASES = list(itertools.product(DEFAULTS, [["docker"], ["containerd", "crio"], []]))  # 9


@pytest.mark.parametrize(("defaults", "runtimes"), DEFAULT_CASES, ids=[str(i) for i in range(len(DEFAULT_CASES))])
def test_nvidia_default_now_is_what_the_jinja_said(defaults, runtimes):
    variables = {
        "ansible_facts": {"gpu_node": {"runtime_defaults": defaults}},
        "__nvidia_container_toolkit_runtimes": runtimes,
    }
    name = "__nvidia_container_toolkit_nvidia_default_now"
    assert render_role_value(NEW_VARS[name], variables) is render_role_value(OLD_SETTINGS_VARS[name], variables)


TOOLKIT_CONFIGS = [
    None,
    {},
    {"accept_envvar_when_unprivileged_effective": True, "accept_volume_mounts_effective": False,
     "cdi_annotation_prefixes_effective": ["cdi.k8s.io/"]},
    {"accept_envvar_when_unprivileged_effective": False, "accept_volume_mounts_effective": True,
     "cdi_annotation_prefixes_effective": []},
]  # fmt: skip
OVERRIDES = [{}, {"nvidia-container-runtime": {"log-level": "debug", "modes": {"cdi": {"default-kind": "x/gpu"}}}},
             {"accept-nvidia-visible-devices-as-volume-mounts": True,
              "nvidia-container-runtime": {"modes": {"cdi": {"annotation-prefixes": ["a/"]}}}}]  # fmt: skip
SETTINGS_CASES = list(
    itertools.product(TOOLKIT_CONFIGS, [True, False], [True, False], [False], [[], ["cdi.k8s.io/"]], OVERRIDES)
) + list(itertools.product(TOOLKIT_CONFIGS[2:], [True], [False], [True], [[]], OVERRIDES[:1]))  # 96 + 2


@pytest.mark.parametrize(
    ("toolkit_config", "keep", "envvar", "mounts", "prefixes", "overrides"),
    SETTINGS_CASES,
    ids=[str(i) for i in range(len(SETTINGS_CASES))],
)
def test_the_config_settings_are_what_the_jinja_built(toolkit_config, keep, envvar, mounts, prefixes, overrides):
    gpu_node = {} if toolkit_config is None else {"toolkit_config": toolkit_config}
    variables = {
        "ansible_facts": {"gpu_node": gpu_node},
        "nvidia_container_toolkit_keep_gpu_pod_access": keep,
        "nvidia_container_toolkit_accept_envvar_when_unprivileged": envvar,
        "nvidia_container_toolkit_accept_volume_mounts": mounts,
        "nvidia_container_toolkit_cdi_annotation_prefixes": prefixes,
        "nvidia_container_toolkit_config": overrides,
    }
    name = "__nvidia_container_toolkit_config_settings"
    old = render_role_value(OLD_SETTINGS_VARS[name], {**variables, **OLD_SETTINGS_VARS})
    assert render_role_value(NEW_VARS[name], variables) == old
