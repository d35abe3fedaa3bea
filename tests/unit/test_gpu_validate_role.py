"""The gpu_validate role's checks, run for real by ansible-playbook against this machine.

Nothing on the machine is inspected or changed: every command the checks run (docker, ctr,
containerd, crio, nvidia-ctk, dpkg-query, nvidia-smi) is a small fake script put first on PATH,
every file they look at lives under pytest's tmp_path, and the node facts that the role's
gpu_node_facts dependency would gather (ansible_facts.gpu_node) are given. So the test drives the role's own
check files (checks.yml, which runs the families of the node-side module gpu_validate_checks, and
report.yml, through include_role tasks_from) with their states and their
report writing, on three kinds of node:

- a GPU node where everything is right (all ok, report files written once, then unchanged);
- a node without a GPU and without test images (GPU checks "skipped: no GPU", container runs
  "skipped: no test image");
- a GPU node where things are wrong (nvidia is docker's default, containers see GPUs, the
  driver is not the pinned one, /dev/fuse is missing, containerd's CRI plugin did not load): the
  node fails with the failed checks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"

FAKES = {
    "docker": """#!/bin/sh
case "$1" in
  info)
    if [ "$SCEN" = bad ]; then default=nvidia; else default=runc; fi
    printf '{"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}, "runc": {"path": "runc"}}, '
    printf '"default": "%s"}\\n' "$default" ;;
  image) echo sha256:0123 ;;
  run)
    echo "$*" >> "$FAKE_LOG"
    case "$*" in
      *"sh -c"*) if [ "$SCEN" = bad ]; then echo 4; else echo 0; fi ;;
    esac ;;
esac
""",
    "ctr": """#!/bin/sh
case "$*" in *" run "*) echo "ctr $*" >> "$FAKE_LOG" ;; esac
case "$*" in
  *"plugins ls"*)
    echo "TYPE                                  ID                       PLATFORMS      STATUS"
    echo "io.containerd.runtime.v2              task                     linux/amd64    ok"
    if [ "$SCEN" = bad ]; then cri=error; else cri=ok; fi
    echo "io.containerd.grpc.v1                 cri                      linux/amd64    $cri" ;;
  *"images ls"*) echo docker.io/library/busybox:latest ;;
  *" run "*) case "$*" in *"sh -c"*) echo 0 ;; esac ;;
esac
""",
    "containerd": """#!/bin/sh
cat <<'EOF'
version = 2
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
EOF
""",
    "crio": """#!/bin/sh
echo 'time="now" level=info msg="Starting CRI-O"' >&2
printf '[crio.runtime]\\ndefault_runtime = "runc"\\n[crio.runtime.runtimes.runc]\\nruntime_path = ""\\n'
printf '[crio.runtime.runtimes.nvidia]\\nruntime_path = "/usr/bin/nvidia-container-runtime"\\n'
""",
    # containerd's start time (µs of CLOCK_MONOTONIC, as systemd < 251 can give it): about 130 years from now,
    # after any config file on this machine was written
    "systemctl": """#!/bin/sh
case "$*" in
  *"show containerd -p ExecMainStartTimestampMonotonic --value") echo 4102444800000000 ;;
  *--timestamp=unix*) echo "Invalid value: unix." >&2; exit 1 ;;  # as systemd 247 (Debian 11) and 249 (Ubuntu 22.04)
  *) exit 1 ;;
esac
""",
    "nvidia-ctk": """#!/bin/sh
echo "NVIDIA Container Toolkit CLI version 1.17.8"
echo "commit: fake"
""",
    "dpkg-query": """#!/bin/sh
printf '1.17.8-1'
""",
    "nvidia-smi": """#!/bin/sh
echo "NVIDIA A100-SXM4-80GB, 580.95.05"
echo "NVIDIA A100-SXM4-80GB, 580.95.05"
""",
}

CDI_SPEC = """cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
    - name: "0"
      containerEdits:
        deviceNodes:
            - path: /dev/nvidia0
              hostPath: /dev/null
              major: 1
              minor: {minor}
