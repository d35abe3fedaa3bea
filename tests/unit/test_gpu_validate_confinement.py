"""The doctor's "FUSE confinement" row, run for real by ansible-playbook against this machine.

The role's checks.yml (family confinement of the gpu_validate_checks module) runs through include_role
(tasks_from) with the node facts of five kinds of node given, and every file it reads under pytest's
tmp_path: nothing on the machine is inspected. It
must say, per node, how FUSE pods are confined and, where user namespaces cannot be used, which
requirement is missing:
- a node of today's Debian 12 kind without AppArmor: "seccomp only: not confined";
- the same node with the FUSE AppArmor profile loaded: "AppArmor + seccomp";
- a new stack (Linux 6.12, containerd 2.1, runc 1.3, kubelet 1.33): "user namespaces";
- kubelet 1.31 whose drop-in turns the UserNamespacesSupport gate on: "user namespaces";
- a node without /dev/fuse: "not possible".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import run_local_playbook, stack_facts

ROOT = Path(__file__).resolve().parents[2]


NODES = {
    "debian12": stack_facts(),
    "debian12_apparmor": stack_facts(apparmor=True),
    "new_stack": stack_facts(kernel="6.12.48", containerd="2.1.4", runc="1.3.0", kubelet="1.33.1"),
    "kubelet131_gate": stack_facts(kernel="6.12.48", containerd="2.1.4", runc="1.3.0", kubelet="1.31.2"),
    "no_fuse": stack_facts(fuse=False),
}

PLAY = """
- name: FUSE confinement on {name}
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Give the node facts the role's gpu_node_facts dependency reads, and the runtimes to check
      ansible.builtin.set_fact:
        __gpu_validate_runtimes: [docker, containerd]  # not read by the confinement family; no "no runtime" row
        __gpu_validate_node: {node}
    - name: Run the confinement check
      ansible.builtin.include_role:
        name: gpu_validate
        tasks_from: checks.yml
      vars:
        __gpu_validate_families: [confinement]
        # the Debian platform data (gpu_node_facts' vars/Debian.yml), which the dependency loads in a run of the role
        __gpu_node_facts_validate_package_version_argv: [dpkg-query, --show, "--showformat=${{Version}}"]
        __gpu_node_facts_apparmor_os: true
        __gpu_node_facts_kubelet_env_file_default: /etc/default/kubelet
        __gpu_validate_apparmor_profiles_file: "{tmp}/apparmor-profiles"
        gpu_validate_seccomp_root: "{tmp}/seccomp"
        gpu_validate_kubelet_config_dir: "{tmp}/kubelet-{name}"
        gpu_validate_kubelet_main_config: "{tmp}/missing-config.yaml"
    - name: Write the result
      ansible.builtin.copy:
        content: "{{{{ gpu_validate_results | to_json }}}}"
        dest: "{tmp}/result-{name}.json"
        mode: "0644"
"""


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("confinement")
    (tmp / "apparmor-profiles").write_text("docker-default (enforce)\nfuse (enforce)\n")
    (tmp / "seccomp" / "profiles").mkdir(parents=True)
    (tmp / "seccomp" / "profiles" / "fuse.json").write_text('{"defaultAction": "SCMP_ACT_ERRNO"}\n')
    gate_dir = tmp / "kubelet-kubelet131_gate"
    gate_dir.mkdir()
    (gate_dir / "50-gpu-node.conf").write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "featureGates:\n  UserNamespacesSupport: true\n"
    )
    plays = "".join(PLAY.format(name=name, node=json.dumps(node), tmp=tmp) for name, node in NODES.items())
    (tmp / "playbook.yml").write_text(plays)
    run = run_local_playbook(tmp / "playbook.yml")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    result = {}
    for name in NODES:
        checks = yaml.safe_load((tmp / f"result-{name}.json").read_text())
        assert [c["check"] for c in checks] == ["FUSE confinement"], checks
        result[name] = checks[0]
    return result


def test_a_node_without_apparmor_says_seccomp_only_not_confined_and_what_user_namespaces_need(rows):
    row = rows["debian12"]
    assert row["status"] == "warn"
    assert row["detail"].startswith("seccomp only: not confined (the kernel has no AppArmor;"), row
    for need in (
        "Linux >= 6.3 (has 6.1.0-28-amd64)",
        "containerd >= 2.0 or CRI-O >= 1.25 (has containerd 1.6.20)",
        "runc >= 1.2 or crun >= 1.9 (has runc 1.1.5)",
        "a kubelet >= 1.30 (none installed)",
    ):
        assert need in row["detail"], (need, row["detail"])
    assert "hostUsers: false" in row["fix"]


def test_a_node_with_the_apparmor_profile_loaded_is_confined_by_apparmor_and_seccomp(rows):
    row = rows["debian12_apparmor"]
    assert row["status"] == "ok"
    assert row["detail"].startswith("AppArmor + seccomp:"), row
    assert "user namespaces not possible: Linux >= 6.3" in row["detail"]


@pytest.mark.parametrize("name", ["new_stack", "kubelet131_gate"])
def test_a_node_that_can_run_user_namespaced_pods_says_so(rows, name):
    row = rows[name]
    assert row["status"] == "ok"
    assert row["detail"].startswith("user namespaces:"), row


def test_a_node_without_dev_fuse_cannot_run_fuse_pods(rows):
    row = rows["no_fuse"]
    assert row["status"] == "fail"
    assert row["detail"] == "not possible: /dev/fuse is missing"


# --- the isolation check with a CAP_SYS_ADMIN container ----------------------------------------------

FAKE_DOCKER = """#!/bin/sh
echo "$*" >> "$FAKE_LOG"
case "$*" in
  *"--cap-add SYS_ADMIN"*) if [ "$SCEN" = bad ]; then echo 4; else echo 0; fi ;;
  *) echo 0 ;;
