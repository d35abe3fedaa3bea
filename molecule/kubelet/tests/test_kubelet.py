"""Verify the kubelet role against the TEST STAND-IN kubelet of this scenario.

kl-debian13 runs a 1.31 stand-in (drop-in in /etc/kubernetes/kubelet.conf.d,
a simulated GPU), kl-debian12 a 1.27 one (merge into /var/lib/kubelet/config.yaml,
no GPU). The stand-in records each start in starts.jsonl: what it was started
with, and which configuration it read. The last tests rerun converge.yml with
bad variables and check that each one fails before anything on the node changes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import testinfra
import yaml

SCENARIO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCENARIO.parent / "resources"))
from fuse_probes import ESCAPE, MOUNT_AND_READ
from playbook_runner import recap, run_playbook_on_nodes

MAIN_CONFIG = "/var/lib/kubelet/config.yaml"
DROPIN_DIR = "/etc/kubernetes/kubelet.conf.d"
DROPIN = f"{DROPIN_DIR}/50-gpu-node.conf"
ALPHA_ENV_DROPIN = "/etc/systemd/system/kubelet.service.d/50-gpu-node-config-dir.conf"
ENV_FILE = "/etc/default/kubelet"
STARTS = "/var/log/kubelet-standin/starts.jsonl"
STARTS_AFTER_CONVERGE = "/var/log/kubelet-standin/starts-after-converge.log"
# Everything the role could write (or back up) on the node.
WATCHED = ("/etc/default", "/var/lib/kubelet", "/etc/kubernetes", "/etc/systemd/system")

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
PREPARED_CONFIG = yaml.safe_load((SCENARIO / "files" / "config.yaml").read_text())
PREPARED_CONFIG_TEXT = (SCENARIO / "files" / "config.yaml").read_text()

# What converge.yml asks for, as KubeletConfiguration fields.
OUR_FIELDS = {
    "cgroupDriver": "systemd",
    "seccompDefault": True,
    "cpuManagerPolicy": "static",
    "reservedSystemCPUs": "0",
    "topologyManagerPolicy": "single-numa-node",
    "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
    "featureGates": {"CPUManagerPolicyBetaOptions": True},
    "topologyManagerScope": "pod",
    "containerLogMaxSize": "50Mi",
    "evictionHard": {"memory.available": "500Mi"},
}
# converge.yml's kubelet_flags provider-id: shell syntax that a sourcing shell must not run
PROVIDER_ID = "gce://p/z/node<1>$(touch${IFS}/tmp/pwned)`touch${IFS}/tmp/pwned2`"
PREPARED_TAINT = {"key": "example.com/pool", "value": "batch", "effect": "NoSchedule"}
USER_TAINT = {"key": "example.com/dedicated", "value": "ml", "effect": "NoSchedule"}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
USER_LABELS = {"example.com/gpu-pool": "a100", "example.com/fast-net": "true"}
GPU_LABELS = {"nvidia.com/gpu.present": "true"}


def _vars(host) -> dict:
    return host.ansible.get_variables()


def _is_dropin_node(host) -> bool:
    return tuple(int(p) for p in _vars(host)["standin_kubelet_version"].split(".")[:2]) >= (1, 30)


def _has_gpu(host) -> bool:
    return bool(_vars(host)["standin_simulate_gpu"])


def _yaml(host, path: str):
    return yaml.safe_load(host.file(path).content_string)


def _starts(host) -> list[dict]:
    return [json.loads(line) for line in host.file(STARTS).content_string.splitlines()]


def _prepared_env_text(host) -> str:
    labels = _vars(host)["standin_node_labels"]
    return (
        "# Extra kubelet flags for this node (kubeadm's 10-kubeadm.conf puts them last).\n"
        f'KUBELET_EXTRA_ARGS="--max-pods=200 --node-ip=10.0.0.5 --node-labels={labels} --cgroup-driver=cgroupfs"\n'
        "HTTPS_PROXY=http://proxy.example.com:3128\n"
    )


def _extra_args(text: str) -> list[str]:
    lines = [line for line in text.splitlines() if line.startswith("KUBELET_EXTRA_ARGS=")]
    assert len(lines) == 1, text
    return shlex.split(lines[0].split("=", 1)[1])[0].split()


def _labels(args: list[str]) -> dict:
    values = [arg.split("=", 1)[1] for arg in args if arg.startswith("--node-labels=")]
    assert len(values) == 1, args
    return dict(pair.split("=", 1) for pair in values[0].split(","))


def _prepared_labels(host) -> dict:
    return dict(pair.split("=", 1) for pair in _vars(host)["standin_node_labels"].split(","))


def _expected_taints(host) -> list[dict]:
    return [PREPARED_TAINT, USER_TAINT] + ([GPU_TAINT] if _has_gpu(host) else [])


def _snapshot(host) -> dict:
    """sha256 of every file the role could have written or backed up."""
    out = host.check_output(f"find {' '.join(WATCHED)} -type f -print0 | sort -z | xargs -0 sha256sum")
    return dict(reversed(line.split(None, 1)) for line in out.splitlines())


# --- the configuration ---------------------------------------------------------------------------------------


def test_the_dropin_is_a_full_kubelet_configuration_on_1_31_and_absent_on_1_27(host):
    if not _is_dropin_node(host):
        assert not host.file(DROPIN_DIR).exists, "a 1.27 kubelet got a drop-in directory"
        return
    dropin = host.file(DROPIN)
    assert (dropin.user, dropin.group, dropin.mode) == ("root", "root", 0o644)
    text = dropin.content_string
    assert text.startswith("#"), "the drop-in does not say who manages it"
    config = yaml.safe_load(text)
    assert list(config)[:2] == ["apiVersion", "kind"]
    assert config == {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        **OUR_FIELDS,
        # kubelet 1.31 has UserNamespacesSupport off by default: the role turns it on (user-namespaced FUSE pods)
        "featureGates": {**OUR_FIELDS["featureGates"], "UserNamespacesSupport": True},
        "registerWithTaints": _expected_taints(host),
    }
    assert host.file(DROPIN_DIR).listdir() == ["50-gpu-node.conf"]


def test_the_main_config_is_merged_on_1_27_and_untouched_on_1_31(host):
    text = host.file(MAIN_CONFIG).content_string
    assert [name for name in host.file("/var/lib/kubelet").listdir() if name.startswith("config.yaml.")] == []
    tree = host.file("/var/backups/gpu-node-provisioning/var/lib/kubelet")
    backups = [name for name in tree.listdir() if name.endswith("~")] if tree.exists else []
    assert host.file(MAIN_CONFIG).mode == 0o644
    if _is_dropin_node(host):
        assert text == PREPARED_CONFIG_TEXT
        assert backups == []
        return
    config = yaml.safe_load(text)
    expected = {
        **PREPARED_CONFIG,
        **OUR_FIELDS,
        "evictionHard": {**PREPARED_CONFIG["evictionHard"], **OUR_FIELDS["evictionHard"]},
        "registerWithTaints": _expected_taints(host),
    }
    assert config == expected
    # kubeadm's keys keep their order; ours that were not there are appended
    assert list(config)[: len(PREPARED_CONFIG)] == list(PREPARED_CONFIG)
    assert len(backups) == 1, backups
    assert host.file(f"{tree.path}/{backups[0]}").content_string == PREPARED_CONFIG_TEXT
    # the merge keeps the file's comments (a round-trip YAML library on the controller)
    comments = [line for line in PREPARED_CONFIG_TEXT.splitlines() if line.startswith("#")]
    assert text.splitlines()[: len(comments)] == comments
    assert "clusterDNS:\n- 10.96.0.10\n" in text, "kubeadm's unindented lists stay unindented"


def test_no_alpha_environment_for_1_27_and_1_31(host):
    assert not host.file(ALPHA_ENV_DROPIN).exists


def test_the_stale_cpu_manager_checkpoint_is_gone(host):
    assert not host.file("/var/lib/kubelet/cpu_manager_state").exists


# --- flags and labels ----------------------------------------------------------------------------------------


def test_the_admins_flags_and_lines_are_kept(host):
    text = host.file(ENV_FILE).content_string
    prepared = _prepared_env_text(host).splitlines()
    lines = text.splitlines()
    assert len(lines) == 3, text
    assert lines[0] == prepared[0], "the comment changed"
    assert lines[2] == prepared[2], "the unrelated line changed"
    args = _extra_args(text)
    assert args[2].startswith("--node-labels="), "--node-labels lost its place"
    # kept in place; --cgroup-driver removed (it would override cgroupDriver); ours appended
    expected = ["--max-pods=200", "--node-ip=10.0.0.5", args[2], "--v=2", f"--provider-id={PROVIDER_ID}"]
    if _is_dropin_node(host):
        expected.append(f"--config-dir={DROPIN_DIR}")
    assert args == expected


def test_the_conflicting_cgroup_driver_flag_is_removed(host):
    # --cgroup-driver=cgroupfs would override cgroupDriver: systemd
    assert "--cgroup-driver" not in host.file(ENV_FILE).content_string


def test_node_labels_are_merged_as_a_map(host):
    labels = _labels(_extra_args(host.file(ENV_FILE).content_string))
    prepared = _prepared_labels(host)
    expected = {**prepared, **USER_LABELS}
    if _has_gpu(host):
        expected.update(GPU_LABELS)
    else:
        for key in GPU_LABELS:
            expected.pop(key, None)
    assert labels == expected
    assert next(iter(labels)) == "example.com/rack", "the admin's label lost its place"


def test_the_gpu_label_is_set_on_a_gpu_node_and_removed_elsewhere(host):
    labels = _labels(_extra_args(host.file(ENV_FILE).content_string))
    if _has_gpu(host):
        assert labels["nvidia.com/gpu.present"] == "true"
    else:
        assert "nvidia.com/gpu.present" in _prepared_labels(host)
        assert "nvidia.com/gpu.present" not in labels


def test_the_env_file_backup_holds_the_admins_file_in_the_backup_tree(host):
    assert [name for name in host.file("/etc/default").listdir() if name.startswith("kubelet.")] == []
    tree = "/var/backups/gpu-node-provisioning/etc/default"
    backups = [name for name in host.file(tree).listdir() if name.startswith("kubelet.") and name.endswith("~")]
    assert len(backups) == 1, backups
    assert host.file(f"{tree}/{backups[0]}").content_string == _prepared_env_text(host)
    assert host.file(f"{tree}/{backups[0]}").mode == host.file(ENV_FILE).mode


# --- the stand-in kubelet ------------------------------------------------------------------------------------


def test_the_standin_reports_its_version(host):
    out = host.check_output("kubelet --version")
    assert out == f"Kubernetes v{_vars(host)['standin_kubelet_version']}"


def test_gpu_node_facts_see_the_running_standin(host):
    # the role restarts only a kubelet these facts report as running
    kubelet = host.ansible("gpu_node_facts", check=False)["ansible_facts"]["gpu_node"]["kubelet"]
    assert kubelet["installed"] is True
    assert kubelet["running"] is True
    assert kubelet["binary"] == "/usr/bin/kubelet"
    assert kubelet["version"] == _vars(host)["standin_kubelet_version"]
    assert kubelet["config_dir_supported"] is _is_dropin_node(host)


def test_the_kubelet_was_restarted_once_by_converge_and_not_by_idempotence(host):
    # prepare started it once; starts-after-converge.log holds the count after converge, then after idempotence
    counts = [int(n) for n in host.file(STARTS_AFTER_CONVERGE).content_string.split()]
    assert counts[:2] == [2, 2], counts
    assert len(_starts(host)) == 2


def test_the_first_start_saw_the_prepared_files(host):
    first = _starts(host)[0]
    assert first["refused"] is None
    assert first["config"] == {"path": MAIN_CONFIG, "content": PREPARED_CONFIG_TEXT}
    assert first["env"]["KUBELET_EXTRA_ARGS"].split() == _extra_args(_prepared_env_text(host))
    assert first["dropins"] == {}


def test_the_last_start_saw_our_configuration(host):
    last = _starts(host)[-1]
    assert last["refused"] is None
    text = host.file(ENV_FILE).content_string
    assert last["env"]["KUBELET_EXTRA_ARGS"].split() == _extra_args(text)
    assert last["env"]["KUBELET_CONFIG_DROPIN_DIR_ALPHA"] is None
    # kubeadm's drop-in puts KUBELET_EXTRA_ARGS last on the command line
    assert last["argv"][-len(_extra_args(text)) :] == _extra_args(text)
    assert f"--config={MAIN_CONFIG}" in last["argv"]
    assert last["config"] == {"path": MAIN_CONFIG, "content": host.file(MAIN_CONFIG).content_string}
    if _is_dropin_node(host):
        assert last["config_dir"] == DROPIN_DIR
        assert last["dropins"] == {DROPIN: host.file(DROPIN).content_string}
    else:
        assert last["config_dir"] is None
        assert last["dropins"] == {}


def test_a_shell_that_sources_the_env_file_reads_exactly_the_flags_systemd_gave_the_kubelet(host):
    last = _starts(host)[-1]
    sourced = host.check_output(f"bash -c 'set -a; . {ENV_FILE}; printf \"%s\\n\" $KUBELET_EXTRA_ARGS'").splitlines()
    assert last["argv"][-len(sourced) :] == sourced
    assert f"--provider-id={PROVIDER_ID}" in sourced
    assert not host.file("/tmp/pwned").exists and not host.file("/tmp/pwned2").exists


def test_the_running_kubelet_is_the_last_start_and_healthy(host):
    assert host.service("kubelet").is_running
    main_pid = int(host.check_output("systemctl show kubelet -p MainPID --value"))
    assert main_pid == _starts(host)[-1]["pid"]
    healthz = host.run(
        "python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:10248/healthz').read())\""
    )
    assert healthz.rc == 0, healthz.stderr
    assert healthz.stdout.strip() == "b'ok'"


# --- reruns with other variables -----------------------------------------------------------------------------


NODES = ("kl-debian12", "kl-debian13")


@dataclass
class SharedRun:
    """converge.yml once on both nodes with the same extra variables, and what each node showed before it."""

    run: subprocess.CompletedProcess
    before: dict  # node -> _files_with_mode_and_owner (sha256 of every file the role could write, modes, owners)
    starts: dict  # node -> the stand-in kubelet's starts so far

    def printed_for(self, hostname: str) -> str:
        """What the run printed about one node: its result lines with the lines indented under them, and the lines
        printed just before each (a task's --diff comes before the node's "changed:" line)."""
        said, pending, result_of = [], [], None  # result_of: the node whose result the indented lines continue
        for line in self.run.stdout.splitlines():
            result = re.match(r"^[a-z]+: \[([^\]\s]+)", line)
            if result:
                result_of = result.group(1)
                if result_of == hostname:
                    said += [*pending, line]
                pending = []
            elif result_of is not None and line[:1].isspace():
                if result_of == hostname:
                    said.append(line)
            elif line.startswith(("TASK [", "RUNNING HANDLER [", "PLAY")):
                pending, result_of = [], None
            else:
                pending.append(line)
                result_of = None
        return "\n".join(said)


@pytest.fixture(scope="module")
def shared_run():
    """A bad input, an unknown field or a refused setting is run on both nodes at once (one ansible-playbook run,
    the nodes side by side) by the first node's test; each node's test reads its own results and files."""
    runs = {}

    def run(key: str, extra_vars: dict, *args: str) -> SharedRun:
        if key not in runs:
            nodes = {
                name: testinfra.get_host(f"ansible://{name}", ansible_inventory=os.environ["MOLECULE_INVENTORY_FILE"])
                for name in NODES
            }
            before = {name: _files_with_mode_and_owner(node) for name, node in nodes.items()}
            starts = {name: len(_starts(node)) for name, node in nodes.items()}
            # rerun_node_vars is unused by converge.yml: both nodes get extra_vars
            done = run_playbook_on_nodes(
                SCENARIO / "converge.yml", {name: {} for name in NODES}, "-e", json.dumps(extra_vars), *args
            )
            done.stdout = ANSI_ESCAPE.sub("", done.stdout)
            runs[key] = SharedRun(done, before, starts)
        return runs[key]

    return run


ROLE_CHECK = "kubelet : Check the kubelet variables"
ARG_TYPES = ROLE_CHECK  # the one check (role_variables): the types and choices first, then the values


def _failure(run, hostname: str) -> tuple[str, dict]:
    """The name of the task that failed on hostname and its result, read back from the YAML result format."""
    lines = run.stdout.splitlines()
    marker = f"fatal: [{hostname}]: FAILED! =>"
    start = next((i for i, line in enumerate(lines) if line.startswith(marker)), None)
    assert start is not None, run.stdout + run.stderr
    block = []
    for line in lines[start + 1 :]:
        if line.strip() and not line.startswith("    "):
            break
        block.append(line)
    task = next(line for line in reversed(lines[:start]) if line.startswith(("TASK [", "RUNNING HANDLER [")))
    return task.split("[", 1)[1], yaml.safe_load(textwrap.dedent("\n".join(block)))


# case: (extra vars, the task that refuses them, its message). The role's one
# check lists every problem in msg: a wrong type (a problem starts with the
# message), else the values (msg is the messages). Ansible's own argument
# validation does not run (the spec has no `main` entry point).
BAD_INPUTS = {
    "label-key-syntax": (
        {"kubelet_node_labels": {"example.com/gpu pool": "a100"}},
        ROLE_CHECK,
        "kubelet_node_labels: label key 'example.com/gpu pool': the name part 'gpu pool' has characters or an ending "
        "that are not allowed; the name must be at most 63 characters: letters, digits, '-', '_' and '.', starting "
        "and ending with a letter or digit.",
    ),
    "label-reserved-namespace": (
        {"kubelet_node_labels": {"node-role.kubernetes.io/gpu": ""}},
        ROLE_CHECK,
        "kubelet_node_labels: label key 'node-role.kubernetes.io/gpu' is in the reserved node-role.kubernetes.io "
        "namespace, and the kubelet refuses to start with it in --node-labels (only node.kubernetes.io/..., "
        "kubelet.kubernetes.io/... and the well-known topology, os, arch and instance-type labels are allowed); use "
        "your own prefix (e.g. example.com/role), or set the label through the API (kubectl label node).",
    ),
    "label-value": (
        {"kubelet_node_labels": {"example.com/gpu-pool": "a100/80gb"}},
        ROLE_CHECK,
        "kubelet_node_labels: label value 'a100/80gb' is not valid: it must be empty or at most 63 characters: "
        "letters, digits, '-', '_' and '.', starting and ending with a letter or digit (label 'example.com/gpu-pool').",
    ),
    "taint-effect": (
        {"kubelet_register_with_taints": ["example.com/dedicated=ml:NoScheduled"]},
        ROLE_CHECK,
        "kubelet_register_with_taints: taint 'example.com/dedicated=ml:NoScheduled' has the effect 'NoScheduled': "
        "use one of NoSchedule, PreferNoSchedule, NoExecute.",
    ),
    "taint-without-effect": (
        {"kubelet_gpu_register_with_taints": ["nvidia.com/gpu=present"]},
        ROLE_CHECK,
        "kubelet_gpu_register_with_taints: taint 'nvidia.com/gpu=present' has no effect: write key[=value]:Effect, "
        "e.g. nvidia.com/gpu=present:NoSchedule.",
    ),
    "wrong-type-string-for-bool": (
        # the argument spec would take "yes" as true; role_variables refuses what Jinja would read as a string
        {"kubelet_seccomp_default": "yes"},
        ARG_TYPES,
        "kubelet_seccomp_default must be a boolean (got a string ('yes')); write it unquoted, "
        "e.g. kubelet_seccomp_default: true",
    ),
    "config-dir-with-a-space": (
        # used to pass: the drop-in was written, then kubelet_flags refused --config-dir (half applied)
        {"kubelet_config_dir": "/etc/kubernetes/kubelet conf.d"},
        ROLE_CHECK,
        "kubelet_config_dir: '/etc/kubernetes/kubelet conf.d' contains whitespace, a quote, a backslash or a "
        "control character, which cannot be passed on the kubelet's command line (KUBELET_EXTRA_ARGS is split at "
        "whitespace); use a path without them.",
    ),
    "label-value-ending-in-a-newline": (
        {"kubelet_node_labels": {"example.com/gpu-pool": "a100\n"}},
        ROLE_CHECK,
        "kubelet_node_labels: label value 'a100\\n' is not valid: it must be empty or at most 63 characters: "
        "letters, digits, '-', '_' and '.', starting and ending with a letter or digit (label 'example.com/gpu-pool').",
    ),
    "wrong-type-list-for-dict": (
        {"kubelet_feature_gates": ["CPUManagerPolicyBetaOptions"]},
        ARG_TYPES,
        "kubelet_feature_gates must be a mapping (got a list); write it as YAML key: value pairs",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_a_bad_input_fails_with_its_message_and_changes_nothing(host, case, shared_run):
    extra_vars, refused_by, message = BAD_INPUTS[case]
    hostname = host.backend.get_hostname()
    shared = shared_run(f"bad input {case}", extra_vars)
    run, (before, _modes), starts = shared.run, shared.before[hostname], shared.starts[hostname]
    assert run.returncode != 0, run.stdout
    task, result = _failure(run, hostname)
    assert task.startswith(refused_by), task
    if "must be a" in message:
        assert [problem for problem in result["msg"] if problem.startswith(message)], result["msg"]
    else:
        assert result["msg"] == [message]
    assert _snapshot(host) == before
    assert len(_starts(host)) == starts, "the kubelet was restarted"


@pytest.mark.parametrize("variable", ["kubelet_config", "kubelet_config_passthrough"])
def test_a_field_the_role_does_not_know_is_written_as_given(host, variable, shared_run):
    # no copy of the upstream field list: the kubelet's own decoding judges the name; --check --diff changes nothing
    hostname = host.backend.get_hostname()
    shared = shared_run(f"unknown field in {variable}", {variable: {"maxPodz": 110}}, "--check", "--diff")
    run, (before, _modes), starts = shared.run, shared.before[hostname], shared.starts[hostname]
    assert run.returncode == 0, run.stdout + run.stderr
    assert "+maxPodz: 110" in shared.printed_for(hostname), run.stdout
    assert recap(run.stdout)[hostname]["changed"] == 1, run.stdout
    assert _snapshot(host) == before
    assert len(_starts(host)) == starts, "check mode restarted the kubelet"


def _files_with_mode_and_owner(host) -> tuple[dict, str]:
    """sha256 of every file the role could have written, and each one's mode and owner."""
    listing = host.check_output(f"find {' '.join(WATCHED)} -type f -printf '%p %m %u:%g\\n' | sort")
    return _snapshot(host), listing