containerEdits:
    hooks:
        - hookName: createContainer
          path: /usr/bin/nvidia-cdi-hook
          args: [nvidia-cdi-hook, enable-cuda-compat, --host-driver-version=580.95.05]
"""

PLAYBOOK = """
- name: Run the gpu_validate checks against fakes
  hosts: localhost
  connection: local
  gather_facts: false
  environment:
    PATH: "{{ fake_bin }}:/usr/bin:/bin:/usr/sbin:/sbin"
    SCEN: "{{ scen }}"
    FAKE_LOG: "{{ fake_log }}"
  tasks:
    - name: Give the node facts the role's gpu_node_facts dependency reads, and the runtimes to check
      ansible.builtin.set_fact:
        __gpu_validate_runtimes: [docker, containerd, crio]
        __gpu_validate_node:
          has_gpu: "{{ has_gpu | bool }}"
          gpu_count: 2
          nouveau_loaded: false
          driver:
            loaded: "{{ has_gpu | bool }}"
            version: "580.95.05"
            modules: "{{ ['nvidia', 'nvidia_uvm'] + (['nvidia_peermem'] if scen == 'good' else []) }}"
          nvidia_smi: "{{ fake_bin }}/nvidia-smi"
          runtimes:
            docker: {installed: true, running: true, binary: "{{ fake_bin }}/docker"}
            containerd: {installed: true, running: true, binary: "{{ fake_bin }}/containerd"}
            crio: {installed: true, running: false, binary: "{{ fake_bin }}/crio"}
          kubelet: {installed: true, running: true, version: 1.31.2}
          apparmor_enabled: true
          apparmor: {kernel_enabled: true, securityfs: true}

    - name: Run each check file of the role (checks.yml runs the families of the node-side module)
      ansible.builtin.include_role:
        name: gpu_validate
        tasks_from: "{{ step[0] }}"
      vars:
        __gpu_validate_families: "{{ step[1] }}"
        __gpu_node_facts_validate_package_version_argv: [dpkg-query, --show, "--showformat=${Version}"]
        __gpu_node_facts_apparmor_os: true
        __gpu_node_facts_kubelet_env_file_default: /etc/default/kubelet
        __gpu_validate_apparmor_dir: "{{ tmp }}/apparmor.d"
        __gpu_validate_containerd_config: "{{ tmp }}/root-{{ scen }}/etc/containerd/config.toml"
        __gpu_validate_apparmor_profiles_file: "{{ tmp }}/apparmor-profiles"
        __gpu_validate_fuse_device: "{{ fuse_device }}"
        __gpu_validate_kernels_root: "{{ tmp }}/root-{{ scen }}"
        __gpu_validate_peermem_file: "{{ tmp }}/root-{{ scen }}/etc/modules-load.d/nvidia-peermem.conf"
      loop:
        - [checks.yml, [driver, toolkit, docker, containerd, crio, cdi, fuse, security, kubelet]]
        - [report.yml, []]
      loop_control:
        loop_var: step