esac
"""

ISOLATION_PLAY = """
- name: GPU isolation of a SYS_ADMIN container, {scen}
  hosts: localhost
  connection: local
  gather_facts: false
  environment:
    PATH: "{tmp}/bin:/usr/bin:/bin"
    SCEN: "{scen}"
    FAKE_LOG: "{tmp}/docker.log"
  tasks:
    - name: Give the node facts the role's gpu_node_facts dependency reads, and the runtime to check
      ansible.builtin.set_fact:
        __gpu_validate_has_gpu: true
        __gpu_validate_runtimes: [docker]
        __gpu_validate_node: {{has_gpu: true, runtimes: {{docker: {{installed: true, running: true}}}}}}
    - name: Run the isolation check
      ansible.builtin.include_role:
        name: gpu_validate
        tasks_from: checks.yml
      vars:
        __gpu_validate_families: [isolation]
        __gpu_node_facts_validate_package_version_argv: []
        __gpu_node_facts_apparmor_os: true
        __gpu_node_facts_kubelet_env_file_default: /etc/default/kubelet
        gpu_validate_test_image: gpunode-test/busybox:latest
    - name: Write the result
      ansible.builtin.copy:
        content: "{{{{ gpu_validate_results | to_json }}}}"
        dest: "{tmp}/isolation-{scen}.json"
        mode: "0644"
"""


def test_the_isolation_check_runs_a_sys_admin_container_through_the_default_runtime(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "docker").write_text(FAKE_DOCKER)
    (tmp_path / "bin" / "docker").chmod(0o755)
    (tmp_path / "playbook.yml").write_text(
        "".join(ISOLATION_PLAY.format(scen=s, tmp=tmp_path) for s in ("good", "bad"))
    )
    run = run_local_playbook(tmp_path / "playbook.yml")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    good = yaml.safe_load((tmp_path / "isolation-good.json").read_text())
    bad = yaml.safe_load((tmp_path / "isolation-bad.json").read_text())
    assert [(c["check"], c["status"]) for c in good] == [
        ("docker: GPU isolation (default, CAP_SYS_ADMIN)", "ok"),
        ("device plugin vs node", "skipped"),  # no NVIDIA device plugin in these facts (issue 25)
    ]
    assert bad[0]["status"] == "fail"
    assert "sees 4 /dev/nvidia* devices" in bad[0]["detail"]
    assert "RuntimeClass nvidia" in bad[0]["fix"]
    calls = (tmp_path / "docker.log").read_text().splitlines()
    assert len(calls) == 2
    for call in calls:
        assert call.startswith("run --rm --cap-add SYS_ADMIN --env NVIDIA_VISIBLE_DEVICES=all")
        assert "--runtime" not in call  # the default runtime


# --- containerd: the same container through the CRI plugin's default runtime --------------------------

# `containerd config dump` of containerd 2.1 (config v3): runc is CRI's default, or (bad) nvidia is.
FAKE_CONTAINERD = """#!/bin/sh
if [ "$SCEN" = bad ]; then default=nvidia; else default=runc; fi
cat <<END
version = 3
[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = '$default'
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
    BinaryName = ''
    SystemdCgroup = true
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]
  runtime_type = 'io.containerd.runc.v2'
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia.options]
    BinaryName = '/usr/bin/nvidia-container-runtime'
    SystemdCgroup = true