def test_a_setting_the_kubelet_refuses_is_rolled_back_and_the_kubelet_runs_its_old_files(host, shared_run):
    """The restart is a transaction: the stand-in refuses a feature gate it does not know (as the kubelet's
    featuregate does); the role restores every file it changed (the configuration and /etc/default/kubelet),
    restarts the kubelet, which runs its old files again, and fails the node with the reason and the journal."""
    extra_vars = {
        "kubelet_feature_gates": {**OUR_FIELDS["featureGates"], "UnknownGpuNodeGate": True},
        "kubelet_node_labels": {**USER_LABELS, "example.com/canary": "yes"},
        "kubelet_healthz_timeout": 15,
    }
    hostname = host.backend.get_hostname()
    shared = shared_run("a refused feature gate", extra_vars)
    run, before, starts = shared.run, shared.before[hostname], shared.starts[hostname]
    assert run.returncode != 0, run.stdout
    task, result = _failure(run, hostname)
    # the shared restart transaction's last task (roles/gpu_node_facts/tasks/restart_transaction.yml), as the kubelet's
    assert task.startswith("kubelet : Fail the node with why it did not come back: the kubelet"), task
    message = result["msg"]
    # the refused kubelet is restarted by systemd every 10 s: a check may catch it running before it exits
    assert re.search(
        r"did not come back within 15s after its settings changed \((the service is |\S+/healthz answered )", message
    )
    changed_config = DROPIN if _is_dropin_node(host) else MAIN_CONFIG
    assert f"restored {changed_config}" in message and f"restored {ENV_FILE}" in message, message
    assert "NOT ALL" not in message and "is running again with its previous settings" in message, message
    assert "unrecognized feature gate: UnknownGpuNodeGate" in message, message
    assert _files_with_mode_and_owner(host) == before
    new_starts = _starts(host)[starts:]
    assert "UnknownGpuNodeGate" in (new_starts[0]["refused"] or ""), new_starts[0]
    assert new_starts[-1]["refused"] is None, new_starts[-1]
    test_the_running_kubelet_is_the_last_start_and_healthy(host)


