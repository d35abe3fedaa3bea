"""The rollout mechanism (playbooks/tasks/rollout.yml, issue 48) under each of its playbooks, run by ansible-playbook
over three inventory nodes on this machine with the TEST STAND-INs: kubectl (tests/fixtures/kubectl-standin, one
state file for the cluster), apt-cache (tests/fixtures/apt-cache-standin: which kernel packages the sources have) and
the change (tests/fixtures/rollout/change.yml: a driver, a kernel with its module build, a MIG layout cannot be made
here). The rest is the playbooks' own: their serial, preflight, plan, cordon, drain, wait, stop, annotation, fleet
report row and resume. The reboot is off (this machine must not reboot) and so is the doctor (its own tests)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, load_module, run_local_playbook

rollout = load_module("rollout", subdir="plugins/filter")
kernel_boot = load_module("kernel_boot", subdir="plugins/filter")
PLAYBOOKS = ROOT / "playbooks"
TASKS = PLAYBOOKS / "tasks"
SHARED = ROOT / "roles" / "gpu_node_facts" / "vars" / "main.yml"
KUBECTL = ROOT / "tests" / "fixtures" / "kubectl-standin" / "kubectl"
APT_CACHE = ROOT / "tests" / "fixtures" / "apt-cache-standin"
GRUB = ROOT / "tests" / "fixtures" / "grub-standin"
STANDIN_CHANGE = ROOT / "tests" / "fixtures" / "rollout" / "change.yml"
NODES = ["node-1", "node-2", "node-3"]
ANNOTATION = "gpu-node-provisioning/rollout"
RELEASE = "6.1.0-99-amd64"


def node(name, allocatable=None):
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "allocatable": {"cpu": "8", **(allocatable or {"nvidia.com/gpu": "1"})},
        },
    }


def cluster(allocatable=None, slices=None) -> dict:
    return {
        "nodes": {
            name: {
                "unschedulable": False,
                "steps": [{"node": node(name, allocatable), "slices": slices(name) if slices else []}],
                "served": 0,
            }
            for name in NODES
        },
        "calls": [],
    }


def rollout_play(tmp: Path, playbook: str, change_prefix: list | None = None, control_plane: bool = True) -> Path:
    """The playbook's play as it is, with the stand-in change (after ``change_prefix``, the playbook's own task files
    to run first), no reboot and no check after it; a pre-task stands in for the kernel the changed nodes booted."""
    (play,) = yaml.safe_load((PLAYBOOKS / playbook).read_text())
    assert play["max_fail_percentage"] == 0 and "gpu_rollout_batches" in play["serial"]
    (include,) = [task for task in play["tasks"] if "ansible.builtin.include_tasks" in task]
    assert include["ansible.builtin.include_tasks"] == "tasks/rollout.yml"
    for path in TASKS.glob("*.yml"):
        (tmp / path.name).write_text(path.read_text())
    change = tmp / "test_change.yml"
    change.write_text(
        yaml.safe_dump(
            [{"name": f"Run {name}", "ansible.builtin.include_tasks": str(tmp / name)} for name in change_prefix or []]
            + [{"name": "Run the stand-in change", "ansible.builtin.include_tasks": str(STANDIN_CHANGE)}]
        )
    )
    include = {
        **include,
        "ansible.builtin.include_tasks": str(tmp / "rollout.yml"),
        "vars": {**include["vars"], "rollout_change": str(change), "rollout_reboot": False, "rollout_verify": ""},
    }
    standin_kernel = {
        "name": "TEST STAND-IN the kernel a changed node booted",
        "ansible.builtin.set_fact": {
            "ansible_facts": "{{ ansible_facts | combine({'kernel': upgrade_kernel_release}) }}"
        },
        "when": [
            "upgrade_kernel_release is defined",
            "inventory_hostname in lookup('ansible.builtin.file', rollout_standin_dir ~ '/changed', errors='ignore')"
            " | default('', true) | split('\\n')",
        ],
    }
    # the build machine is a container: a test that reads a boot loader's files says the node is none
    standin_host = {
        "name": "TEST STAND-IN a node that is no container",
        "ansible.builtin.set_fact": {
            "ansible_facts": "{{ ansible_facts | combine({'gpu_node': {'container': false}}, recursive=true) }}"
        },
        "when": "rollout_standin_not_container | default(false)",
    }
    # the device plugin gpu_node_facts would read on the node (its strategies), where a test names one
    standin_plugin = {
        "name": "TEST STAND-IN the node's device plugin",
        "ansible.builtin.set_fact": {
            "ansible_facts": "{{ ansible_facts | combine({'gpu_node': {'device_plugin': "
            "rollout_standin_device_plugin[inventory_hostname]}}, recursive=true) }}"
        },
        "when": "inventory_hostname in rollout_standin_device_plugin | default({})",
    }
    roles = [t for t in play["tasks"] if "ansible.builtin.include_role" in t]
    tasks = [standin_kernel, *roles, standin_host, standin_plugin, include]
    path = tmp / f"test_{playbook}"
    test = {**play, "gather_subset": ["min"], "vars_files": [str(SHARED)], "tasks": tasks}
    path.write_text(yaml.safe_dump([test], sort_keys=False))
    hosts = "".join(f"{name} ansible_connection=local\n" for name in NODES)
    plane = "[kube_control_plane]\ncontrol-plane ansible_connection=local\n" if control_plane else ""
    (tmp / "inventory.ini").write_text(f"[gpu_nodes]\n{hosts}{plane}[controller]\nlocalhost ansible_connection=local\n")
    return path


GATHERED: dict[str, Path] = {}


@pytest.fixture(scope="module", autouse=True)
def gathered(tmp_path_factory, module_payloads_compiled_once):
    """The facts of this machine, gathered once as the test plays gather them (gather_subset min) for the three
    nodes, all of them this machine, into a jsonfile fact cache: each run starts from a copy of it, so that its play's
    own gathering (gathering = smart, ansible.cfg) finds them gathered. Gathering three times a run was a fifth of
    its time; the rollout's claims are about what it does with the facts, which are the same."""
    tmp = tmp_path_factory.mktemp("gathered")
    (tmp / "inventory.ini").write_text("".join(f"{name} ansible_connection=local\n" for name in NODES))
    (tmp / "gather.yml").write_text(
        yaml.safe_dump([{"hosts": ",".join(NODES), "gather_facts": True, "gather_subset": ["min"], "tasks": []}])
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ANSIBLE_CACHE_PLUGIN", "ansible.builtin.jsonfile")
        patch.setenv("ANSIBLE_CACHE_PLUGIN_CONNECTION", str(tmp / "facts"))
        patch.setenv("PATH", f"{APT_CACHE}:{GRUB}:{os.environ['PATH']}")
        result = run_local_playbook(tmp / "gather.yml", "-i", str(tmp / "inventory.ini"))
    assert result.returncode == 0, result.stdout[-4000:]
    assert len(list((tmp / "facts").iterdir())) == len(NODES)  # one file of facts a node
    GATHERED["facts"] = tmp / "facts"
    yield
    GATHERED.clear()


def run(tmp: Path, playbook: str, state: dict | None, *args: str, env: dict | None = None, **extra):
    """One run; ``state`` None: the cluster as the last run left it. The run, the cluster after it."""
    path = tmp / "cluster.json"
    if state is not None:
        path.write_text(json.dumps(state))
    else:
        state = json.loads(path.read_text())
        state["calls"] = []
        path.write_text(json.dumps(state))
    settings = {
        "rollout_kubectl": str(KUBECTL),
        "rollout_kubeconfig": str(path),
        "rollout_node_name": "{{ inventory_hostname }}",
        "rollout_gpu_count": 1,
        "rollout_ready_delay": 1,
        "rollout_ready_timeout": 3,
        "rollout_validate": False,
        "rollout_batch": 1,
        "rollout_standin_dir": str(tmp),
        "gpu_validate_fleet_report": str(tmp / "gpu-fleet-report"),
        # the rollout reads no runtime version (gpu_node's container, installer, device plugin, DRA and GPU facts are
        # the same without): not the probes of dockerd, containerd, kubelet and systemd-detect-virt on each node
        "gpu_node_facts_gather_runtimes": False,
        **extra,
    }
    facts = tmp / "facts"  # each run starts from the facts gathered once (gathered), not from the last run's
    shutil.rmtree(facts, ignore_errors=True)
    shutil.copytree(GATHERED["facts"], facts)
    old = dict(os.environ)
    os.environ.update(env or {})
    os.environ.update(ANSIBLE_CACHE_PLUGIN="ansible.builtin.jsonfile", ANSIBLE_CACHE_PLUGIN_CONNECTION=str(facts))
    os.environ["PATH"] = f"{APT_CACHE}:{GRUB}:{old['PATH']}"
    try:
        result = run_local_playbook(
            path.parent / f"test_{playbook}", "-i", str(tmp / "inventory.ini"), *args, "-e", json.dumps(settings)
        )
    finally:
        os.environ.clear()
        os.environ.update(old)
    return result, json.loads(path.read_text())


def calls_for(state, name):
    """The stand-in kubectl's calls about node ``name`` (by name, or by the field selector of a ResourceSlice list)."""
    return [
        " ".join(c["args"][:2]) if c["args"][0] in ("get", "annotate") else c["args"][0]
        for c in state["calls"]
        if any(arg in (name, f"spec.nodeName={name}") or arg.startswith(f"spec.nodeName={name},") for arg in c["args"])
    ]


def changed(tmp):
    path = tmp / "changed"
    return path.read_text().split() if path.exists() else []


def flat(text):
    return " ".join(text.split())


# ---- upgrade_kernel.yml -----------------------------------------------------------------------------------------


def test_a_kernel_update_stops_on_the_node_whose_modules_do_not_build_and_the_next_run_resumes(tmp_path):
    rollout_play(tmp_path, "upgrade_kernel.yml")
    first, state = run(
        tmp_path,
        "upgrade_kernel.yml",
        cluster(),
        upgrade_kernel_release=RELEASE,
        rollout_standin_fail_on=["node-2"],
        rollout_standin_reason=f"TEST STAND-IN module build: dkms build of nvidia for kernel {RELEASE} failed",
    )
    out = flat(first.stdout)
    assert first.returncode == 2, first.stdout[-4000:]
    (tmp_path / "first.log").write_text(first.stdout)
    # the canary finished, node-2 stopped cordoned and annotated, node-3 was not touched
    assert changed(tmp_path) == ["node-1"]
    assert calls_for(state, "node-1") == ["get node", "cordon", "drain", "get node", "uncordon"]
    assert calls_for(state, "node-2") == ["get node", "cordon", "drain", "cordon", "annotate node"]
    assert calls_for(state, "node-3") == []
    nodes = state["nodes"]
    assert nodes["node-1"]["unschedulable"] is False and nodes["node-3"]["unschedulable"] is False
    assert nodes["node-2"]["unschedulable"] is True
    stop = json.loads(nodes["node-2"]["annotations"][ANNOTATION])
    assert stop == {
        "rollout": "upgrade_kernel",
        "step": "Fail the stand-in change where the test asks for it",
        "reason": f"TEST STAND-IN module build: dkms build of nvidia for kernel {RELEASE} failed",
        "cordoned": True,
    }
    assert "The upgrade_kernel rollout stopped on node-2 (node node-2)" in out and "stays cordoned" in out
    fleet = json.loads((tmp_path / "gpu-fleet-report.json").read_text())
    (stopped,) = [n for n in fleet["nodes"] if n["host"] == "node-2"]
    assert stopped["status"] == "fail"
    assert "dkms build of nvidia" in stopped["cells"]["rollout: upgrade_kernel"]["detail"]

    # the second run: node-1 runs the target kernel (not drained again), node-2 resumes, node-3 follows
    second, state = run(tmp_path, "upgrade_kernel.yml", None, upgrade_kernel_release=RELEASE)
    out = flat(second.stdout)
    assert second.returncode == 0, second.stdout[-4000:]
    assert f"node-1 (node node-1), batch node-1: nothing to change (kernel {RELEASE}" in out
    assert "Resuming: the last rollout stopped on node node-2 at step Fail the stand-in change" in out
    assert calls_for(state, "node-1") == ["get node"]
    assert calls_for(state, "node-2") == ["get node", "drain", "get node", "uncordon", "annotate node"]
    assert calls_for(state, "node-3") == ["get node", "cordon", "drain", "get node", "uncordon"]
    assert changed(tmp_path) == ["node-1", "node-2", "node-3"]
    assert all(not n["unschedulable"] and not n.get("annotations") for n in state["nodes"].values())


def test_a_node_whose_kernel_modules_cannot_be_had_is_refused_before_its_drain(tmp_path):
    rollout_play(tmp_path, "upgrade_kernel.yml")
    log = tmp_path / "apt.log"
    result, state = run(
        tmp_path,
        "upgrade_kernel.yml",
        cluster(),
        upgrade_kernel_release=RELEASE,
        env={"APT_CACHE_STANDIN_MISSING": f"linux-headers-{RELEASE}", "APT_CACHE_STANDIN_LOG": str(log)},
    )
    assert result.returncode == 2, result.stdout[-4000:]
    # the canary was looked up, refused, annotated, never cordoned nor drained; the others were not touched
    assert log.read_text().splitlines() == [f"policy linux-image-{RELEASE}", f"policy linux-headers-{RELEASE}"]
    assert calls_for(state, "node-1") == ["get node", "annotate node"]
    assert calls_for(state, "node-2") == calls_for(state, "node-3") == []
    assert state["nodes"]["node-1"]["unschedulable"] is False and changed(tmp_path) == []
    stop = json.loads(state["nodes"]["node-1"]["annotations"][ANNOTATION])
    assert (
        stop["cordoned"] is False
        and stop["step"] == "Refuse the node when its kernel or its NVIDIA modules cannot be had"
    )
    out = flat(result.stdout)
    assert (
        f"node-1 cannot have kernel {RELEASE} with its NVIDIA modules: not in its package sources: "
        f"linux-headers-{RELEASE}" in out
    )
    assert "The node was not drained and keeps its pods." in out


def test_check_mode_prints_the_kernel_plan_and_changes_nothing(tmp_path):
    rollout_play(tmp_path, "upgrade_kernel.yml")
    result, state = run(tmp_path, "upgrade_kernel.yml", cluster(), "--check", upgrade_kernel_release=RELEASE)
    assert result.returncode == 0, result.stdout[-4000:]
    out = flat(result.stdout)
    for name in NODES:
        assert (
            f"PLAN (check mode: nothing changes): {name} (node {name}), batch {name}: cordon, drain, kernel {RELEASE}"
        ) in out
        assert calls_for(state, name) == ["get node"]  # read only
    assert out.index("PLAN (check mode: nothing changes): node-1") < out.index(
        "PLAN (check mode: nothing changes): node-2"
    )
    assert changed(tmp_path) == [] and all(not n["unschedulable"] for n in state["nodes"].values())


def test_a_rollout_that_cannot_reach_the_control_plane_stops_before_any_change(tmp_path):
    # an AWX job slice without the kube_control_plane host sees no such group (awx/main/models/inventory.py)
    rollout_play(tmp_path, "upgrade_kernel.yml", control_plane=False)
    result, state = run(tmp_path, "upgrade_kernel.yml", cluster(), upgrade_kernel_release=RELEASE)
    assert result.returncode == 2
    out = flat(result.stdout)
    assert "no host of group kube_control_plane is in this run's inventory" in out
    assert "do not slice a rollout job" in out and "set upgrade_kernel_drain=false" in out
    assert state["calls"] == [] and changed(tmp_path) == []
    # nodes outside any cluster say so
    result, state = run(
        tmp_path,
        "upgrade_kernel.yml",
        cluster(),
        "--limit",
        "node-1",
        upgrade_kernel_release=RELEASE,
        upgrade_kernel_drain=False,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    assert state["calls"] == [] and changed(tmp_path) == ["node-1"]


def boot_tree(tmp: Path, grub: str, grubenv: str = "", kernels=("6.1.0-13-amd64",), dropin: str = "") -> Path:
    """A node's boot loader files (GRUB on Debian), read by upgrade_kernel_boot_read.yml under __upgrade_kernel_root."""
    root = tmp / "root"
    (root / "etc" / "default" / "grub.d").mkdir(parents=True)
    (root / "boot" / "grub").mkdir(parents=True)
    (root / "etc" / "default" / "grub").write_text(grub)
    if dropin:
        (root / "etc" / "default" / "grub.d" / "50-cloudimg-settings.cfg").write_text(dropin)
    (root / "boot" / "grub" / "grubenv").write_text("# GRUB Environment Block\n" + grubenv + "#" * 900)
    for kernel in kernels:
        (root / "boot" / f"vmlinuz-{kernel}").write_text("")
    return root


def test_a_node_that_would_boot_another_kernel_is_refused_before_its_drain(tmp_path):
    rollout_play(tmp_path, "upgrade_kernel.yml")
    # entry 0 is the newest kernel, and 6.1.0-100 sorts after the target 6.1.0-99 (a drop-in sets GRUB_DEFAULT=0)
    root = boot_tree(
        tmp_path, "GRUB_DEFAULT=saved\n", kernels=("6.1.0-13-amd64", "6.1.0-100-amd64"), dropin="GRUB_DEFAULT=0\n"
    )
    extra = {
        "upgrade_kernel_release": RELEASE,
        "rollout_standin_not_container": True,
        "__upgrade_kernel_root": str(root),
    }
    result, state = run(tmp_path, "upgrade_kernel.yml", cluster(), **extra)
    assert result.returncode == 2, result.stdout[-4000:]
    assert calls_for(state, "node-1") == ["get node", "annotate node"] and calls_for(state, "node-2") == []
    assert state["nodes"]["node-1"]["unschedulable"] is False and changed(tmp_path) == []
    out = flat(result.stdout)
    assert (
        f"node-1 would not boot kernel {RELEASE} after the reboot but 6.1.0-100-amd64: GRUB_DEFAULT=0 boots the newest "
        f"kernel, and 6.1.0-100-amd64 is newer than {RELEASE}. It is not drained and keeps running." in out
    )
    stop = json.loads(state["nodes"]["node-1"]["annotations"][ANNOTATION])
    assert stop["step"] == "Refuse the node when it would not boot the target kernel" and stop["cordoned"] is False


def test_a_saved_grub_entry_is_forgotten_so_that_the_target_kernel_boots(tmp_path):
    rollout_play(tmp_path, "upgrade_kernel.yml", change_prefix=["upgrade_kernel_boot.yml"])
    saved = "saved_entry=gnulinux-advanced-ab12>gnulinux-6.1.0-13-amd64-advanced-ab12\n"
    root = boot_tree(tmp_path, "GRUB_DEFAULT=saved\nGRUB_SAVEDEFAULT=true\n", saved)
    log = tmp_path / "grub.log"
    extra = {
        "upgrade_kernel_release": RELEASE,
        "rollout_standin_not_container": True,
        "__upgrade_kernel_root": str(root),
    }
    result, state = run(tmp_path, "upgrade_kernel.yml", cluster(), "--check", "--limit", "node-1", **extra)
    assert result.returncode == 0, result.stdout[-4000:]
    assert "GRUB_DEFAULT=saved boots another saved entry: it is forgotten after the install" in flat(result.stdout)
    assert saved in (root / "boot" / "grub" / "grubenv").read_text() and changed(tmp_path) == []
    result, state = run(
        tmp_path, "upgrade_kernel.yml", None, "--limit", "node-1", env={"GRUB_STANDIN_LOG": str(log)}, **extra
    )
    assert result.returncode == 0, result.stdout[-4000:]
    assert log.read_text().splitlines() == [f"{root}/boot/grub/grubenv unset saved_entry next_entry"]
    assert "saved_entry" not in (root / "boot" / "grub" / "grubenv").read_text()
    assert calls_for(state, "node-1") == ["get node", "cordon", "drain", "get node", "uncordon"]
    assert changed(tmp_path) == ["node-1"]


def test_what_the_boot_loader_boots():
    boot = kernel_boot.gpu_kernel_boot
    grub = "grub=yes\nkernel=6.1.0-13-amd64\n"
    assert boot(grub + "default=0", RELEASE) == {
        "ok": True,
        "action": "none",
        "boots": RELEASE,
        "reason": "",
        "fix": "",
    }
    assert boot(grub + "default=saved", RELEASE)["action"] == "none"  # no saved entry: entry 0
    assert boot(grub + "default=saved\nsaved_entry=Debian GNU/Linux, with Linux 6.1.0-13-amd64", RELEASE)["action"] == (
        "unset_saved"
    )
    assert boot(grub + f"default=saved\nsaved_entry=x>gnulinux-{RELEASE}-advanced-x", RELEASE)["action"] == "none"
    # a saved entry of an older kernel, the target not the newest: nothing here can make it boot
    older = boot(grub + "kernel=6.2.0-1-amd64\ndefault=saved\nnext_entry=1>2", RELEASE)
    assert not older["ok"] and older["boots"] == "1>2" and "grub-set-default" in older["fix"]
    # an entry of 6.1.0-99-amd64 does not name kernel 6.1.0-9
    pinned = boot(grub + "default=Advanced options for Debian>Debian, with Linux 6.1.0-99-amd64", "6.1.0-9")
    assert not pinned["ok"] and "pins another boot entry" in pinned["reason"]
    assert boot(grub + f"default=1>{RELEASE}", RELEASE)["ok"]
    top = boot(grub + "top_level=/boot/vmlinuz-6.1.0-13-amd64", RELEASE)
    assert not top["ok"] and top["boots"] == "6.1.0-13-amd64"
    assert boot(grub + f"top_level=/boot/vmlinuz-{RELEASE}", RELEASE)["ok"]
    assert boot("kernel=6.9.0-1-amd64", RELEASE) == {
        "ok": True,
        "action": "none",
        "boots": "?",
        "reason": "no GRUB configuration: the running kernel is checked after the reboot",
        "fix": "",
    }
    # EL: grubby sets it unless it is the default already; without grubby the node is refused
    assert boot("grubby=yes\ngrubby_default=/boot/vmlinuz-5.14.0-1.el9", RELEASE, "dnf")["action"] == "grubby"
    assert boot(f"grubby=yes\ngrubby_default=/boot/vmlinuz-{RELEASE}", RELEASE, "dnf")["action"] == "none"
    assert not boot("", RELEASE, "dnf")["ok"]


# ---- relayout_mig.yml -------------------------------------------------------------------------------------------


def test_a_mig_relayout_drains_the_nodes_that_name_a_layout_and_waits_for_their_mig_resources(tmp_path):
    rollout_play(tmp_path, "relayout_mig.yml")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "node-1.yml").write_text("nvidia_mig_config: all-1g.10gb\n")
    state = cluster(allocatable={"nvidia.com/mig-1g.10gb": "7"})
    # node-1 names a layout, node-3 none (node-2 stays out of these runs: --limit)
    result, state = run(tmp_path, "relayout_mig.yml", state, "--check", "--limit", "node-1,node-3")
    out = flat(result.stdout)
    assert result.returncode == 0, result.stdout[-4000:]
    assert (
        "PLAN (check mode: nothing changes): node-1 (node node-1), batch node-1: cordon, drain, MIG layout "
        "all-1g.10gb and its CDI spec, wait until Ready with its GPUs allocatable, uncordon." in out
    )
    assert "node-3 (node node-3), batch node-3: nothing to change (MIG layout (none named)" in out
    assert all(calls_for(state, name) == ["get node"] for name in ("node-1", "node-3")) and changed(tmp_path) == []
    result, state = run(tmp_path, "relayout_mig.yml", None, "--limit", "node-1,node-3")
    assert result.returncode == 0, result.stdout[-4000:]
    assert changed(tmp_path) == ["node-1"]
    # back once the device plugin lists the new MIG resources (nvidia.com/mig-1g.10gb: 7)
    assert calls_for(state, "node-1") == ["get node", "cordon", "drain", "get node", "uncordon"]
    assert calls_for(state, "node-3") == ["get node"] and calls_for(state, "node-2") == []


# ---- move_gpu_allocation.yml ------------------------------------------------------------------------------------


def slices(name):
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{name}-gpu"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": name, "devices": [{"name": "gpu-0"}]},
        }
    ]


