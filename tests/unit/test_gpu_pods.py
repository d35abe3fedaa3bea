"""Unit tests for module_utils/kubernetes/gpu_pods.py: the device plugin read from a fake /proc tree, the toolkit
config and runtime defaults, the doctor's "device plugin vs node" row and the refusal before any change
(issue 25). The process layouts follow NVIDIA's deployments: the Helm chart runs `nvidia-device-plugin`
with DEVICE_LIST_STRATEGY from deviceListStrategy; the GPU Operator's entrypoint.sh execs it with
DEVICE_LIST_STRATEGY=envvar, or cdi-annotations,cdi-cri with CDI on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ansible_collections.gpunode.provisioning.plugins.module_utils.kubernetes import gpu_pods
from conftest import gather_node_facts, shared_values

SOCKET = "/var/lib/kubelet/device-plugins/nvidia-gpu.sock"
NVIDIA_DEFAULT = {"containerd": {"default": "nvidia", "cdi": False, "cdi_supported": True}}
RUNC_DEFAULT = {"containerd": {"default": "runc", "cdi": False, "cdi_supported": True}}
TOOLKIT_UPSTREAM = gpu_pods.toolkit_config_facts("/", None)  # the toolkit's defaults: envvar true
TOOLKIT_HARDENED = {"accept_envvar_when_unprivileged_effective": False, "accept_volume_mounts_effective": True}


def add_process(root: Path, pid: int, argv: list, env: dict | None = None, comm: str | None = None, fds=()):
    proc = root / "proc" / str(pid)
    proc.mkdir(parents=True)
    (proc / "comm").write_text((comm or os.path.basename(argv[0]))[:15] + "\n")
    (proc / "cmdline").write_bytes(b"\0".join(arg.encode() for arg in argv) + b"\0")
    (proc / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in (env or {}).items()))
    (proc / "fd").mkdir()
    for number, target in enumerate(fds):
        (proc / "fd" / str(number)).symlink_to(target)
    (proc / "root").mkdir()
    return proc


def add_socket(root: Path, name: str = "nvidia-gpu.sock"):
    path = root / "var/lib/kubelet/device-plugins" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")  # a stand-in for the socket: the read only globs the name


@pytest.mark.parametrize(
    ("argv", "env", "expected", "source"),
    [
        (["nvidia-device-plugin"], {}, ["envvar"], "default"),
        (["nvidia-device-plugin"], {"DEVICE_LIST_STRATEGY": "volume-mounts"}, ["volume-mounts"], "env"),
        # the GPU Operator with CDI on (controllers/object_controls.go transformDevicePluginCtrForCDI)
        (
            ["nvidia-device-plugin"],
            {"DEVICE_LIST_STRATEGY": "cdi-annotations,cdi-cri"},
            ["cdi-annotations", "cdi-cri"],
            "env",
        ),
        (
            ["/usr/bin/nvidia-device-plugin", "--device-list-strategy=cdi-cri"],
            {"DEVICE_LIST_STRATEGY": "envvar"},
            ["cdi-cri"],
            "flag",
        ),
        (
            ["nvidia-device-plugin", "--device-list-strategy", "envvar", "--device-list-strategy", "cdi-cri"],
            {},
            ["envvar", "cdi-cri"],
            "flag",
        ),
        (["nvidia-device-plugin", "-device-list-strategy=volume-mounts"], {}, ["volume-mounts"], "flag"),
    ],
)
def test_device_plugin_strategy_from_flags_and_environment(tmp_path, argv, env, expected, source):
    add_process(tmp_path, 4711, argv, env)
    add_socket(tmp_path)
    facts = gpu_pods.device_plugin_facts(str(tmp_path))
    assert facts["running"] and facts["present"]
    assert facts["pids"] == [4711]
    assert facts["strategies"] == expected
    assert facts["source"] == source
    assert facts["sockets"] == [SOCKET]
    assert facts["managed_by"] == "standalone"


def test_device_plugin_found_by_its_truncated_comm_and_under_the_operator(tmp_path):
    # exec'd by the operator's entrypoint.sh through /bin/sh: argv[0] is the name, comm its first 15 characters
    add_process(tmp_path, 80, ["nvidia-device-plugin"], {"DEVICE_LIST_STRATEGY": "envvar"}, comm="nvidia-device-plugin")
    (tmp_path / "run/nvidia/validations").mkdir(parents=True)
    facts = gpu_pods.device_plugin_facts(str(tmp_path))
    assert facts["pids"] == [80]
    assert facts["managed_by"] == "gpu-operator"


def test_device_plugin_strategy_from_its_config_file_through_the_process_root(tmp_path):
    proc = add_process(tmp_path, 90, ["nvidia-device-plugin", "--config-file=/config/config.yaml"])
    (proc / "root/config").mkdir()
    (proc / "root/config/config.yaml").write_text(
        "version: v1\nflags:\n  plugin:\n    deviceListStrategy:\n      - volume-mounts\n      - cdi-cri\n"
    )
    facts = gpu_pods.device_plugin_facts(str(tmp_path))
    assert facts["strategies"] == ["volume-mounts", "cdi-cri"]
    assert facts["source"] == "config-file"


def test_a_socket_without_a_readable_process_is_present_with_an_unknown_strategy(tmp_path):
    add_socket(tmp_path, "nvidia-mig-1g.10gb.sock")
    add_process(tmp_path, 1, ["/sbin/init"])
    facts = gpu_pods.device_plugin_facts(str(tmp_path))
    assert facts == {
        "running": False,
        "present": True,
        "pids": [],
        "strategies": [],
        "source": "unknown",
        "sockets": ["/var/lib/kubelet/device-plugins/nvidia-mig-1g.10gb.sock"],
        "managed_by": "standalone",
    }


def test_no_device_plugin(tmp_path):
    add_process(tmp_path, 1, ["/sbin/init"])
    add_socket(tmp_path, "kubelet.sock")
    facts = gpu_pods.device_plugin_facts(str(tmp_path))
    assert not facts["present"] and facts["source"] is None and facts["managed_by"] is None


# a process of the tree made by add_process: no status file (privileged unknown), PID 1's mount namespace
HOST = {"privileged": None, "container": False, "by_envvar": False}


def test_gpu_workloads_by_environment_or_open_device_not_host_daemons(tmp_path):
    add_process(tmp_path, 1, ["/sbin/init"])
    add_process(tmp_path, 10, ["python3", "train.py"], {"NVIDIA_VISIBLE_DEVICES": "GPU-1234"})
    add_process(tmp_path, 11, ["sleep"], {"NVIDIA_VISIBLE_DEVICES": "void"})
    add_process(tmp_path, 12, ["bash"], {"NVIDIA_VISIBLE_DEVICES": "none"})
    add_process(tmp_path, 13, ["cuda-app"], fds=["/dev/nvidiactl", "/dev/nvidia3", "/dev/null"])
    add_process(tmp_path, 14, ["nvidia-persistenced"], fds=["/dev/nvidia0"])
    add_process(tmp_path, 15, ["nvidia-device-plugin"], {"NVIDIA_VISIBLE_DEVICES": "all"})
    found = gpu_pods.gpu_processes(str(tmp_path), exclude=[15])
    assert found == [
        {"pid": 10, "comm": "python3", "visible_devices": "GPU-1234", "open_devices": [], **HOST},
        {"pid": 13, "comm": "cuda-app", "visible_devices": "", "open_devices": ["/dev/nvidia3"], **HOST},
    ]


def test_toolkit_config_keys_as_set_and_as_they_act(tmp_path):
    path = tmp_path / "etc/nvidia-container-runtime/config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(
        "#accept-nvidia-visible-devices-envvar-when-unprivileged = false\n"
        "accept-nvidia-visible-devices-as-volume-mounts = true\n\n"
        "[nvidia-container-cli]\naccept-nvidia-visible-devices-envvar-when-unprivileged = false\n"
    )
    facts = gpu_pods.toolkit_config_facts(str(tmp_path), shared_values()["__gpu_node_facts_toolkit_config"])
    assert facts["exists"]
    assert facts["accept_envvar_when_unprivileged"] is None  # commented, and the one below a table is not top level
    assert facts["accept_envvar_when_unprivileged_effective"] is True
    assert facts["accept_volume_mounts"] is True and facts["accept_volume_mounts_effective"] is True
    assert TOOLKIT_UPSTREAM["exists"] is False
    assert TOOLKIT_UPSTREAM["accept_envvar_when_unprivileged_effective"] is True
    assert TOOLKIT_UPSTREAM["accept_volume_mounts_effective"] is False


@pytest.mark.parametrize(
    ("text", "prefixes"),
    [
        ('[nvidia-container-runtime.modes.cdi]\nannotation-prefixes = []\ndefault-kind = "nvidia.com/gpu"\n', []),
        # the package's config (nvidia-ctk config default) and a list over lines, single-quoted
        ('[nvidia-container-runtime.modes.cdi]\nannotation-prefixes = ["cdi.k8s.io/"]\n', ["cdi.k8s.io/"]),
        ("[nvidia-container-runtime.modes.cdi]  # x\nannotation-prefixes = [\n  'a/',\n  \"b/\",\n]\n", ["a/", "b/"]),
        # unset: the key absent, commented, in another table, or no such table
        ("[nvidia-container-runtime.modes.cdi]\n#annotation-prefixes = []\n", None),
        (
            "[nvidia-container-runtime.modes.cdi]\n[nvidia-container-runtime.modes.csv]\nannotation-prefixes = []\n",
            None,
        ),
        ("annotation-prefixes = []\n", None),
    ],
)
def test_toolkit_config_cdi_annotation_prefixes_as_set_and_as_they_act(tmp_path, text, prefixes):
    path = tmp_path / "etc/nvidia-container-runtime/config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    facts = gpu_pods.toolkit_config_facts(str(tmp_path), shared_values()["__gpu_node_facts_toolkit_config"])
    assert facts["cdi_annotation_prefixes"] == prefixes
    assert facts["cdi_annotation_prefixes_effective"] == (["cdi.k8s.io/"] if prefixes is None else prefixes)
    assert TOOLKIT_UPSTREAM["cdi_annotation_prefixes_effective"] == ["cdi.k8s.io/"]


def test_runtime_states():
    cns = (Path(__file__).parents[1] / "fixtures/gpu_pods/cns-containerd-config.toml").read_text()
    nvidia_bin = {"default_binary": "/usr/bin/nvidia-container-runtime", "default_nvidia": True}
    runc = {"default_binary": None, "default_nvidia": False}
    cns_entries = {"nvidia_entries": {"nvidia": "/usr/bin/nvidia-container-runtime"}}
    assert gpu_pods.containerd_runtime_state([cns], "1.7.24") == {
        "default": "nvidia",
        "cdi": False,
        **nvidia_bin,
        **cns_entries,
    }
    dropin = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\nenable_cdi = true\n'
    assert gpu_pods.containerd_runtime_state([cns, dropin], "1.7.24")["cdi"] is True
    # issue 51: a key outside the CRI table is not the CRI plugin's (the regexes before took it)
    assert gpu_pods.containerd_runtime_state([cns, "enable_cdi = true\n"], "1.7.24")["cdi"] is False
    runc["nvidia_entries"] = {}
    assert gpu_pods.containerd_runtime_state([None], "2.1.4") == {"default": "runc", "cdi": True, **runc}
    # named nvidia, binary not in the file: the project's own name still counts
    assert gpu_pods.docker_runtime_state('{"default-runtime": "nvidia"}') == {
        "default": "nvidia",
        "cdi": False,
        "default_binary": None,
        "default_nvidia": True,
        "nvidia_entries": {},
    }
    assert gpu_pods.docker_runtime_state("not json") == {"default": "runc", "cdi": False, **runc}
    assert gpu_pods.crio_runtime_state(
        ['[crio.runtime]\ndefault_runtime = "crun"\n', '[crio.runtime]\ndefault_runtime = "nvidia"\n']
    ) == {"default": "nvidia", "cdi": True, "default_binary": None, "default_nvidia": True, "nvidia_entries": {}}
    # issue 51: outside [crio.runtime] it is no setting of CRI-O's (the regexes before took the last one anywhere)
    assert (
        gpu_pods.crio_runtime_state(['[crio.runtime]\ndefault_runtime = "crun"\n', 'default_runtime = "nvidia"\n'])[
            "default"
        ]
        == "crun"
    )


PLUGIN_ENVVAR = {
    "running": True,
    "present": True,
    "pids": [7],
    "strategies": ["envvar"],
    "source": "env",
    "sockets": [SOCKET],
    "managed_by": "standalone",
}
PLUGIN_CDI = dict(PLUGIN_ENVVAR, strategies=["cdi-cri"])
PLUGIN_VOLUMES = dict(PLUGIN_ENVVAR, strategies=["volume-mounts"])


@pytest.mark.parametrize(
    ("plugin", "runtimes", "toolkit", "status"),
    [
        ({"present": False}, NVIDIA_DEFAULT, TOOLKIT_UPSTREAM, "skipped"),
        # today's Cloud Native Stack node: works, but every CUDA image sees GPUs
        (PLUGIN_ENVVAR, NVIDIA_DEFAULT, TOOLKIT_UPSTREAM, "warn"),
        # mutations: the node changed under an envvar plugin
        (PLUGIN_ENVVAR, RUNC_DEFAULT, TOOLKIT_UPSTREAM, "fail"),
        (PLUGIN_ENVVAR, NVIDIA_DEFAULT, TOOLKIT_HARDENED, "fail"),
        (PLUGIN_VOLUMES, NVIDIA_DEFAULT, TOOLKIT_UPSTREAM, "fail"),  # volume mounts not accepted
        (PLUGIN_VOLUMES, NVIDIA_DEFAULT, TOOLKIT_HARDENED, "ok"),
        (PLUGIN_CDI, RUNC_DEFAULT, TOOLKIT_HARDENED, "fail"),  # containerd 1.7 without enable_cdi
        (PLUGIN_CDI, {"containerd": {"default": "runc", "cdi": True}}, TOOLKIT_HARDENED, "ok"),
        (PLUGIN_CDI, {"containerd": {"default": "nvidia", "cdi": True}}, TOOLKIT_UPSTREAM, "warn"),
        (dict(PLUGIN_ENVVAR, running=False, strategies=[], source="unknown"), NVIDIA_DEFAULT, TOOLKIT_HARDENED, "fail"),
    ],
)
def test_doctor_row(plugin, runtimes, toolkit, status):
    row = gpu_pods.doctor_row(plugin, runtimes, toolkit, gpu_pods=2 if status != "skipped" else 0)
    assert row["check"] == "device plugin vs node"
    assert row["status"] == status, row
    if status == "fail":
        assert row["detail"].startswith("GPU pods would get no GPU")
        assert "cdi-cri" in row["fix"]
    if status == "warn":
        assert row["detail"].startswith("pods without a GPU request can see GPUs")


def _refusal(plugin, current, set_as_default=False, enable_cdi=True, toolkit_planned=TOOLKIT_HARDENED):
    planned = gpu_pods.planned_runtimes(current, list(current), set_as_default, enable_cdi)
    work = [{"pid": 10, "comm": "python3", "visible_devices": "GPU-1", "open_devices": []}]
    return gpu_pods.refusal("gp-node", plugin, current, planned, TOOLKIT_UPSTREAM, toolkit_planned, work)


def test_refusal_names_the_node_what_runs_and_both_ways_forward():
    message = _refusal(PLUGIN_ENVVAR, NVIDIA_DEFAULT)
    assert message.startswith("Refusing to change gp-node: it runs NVIDIA's device plugin (standalone, pid 7)")
    assert "containerd's default runtime nvidia -> runc" in message
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged true -> false" in message
    assert "python3 (pid 10)" in message
    assert "deviceListStrategy=cdi-cri" in message and "spec.cdi.enabled: true" in message
    assert "nvidia_container_toolkit_keep_gpu_pod_access: true" in message


@pytest.mark.parametrize(
    ("plugin", "current", "kwargs", "refused"),
    [
        (PLUGIN_ENVVAR, NVIDIA_DEFAULT, {}, True),
        # only the envvar hardening, nvidia kept as the default: still refused
        (PLUGIN_ENVVAR, NVIDIA_DEFAULT, {"set_as_default": True}, True),
        # only the default moves, the toolkit keeps honouring the variable: refused (runc ignores it)
        (PLUGIN_ENVVAR, NVIDIA_DEFAULT, {"toolkit_planned": TOOLKIT_UPSTREAM}, True),
        # keeping today's semantics: nothing taken away
        (PLUGIN_ENVVAR, NVIDIA_DEFAULT, {"set_as_default": True, "toolkit_planned": TOOLKIT_UPSTREAM}, False),
        # the plugin moved to CDI first: the run turns CDI on, GPU pods keep their GPUs
        (PLUGIN_CDI, NVIDIA_DEFAULT, {}, False),
        # cdi-cri on containerd 1.7 without CDI: no GPU today, nothing to take away
        (PLUGIN_CDI, NVIDIA_DEFAULT, {"enable_cdi": False}, False),
        # volume-mounts while the toolkit refuses volume mounts (its default): GPU pods get none today already
        (PLUGIN_VOLUMES, NVIDIA_DEFAULT, {}, False),
        # envvar already broken today (runc default): nothing to take away
        (PLUGIN_ENVVAR, RUNC_DEFAULT, {}, False),
        ({"present": False}, NVIDIA_DEFAULT, {}, False),
        # a socket whose process cannot be read counts as envvar, the upstream default
        (dict(PLUGIN_ENVVAR, running=False, strategies=[], source="unknown"), NVIDIA_DEFAULT, {}, True),
    ],
)
def test_refusal_cases(plugin, current, kwargs, refused):
    assert bool(_refusal(plugin, current, **kwargs)) is refused


def test_closing_cdi_annotations_is_refused_where_nvidia_as_the_default_delivers_them():
    """cdi-annotations on a runtime without CDI of its own (containerd 1.6) reach GPU pods only through NVIDIA's
    runtime as the default, which reads them with its annotation prefixes: [] would take the GPUs away."""
    plugin = dict(PLUGIN_ENVVAR, strategies=["cdi-annotations"])
    current = {"containerd": {"default": "nvidia", "cdi": False, "cdi_supported": False}}
    closed = gpu_pods.toolkit_planned(
        TOOLKIT_UPSTREAM, {"nvidia-container-runtime": {"modes": {"cdi": {"annotation-prefixes": []}}}}
    )
    assert closed["cdi_annotation_prefixes_effective"] == []
    kept = gpu_pods.toolkit_planned(TOOLKIT_UPSTREAM, {"accept-nvidia-visible-devices-as-volume-mounts": False})
    assert kept["cdi_annotation_prefixes_effective"] == ["cdi.k8s.io/"]
    message = _refusal(plugin, current, set_as_default=True, enable_cdi=False, toolkit_planned=closed)
    assert "nvidia-container-runtime.modes.cdi.annotation-prefixes ['cdi.k8s.io/'] -> []" in message, message
    assert not _refusal(plugin, current, set_as_default=True, enable_cdi=False, toolkit_planned=kept)
    # with the runtime's own CDI the prefixes do not matter
    assert not _refusal(plugin, dict(current, containerd=dict(current["containerd"], cdi=True)), toolkit_planned=closed)


def test_docker_default_nvidia_with_envvar_is_refused_and_other_runtimes_do_not_count():
    current = {"docker": {"default": "nvidia", "cdi": False}, "containerd": {"default": "runc", "cdi": True}}
    message = _refusal(PLUGIN_ENVVAR, current)
    assert "docker's default runtime nvidia -> runc" in message
    assert "containerd's default" not in message


def test_facts_module_reports_what_gpu_pods_rely_on(tmp_path):
    add_process(tmp_path, 1, ["/sbin/init"])
    add_process(
        tmp_path, 4711, ["nvidia-device-plugin"], {"DEVICE_LIST_STRATEGY": "envvar", "NVIDIA_VISIBLE_DEVICES": "all"}
    )
    add_process(tmp_path, 5000, ["python3"], {"NVIDIA_VISIBLE_DEVICES": "GPU-1"})
    add_socket(tmp_path)
    for binary in ("usr/bin/containerd", "usr/bin/dockerd"):
        (tmp_path / binary).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / binary).write_text("#!/bin/sh\n")
        (tmp_path / binary).chmod(0o755)
    (tmp_path / "etc/containerd").mkdir(parents=True)
    (tmp_path / "etc/containerd/config.toml").write_text(
        'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "runc"\n'
    )
    (tmp_path / "etc/containerd/conf.d").mkdir()
    (tmp_path / "etc/containerd/conf.d/99-nvidia.toml").write_text(
        '[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "nvidia"\n'
    )
    (tmp_path / "etc/docker").mkdir(parents=True)
    (tmp_path / "etc/docker/daemon.json").write_text('{"default-runtime": "nvidia", "runtimes": {}}')
    facts = gather_node_facts(str(tmp_path))
    assert facts["device_plugin"]["strategies"] == ["envvar"]
    assert [w["pid"] for w in facts["gpu_workloads"]] == [5000]
    assert facts["runtime_defaults"]["containerd"] == {
        "default": "nvidia",
        "cdi": False,
        "default_binary": None,
        "default_nvidia": True,
        "nvidia_entries": {},
        "cdi_supported": True,
        "source": "files",
    }
    assert facts["runtime_defaults"]["docker"] == {
        "default": "nvidia",
        "cdi": False,
        "default_binary": None,
        "default_nvidia": True,
        "nvidia_entries": {},
    }
    assert "crio" not in facts["runtime_defaults"]
    assert facts["toolkit_config"]["exists"] is False


def test_device_plugin_found_by_comm_alone_when_an_interpreter_runs_it(tmp_path):
    # a script (the scenario's stand-in): argv[0] is the interpreter, comm the script's name cut to 15 characters
    add_process(tmp_path, 81, ["/usr/bin/python3", "/usr/local/bin/nvidia-device-plugin"], comm="nvidia-device-plugin")
    add_process(tmp_path, 82, ["/usr/bin/python3", "/srv/other.py"], {"DEVICE_LIST_STRATEGY": "envvar"})
    facts = gpu_pods.device_plugin_facts(str(tmp_path))
    assert facts["pids"] == [81]
    assert facts["strategies"] == ["envvar"] and facts["source"] == "default"


def test_the_guard_reads_the_installers_containerd_on_rke2_and_k3s():
    """On RKE2/k3s runtime_config configures the installer's containerd although it is not among the installed
    runtimes (targets are empty there): the guard plans that containerd too (issue 26 review)."""
    facts = {
        "device_plugin": PLUGIN_ENVVAR,
        "runtime_defaults": NVIDIA_DEFAULT,
        "toolkit_config": TOOLKIT_UPSTREAM,
        "installer": {"name": "k3s", "containerd": {"config_regenerated": "agent start"}},
    }
    message = gpu_pods.refusal_for_run(facts, "gpu1", [], False, True, {})
    assert message.startswith("Refusing to change gpu1") and "containerd's default runtime nvidia -> runc" in message
    # nvidia stays the default through the agent option: nothing is taken away
    assert gpu_pods.refusal_for_run(facts, "gpu1", [], True, True, {}) == ""
    # a plugin on cdi-cri gets nothing through containerd today (CDI off): nothing to lose
    cdi_plugin = dict(facts, device_plugin=dict(PLUGIN_ENVVAR, strategies=["cdi-cri"]))
    assert gpu_pods.refusal_for_run(cdi_plugin, "gpu1", [], False, True, {}) == ""
    # a kubeadm node with the same facts and no runtime configured: nothing changes, nothing to refuse
    kubeadm = dict(facts, installer={"name": "kubeadm", "containerd": {"config_regenerated": None}})
    assert gpu_pods.refusal_for_run(kubeadm, "gpu1", [], False, True, {}) == ""


def test_mig_refusal_names_the_processes_holding_gpus_and_the_way_forward():
    work = [{"pid": 10 + n, "comm": f"app{n}", "visible_devices": "GPU-1", "open_devices": []} for n in range(7)]
    message = gpu_pods.mig_refusal({"gpu_workloads": work}, "gpu-07", "inference")
    assert message.startswith("gpu-07: MIG layout inference is not in place and 7 process(es) hold GPUs: app0 (pid 10)")
    assert "app4 (pid 14) and 2 more." in message
    assert "kubectl drain gpu-07" in message and "Nothing on the node was changed." in message
    assert gpu_pods.mig_refusal({"gpu_workloads": []}, "gpu-07", "inference") == ""
    assert gpu_pods.mig_refusal({}, "gpu-07", "inference") == ""