"""


@pytest.fixture
def node(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in FAKES.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)
    (tmp_path / "apparmor.d").mkdir()
    (tmp_path / "apparmor.d" / "fuse").write_text("profile fuse {}\n")
    (tmp_path / "apparmor-profiles").write_text("docker-default (enforce)\nfuse (enforce)\n")
    (tmp_path / "seccomp" / "profiles").mkdir(parents=True)
    (tmp_path / "seccomp" / "profiles" / "fuse.json").write_text('{"defaultAction": "SCMP_ACT_ERRNO"}\n')
    (tmp_path / "kubelet.conf.d").mkdir()
    (tmp_path / "kubelet.conf.d" / "50-gpu-node.conf").write_text("kind: KubeletConfiguration\n")
    (tmp_path / "default-kubelet").write_text('KUBELET_EXTRA_ARGS="--config-dir=/etc/kubernetes/kubelet.conf.d"\n')
    # Installed kernels: on the good node the newest (the next boot) has the DKMS-built module; on the bad node
    # an update installed a newer kernel without one.
    for scen, kernels in (("good", ("6.8.0-149-generic",)), ("bad", ("6.8.0-149-generic", "6.8.0-151-generic"))):
        for release in kernels:
            (tmp_path / f"root-{scen}" / "boot").mkdir(parents=True, exist_ok=True)
            (tmp_path / f"root-{scen}" / "boot" / f"vmlinuz-{release}").write_bytes(b"MZ")
        dkms = tmp_path / f"root-{scen}" / "lib" / "modules" / "6.8.0-149-generic" / "updates" / "dkms"
        dkms.mkdir(parents=True)
        (dkms / "nvidia.ko.zst").write_bytes(b"")
    (tmp_path / "root-good" / "etc" / "modules-load.d").mkdir(parents=True)
    (tmp_path / "root-good" / "etc" / "modules-load.d" / "nvidia-peermem.conf").write_text("nvidia-peermem\n")
    # CDI specs (issue 38): /dev/null, 1:3 on every Linux machine, as NVIDIA's spec names its device nodes; the bad
    # node's spec was generated when the node had another device there
    for scen, minor in (("good", 3), ("bad", 4)):
        (tmp_path / f"cdi-{scen}").mkdir()
        (tmp_path / f"cdi-{scen}" / "nvidia.yaml").write_text(CDI_SPEC.format(minor=minor))
    # containerd's root config and a drop-in; on the bad node the drop-in is above the root's version (aicr#1688)
    for scen, dropin_version in (("good", 2), ("bad", 4)):
        etc = tmp_path / f"root-{scen}" / "etc" / "containerd"
        (etc / "conf.d").mkdir(parents=True)
        (etc / "config.toml").write_text(f"version = 2\nimports = ['{etc}/conf.d/*.toml']\n")
        (etc / "conf.d" / "99-nvidia.toml").write_text(f"version = {dropin_version}\n")
    (tmp_path / "playbook.yml").write_text(PLAYBOOK)
    return tmp_path


def run(tmp: Path, scen: str, has_gpu: bool, **overrides) -> tuple[subprocess.CompletedProcess, dict | None]:
    extra = {
        "scen": scen,
        "has_gpu": has_gpu,
        "tmp": str(tmp),
        "fake_bin": str(tmp / "bin"),
        "fake_log": str(tmp / "containers.log"),
        "role_dir": str(ROOT / "roles" / "gpu_validate"),
        "fuse_device": "/dev/null",  # a character device every machine has
        "ansible_python_interpreter": sys.executable,
        "gpu_validate_report_dir": str(tmp / "report"),
        # each test's own fleet report: the default ($PWD/gpu-fleet-report, the checkout) is shared by the tests
        # running beside it, whose rows made the second run of a stable node write it again
        "gpu_validate_fleet_report": str(tmp / "gpu-fleet-report"),
        "gpu_validate_seccomp_root": str(tmp / "seccomp"),
        "gpu_validate_kubelet_config_dir": str(tmp / "kubelet.conf.d"),
        "gpu_validate_kubelet_env_file": str(tmp / "default-kubelet"),
        "gpu_validate_kubelet_main_config": str(tmp / "missing-config.yaml"),
        "gpu_validate_driver_version": "580.95.05",
        "gpu_validate_peermem": True,
        "gpu_validate_toolkit_version": "1.17.8-1",
        "gpu_validate_test_image": "busybox:latest",
        "gpu_validate_containerd_test_image": "docker.io/library/busybox:latest",
        "gpu_validate_cdi_spec_dirs": [str(tmp / f"cdi-{scen}")],
        "runtime_config_docker_daemon_json": str(tmp / "daemon.json"),  # none: no docker spec directories
        **overrides,
    }
    (tmp / "extra.json").write_text(json.dumps(extra))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["ANSIBLE_NOCOLOR"] = "1"
    result = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", str(tmp / "playbook.yml"), "-e", f"@{tmp / 'extra.json'}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    report = tmp / "report" / "validate.json"
    return result, (json.loads(report.read_text()) if report.exists() else None)


def by_name(report: dict) -> dict[str, dict]:
    return {c["check"]: c for c in report["checks"]}


def test_a_healthy_gpu_node_passes_every_check_and_the_report_is_stable(node):
    result, report = run(node, "good", True)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = by_name(report)
    assert {c["status"] for c in report["checks"]} == {"ok"}, report["checks"]
    assert report["summary"] == {"ok": 24, "warn": 0, "fail": 0, "skipped": 0, "total": 24, "status": "ok"}
    assert checks["containerd: drop-in versions"]["detail"] == (
        f"{node}/root-good/etc/containerd/config.toml: version 2; its 1 imported file(s) are not above it (on disk)"
    )
    assert checks["containerd: CRI plugin"]["detail"] == "ctr plugins ls: cri ok (the kubelet can run pods)"
    assert checks["containerd: running config"]["detail"] == (
        "containerd started after its config files were last written"
    )
    assert checks["NVIDIA driver"]["detail"] == "580.95.05 loaded (pin: version 580.95.05)"
    assert checks["nvidia-smi"]["detail"] == "2 GPU(s): NVIDIA A100-SXM4-80GB"
    assert (
        checks["driver after next reboot"]["detail"]
        == "kernel 6.8.0-149-generic boots next with NVIDIA module nvidia.ko.zst"
    )
    assert checks["nvidia-peermem"]["detail"] == (
        f"loaded, and loaded at boot ({node}/root-good/etc/modules-load.d/nvidia-peermem.conf)"
    )
    assert checks["container toolkit"]["detail"] == "nvidia-container-toolkit 1.17.8-1 (pin 1.17.8-1)"
    assert checks["docker: default runtime"]["detail"] == "runc (nvidia is not the default)"
    assert checks["crio: nvidia runtime"]["status"] == "ok"
    assert checks["AppArmor profile fuse"]["detail"] == "installed and loaded (enforce)"
    # validate.json: every row with the family whose checks built it (issue 51), the families asked for, in order
    families = ["driver", "toolkit", "docker", "containerd", "crio", "cdi", "fuse", "security", "kubelet"]
    assert list(dict.fromkeys(c["family"] for c in report["checks"])) == families
    assert checks["AppArmor profile fuse"]["family"] == "security" and checks["CDI spec"]["family"] == "cdi"
    table = (node / "report" / "validate.txt").read_text()
    assert checks["CDI spec"]["detail"] == (
        f"device nodes as in /dev; driver 580.95.05 loaded: {node}/cdi-good/nvidia.yaml (nvidia.com/gpu, 1 devices)"
    )
    assert table.startswith("localhost: OK - 24 checks (24 ok, 0 warn, 0 fail, 0 skipped)\n")
    assert "CHECK" in table.splitlines()[1] and "FIX" in table.splitlines()[1]
    # the test containers went through the nvidia runtime, with the configured options
    log = (node / "containers.log").read_text()
    assert "run --rm --runtime nvidia --network none busybox:latest true" in log
    assert "--env NVIDIA_VISIBLE_DEVICES=all --network none busybox:latest sh -c" in log
    assert "--runc-binary /usr/bin/nvidia-container-runtime docker.io/library/busybox:latest" in log
    # one task (gpu_validate_outcome) made the report directory and wrote both files, and says so
    assert "changed=1" in result.stdout, result.stdout
    assert f"- {node}/report/validate.txt" in result.stdout and f"- {node}/report/validate.json" in result.stdout

    again, report_again = run(node, "good", True)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "changed=0" in again.stdout, "the report files were rewritten although nothing changed"
    # the node's files and the fleet report are as they should be: nothing written, the table shown all the same
    assert "written: []" in again.stdout and "Fleet report of" not in again.stdout
    assert "localhost: OK - 24 checks" in again.stdout
    assert report_again == report


def test_a_report_that_cannot_be_written_fails_the_node_after_its_table_and_the_fleet_report(node):
    """The node's report directory cannot be made (a file stands where it goes): the last task fails naming it, after
    the table, and the fleet report, which holds the batch's other nodes, is written all the same."""
    (node / "not-a-dir").write_text("a file\n")
    result, report = run(node, "good", True, gpu_validate_report_dir=str(node / "not-a-dir" / "report"))
    assert result.returncode != 0 and report is None
    output = result.stdout + result.stderr
    assert "writing the doctor's report on the node failed" in output, output
    assert "localhost: OK - 24 checks" in output  # the table, all checks ok: only the write failed
    fleet = json.loads((node / "gpu-fleet-report.json").read_text())
    assert fleet["summary"]["nodes"]["ok"] == 1, fleet["summary"]