def test_a_move_to_dra_and_back_labels_the_node_and_waits_for_the_right_api(tmp_path):
    rollout_play(tmp_path, "move_gpu_allocation.yml", change_prefix=["move_gpu_allocation_label.yml"])
    state = cluster(allocatable={"nvidia.com/gpu": "0"}, slices=slices)
    # GPU Operator: its device plugin DaemonSet selects nvidia.com/gpu.deploy.device-plugin=true
    extra = {"gpu_node_facts_gpu_allocation": "dra", "move_gpu_allocation_install_method": "gpu-operator"}
    result, state = run(tmp_path, "move_gpu_allocation.yml", state, "--check", "--limit", "node-1", **extra)
    assert result.returncode == 0, result.stdout[-4000:]
    assert "batch node-1: cordon, drain, GPU allocation dra, wait until Ready" in flat(result.stdout)
    assert calls_for(state, "node-1") == ["get node"]
    result, state = run(tmp_path, "move_gpu_allocation.yml", None, "--limit", "node-1", **extra)
    assert result.returncode == 0, result.stdout[-4000:]
    # the wait asks for the DRA driver's ResourceSlices of the node, not the device plugin's resource (0 here)
    assert calls_for(state, "node-1") == [
        "get node",
        "cordon",
        "drain",
        "label",
        "get node",
        "get resourceslices.v1.resource.k8s.io",
        "uncordon",
    ]
    assert state["nodes"]["node-1"]["labels"] == {
        "gpu-node-provisioning/gpu-allocation": "dra",
        "nvidia.com/gpu.deploy.device-plugin": "false",
    }
    # back to the device plugin: the labels back, the wait on nvidia.com/gpu in the node's allocatable
    state["nodes"]["node-1"]["steps"] = [{"node": node("node-1", {"nvidia.com/gpu": "1"}), "slices": []}]
    state["nodes"]["node-1"]["served"] = 0
    (tmp_path / "cluster.json").write_text(json.dumps(state))
    extra["gpu_node_facts_gpu_allocation"] = "device-plugin"
    result, state = run(tmp_path, "move_gpu_allocation.yml", None, "--limit", "node-1", **extra)
    assert result.returncode == 0, result.stdout[-4000:]
    assert calls_for(state, "node-1") == ["get node", "cordon", "drain", "label", "get node", "uncordon"]
    assert state["nodes"]["node-1"]["labels"] == {"nvidia.com/gpu.deploy.device-plugin": "true"}
    assert calls_for(state, "node-2") == [] and changed(tmp_path) == ["node-1"]


