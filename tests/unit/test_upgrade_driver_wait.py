"""playbooks/upgrade_driver.yml waits, after the reboot and the doctor, until the node is Ready and its GPUs are
allocatable again (issue 38 item 3): the filters of plugins/filter/rollout.py, and the play's own cordon, drain, wait
and uncordon tasks run by ansible-playbook against this machine with the TEST STAND-IN kubectl
(tests/fixtures/kubectl-standin/kubectl) replaying a node's status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from conftest import ROOT, load_module, run_local_playbook

rollout = load_module("rollout", subdir="plugins/filter")
PLAYBOOK = ROOT / "playbooks" / "upgrade_driver.yml"
SHARED = ROOT / "roles" / "gpu_node_facts" / "vars" / "main.yml"
KUBECTL = ROOT / "tests" / "fixtures" / "kubectl-standin" / "kubectl"
NODE = "gpu-a100-01"


def node(ready="True", reason="KubeletReady", allocatable=None):
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE},
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": ready, "reason": reason, "message": f"kubelet says {reason}"},
            ],
            "allocatable": {"cpu": "64", "memory": "515000Mi", "pods": "110", **(allocatable or {})},
        },
    }


def resource_slice(node_name=NODE, driver="gpu.nvidia.com", devices=2):
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{driver}-x"},
        "spec": {
            "driver": driver,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}}} for i in range(devices)],
        },
    }


def answer(node_obj, slices=None, rc=0):
    return {"rc": rc, "stdout": json.dumps({"node": node_obj, "slices": slices}), "stderr": ""}


NOT_READY = node("False", "KubeletNotReady")
NO_GPUS = node()
GPUS = node(allocatable={"nvidia.com/gpu": "2"})


# ---- the filters ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "back", "missing", "fix"),
    [
        (answer(NOT_READY), False, "the node is not Ready (Ready=False: KubeletNotReady: kubelet says", "kubelet"),
        (answer(NO_GPUS), False, "nvidia.com/gpu is not in its status.allocatable", "device plugin's pod on"),
        (answer(node(allocatable={"nvidia.com/gpu": "1"})), False, "allocatable nvidia.com/gpu 1, 2 wanted", ""),
        (answer(node(allocatable={"nvidia.com/gpu": "0"})), False, "allocatable nvidia.com/gpu 0, 2 wanted", ""),
        # MIG (strategy mixed) and time-slicing with renameByDefault: the device plugin's other resource names
        (answer(node(allocatable={"nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "2"})), True, "", ""),
        (answer(node(allocatable={"nvidia.com/gpu.shared": "8"})), True, "", ""),
        (answer(node(allocatable={"nvidia.com/mig-7g.80gb": "1"})), False, "nvidia.com/mig-7g.80gb 1, 2 wanted", ""),
        (answer(node(allocatable={"nvidia.com/gpu": "1", "nvidia.com/mig-2g.20gb": "3"})), True, "", ""),
        (answer(node(allocatable={"example.com/gpu": "4", "nvidia.com/gpus": "4"})), False, "is not in its", ""),
        (answer(GPUS), True, "", ""),
        (answer(node(allocatable={"nvidia.com/gpu": "16"})), True, "", ""),  # time-slicing replicas
        (
            {"rc": 1, "stdout": "", "stderr": "The connection to the server was refused\n"},
            False,
            "kubectl could not read node gpu-a100-01: The connection to the server was refused",
            "kubeconfig",
        ),
        ({"rc": 0, "stdout": '{"node": ', "stderr": ""}, False, "kubectl could not read node", "kubeconfig"),
    ],
)
def test_the_device_plugin_node_is_back_when_ready_with_its_gpus(result, back, missing, fix):
    state = rollout.gpu_rollout_node_gpus(result, NODE, "device_plugin", "nvidia.com/gpu", "gpu.nvidia.com", 2)
    assert state["back"] is back
    assert missing in state["missing"] and (state["missing"] == "") is back
    assert fix in state["fix"]


def test_a_node_neither_ready_nor_with_gpus_names_both_and_the_kubelet_first():
    state = rollout.gpu_rollout_node_gpus(answer(node("Unknown", "NodeStatusUnknown")), NODE, count=1)
    assert state["missing"] == (
        "the node is not Ready (Ready=Unknown: NodeStatusUnknown: kubelet says NodeStatusUnknown); "
        "nvidia.com/gpu is not in its status.allocatable"
    )
    assert "journalctl -u kubelet" in state["fix"]


def test_dra_counts_the_devices_of_the_gpu_drivers_slices_for_this_node_only():
    others = [resource_slice("gpu-a100-02"), resource_slice(driver="compute-domain.nvidia.com")]
    dra = {"items": others}
    state = rollout.gpu_rollout_node_gpus(answer(GPUS, dra), NODE, "dra", count=1)
    assert not state["back"]
    assert state["missing"] == "no ResourceSlice of the DRA driver gpu.nvidia.com names the node"
    assert "DRA driver's kubelet plugin pod on gpu-a100-01" in state["fix"]
    dra = {"items": [*others, resource_slice(devices=1)]}
    state = rollout.gpu_rollout_node_gpus(answer(NO_GPUS, dra), NODE, "dra", count=2)
    assert state["missing"] == "the ResourceSlices of gpu.nvidia.com list 1 devices, 2 wanted"
    dra = {"items": [*others, resource_slice(devices=1), resource_slice(devices=1)]}
    assert rollout.gpu_rollout_node_gpus(answer(NO_GPUS, dra), NODE, "dra", count=2)["back"]
    assert not rollout.gpu_rollout_node_gpus(answer(NOT_READY, dra), NODE, "dra", count=2)["back"]


def test_none_or_no_gpus_asks_for_ready_only():
    assert rollout.gpu_rollout_node_gpus(answer(NO_GPUS), NODE, "none", count=2)["back"]
    assert rollout.gpu_rollout_node_gpus(answer(NO_GPUS), NODE, "device_plugin", count=0)["back"]
    assert not rollout.gpu_rollout_node_gpus(answer(NOT_READY), NODE, "none", count=0)["back"]


def test_the_wait_settings():
    assert rollout.gpu_rollout_wait("device_plugin", 600, 10, 8) == {
        "api": "device_plugin",
        "timeout": 600,
        "delay": 10,
        "retries": 60,
        "count": 8,
    }
    assert rollout.gpu_rollout_wait("dra", "65s", "10", "0")["retries"] == 7


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("nvidia", 600, 10, 1), r"upgrade_driver_gpu_api: 'nvidia'; write device_plugin"),
        (("dra", "10m", 10, 1), r"upgrade_driver_ready_timeout: '10m' is no number of seconds"),
        (
            ("dra", 5, 10, 1),
            r"upgrade_driver_ready_timeout: 5 is no number of seconds; write a whole number of at "
            r"least 10",
        ),
        (("dra", 600, 0, 1), r"upgrade_driver_ready_delay: 0"),
        (("dra", 600, 10, -1), r"upgrade_driver_gpu_count: -1; write the number of GPUs"),
        (("dra", 600, 10, True), r"upgrade_driver_gpu_count: True"),
    ],
)
def test_bad_wait_settings_are_refused_naming_the_variable(args, message):
    with pytest.raises(AnsibleFilterError, match=message):
        rollout.gpu_rollout_wait(*args)


ADMIN = yaml.safe_load(SHARED.read_text())["__gpu_node_facts_cluster_admin"]


@pytest.mark.parametrize(
    ("installer", "argv"),
    [
        ("kubeadm", ["kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf"]),
        ("kubespray", ["kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf"]),
        ("rke2", ["/var/lib/rancher/rke2/bin/kubectl", "--kubeconfig", "/etc/rancher/rke2/rke2.yaml"]),
        ("k3s", ["kubectl", "--kubeconfig", "/etc/rancher/k3s/k3s.yaml"]),
        ("unknown", ["kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf"]),
        ("", ["kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf"]),  # no facts of the control-plane host
    ],
)
def test_the_kubeconfig_comes_from_the_control_plane_hosts_installer(installer, argv):
    assert rollout.gpu_rollout_kubectl(installer, ADMIN) == argv


def test_the_users_kubeconfig_and_kubectl_win():
    assert rollout.gpu_rollout_kubectl("rke2", ADMIN, "/root/.kube/config") == [
        "/var/lib/rancher/rke2/bin/kubectl",
        "--kubeconfig",
        "/root/.kube/config",
    ]
    assert rollout.gpu_rollout_kubectl("k3s", ADMIN, None, "/opt/bin/kubectl") == [
        "/opt/bin/kubectl",
        "--kubeconfig",
        "/etc/rancher/k3s/k3s.yaml",
    ]


# ---- the play's cordon, drain, wait and uncordon, with the stand-in kubectl -----------------------------------


STANDIN_CHANGE = ROOT / "tests" / "fixtures" / "rollout" / "change.yml"


def play_of_the_kubectl_steps(tmp: Path, facts_root: Path | None = None) -> Path:
    """upgrade_driver.yml's play as it is, on the rollout mechanism (playbooks/tasks/rollout.yml, its cordon, drain,
    wait, uncordon and stop), but for the roles (facts, driver, CDI, doctor: covered by their own tests; the driver's
    reboot cannot happen here): the driver's change is the TEST STAND-IN tests/fixtures/rollout/change.yml. With
    ``facts_root``, the mechanism's gpu_node_facts task reads the control-plane host below that tree (the module's
    `root` option)."""
    play = yaml.safe_load(PLAYBOOK.read_text())[0]
    assert play["vars_files"] == ["../roles/gpu_node_facts/vars/main.yml"]
    tasks = [task for task in play["tasks"] if "ansible.builtin.include_role" not in task]
    (rollout,) = tasks
    assert rollout["ansible.builtin.include_tasks"] == "tasks/rollout.yml"
    assert rollout["vars"]["rollout_change"] == "upgrade_driver_change.yml"
    mechanism = yaml.safe_load((PLAYBOOK.parent / "tasks" / "rollout.yml").read_text())
    if facts_root:
        for task in mechanism:
            facts = "gpunode.provisioning.gpu_node_facts"
            if facts in task:
                task[facts] = {**task[facts], "root": str(facts_root)}
    (tmp / "rollout.yml").write_text(yaml.safe_dump(mechanism, sort_keys=False))
    for name in ("rollout_wait.yml", "rollout_failed.yml", "upgrade_driver_preflight.yml"):
        (tmp / name).write_text((PLAYBOOK.parent / "tasks" / name).read_text())
    rollout = {
        **rollout,
        "ansible.builtin.include_tasks": str(tmp / "rollout.yml"),
        "vars": {**rollout["vars"], "rollout_change": str(STANDIN_CHANGE)},
    }
    test_play = {**play, "gather_facts": False, "vars_files": [str(SHARED)], "tasks": [rollout]}
    path = tmp / "upgrade_kubectl_steps.yml"
    path.write_text(yaml.safe_dump([test_play], sort_keys=False))
    (tmp / "inventory.ini").write_text(
        "[gpu_nodes]\nlocalhost ansible_connection=local\n[kube_control_plane]\nlocalhost\n"
    )
    return path


def upgrade(tmp: Path, steps: list, facts_root: Path | None = None, **settings):
    cluster = tmp / "cluster.json"
    if steps is not None:  # None: the cluster as the last run left it
        cluster.write_text(json.dumps({"node": NODE, "unschedulable": False, "steps": steps, "served": 0, "calls": []}))
    extra = {
        "upgrade_driver_kubectl": str(KUBECTL),
        **({} if facts_root else {"upgrade_driver_kubeconfig": str(cluster)}),  # the stand-in's state
        "upgrade_driver_node_name": NODE,
        "nvidia_driver_force": True,
        "upgrade_driver_gpu_count": 2,
        "upgrade_driver_ready_delay": 1,
        "upgrade_driver_ready_timeout": 20,
        "upgrade_driver_validate": False,  # the doctor has its own tests; here it would check this machine
        "rollout_standin_dir": str(tmp),
        "gpu_validate_fleet_report": str(tmp / "gpu-fleet-report"),
        **settings,
    }
    run = run_local_playbook(
        play_of_the_kubectl_steps(tmp, facts_root), "-i", str(tmp / "inventory.ini"), "-e", json.dumps(extra)
    )
    return run, json.loads(cluster.read_text())


def verbs(calls):
    return [" ".join(call["args"][:2]) if call["args"][0] == "get" else call["args"][0] for call in calls]


def test_the_play_holds_the_node_cordoned_until_its_gpus_are_allocatable(tmp_path):
    run, cluster = upgrade(tmp_path, [{"node": NOT_READY}, {"node": NO_GPUS}, {"node": GPUS}])
    assert run.returncode == 0, run.stdout + run.stderr
    assert verbs(cluster["calls"]) == ["get node", "cordon", "drain", "get node", "get node", "get node", "uncordon"]
    uncordon = cluster["calls"][-1]
    assert uncordon["served"] == 3  # after the step with nvidia.com/gpu: 2 was served, not before
    assert cluster["unschedulable"] is False


def test_the_rollout_stops_with_the_node_cordoned_when_its_gpus_never_come_back(tmp_path):
    # someone uncordons the node while it waits: it is cordoned again before the play stops
    run, cluster = upgrade(
        tmp_path, [{"node": NOT_READY}, {"node": NO_GPUS, "uncordoned": True}], upgrade_driver_ready_timeout=3
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "uncordon" not in verbs(cluster["calls"])
    # it looked for the whole timeout: every 1 s for 3 s, the first look included
    assert verbs(cluster["calls"]).count("get node") == 1 + 4
    # the rescue cordons it again and records the stop in its annotation
    assert verbs(cluster["calls"])[-2:] == ["cordon", "annotate"] and cluster["unschedulable"] is True
    stop = json.loads(cluster["annotations"]["gpu-node-provisioning/rollout"])
    assert stop["rollout"] == "upgrade_driver" and stop["cordoned"] is True
    assert stop["step"] == "Stop the rollout when the node did not come back"
    assert "nvidia.com/gpu is not in its status.allocatable" in stop["reason"]
    out = " ".join(run.stdout.split())
    assert "Node gpu-a100-01 did not come back within 3s after driver newest of branch the platform default" in out
    assert ("nvidia.com/gpu is not in its status.allocatable. It stays cordoned and the rollout stops here") in out
    assert "Fix: look at the NVIDIA device plugin's pod on gpu-a100-01" in out
    assert "it resumes on gpu-a100-01 and uncordons it once it is back" in out
    # the fleet report shows the stop
    fleet = json.loads((tmp_path / "gpu-fleet-report.json").read_text())
    (node_doc,) = fleet["nodes"]
    assert node_doc["status"] == "fail"
    assert "stopped at step Stop the rollout when" in node_doc["cells"]["rollout: upgrade_driver"]["detail"]

    # the second run resumes: it says where it stopped, runs the node again and uncordons it once its GPUs are back
    cluster["steps"], cluster["served"], cluster["calls"] = [{"node": GPUS}], 0, []
    (tmp_path / "cluster.json").write_text(json.dumps(cluster))
    run, cluster = upgrade(tmp_path, None)
    assert run.returncode == 0, run.stdout + run.stderr
    out = " ".join(run.stdout.split())
    assert "Resuming: the last rollout stopped on node gpu-a100-01 at step Stop the rollout when the node" in out
    assert "the node is cordoned since then and is uncordoned when it finishes" in out
    assert verbs(cluster["calls"]) == ["get node", "drain", "get node", "uncordon", "annotate"]
    assert cluster["unschedulable"] is False and cluster["annotations"] == {}


def test_with_dra_the_play_waits_for_the_gpu_drivers_resource_slices(tmp_path):
    others = [resource_slice("gpu-a100-02"), resource_slice(driver="compute-domain.nvidia.com")]
    steps = [{"node": NO_GPUS, "slices": others}, {"node": NO_GPUS, "slices": [*others, resource_slice()]}]
    run, cluster = upgrade(tmp_path, steps, upgrade_driver_gpu_api="dra")
    assert run.returncode == 0, run.stdout + run.stderr
    assert verbs(cluster["calls"]) == [
        "get node",
        "cordon",
        "drain",
        "get node",
        "get resourceslices.v1.resource.k8s.io",
        "get node",
        "get resourceslices.v1.resource.k8s.io",
        "uncordon",
    ]
    assert cluster["calls"][4]["args"][-2:] == [
        "--field-selector",
        "spec.nodeName=gpu-a100-01,spec.driver=gpu.nvidia.com",
    ]


def test_a_bad_wait_setting_stops_the_play_before_the_node_is_cordoned(tmp_path):
    run, cluster = upgrade(tmp_path, [{"node": GPUS}], upgrade_driver_gpu_api="nvidia")
    assert run.returncode == 2
    assert "upgrade_driver_gpu_api: 'nvidia'; write device_plugin" in run.stdout
    assert cluster["calls"] == []


@pytest.mark.parametrize(
    # one installer is enough here (a playbook run each); the table's every row: the filter tests above
    ("installer", "kubeconfig"),
    [("rke2", "/etc/rancher/rke2/rke2.yaml")],
)
def test_without_a_kubeconfig_the_play_takes_the_control_plane_installers(tmp_path, monkeypatch, installer, kubeconfig):
    # the control-plane host laid out by the installer (its binary where the installer puts it), read by gpu_node_facts
    root = tmp_path / "control-plane"
    (root / "usr" / "local" / "bin").mkdir(parents=True)
    (root / "usr" / "local" / "bin" / installer).write_text("#!/bin/sh\n")
    (root / "usr" / "local" / "bin" / installer).chmod(0o755)
    monkeypatch.setenv("KUBECTL_STANDIN_STATE", str(tmp_path / "cluster.json"))
    run, cluster = upgrade(tmp_path, [{"node": GPUS}], facts_root=root)
    assert run.returncode == 0, run.stdout + run.stderr
    assert {call["kubeconfig"] for call in cluster["calls"]} == {kubeconfig}
    assert verbs(cluster["calls"])[-1] == "uncordon"


def test_a_resource_the_user_names_is_counted_alone():
    allocatable = {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "7"}
    state = rollout.gpu_rollout_node_gpus(
        answer(node(allocatable=allocatable)), NODE, resource="nvidia.com/mig-1g.10gb", count=8
    )
    assert state["gpus"] == 7 and state["missing"] == "allocatable nvidia.com/mig-1g.10gb 7, 8 wanted"


# The wait task's script as a Jinja program before issue 40 (the YAML value as loaded), kept to prove the filter
# gpu_rollout_wait_script renders the same script on the same inputs.
OLD_WAIT_SCRIPT = (
    "set -euo pipefail\nprintf '{\"node\": '\n{{ __upgrade_driver_kubectl | map('quote') | join(' ') }} get node "
    "{{ __upgrade_driver_node | quote }} -o json\nprintf ', \"slices\": '\n{% if __upgrade_driver_wait.api == 'dra' "
    "and __upgrade_driver_wait.count > 0 %}\n{{ __upgrade_driver_kubectl | map('quote') | join(' ') }} get "
    "{{ __upgrade_driver_resourceslices | quote }} -o json \\\n  --field-selector {{ ('spec.nodeName=' ~ "
    "__upgrade_driver_node ~ ',spec.driver=' ~ __upgrade_driver_dra_driver) | quote }}\n{% else %}\nprintf 'null'\n"
    "{% endif %}\nprintf '}\\n'\n"
)


@pytest.mark.parametrize(
    ("api", "count"), [("dra", 2), ("dra", 0), ("device_plugin", 1), ("device_plugin", 0), ("none", 0)]
)
@pytest.mark.parametrize(
    ("kubectl", "node_name"),
    [
        (["kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf"], NODE),
        (["/var/lib/rancher/rke2/bin/kubectl", "--kubeconfig", "/etc/my cluster/it's.yaml"], "node with space"),
    ],
)
def test_the_wait_script_is_the_one_the_jinja_program_rendered(api, count, kubectl, node_name):
    from conftest import render_role_value

    variables = {
        "__rollout_kubectl": kubectl,
        "__rollout_node": node_name,
        "__rollout_wait": {"api": api, "count": count},
        "__rollout_resourceslices": "resourceslices.v1.resource.k8s.io",
        "__rollout_dra_driver": "gpu.nvidia.com",
        "__upgrade_driver_kubectl": kubectl,
        "__upgrade_driver_node": node_name,
        "__upgrade_driver_wait": {"api": api, "count": count},
        "__upgrade_driver_resourceslices": "resourceslices.v1.resource.k8s.io",
        "__upgrade_driver_dra_driver": "gpu.nvidia.com",
    }
    task = yaml.safe_load((ROOT / "playbooks" / "tasks" / "rollout_wait.yml").read_text())[0]
    new = render_role_value(task["ansible.builtin.shell"]["cmd"], variables)
    assert new == render_role_value(OLD_WAIT_SCRIPT, variables)