def test_a_prefix_pin_matches_the_loaded_full_version(node):
    result, report = run(node, "good", True, gpu_validate_driver_version="580.95")
    assert result.returncode == 0, result.stdout + result.stderr
    assert by_name(report)["NVIDIA driver"] == {
        "check": "NVIDIA driver",
        "status": "ok",
        "detail": "580.95.05 loaded (pin: version 580.95)",
        "fix": "",
        "family": "driver",
    }


def test_a_node_without_gpu_and_test_images_skips_what_needs_them(node):
    result, report = run(
        node,
        "good",
        False,
        gpu_validate_test_image="",
        gpu_validate_containerd_test_image="",
        gpu_validate_cdi_spec_dirs=[str(node / "no-cdi")],
    )
    assert result.returncode == 0, result.stdout + result.stderr
    checks = by_name(report)
    for name in (
        "NVIDIA driver",
        "nvidia-smi",
        "driver after next reboot",
        "nvidia-peermem",
        "docker: GPU isolation (nvidia)",
        "docker: GPU isolation (default)",
        "containerd: GPU isolation (nvidia)",
    ):
        assert checks[name]["status"] == "skipped", checks[name]
        assert checks[name]["detail"].startswith("no GPU"), checks[name]
    for name in ("docker: container via nvidia", "containerd: container via nvidia"):
        assert checks[name]["status"] == "skipped"
        assert checks[name]["detail"].startswith("no test image"), checks[name]
    # the toolkit is installed, so the runtimes must have the nvidia runtime even without a GPU
    assert checks["docker: nvidia runtime"]["status"] == "ok"
    assert checks["CDI spec"] == {
        "check": "CDI spec",
        "status": "skipped",
        "detail": f"no CDI spec in {node}/no-cdi",
        "fix": "",
        "family": "cdi",
    }
    assert report["summary"]["status"] == "ok"
    assert not (node / "containers.log").exists(), "containers ran without a test image"