# ---- restart_runtime.yml ---------------------------------------------------------------------------------------


def pod(name, namespace="default", owner=None, phase="Running", mirror=False):
    meta = {"name": name, "namespace": namespace}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-owner"}]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "0123abcd"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "status": {"phase": phase}}


def node_pods(state):
    """node-1 runs a workload; node-2 only what a drain leaves: a DaemonSet's pod, a static (mirror) pod, a pod that
    finished; node-3's pods cannot be listed."""
    daemons = [
        pod("nvidia-device-plugin-x", "gpu-operator", owner="DaemonSet"),
        pod("etcd-n", "kube-system", mirror=True),
    ]
    state["nodes"]["node-1"]["pods"] = [pod("train-0", "ml", owner="StatefulSet"), *daemons]
    state["nodes"]["node-2"]["pods"] = [*daemons, pod("job-1-abc", "ml", owner="Job", phase="Succeeded")]
    state["nodes"]["node-3"]["pods_fail"] = "the server is currently unable to handle the request"
    return state


def test_a_runtime_restart_drains_only_the_nodes_where_pods_run(tmp_path):
    rollout_play(tmp_path, "restart_runtime.yml")
    result, state = run(tmp_path, "restart_runtime.yml", node_pods(cluster()), "--check")
    assert result.returncode == 0, result.stdout[-4000:]
    out = flat(result.stdout)
    plan = "PLAN (check mode: nothing changes): {0} (node {0}), batch {0}: "
    assert plan.format("node-1") + "cordon, drain (1 pod run there: ml/train-0), the container toolkit" in out
    assert (
        plan.format("node-2") + "cordon, no drain (no pod runs there but DaemonSet, mirror and finished pods), "
        "the container toolkit" in out
    )
    assert (
        plan.format("node-3") + "cordon, drain (the pods on node node-3 could not be listed (error: the server is "
        "currently unable to handle the request): counted as busy)" in out
    )
    assert all(calls_for(state, name) == ["get node", "get pods"] for name in NODES) and changed(tmp_path) == []

    result, state = run(tmp_path, "restart_runtime.yml", None)
    assert result.returncode == 0, result.stdout[-4000:]
    assert calls_for(state, "node-1") == ["get node", "get pods", "cordon", "drain", "get node", "uncordon"]
    # node-2 is cordoned while its runtime restarts, not drained, and the run says so
    assert calls_for(state, "node-2") == ["get node", "get pods", "cordon", "get node", "uncordon"]
    assert "Node node-2 runs no pod but DaemonSet, mirror and finished pods: it is cordoned for" in flat(result.stdout)
    assert calls_for(state, "node-3") == ["get node", "get pods", "cordon", "drain", "get node", "uncordon"]
    assert changed(tmp_path) == NODES and all(not n["unschedulable"] for n in state["nodes"].values())