def test_the_kubelet_user_owns_a_host_id_range_for_user_namespaces_on_1_31(host):
    if not _is_dropin_node(host):
        # kubelet 1.27 has no user namespaces for pods: no gate, no range
        assert "UserNamespacesSupport" not in host.file(MAIN_CONFIG).content_string
        assert host.run("getent passwd kubelet").rc != 0
        return
    assert host.user("kubelet").exists
    for path in ("/etc/subuid", "/etc/subgid"):
        assert "kubelet:1048576:7208960" in host.file(path).content_string.splitlines(), path
    # what the kubelet itself runs to read its range
    answer = host.run("getsubids kubelet")
    assert answer.rc == 0, answer.stderr
    assert answer.stdout.split()[-3:] == ["kubelet", "1048576", "7208960"], answer.stdout


# --- a FUSE pod in a user namespace, through CRI (kl-debian13: containerd 2.0+, runc 1.2+) -----------------

FUSE_IMAGE = "docker.io/gpunode-test/fuse:latest"


def _fuse_pod(host, host_ids):
    """A FUSE pod as the kubelet starts it (CAP_SYS_ADMIN, /dev/fuse from a device plugin); its exit code and
    its output lines. host_ids: the pod's host ID range (hostUsers: false), or None (hostUsers: true)."""
    sys.path.insert(0, str(SCENARIO.parents[1]))
    from tests.cri.client import CriClient, log_streams, node_socket

    command = f"{MOUNT_AND_READ}; grep /mnt/b /proc/mounts; {ESCAPE}; cat /proc/self/uid_map; echo DONE"
    with CriClient(node_socket(host.backend.get_hostname())) as cri:
        code, log = cri.run_to_completion(
            "fuse",
            FUSE_IMAGE,
            ["sh", "-c", command],
            host_ids=host_ids,
            devices=("/dev/fuse",),
            add_capabilities=("SYS_ADMIN",),
        )
    # the container's stdout, read by stream: its stderr (e.g. the shell's "can't create
    # /proc/sys/kernel/threads-max") may come before or after any stdout line
    return code, log_streams(host.file(log).content_string)["stdout"]