def test_a_broken_gpu_node_fails_with_each_problem_and_its_fix(node):
    result, report = run(node, "bad", True, gpu_validate_driver_version="580.65.06", fuse_device=str(node / "no-fuse"))
    assert result.returncode != 0
    checks = by_name(report)
    failed = {name for name, c in checks.items() if c["status"] == "fail"}
    assert failed == {
        "NVIDIA driver",
        "docker: default runtime",
        "docker: GPU isolation (nvidia)",
        "docker: GPU isolation (default)",
        "/dev/fuse",
        "containerd: CRI plugin",
        "driver after next reboot",
        "nvidia-peermem",
        "CDI spec",
        "containerd: drop-in versions",
    }
    assert checks["CDI spec"]["detail"] == f"{node}/cdi-bad/nvidia.yaml: /dev/null is 1:3 in /dev, 1:4 in the spec"
    assert checks["containerd: drop-in versions"]["detail"].startswith(
        f"{node}/root-bad/etc/containerd/conf.d/99-nvidia.toml has config version 4 on disk, above 2 of"
    )
    assert checks["nvidia-peermem"]["detail"] == (
        f"{node}/root-bad/etc/modules-load.d/nvidia-peermem.conf is missing: not loaded at boot"
    )
    assert checks["nvidia-peermem"]["fix"] == "Run site.yml --tags driver with nvidia_driver_peermem: true"
    assert checks["driver after next reboot"]["detail"] == (
        "kernel 6.8.0-151-generic boots next (newest /boot/vmlinuz-*) and has no NVIDIA module"
    )
    assert checks["driver after next reboot"]["fix"].startswith("Run site.yml --tags driver")
    cri = checks["containerd: CRI plugin"]
    assert cri["detail"] == (
        "containerd runs but its CRI plugin did not load, so the kubelet can run no pod:"
        " io.containerd.grpc.v1/cri=error"
    )
    assert "failed to load plugin" in cri["fix"]
    assert checks["NVIDIA driver"]["detail"] == "580.95.05 loaded, but the pin is version 580.65.06"
    assert checks["docker: GPU isolation (nvidia)"]["detail"].endswith(": 4 /dev/nvidia* devices visible")
    assert "accept_envvar_when_unprivileged: false" in checks["docker: GPU isolation (nvidia)"]["fix"]
    assert "set_as_default: false" in checks["docker: default runtime"]["fix"]
    assert checks["/dev/fuse"]["fix"] == "Run site.yml --tags fuse (loads the fuse module)"
    assert "10 check(s) failed on localhost" in result.stdout + result.stderr
    assert report["summary"]["status"] == "fail"