def test_a_runtime_restart_outside_a_cluster_lists_no_pods(tmp_path):
    rollout_play(tmp_path, "restart_runtime.yml", control_plane=False)
    result, state = run(tmp_path, "restart_runtime.yml", node_pods(cluster()), restart_runtime_drain=False)
    assert result.returncode == 0, result.stdout[-4000:]
    assert state["calls"] == [] and changed(tmp_path) == NODES
    assert "batch node-1: the container toolkit" in flat(result.stdout)


def test_the_pods_a_drain_would_evict():
    listing = {
        "items": [
            pod("a", owner="ReplicaSet"),
            pod("b", owner="DaemonSet"),
            pod("c", mirror=True),
            pod("d", phase="Failed"),
            pod("e", "x"),
            pod("f", phase="Pending"),
        ]
    }
    pods = rollout.gpu_rollout_node_pods({"rc": 0, "stdout": json.dumps(listing)}, "n1")
    assert pods == {"known": True, "pods": ["default/a", "default/f", "x/e"], "reason": ""}
    assert rollout.gpu_rollout_node_pods({"rc": 0, "stdout": "{}"}, "n1")["known"] is False
    failed = rollout.gpu_rollout_node_pods({"rc": 1, "stderr": "forbidden\n"}, "n1")
    assert failed == {"known": False, "pods": [], "reason": "the pods on node n1 could not be listed (forbidden)"}
    assert rollout.gpu_rollout_plan("n1", "h1", True, "x", "h1", False, "cp", pods=pods).startswith(
        "h1 (node n1), batch h1: cordon, drain (3 pods run there: default/a, default/f, x/e), x,"
    )