def test_a_fuse_pod_with_host_users_false_mounts_and_cannot_touch_kernel_settings_through_cri(host):
    """Issue 13 item 1 through the kubelet's path: containerd 2's CRI plugin puts the pod in a user namespace
    mapped onto the first 65536 IDs of the kubelet's own range (what the kubelet picks from getsubids kubelet);
    bindfs mounts through /dev/fuse, and /proc/sys stays unwritable. The same pod in the node's user namespace
    (hostUsers: true) does write kernel.threads-max (its own value back): the assertions tell the two apart."""
    if not _is_dropin_node(host):
        return
    # what user namespaces for pods need: containerd 2.0+, runc 1.2+ (prepare took them from forky or sid, whichever
    # could serve them: tasks/userns_cri.yml)
    versions = host.check_output("containerd --version; runc --version")
    containerd = re.search(r"containerd \S+ v?([0-9]+)\.([0-9]+)\.", versions)
    runc = re.search(r"runc version ([0-9]+)\.([0-9]+)\.", versions)
    assert containerd and (int(containerd[1]), int(containerd[2])) >= (2, 0), versions
    assert runc and (int(runc[1]), int(runc[2])) >= (1, 2), versions
    first = int(host.check_output("getsubids kubelet").split()[-2])

    code, lines = _fuse_pod(host, (first, 65536))
    assert code == 0, lines
    assert lines[0] == "hello-through-fuse", lines
    assert " fuse " in lines[1], lines
    assert "WROTE-THREADS-MAX" not in lines and "UNMASKED-PROC-SYS" not in lines, lines
    assert [line.split() for line in lines if line.split()[:1] == ["0"]] == [["0", str(first), "65536"]], lines
    assert lines[-1] == "DONE", lines

    # the doctor's FUSE confinement row judges with this function: on this node nothing is missing
    sys.path.insert(0, str(SCENARIO.parents[1] / "collections"))  # the collection, as ansible.cfg resolves it
    from ansible_collections.gpunode.provisioning.plugins.filter.validate import gpu_validate_userns_missing

    facts = host.ansible("gpu_node_facts", check=False)["ansible_facts"]["gpu_node"]
    gates = yaml.safe_load(host.file(DROPIN).content_string)["featureGates"]  # the kubelet role's drop-in
    assert gpu_validate_userns_missing(facts, gates) == [], (facts, gates)

    code, lines = _fuse_pod(host, None)
    assert code == 0, lines
    assert lines[0] == "hello-through-fuse", lines
    assert "WROTE-THREADS-MAX" in lines, lines  # host root with CAP_SYS_ADMIN: a host-wide setting is writable
    assert ["0", "0", "4294967295"] in [line.split() for line in lines], lines