END
"""

# ctr: a container through the nvidia binary with CAP_SYS_ADMIN sees 4 devices, as NVIDIA's runtime
# gives them to a "privileged" container that sets NVIDIA_VISIBLE_DEVICES=all.
FAKE_CTR = """#!/bin/sh
case "$*" in
  *"plugins ls"*) echo "io.containerd.grpc.v1                 cri                      linux/amd64    ok" ;;
  *"images ls"*) echo docker.io/library/busybox:latest ;;
  *" run "*)
    echo "$*" >> "$FAKE_LOG"
    case "$*" in
      *"--runc-binary /usr/bin/nvidia-container-runtime --cap-add CAP_SYS_ADMIN"*) echo 4 ;;
      *"sh -c"*) echo 0 ;;
    esac ;;
esac
"""

CONTAINERD_PLAY = """
- name: GPU isolation of a SYS_ADMIN container through containerd, {scen}
  hosts: localhost
  connection: local
  gather_facts: false
  environment:
    PATH: "{tmp}/bin:/usr/bin:/bin"
    SCEN: "{scen}"
    FAKE_LOG: "{tmp}/ctr-{scen}.log"
  tasks:
    - name: Give the node facts the role's gpu_node_facts dependency reads, and the runtime to check
      ansible.builtin.set_fact:
        __gpu_validate_has_gpu: true
        __gpu_validate_runtimes: [containerd]
        __gpu_validate_node:
          has_gpu: true
          runtimes:
            containerd: {{installed: true, running: true, binary: "{tmp}/bin/containerd"}}
    - name: Run containerd's checks, then the isolation check
      ansible.builtin.include_role:
        name: gpu_validate
        tasks_from: checks.yml
      vars:
        __gpu_validate_families: [containerd, isolation]
        __gpu_node_facts_validate_package_version_argv: []
        __gpu_node_facts_apparmor_os: true
        __gpu_node_facts_kubelet_env_file_default: /etc/default/kubelet
        gpu_validate_containerd_test_image: docker.io/library/busybox:latest
        gpu_validate_containerd_run_options: [--cpu-shares, "0"]
    - name: Write the result
      ansible.builtin.copy:
        content: "{{{{ gpu_validate_results | to_json }}}}"
        dest: "{tmp}/containerd-{scen}.json"
        mode: "0644"
"""


def test_containerds_isolation_check_runs_the_sys_admin_container_through_cris_default_runtime(tmp_path):
    """Pods without a RuntimeClass get CRI's default_runtime_name, not ctr's default: with nvidia as CRI's
    default, the doctor's container goes through nvidia's binary, sees the GPUs, and the row fails."""
    (tmp_path / "bin").mkdir()
    for name, text in {"containerd": FAKE_CONTAINERD, "ctr": FAKE_CTR, "systemctl": "#!/bin/sh\necho @1\n"}.items():
        (tmp_path / "bin" / name).write_text(text)
        (tmp_path / "bin" / name).chmod(0o755)
    (tmp_path / "playbook.yml").write_text(
        "".join(CONTAINERD_PLAY.format(scen=s, tmp=tmp_path) for s in ("good", "bad"))
    )
    run = run_local_playbook(tmp_path / "playbook.yml")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    name = "containerd: GPU isolation (default, CAP_SYS_ADMIN)"
    good = {c["check"]: c for c in yaml.safe_load((tmp_path / "containerd-good.json").read_text())}
    bad = {c["check"]: c for c in yaml.safe_load((tmp_path / "containerd-bad.json").read_text())}
    assert good[name]["status"] == "ok", good[name]
    assert "through CRI's default runtime runc (io.containerd.runc.v2, runc): no /dev/nvidia*" in good[name]["detail"]
    assert bad[name]["status"] == "fail", bad[name]
    assert (
        "through CRI's default runtime nvidia (io.containerd.runc.v2, /usr/bin/nvidia-container-runtime) sees 4"
        in bad[name]["detail"]
    ), bad[name]
    fix = bad[name]["fix"]
    assert fix.startswith("Make runc CRI's default (nvidia_container_toolkit_set_as_default: false"), fix
    assert "RuntimeClass nvidia" in fix
    calls = {scen: (tmp_path / f"ctr-{scen}.log").read_text().splitlines() for scen in ("good", "bad")}
    good_call, bad_call = ([line for line in calls[scen] if "CAP_SYS_ADMIN" in line] for scen in ("good", "bad"))
    assert len(good_call) == 1 and len(bad_call) == 1, calls
    assert (
        " run --rm --runtime io.containerd.runc.v2 --cap-add CAP_SYS_ADMIN --env NVIDIA_VISIBLE_DEVICES=all"
        in good_call[0]
    )
    assert "--runc-binary" not in good_call[0]  # runc: the shim's own default binary
    assert (
        " run --rm --runtime io.containerd.runc.v2 --runc-binary /usr/bin/nvidia-container-runtime"
        " --cap-add CAP_SYS_ADMIN --env NVIDIA_VISIBLE_DEVICES=all --cpu-shares 0 docker.io/library/busybox:latest"
        in bad_call[0]
    )