# ---- migrate_gpu_isolation.yml ---------------------------------------------------------------------------------

ISOLATE = {"migrate_gpu_isolation_step": "isolate"}
PLUGIN_CDI = {"present": True, "running": True, "strategies": ["cdi-cri"], "source": "flag"}
PLUGIN_ENVVAR = {"present": True, "running": True, "strategies": ["envvar"], "source": "default"}
REFUSE = "Refuse a node whose device plugin uses the env var"


def plugins(**strategies):
    """The stand-in device plugin of each node: on cdi-cri unless named here."""
    return {
        "rollout_standin_device_plugin": {name: strategies.get(name.replace("-", "_"), PLUGIN_CDI) for name in NODES}
    }


def test_migrate_isolate_refuses_the_node_whose_device_plugin_is_on_envvar_before_its_drain(tmp_path):
    rollout_play(tmp_path, "migrate_gpu_isolation.yml")
    result, state = run(tmp_path, "migrate_gpu_isolation.yml", cluster(), **ISOLATE, **plugins(node_3=PLUGIN_ENVVAR))
    assert result.returncode == 2, result.stdout[-4000:]
    out = flat(result.stdout)
    # the canary and the next batch are isolated; node-3 is refused before its cordon, keeps its pods, is annotated
    assert changed(tmp_path) == ["node-1", "node-2"]
    for name in ("node-1", "node-2"):
        assert calls_for(state, name) == ["get node", "cordon", "drain", "get node", "uncordon"]
    assert calls_for(state, "node-3") == ["get node", "annotate node"]
    assert not any(n["unschedulable"] for n in state["nodes"].values())
    assert "node-3: the device plugin still runs with device-list-strategy envvar. Move it to cdi-cri first" in out
    assert "The node was not drained and keeps its pods." in out
    stop = json.loads(state["nodes"]["node-3"]["annotations"][ANNOTATION])
    assert stop["rollout"] == "migrate_gpu_isolation" and stop["step"] == REFUSE and stop["cordoned"] is False
    fleet = json.loads((tmp_path / "gpu-fleet-report.json").read_text())
    (stopped,) = [n for n in fleet["nodes"] if n["host"] == "node-3"]
    assert "device-list-strategy envvar" in stopped["cells"]["rollout: migrate_gpu_isolation"]["detail"]

    # the plugin moved on node-3: the next run says where the last one stopped and isolates it
    result, state = run(tmp_path, "migrate_gpu_isolation.yml", None, "--limit", "node-3", **ISOLATE, **plugins())
    assert result.returncode == 0, result.stdout[-4000:]
    assert f"Resuming: the last rollout stopped on node node-3 at step {REFUSE}" in flat(result.stdout)
    assert calls_for(state, "node-3") == ["get node", "cordon", "drain", "get node", "uncordon", "annotate node"]
    assert changed(tmp_path) == NODES and not state["nodes"]["node-3"].get("annotations")


