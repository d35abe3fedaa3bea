"""roles/nvidia_mig (issue 38 item 2): MIG layouts per node through NVIDIA's MIG manager, without a GPU.

The role's own task files (guard.yml, configure.yml, apply.yml) run in a playbook on the build machine with every
path of the role moved into a temporary tree (extra vars beat role vars), against:
- the TEST STAND-IN nvidia-mig-parted (tests/fixtures/nvidia-mig-parted-standin: records its calls, keeps the layout
  it applied, runs the hooks file in mig-parted's order);
- stand-in systemctl, crictl and modprobe written below (record their calls; systemctl answers is-active from a list
  of active units, the kubelet among them);
- facts from gpu_node_facts on a stand-in /proc (a GPU pod: a process with NVIDIA_VISIBLE_DEVICES).
The unit's ordering drop-in is checked with systemd-analyze verify next to a stand-in of NVIDIA's unit."""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import run_local_playbook

ROOT = Path(__file__).resolve().parents[2]
STANDIN = ROOT / "tests" / "fixtures" / "nvidia-mig-parted-standin" / "nvidia-mig-parted"
LAYOUTS = {
    "all-disabled": [{"devices": "all", "mig-enabled": False}],
    "inference": [
        {"device-filter": ["0x233010DE"], "devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"device-filter": "0x20B010DE", "devices": [0, 1], "mig-enabled": True, "mig-devices": {"2g.10gb": 3}},
    ],
    "training": [{"devices": "all", "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}],
}
# stand-ins on PATH for the hooks: each appends "name args" to calls.log
SYSTEMCTL = """#!/bin/bash
echo "systemctl $*" >>"$STANDIN_DIR/calls.log"
active="$STANDIN_DIR/active"
case "$1" in
  -q) shift; [ "$1" = is-active ] && grep -qxF "$2" "$active" ;;
  is-active) grep -qxF "$2" "$active" ;;
  stop) grep -vxF "$2" "$active" >"$active.new" || true; mv "$active.new" "$active" ;;
  start|restart) grep -qxF "$2" "$active" || echo "$2" >>"$active" ;;
  cat) [ -e "$STANDIN_DIR/units/$2" ] ;;
  *) exit 0 ;;
esac
"""
CRICTL = """#!/bin/bash
echo "crictl $*" >>"$STANDIN_DIR/calls.log"
if [ "$1" = ps ] && [ "$4" = k8s-device-plugin ]; then echo c0ffee; fi
"""
MODPROBE = """#!/bin/bash
echo "modprobe $*" >>"$STANDIN_DIR/calls.log"
[ ! -e "$STANDIN_DIR/drm-in-use" ] && rmdir "$STANDIN_DIR/sys/module/nvidia_drm"
"""
PLAYBOOK = """
- name: Run the nvidia_mig role's task files against stand-ins
  hosts: localhost
  connection: local
  gather_facts: false
  # the roles' dependency gpu_node_facts gathers from the stand-in tree (its /proc: the GPU pods)
  module_defaults:
    gpunode.provisioning.gpu_node_facts:
      root: "{{ standin_root }}"
      gather_runtimes: false
  tasks:
    - name: Guard
      ansible.builtin.include_role: {name: nvidia_mig, tasks_from: guard.yml}
    - name: Configure
      ansible.builtin.include_role: {name: nvidia_mig, tasks_from: configure.yml}
    - name: Apply
      ansible.builtin.include_role: {name: nvidia_mig, tasks_from: apply.yml}
"""


class Node:
    """The temporary tree: the role's files, the stand-ins and what they recorded."""

    def __init__(self, base: Path, copy_of: Path | None = None):
        self.base = base
        self.bin = base / "bin"
        self.etc = base / "etc" / "nvidia-mig-manager"
        self.dropins = base / "etc" / "systemd" / "nvidia-mig-manager.service.d"
        self.root = base / "root"
        if copy_of is not None:
            # the tree of another node, as it was (its paths in the files this run and the role wrote: this tree's)
            shutil.copytree(copy_of, base, dirs_exist_ok=True)
            for path in base.rglob("*"):
                if path.is_file() and str(copy_of) in (text := path.read_text()):
                    path.write_text(text.replace(str(copy_of), str(base)))
            return
        for path in (self.bin, self.root / "proc", base / "units", base / "sys" / "module" / "nvidia_drm"):
            path.mkdir(parents=True)
        # the stand-in runs under this venv's Python (PyYAML)
        parted = self.bin / "nvidia-mig-parted"
        parted.write_text(f"#!{sys.executable}\n" + STANDIN.read_text().split("\n", 1)[1])
        for name, text in (("systemctl", SYSTEMCTL), ("crictl", CRICTL), ("modprobe", MODPROBE)):
            (self.bin / name).write_text(text)
        for path in self.bin.iterdir():
            path.chmod(0o755)
        (base / "active").write_text("kubelet.service\ndcgm-exporter.service\n")
        (base / "units" / "nvidia-cdi-refresh.service").write_text("")
        (base / "playbook.yml").write_text(PLAYBOOK)

    def extra_vars(self, layout: str) -> dict:
        env = {
            "MIG_PARTED_CONFIG_FILE": str(self.etc / "gpu-node-provisioning-config.yaml"),
            "MIG_PARTED_HOOKS_FILE": str(self.etc / "gpu-node-provisioning-hooks.yaml"),
            "MIG_PARTED_SELECTED_CONFIG": layout,
            "PATH": f"{self.bin}:{os.environ['PATH']}",
            "STANDIN_DIR": str(self.base),
        }
        return {
            "standin_root": str(self.root),
            "nvidia_mig_configs": LAYOUTS,
            "nvidia_mig_config": layout,
            "__nvidia_mig_parted": str(self.bin / "nvidia-mig-parted"),
            "__nvidia_mig_dir": str(self.etc),
            "__nvidia_mig_dropin_dir": str(self.dropins),
            "__nvidia_mig_state_file": str(self.base / "run" / "stopped-units"),
            "__nvidia_mig_sys_module": str(self.base / "sys" / "module"),
            "__nvidia_mig_apply_env": env,
        }

    def converge(self, layout: str, *extra: str):
        return run_local_playbook(
            self.base / "playbook.yml", "-e", json.dumps(self.extra_vars(layout)), "-e", "ansible_become=false", *extra
        )

    def calls(self) -> list:
        path = self.base / "calls.log"
        return path.read_text().splitlines() if path.exists() else []

    def parted_calls(self) -> list:
        path = self.bin / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def files(self) -> dict:
        return {
            str(path.relative_to(self.base)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(self.base.rglob("*"))
            if path.is_file() and "etc" in path.parts
        }

    def add_gpu_pod(self):
        proc = self.root / "proc" / "4242"
        proc.mkdir()
        (proc / "comm").write_text("python3\n")
        (proc / "cmdline").write_bytes(b"python3\0serve.py\0")
        (proc / "environ").write_bytes(b"NVIDIA_VISIBLE_DEVICES=GPU-0\0")
        (proc / "fd").mkdir()


def _recap(result) -> str:
    return result.stdout.split("PLAY RECAP", 1)[-1]


@pytest.fixture(scope="module")
def converged(tmp_path_factory):
    """A first run that applies the layout "inference" (MIG mode on: pre-apply-mode too), then a second run."""
    node = Node(tmp_path_factory.mktemp("mig"))
    first = node.converge("inference")
    calls_first, parted_first = node.calls(), node.parted_calls()
    # the node as a first run left it, for the tests that start there (inference_applied)
    applied = tmp_path_factory.mktemp("mig-applied")
    shutil.copytree(node.base, applied, dirs_exist_ok=True)
    second = node.converge("inference")
    return node, first, calls_first, parted_first, second, applied


@pytest.fixture
def inference_applied(converged, tmp_path):
    """A node of its own as the first run of "inference" left it (the converged fixture's, which its tests check): a
    copy, not a run of its own each."""
    _, first, *_, applied = converged
    assert first.returncode == 0, first.stdout + first.stderr
    return Node(tmp_path / "node", copy_of=applied)


def test_the_first_run_applies_the_layout_with_the_hooks_around_it(converged):
    node, first, calls, parted, *_ = converged
    assert first.returncode == 0, first.stdout + first.stderr
    assert "failed=0" in _recap(first)
    # nvidia-mig-parted: asked by the guard (the candidate config) and after the write, then apply with the env
    assert [call["argv"][0] for call in parted] == ["assert", "assert", "apply"]
    assert parted[2]["env"]["MIG_PARTED_SELECTED_CONFIG"] == "inference"
    assert parted[2]["env"]["MIG_PARTED_HOOKS_FILE"] == str(node.etc / "gpu-node-provisioning-hooks.yaml")
    assert json.loads((node.bin / "state.json").read_text()) == LAYOUTS["inference"]
    # the active kubelet and GPU client stopped first, the plugin's container stopped, nvidia_drm unloaded for the
    # mode change; at exit started in reverse and the CDI spec refreshed
    stops = [call for call in calls if call.startswith(("systemctl stop", "systemctl start", "systemctl restart"))]
    assert stops == [
        "systemctl stop kubelet.service",
        "systemctl stop dcgm-exporter.service",
        "systemctl start dcgm-exporter.service",
        "systemctl start kubelet.service",
        "systemctl restart nvidia-cdi-refresh.service",
    ]
    assert "crictl stop c0ffee" in calls
    assert "modprobe -r nvidia_drm" in calls
    assert calls.index("modprobe -r nvidia_drm") < calls.index("systemctl start dcgm-exporter.service")
    assert set((node.base / "active").read_text().split()) == {
        "kubelet.service",
        "dcgm-exporter.service",
        "nvidia-cdi-refresh.service",
    }


def test_the_files_name_the_layout_and_order_the_unit_before_the_kubelet(converged):
    node, *_ = converged
    config = yaml.safe_load((node.etc / "gpu-node-provisioning-config.yaml").read_text())
    assert config == {"version": "v1", "mig-configs": LAYOUTS}
    hooks = yaml.safe_load((node.etc / "gpu-node-provisioning-hooks.yaml").read_text())
    assert hooks["version"] == "v1" and sorted(hooks["hooks"]) == ["apply-exit", "pre-apply-config", "pre-apply-mode"]
    # NVIDIA's own form of override.conf (deployments/systemd/utils.sh, persist_config_across_reboot)
    assert (
        node.dropins / "override.conf"
    ).read_text() == '[Service]\nEnvironment="MIG_PARTED_SELECTED_CONFIG=inference"\n'
    ordering = configparser.ConfigParser(strict=False)
    ordering.read_string((node.dropins / "50-gpu-node-provisioning.conf").read_text())
    # mig-parted v0.14.0+ service.sh rewrites config.yaml at every boot and re-links hooks.yaml (vars/main.yml): the
    # unit must read the role's own files, which the role never names config.yaml / hooks.yaml
    environment = (node.dropins / "50-gpu-node-provisioning.conf").read_text()
    assert f"MIG_PARTED_CONFIG_FILE={node.etc / 'gpu-node-provisioning-config.yaml'}" in environment
    assert f"MIG_PARTED_HOOKS_FILE={node.etc / 'gpu-node-provisioning-hooks.yaml'}" in environment
    assert not (node.etc / "config.yaml").exists() and not (node.etc / "hooks.yaml").exists()
    assert "kubelet.service" in ordering["Unit"]["Before"].split()
    assert {"nvidia-persistenced.service", "nvidia-fabricmanager.service"} <= set(ordering["Unit"]["After"].split())


def test_a_second_run_changes_nothing(converged):
    node, _, calls, parted, second, _ = converged
    assert second.returncode == 0, second.stdout + second.stderr
    assert "changed=0" in _recap(second), _recap(second)
    assert [call["argv"][0] for call in node.parted_calls()[len(parted) :]] == ["assert", "assert"]
    assert node.calls() == calls


def test_a_layout_change_while_a_gpu_pod_runs_is_refused_with_every_file_unchanged(inference_applied):
    node = inference_applied
    before, calls, parted = node.files(), node.calls(), node.parted_calls()
    node.add_gpu_pod()
    refused = node.converge("training")
    assert refused.returncode != 0
    assert "MIG layout training is not in place and 1 process(es) hold GPUs: python3 (pid 4242)" in refused.stdout
    assert "Nothing on the node was changed" in refused.stdout
    assert node.files() == before
    assert node.calls() == calls
    assert [call["argv"][0] for call in node.parted_calls()[len(parted) :]] == ["assert"]
    # the same pod with the layout already in place: nothing to change, nothing refused
    assert node.converge("inference").returncode == 0


def test_check_mode_reports_a_layout_change_and_writes_nothing(inference_applied):
    node = inference_applied
    before, parted = node.files(), node.parted_calls()
    checked = node.converge("training", "--check", "--diff")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "changed=0" not in _recap(checked)
    assert node.files() == before
    assert "apply" not in [call["argv"][0] for call in node.parted_calls()[len(parted) :]]


def _hook(node: Node, phase: str):
    return subprocess.run(
        ["/bin/bash", str(node.etc / "gpu-node-provisioning-hooks.sh"), phase],
        env={**os.environ, "PATH": f"{node.bin}:{os.environ['PATH']}", "STANDIN_DIR": str(node.base)},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_mode_hook_fails_while_nvidia_drm_stays_loaded(converged, tmp_path):
    node = Node(tmp_path)
    shutil.copytree(converged[0].etc, node.etc)
    text = (node.etc / "gpu-node-provisioning-hooks.sh").read_text()
    (node.etc / "gpu-node-provisioning-hooks.sh").write_text(text.replace(str(converged[0].base), str(node.base)))
    (node.base / "drm-in-use").write_text("")
    done = _hook(node, "pre-apply-mode")
    assert done.returncode != 0
    assert "nvidia_drm is loaded and in use: a MIG mode change needs it unloaded" in done.stderr
    # a configuration change alone leaves nvidia_drm alone
    assert _hook(node, "pre-apply-config").returncode == 0
    assert "modprobe -r nvidia_drm" in node.calls()
    assert node.calls().count("modprobe -r nvidia_drm") == 1


def test_the_hooks_leave_inactive_units_alone(converged, tmp_path):
    node = Node(tmp_path)
    shutil.copytree(converged[0].etc, node.etc)
    text = (node.etc / "gpu-node-provisioning-hooks.sh").read_text()
    (node.etc / "gpu-node-provisioning-hooks.sh").write_text(text.replace(str(converged[0].base), str(node.base)))
    (node.base / "active").write_text("dcgm-exporter.service\n")
    assert _hook(node, "pre-apply-config").returncode == 0
    assert _hook(node, "apply-exit").returncode == 0
    touched = [call for call in node.calls() if call.startswith(("systemctl stop", "systemctl start"))]
    assert touched == ["systemctl stop dcgm-exporter.service", "systemctl start dcgm-exporter.service"]


# A TEST STAND-IN of NVIDIA's unit as the package installs it (mig-parted v0.9.1 deployments/systemd/
# nvidia-mig-manager.service: oneshot, no default dependencies, after persistenced and the fabric manager).
STANDIN_UNIT = """[Unit]
Description=TEST STAND-IN of NVIDIA's nvidia-mig-manager.service
DefaultDependencies=no
After=nvidia-persistenced.service nvidia-fabricmanager.service
Before=nvidia-gpu-reset.target

[Service]
Type=oneshot
ExecStart=-/bin/bash /etc/nvidia-mig-manager/service.sh

[Install]
WantedBy=multi-user.target nvidia-gpu-reset.target
"""


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is part of every build machine")
def test_systemd_analyze_verifies_the_unit_with_the_role_s_drop_ins(converged, tmp_path):
    node = converged[0]
    units = tmp_path / "units"
    shutil.copytree(node.dropins, units / "nvidia-mig-manager.service.d")
    (units / "nvidia-mig-manager.service").write_text(STANDIN_UNIT)
    (units / "kubelet.service").write_text(
        "[Unit]\nDescription=TEST STAND-IN kubelet\n[Service]\nExecStart=/bin/true\n"
    )
    done = subprocess.run(
        ["systemd-analyze", "verify", str(units / "nvidia-mig-manager.service"), str(units / "kubelet.service")],
        env={**os.environ, "SYSTEMD_UNIT_PATH": f"{units}:"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and done.stderr.strip() == "", done.stderr


MAIN_PLAYBOOK = """
- name: Run the nvidia_mig role as site.yml does
  hosts: localhost
  connection: local
  gather_facts: false
  module_defaults:
    gpunode.provisioning.gpu_node_facts:
      root: "{{ standin_root }}"
      gather_runtimes: false
  roles:
    - role: nvidia_mig
"""


def _main(tmp_path, **variables):
    (tmp_path / "root").mkdir(exist_ok=True)
    (tmp_path / "main.yml").write_text(MAIN_PLAYBOOK)
    extra = {"standin_root": str(tmp_path / "root"), "nvidia_mig_configs": LAYOUTS, **variables}
    return run_local_playbook(tmp_path / "main.yml", "-e", json.dumps(extra), "-e", "ansible_become=false")


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        (
            {"nvidia_mig_config": "trainnig"},
            'nvidia_mig_config is "trainnig", which nvidia_mig_configs does not define',
        ),
        (
            {
                "nvidia_mig_config": "bad",
                "nvidia_mig_configs": {"bad": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g10gb": 7}}]},
            },
            "bad entry 1: mig-devices must map MIG profiles (like 1g.10gb) to counts",
        ),
        (
            {
                "nvidia_mig_config": "bad",
                "nvidia_mig_configs": {"bad": [{"device-filter": "H100", "devices": "all", "mig-enabled": False}]},
            },
            "bad entry 1: device-filter must be PCI device IDs like 0x233010DE",
        ),
        (
            {"nvidia_mig_config": "bad", "nvidia_mig_configs": {"bad": [{"devices": "0", "mig-enabled": False}]}},
            "bad entry 1: devices must be all or a list of GPU indexes",
        ),
    ],
)
def test_a_bad_layout_is_refused_naming_it_before_anything_changes(tmp_path, variables, message):
    done = _main(tmp_path, **variables)
    assert done.returncode != 0
    assert message in " ".join(done.stdout.split()), done.stdout[-3000:]
    assert "Ask nvidia-mig-parted" not in done.stdout and "changed=0" in _recap(done)


def test_a_node_without_a_gpu_is_left_alone_and_the_example_inventory_s_layouts_pass_the_checks(tmp_path):
    example = yaml.safe_load((ROOT / "inventories/example/group_vars/gpu_nodes/mig.yml").read_text())
    done = _main(tmp_path, nvidia_mig_config="inference", nvidia_mig_configs=example["nvidia_mig_configs"])
    assert done.returncode == 0, done.stdout[-3000:]
    assert "has no NVIDIA GPU: nvidia_mig_config inference is not applied here" in done.stdout
    assert "changed=0" in _recap(done)
    assert not Path("/etc/nvidia-mig-manager/gpu-node-provisioning-hooks.sh").exists()


INSTALL_PLAYBOOK = """
- name: Run the nvidia_mig role's install step on the build machine
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Install
      ansible.builtin.include_role: {name: nvidia_mig, tasks_from: install.yml}
"""


@pytest.mark.skipif(not shutil.which("apt-cache"), reason="the refusal reads apt-cache madison (Debian build machine)")
def test_a_package_no_source_offers_is_refused_naming_nvidias_release_assets(tmp_path):
    # The build machine's package sources have no nvidia-mig-manager (NVIDIA publishes it as GitHub release assets
    # only), and it is not installed: the role refuses before it releases, downloads or installs anything.
    playbook = tmp_path / "install.yml"
    playbook.write_text(INSTALL_PLAYBOOK)
    variables = {"nvidia_mig_manager_version": "0.15.0-1", "__nvidia_mig_package": "nvidia-mig-manager-not-here"}
    run = run_local_playbook(playbook, "-e", json.dumps(variables), "-e", "ansible_become=false")
    assert run.returncode != 0
    assert "nvidia-mig-manager-not-here 0.15.0-1 is in none of the package sources of localhost" in run.stdout
    assert "https://github.com/NVIDIA/mig-parted/releases" in run.stdout
    assert "set nvidia_mig_manager_package_url" in run.stdout
    assert "Nothing was changed" in run.stdout
    assert "changed=0" in _recap(run)


# --------------------------------------------------------------------------- the platform data (tasks/set_vars.yml)

ROLE = ROOT / "roles" / "nvidia_mig"

PLATFORMS = [
    ({"distribution": "Debian", "distribution_version": "12.7", "distribution_major_version": "12",
      "os_family": "Debian"}, "Debian.yml", "apt"),
    ({"distribution": "Ubuntu", "distribution_version": "24.04", "distribution_major_version": "24",
      "os_family": "Debian"}, "Debian.yml", "apt"),
    ({"distribution": "Rocky", "distribution_version": "9.5", "distribution_major_version": "9",
      "os_family": "RedHat"}, "RedHat.yml", "dnf"),
    ({"distribution": "SLES", "distribution_version": "15.6", "distribution_major_version": "15",
      "os_family": "Suse"}, "default.yml", ""),
]  # fmt: skip


@pytest.mark.parametrize(("facts", "name", "manager"), PLATFORMS)
def test_each_platform_loads_its_package_manager(facts, name, manager):
    from conftest import render_role_value

    shared = yaml.safe_load((ROOT / "roles" / "gpu_node_facts" / "vars" / "main.yml").read_text())
    names = render_role_value("{{ __gpu_node_facts_platform_files.files }}", {**shared, "ansible_facts": facts})
    found = next(candidate for candidate in names if (ROLE / "vars" / candidate).is_file())
    assert found == name
    data = yaml.safe_load((ROLE / "vars" / found).read_text())
    assert data == {"__nvidia_mig_package_manager": manager}
    spec = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__nvidia_mig_package_spec"]
    separator = "=" if manager == "apt" else "-"
    values = {**data, "__nvidia_mig_package": "nvidia-mig-manager", "__nvidia_mig_target": "0.15.0-1"}
    assert render_role_value(spec, values) == f"nvidia-mig-manager{separator}0.15.0-1"


def test_the_install_reads_the_package_manager_from_the_platform_data_alone():
    text = (ROLE / "tasks" / "install.yml").read_text() + (ROLE / "vars" / "main.yml").read_text()
    assert "pkg_mgr" not in text and "os_family" not in text
    assert "set_vars.yml" in (ROLE / "tasks" / "layout.yml").read_text()