def test_fail_on_error_false_reports_without_failing(node):
    result, report = run(node, "bad", True, gpu_validate_fail_on_error=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert report["summary"]["fail"] == 8
    assert yaml.safe_load(json.dumps(report)) == report


def test_the_role_reads_fresh_facts_and_the_shared_values_through_gpu_node_facts():
    role = ROOT / "roles" / "gpu_validate"
    # a parameter of its own makes the dependency run again where another role's gpu_node_facts ran earlier in
    # the play (playbooks/upgrade_driver.yml validates after a reboot)
    dependencies = yaml.safe_load((role / "meta" / "main.yml").read_text())["dependencies"]
    assert dependencies == [{"role": "gpu_node_facts", "gpu_node_facts_gather_runtimes": True}]
    role_text = "".join(p.read_text() for p in sorted(role.rglob("*.yml")))
    assert "__gpu_validate_known_runtimes" not in role_text and "__gpu_validate_kubelet_dropin_min" not in role_text
    assert "__gpu_node_facts_runtimes" in role_text and "__gpu_node_facts_kubelet_dropin_min" in role_text
    # no include: one task writes the reports where they differ, shows the table and fails a failed node
    assert "include_tasks" not in role_text
    (outcome,) = yaml.safe_load((role / "tasks" / "report.yml").read_text())
    args = outcome["gpunode.provisioning.gpu_validate_outcome"]
    assert args["node_pending"] == "{{ __gpu_validate_node_report_pending }}"
    assert "__gpu_validate_fleet_pending" in args["fleet"]


@pytest.mark.parametrize(
    ("host", "batch", "compared"),
    [
        ("gpu-1", ["gpu-1", "gpu-2", "gpu-3"], True),
        ("gpu-2", ["gpu-1", "gpu-2", "gpu-3"], False),
        ("gpu-3", ["gpu-1", "gpu-2", "gpu-3"], False),
        # a rollout's second batch (serial): its first host compares, though the play's first host is gpu-1
        ("gpu-2", ["gpu-2", "gpu-3"], True),
        ("gpu-3", ["gpu-2", "gpu-3"], False),
    ],
)
def test_one_host_compares_the_fleet_report_not_each(host, batch, compared):
    """The fleet report holds every node: comparing it on each host made the doctor's cost grow with the square of
    the fleet. The last task's ``fleet`` renders it on the first host of the batch only; in a rollout's later batch
    that is not the play's first host."""
    from conftest import render_role_value

    (outcome,) = yaml.safe_load((ROOT / "roles" / "gpu_validate" / "tasks" / "report.yml").read_text())
    fleet = outcome["gpunode.provisioning.gpu_validate_outcome"]["fleet"]
    variables = {
        "inventory_hostname": host,
        "ansible_play_hosts": ["gpu-1", "gpu-2", "gpu-3"],
        "ansible_play_batch": batch,
        # rendering it fails: the condition must not touch it where it is not to be compared
        "__gpu_validate_fleet_pending": "{{ fleet_compared_here }}",
    }
    if compared:
        with pytest.raises(Exception, match="fleet_compared_here"):
            render_role_value(fleet, variables)
    else:
        assert render_role_value(fleet, variables) is False