def test_migrate_check_mode_prints_the_isolation_plan_and_changes_nothing(tmp_path):
    rollout_play(tmp_path, "migrate_gpu_isolation.yml")
    result, state = run(tmp_path, "migrate_gpu_isolation.yml", cluster(), "--check", **ISOLATE, **plugins())
    assert result.returncode == 0, result.stdout[-4000:]
    out = flat(result.stdout)
    for name in NODES:
        assert (
            f"PLAN (check mode: nothing changes): {name} (node {name}), batch {name}: cordon, drain, step isolate: "
            "runc the default runtime, NVIDIA_VISIBLE_DEVICES ignored from unprivileged containers (runtime "
            "restart), wait until Ready with its GPUs allocatable, uncordon." in out
        )
        assert calls_for(state, name) == ["get node"]
    assert changed(tmp_path) == [] and not any(n["unschedulable"] for n in state["nodes"].values())


def test_migrate_a_failed_isolation_stops_cordoned_and_annotated_and_the_next_run_resumes(tmp_path):
    rollout_play(tmp_path, "migrate_gpu_isolation.yml")
    reason = "TEST STAND-IN containerd did not come back after its restart: rolled back"
    extra = {**ISOLATE, **plugins()}
    first, state = run(
        tmp_path,
        "migrate_gpu_isolation.yml",
        cluster(),
        rollout_standin_fail_on=["node-2"],
        rollout_standin_reason=reason,
        **extra,
    )
    assert first.returncode == 2, first.stdout[-4000:]
    assert changed(tmp_path) == ["node-1"]
    assert calls_for(state, "node-2") == ["get node", "cordon", "drain", "cordon", "annotate node"]
    assert calls_for(state, "node-3") == []
    assert state["nodes"]["node-2"]["unschedulable"] is True
    stop = json.loads(state["nodes"]["node-2"]["annotations"][ANNOTATION])
    assert stop == {
        "rollout": "migrate_gpu_isolation",
        "step": "Fail the stand-in change where the test asks for it",
        "reason": reason,
        "cordoned": True,
    }
    assert "The migrate_gpu_isolation rollout stopped on node-2 (node node-2)" in flat(first.stdout)

    # the second run resumes on node-2 (cordoned since: drained, changed, uncordoned, the stop forgotten) and goes on;
    # the isolate step has no "already isolated" check, so node-1 runs again (cordon, drain, the change)
    second, state = run(tmp_path, "migrate_gpu_isolation.yml", None, **extra)
    assert second.returncode == 0, second.stdout[-4000:]
    assert "Resuming: the last rollout stopped on node node-2 at step Fail the stand-in change" in flat(second.stdout)
    assert calls_for(state, "node-2") == ["get node", "drain", "get node", "uncordon", "annotate node"]
    assert calls_for(state, "node-3") == ["get node", "cordon", "drain", "get node", "uncordon"]
    assert all(not n["unschedulable"] and not n.get("annotations") for n in state["nodes"].values())


def test_migrate_prepare_drains_only_the_nodes_where_pods_run(tmp_path):
    rollout_play(tmp_path, "migrate_gpu_isolation.yml")
    # prepare does not look at the device plugin: node-3 on envvar is prepared too
    extra = {"migrate_gpu_isolation_step": "prepare", **plugins(node_3=PLUGIN_ENVVAR)}
    result, state = run(tmp_path, "migrate_gpu_isolation.yml", node_pods(cluster()), "--check", **extra)
    assert result.returncode == 0, result.stdout[-4000:]
    out = flat(result.stdout)
    plan = "PLAN (check mode: nothing changes): {0} (node {0}), batch {0}: "
    assert plan.format("node-1") + "cordon, drain (1 pod run there: ml/train-0), step prepare: the container" in out
    assert plan.format("node-2") + "cordon, no drain (no pod runs there but DaemonSet, mirror and finished" in out
    assert all(calls_for(state, name) == ["get node", "get pods"] for name in NODES) and changed(tmp_path) == []

    result, state = run(tmp_path, "migrate_gpu_isolation.yml", None, **extra)
    assert result.returncode == 0, result.stdout[-4000:]
    assert calls_for(state, "node-1") == ["get node", "get pods", "cordon", "drain", "get node", "uncordon"]
    assert calls_for(state, "node-2") == ["get node", "get pods", "cordon", "get node", "uncordon"]
    assert calls_for(state, "node-3") == ["get node", "get pods", "cordon", "drain", "get node", "uncordon"]
    assert changed(tmp_path) == NODES and not any(n["unschedulable"] for n in state["nodes"].values())


def test_migrate_without_the_control_plane_stops_before_any_change(tmp_path):
    rollout_play(tmp_path, "migrate_gpu_isolation.yml", control_plane=False)
    result, state = run(tmp_path, "migrate_gpu_isolation.yml", cluster(), **ISOLATE, **plugins())
    assert result.returncode == 2
    out = flat(result.stdout)
    assert "no host of group kube_control_plane" in out and "set migrate_gpu_isolation_drain=false" in out
    assert state["calls"] == [] and changed(tmp_path) == []
    # nodes outside any cluster: changed in place, no kubectl; the refusal still holds before the change
    result, state = run(
        tmp_path,
        "migrate_gpu_isolation.yml",
        cluster(),
        **ISOLATE,
        **plugins(node_2=PLUGIN_ENVVAR),
        migrate_gpu_isolation_drain=False,
    )
    assert result.returncode == 2
    assert state["calls"] == [] and changed(tmp_path) == ["node-1"]
    assert "node-2: the device plugin still runs with device-list-strategy envvar" in flat(result.stdout)


def test_migrate_without_its_step_is_refused(tmp_path):
    rollout_play(tmp_path, "migrate_gpu_isolation.yml")
    result, state = run(tmp_path, "migrate_gpu_isolation.yml", cluster(), migrate_gpu_isolation_step="isolated")
    assert result.returncode == 2
    assert 'migrate_gpu_isolation_step is "isolated": give -e migrate_gpu_isolation_step=prepare' in flat(result.stdout)
    assert state["calls"] == [] and changed(tmp_path) == []


# ---- the filters ------------------------------------------------------------------------------------------------


def test_the_batches_of_a_rollout_playbook():
    assert rollout.gpu_rollout_batches("upgrade_kernel") == [1, "25%"]
    assert rollout.gpu_rollout_batches("upgrade_kernel", 0, None, "10%") == ["10%"]
    assert rollout.gpu_rollout_batches("upgrade_kernel", 2, 3) == [2, 3]
    with pytest.raises(Exception, match="upgrade_kernel_batch and upgrade_kernel_max_unavailable are both set"):
        rollout.gpu_rollout_batches("upgrade_kernel", 1, 2, 3)
    with pytest.raises(Exception, match="upgrade_kernel_max_unavailable: 'half' is no batch size"):
        rollout.gpu_rollout_batches("upgrade_kernel", 1, None, "half")


def test_the_node_state_reads_a_stop_back():
    stop = rollout.gpu_rollout_annotation("upgrade_kernel", "Build", "dkms\n failed", True)
    result = {"rc": 0, "stdout": "true|" + json.dumps({ANNOTATION: stop, "other": "x"})}
    state = rollout.gpu_rollout_node_state(result, "n1", "upgrade_kernel")
    assert state["found"] and state["unschedulable"] and state["cordoned_by_rollout"]
    assert state["previous"] == {
        "rollout": "upgrade_kernel",
        "step": "Build",
        "reason": "dkms failed",
        "cordoned": True,
    }
    assert state["resume"].startswith("Resuming: the last rollout stopped on node n1 at step Build: dkms failed.")
    # cordoned by someone, no stop: left cordoned
    state = rollout.gpu_rollout_node_state({"rc": 0, "stdout": "true|"}, "n1")
    assert state["unschedulable"] and not state["cordoned_by_rollout"] and state["previous"] is None
    assert not rollout.gpu_rollout_node_state({"rc": 1, "stdout": ""}, "n1")["found"]
    (row,) = rollout.gpu_rollout_results(json.loads(stop), "n1")
    assert row["check"] == "rollout: upgrade_kernel" and row["status"] == "fail"
    assert "kubectl annotate node n1 gpu-node-provisioning/rollout-" in row["fix"]
    assert rollout.gpu_rollout_annotate(["k"], "n1") == ["k", "annotate", "node", "n1", f"{ANNOTATION}-"]


def test_the_control_plane_host_or_the_refusal():
    assert rollout.gpu_rollout_control_plane({"kube_control_plane": ["cp1", "cp2"]}) == "cp1"
    assert rollout.gpu_rollout_control_plane({}, drain=False) == ""
    assert rollout.gpu_rollout_control_plane({}, drain="false") == ""
    for groups in ({}, {"kube_control_plane": []}):
        with pytest.raises(Exception, match="no host of group kube_control_plane"):
            rollout.gpu_rollout_control_plane(groups, True, "relayout_mig")
