"""Every NVIDIA runtime entry is held to the isolation of the config its runtime really reads (issue 46).

The GPU Operator registers nvidia, nvidia-cdi and nvidia-legacy with binaries under /usr/local/nvidia/toolkit that are
shell wrappers running `<name>.real` with NVIDIA_CTK_CONFIG_FILE_PATH set to the Operator's own config
(NVIDIA/nvidia-container-toolkit v1.20.0 cmd/nvidia-ctk-installer/toolkit/installer/executables.go). The wrappers here
are rendered as that file's template renders them (installer_wrapper below); molecule/gpu_pods runs them with NVIDIA's
real runtime as the .real binaries.

One definition (plugins/module_utils/nvidia/runtime.py config_read_by) serves the facts (nvidia_runtimes), the merge
targets of the toolkit role, the refusals before any change and the doctor's door rows."""

from __future__ import annotations

import os
from pathlib import Path

import jinja2
import pytest
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import config as ct
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import doors as gpu_validate_doors
from ansible_collections.gpunode.provisioning.plugins.module_utils.kubernetes import gpu_pods
from ansible_collections.gpunode.provisioning.plugins.module_utils.nvidia import runtime as nvidia_runtime
from conftest import FakeNode, load_module, params

TOOLKIT = "/usr/local/nvidia/toolkit"
OPERATOR_CONFIG = f"{TOOLKIT}/.config/nvidia-container-runtime/config.toml"
OWN = "/etc/nvidia-container-runtime/config.toml"
ENVVAR = gpu_pods.ENVVAR_KEY
MOUNTS = gpu_pods.VOLUME_MOUNTS_KEY
# what the Operator's installer writes (cmd/nvidia-ctk-installer/toolkit/toolkit.go, Install): the envvar accepted
OPERATOR_TEXT = (
    f"{ENVVAR} = true\n{MOUNTS} = false\n\n"
    f'[nvidia-container-cli]\nroot = "/"\npath = "{TOOLKIT}/nvidia-container-cli"\n'
    f'\n[nvidia-container-runtime]\nmode = "cdi"\n'
)
HARDENED_TEXT = OPERATOR_TEXT.replace(f"{ENVVAR} = true", f"{ENVVAR} = false")
ELF = b"\x7fELF\x02\x01\x01" + b"\0" * 64
SETTINGS = {
    ENVVAR: False,
    MOUNTS: False,
    "nvidia-container-runtime": {"modes": {"cdi": {"annotation-prefixes": []}}, "log-level": "info"},
}
gpu_pods_filters = load_module("gpu_pods", subdir="plugins/filter").FilterModule().filters()


WRAPPER_TEMPLATE = Path(__file__).resolve().parents[1] / "fixtures/gpu_pods/gpu-operator-wrapper.sh.j2"


def installer_wrapper(name: str, check_modules: bool = True, dest: str = TOOLKIT) -> str:
    """The wrapper of `name` as the installer writes it (the fixture template, rendered as Ansible's template module
    renders it: trim_blocks), which molecule/gpu_pods puts on its GPU Operator node too."""
    environment = jinja2.Environment(trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    template = environment.from_string(WRAPPER_TEMPLATE.read_text())
    return template.render(toolkit_dir=dest, executable=name, check_modules=check_modules)


def test_the_wrapper_fixture_is_the_installers_shape():
    """executables.go's template: `#! /bin/sh`, the module check that runs runc without the driver, each variable on a
    line of its own ending in a backslash, the .real executable with "$@"."""
    lines = installer_wrapper("nvidia-container-runtime.cdi").splitlines()
    assert lines[0] == "#! /bin/sh" and lines[1].startswith("cat /proc/modules | grep")
    assert lines[-4:] == [
        f"NVIDIA_CTK_CONFIG_FILE_PATH={OPERATOR_CONFIG} \\",
        f"PATH={TOOLKIT}:$PATH \\",
        f"\t{TOOLKIT}/nvidia-container-runtime.cdi.real \\",
        '\t\t"$@"',
    ]
    assert installer_wrapper("nvidia-container-runtime-hook", check_modules=False).splitlines()[1].startswith("NVIDIA")


def reader(files: dict):
    return lambda path: files[path].encode() if isinstance(files.get(path), str) else files.get(path)


@pytest.mark.parametrize("mode", ["", ".cdi", ".legacy"])
def test_an_installer_wrapper_reads_the_config_it_names(mode):
    binary = f"{TOOLKIT}/nvidia-container-runtime{mode}"
    found = nvidia_runtime.config_read_by(
        binary, reader({binary: installer_wrapper(f"nvidia-container-runtime{mode}")})
    )
    assert found == {
        "binary": binary,
        "path": binary,
        "wrapper": True,
        "exec": f"{binary}.real",
        "config": OPERATOR_CONFIG,
        "via": f"wrapper {binary} sets NVIDIA_CTK_CONFIG_FILE_PATH",
        "problem": "",
    }


def test_the_lookup_order_is_nvidias():
    """api/config/v1/config.go GetConfigFilePath: the file override, else XDG_CONFIG_HOME, else /etc."""
    assert nvidia_runtime.config_file_path({}) == OWN
    assert (
        nvidia_runtime.config_file_path({"XDG_CONFIG_HOME": "/opt/x"}) == "/opt/x/nvidia-container-runtime/config.toml"
    )
    both = {"XDG_CONFIG_HOME": "/opt/x", "NVIDIA_CTK_CONFIG_FILE_PATH": "/srv/c.toml"}
    assert nvidia_runtime.config_file_path(both) == "/srv/c.toml"


@pytest.mark.parametrize(
    ("files", "binary", "config", "problem"),
    [
        # NVIDIA's runtime itself: no override, /etc
        ({"/usr/bin/nvidia-container-runtime": ELF}, "/usr/bin/nvidia-container-runtime", OWN, ""),
        # a name without a directory: looked up like a service's PATH
        ({"/usr/bin/nvidia-container-runtime": ELF}, "nvidia-container-runtime", OWN, ""),
        # a hand-made wrapper with XDG_CONFIG_HOME exported
        (
            {
                "/opt/bin/nvidia-container-runtime": "#!/bin/sh\nexport XDG_CONFIG_HOME=/opt/conf\n"
                'exec /usr/bin/nvidia-container-runtime "$@"\n'
            },
            "/opt/bin/nvidia-container-runtime",
            "/opt/conf/nvidia-container-runtime/config.toml",
            "",
        ),
        # a wrapper that sets nothing: the runtime's own lookup
        (
            {"/opt/w/nvidia-container-runtime": '#!/bin/sh\nexec /usr/bin/nvidia-container-runtime "$@"\n'},
            "/opt/w/nvidia-container-runtime",
            OWN,
            "",
        ),
        # a path computed at run time cannot be told
        (
            {
                "/opt/w/nvidia-container-runtime": "#!/bin/sh\n"
                'NVIDIA_CTK_CONFIG_FILE_PATH=$HOME/c.toml /x/nvidia-container-runtime.real "$@"\n'
            },
            "/opt/w/nvidia-container-runtime",
            None,
            "computes NVIDIA_CTK_CONFIG_FILE_PATH at run time",
        ),
        # a script that runs no NVIDIA runtime this definition can follow
        (
            {"/opt/w/nvidia-container-runtime": '#!/bin/sh\nexec "$REAL" "$@"\n'},
            "/opt/w/nvidia-container-runtime",
            None,
            "runs no NVIDIA runtime",
        ),
    ],
)
def test_config_read_by_follows_the_binary(files, binary, config, problem):
    found = nvidia_runtime.config_read_by(binary, reader(files))
    assert found["config"] == config
    assert (problem in found["problem"]) if problem else found["problem"] == ""


def test_a_missing_binary_reads_no_config():
    found = nvidia_runtime.config_read_by(f"{TOOLKIT}/nvidia-container-runtime.cdi", reader({}))
    assert found["path"] is None and found["config"] is None and found["via"] == "binary not found"


def operator_tree(tmp_path, config_text: str | None = OPERATOR_TEXT) -> str:
    """The GPU Operator's toolkit directory under tmp_path; its config left out when config_text is None."""
    toolkit = tmp_path / TOOLKIT.lstrip("/")
    toolkit.mkdir(parents=True)
    for mode in ("", ".cdi", ".legacy"):
        name = f"nvidia-container-runtime{mode}"
        (toolkit / name).write_text(installer_wrapper(name))
        (toolkit / f"{name}.real").write_bytes(ELF)
    if config_text is not None:
        (tmp_path / OPERATOR_CONFIG.lstrip("/")).parent.mkdir(parents=True)
        (tmp_path / OPERATOR_CONFIG.lstrip("/")).write_text(config_text)
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/bin/nvidia-container-runtime").write_bytes(ELF)
    return str(tmp_path)


OPERATOR_ENTRIES = {
    "nvidia": f"{TOOLKIT}/nvidia-container-runtime",
    "nvidia-cdi": f"{TOOLKIT}/nvidia-container-runtime.cdi",
    "nvidia-legacy": f"{TOOLKIT}/nvidia-container-runtime.legacy",
}


def operator_facts(root: str, plugin=None, workloads=()) -> dict:
    defaults = {"containerd": {"default": "runc", "nvidia_entries": dict(OPERATOR_ENTRIES)}}
    return {
        "runtime_defaults": defaults,
        "nvidia_runtimes": gpu_pods.nvidia_runtime_facts(root, defaults, OWN),
        "toolkit_config": gpu_pods.toolkit_config_facts(root, OWN),
        "device_plugin": plugin or {"present": False},
        "gpu_workloads": list(workloads),
    }


def test_the_facts_name_each_entry_with_the_config_it_reads(tmp_path):
    root = operator_tree(tmp_path)
    entries = gpu_pods.nvidia_runtime_facts(
        root, {"containerd": {"nvidia_entries": OPERATOR_ENTRIES}, "docker": {"nvidia_entries": {"nvidia": None}}}, OWN
    )
    by_name = {(e["runtime"], e["name"]): e for e in entries}
    for name in OPERATOR_ENTRIES:
        entry = by_name[("containerd", name)]
        assert entry["config"] == OPERATOR_CONFIG and entry["wrapper"] and not entry["own"]
        assert entry["toolkit"]["accept_envvar_when_unprivileged_effective"] is True
    # docker's nvidia without a path: no binary, no config, nothing to judge
    assert by_name[("docker", "nvidia")]["config"] is None


CDI_CRI = {
    "present": True,
    "running": True,
    "pids": [7],
    "strategies": ["cdi-cri"],
    "source": "env",
    "sockets": [],
    "managed_by": "gpu-operator",
}
ENVVAR_PLUGIN = {**CDI_CRI, "strategies": ["envvar"]}


def test_the_operators_config_gets_the_isolation_keys_and_only_those(tmp_path):
    facts = operator_facts(operator_tree(tmp_path))
    targets = gpu_pods_filters["gpu_pods_config_targets"](facts, OWN, SETTINGS)
    assert [t["path"] for t in targets] == [OWN, OPERATOR_CONFIG]
    assert targets[1]["settings"] == {
        ENVVAR: False,
        MOUNTS: False,
        "nvidia-container-runtime": {"modes": {"cdi": {"annotation-prefixes": []}}},
    }
    assert "containerd nvidia-cdi" in targets[1]["label"]
    assert "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED" in targets[1]["label"]
    # nvidia_container_toolkit_keep_gpu_pod_access: the Operator's config stays as it is
    assert [t["path"] for t in gpu_pods.config_targets(facts, OWN, SETTINGS, keep=True)] == [OWN]


def refusal(facts, keep=False):
    return gpu_pods_filters["gpu_pods_refusal"](
        facts,
        "gpu7",
        ["containerd"],
        False,
        True,
        SETTINGS,
        "nvidia",
        "nvidia_container_toolkit_keep_gpu_pod_access",
        OWN,
        keep,
    )


def test_no_refusal_when_nothing_gets_gpus_by_the_envvar(tmp_path):
    assert refusal(operator_facts(operator_tree(tmp_path), CDI_CRI)) == ""


def test_a_device_plugin_on_envvar_is_refused_first_naming_the_entries_and_the_config(tmp_path):
    message = refusal(operator_facts(operator_tree(tmp_path), ENVVAR_PLUGIN))
    assert message.startswith("Refusing to change gpu7: this run would set")
    assert f"{ENVVAR} true -> false in {OPERATOR_CONFIG}, read by containerd nvidia (" in message
    assert "device-list-strategy envvar" in message and "deviceListStrategy=cdi-cri" in message
    assert "nvidia_container_toolkit_keep_gpu_pod_access: true" in message
    assert refusal(operator_facts(operator_tree(tmp_path / "k"), ENVVAR_PLUGIN), keep=True) == ""


def test_a_workload_that_has_gpus_by_the_envvar_is_refused_first(tmp_path):
    workload = {
        "pid": 4242,
        "comm": "python3",
        "visible_devices": "all",
        "open_devices": [],
        "privileged": False,
        "container": True,
        "by_envvar": True,
    }
    message = refusal(operator_facts(operator_tree(tmp_path), CDI_CRI, [workload]))
    assert "python3 (pid 4242, NVIDIA_VISIBLE_DEVICES=all)" in message
    # a privileged one keeps its GPUs whatever the config says: nothing to refuse
    privileged = {**workload, "privileged": True, "by_envvar": False}
    assert refusal(operator_facts(operator_tree(tmp_path / "p"), CDI_CRI, [privileged])) == ""


def test_an_entry_whose_config_is_not_there_is_refused(tmp_path):
    message = refusal(operator_facts(operator_tree(tmp_path, config_text=None), CDI_CRI))
    assert f"Refusing to change gpu7: NVIDIA's runtime is registered as containerd nvidia ({TOOLKIT}/" in message
    assert f"containerd nvidia-cdi ({TOOLKIT}/nvidia-container-runtime.cdi)" in message
    assert f"its runtime reads {OPERATOR_CONFIG}" in message and "which does not exist" in message
    assert "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED" in message


def test_runtime_configs_own_guard_leaves_the_entries_to_the_toolkit(tmp_path):
    facts = operator_facts(operator_tree(tmp_path, config_text=None), ENVVAR_PLUGIN)
    assert gpu_pods_filters["gpu_pods_refusal"](facts, "gpu7", ["containerd"], False, True, {}) == ""


def add_container_process(proc, pid, env, cap_bnd, devices=(), own_ns=True):
    base = proc / str(pid)
    (base / "ns").mkdir(parents=True)
    (base / "fd").mkdir()
    (base / "root/dev").mkdir(parents=True)
    (base / "comm").write_text("python3\n")
    (base / "cmdline").write_bytes(b"python3\0")
    (base / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()))
    (base / "status").write_text(f"Name:\tpython3\nCapBnd:\t{cap_bnd}\n")
    os.symlink("mnt:[4026532000]" if own_ns else "mnt:[4026531841]", base / "ns/mnt")
    for device in devices:
        (base / "root/dev" / device).write_text("")


@pytest.mark.parametrize(
    ("cap_bnd", "devices", "own_ns", "by_envvar"),
    [
        ("00000000a80425fb", ["nvidia0"], True, True),  # docker's default set: no CAP_SYS_ADMIN
        ("000001ffffffffff", ["nvidia0"], True, False),  # CAP_SYS_ADMIN: privileged, keeps its GPUs
        ("00000000a80425fb", [], True, False),  # the variable but no device: it got none
        ("00000000a80425fb", ["nvidia0"], False, False),  # a host process, no container
    ],
)
def test_which_workloads_have_gpus_by_the_envvar(tmp_path, cap_bnd, devices, own_ns, by_envvar):
    proc = tmp_path / "proc"
    (proc / "1/ns").mkdir(parents=True)
    os.symlink("mnt:[4026531841]", proc / "1/ns/mnt")
    (proc / "1/comm").write_text("systemd\n")
    add_container_process(proc, 30, {"NVIDIA_VISIBLE_DEVICES": "all"}, cap_bnd, devices, own_ns)
    [found] = gpu_pods.gpu_processes(str(tmp_path))
    assert found["by_envvar"] is by_envvar
    assert found["privileged"] is (cap_bnd == "000001ffffffffff")


# ------------------------------------------------------------------------------------------------- the doctor


def doctor_files(config_text: str | None) -> dict:
    files = {f"{TOOLKIT}/nvidia-container-runtime.cdi": installer_wrapper("nvidia-container-runtime.cdi")}
    if config_text is not None:
        files[OPERATOR_CONFIG] = config_text
    return files


ENTRY = {"runtime": "containerd", "name": "nvidia-cdi", "binary": f"{TOOLKIT}/nvidia-container-runtime.cdi"}


@pytest.mark.parametrize(
    ("config_text", "allowed", "status", "in_detail"),
    [
        (HARDENED_TEXT, False, "ok", f"reads {OPERATOR_CONFIG} (wrapper {TOOLKIT}/nvidia-container-runtime.cdi sets"),
        (OPERATOR_TEXT, False, "fail", f"{ENVVAR} = true: an unprivileged pod that requests no GPU and names"),
        (OPERATOR_TEXT, True, "warn", "asked for"),
        (None, False, "fail", f"the file does not exist: NVIDIA defaults): {ENVVAR} unset (NVIDIA's default: true)"),
        (HARDENED_TEXT.replace(f"{MOUNTS} = false", f"{MOUNTS} = true"), False, "fail", "/dev/null volume"),
    ],
)
def test_the_doctor_has_a_door_row_per_entry_reading_its_config(config_text, allowed, status, in_detail):
    row = gpu_validate_doors.entry_row(
        params(envvar_allowed=allowed, toolkit_config=OWN), ENTRY, FakeNode(files=doctor_files(config_text))
    )
    assert row["check"] == "door: containerd runtime nvidia-cdi"
    assert row["status"] == status, row
    assert in_detail in row["detail"], row
    assert row["detail"].startswith(f"containerd runtime nvidia-cdi ({TOOLKIT}/nvidia-container-runtime.cdi)")
    if status == "fail":
        assert OPERATOR_CONFIG in row["fix"] and "ClusterPolicy spec.toolkit.env" in row["fix"]


def test_the_doors_family_lists_every_entry_even_without_the_projects_toolkit():
    legacy = {**ENTRY, "name": "nvidia-legacy", "binary": f"{TOOLKIT}/nvidia-container-runtime.legacy"}
    node = {"nvidia_runtimes": [ENTRY, legacy]}
    rows = gpu_validate_doors.check_doors(
        params(toolkit_config=OWN), node, FakeNode(files=doctor_files(OPERATOR_TEXT)), False, None
    )
    checks = [r["check"] for r in rows]
    assert checks[:2] == ["door: containerd runtime nvidia-cdi", "door: containerd runtime nvidia-legacy"]
    # nvidia-legacy's binary is not in this fake: a warning, no container can start through it
    assert [r["status"] for r in rows[:2]] == ["fail", "warn"]


# ------------------------------------------------------------------------------------ the drop-in refusal


def test_the_drop_in_refusal_names_every_nvidia_entry_of_the_imported_file():
    root = 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
    cri = 'plugins."io.containerd.grpc.v1.cri".containerd.runtimes'
    runc = {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": True}}
    runtimes = {"runc": runc}
    for name, binary in OPERATOR_ENTRIES.items():
        runtimes[name] = {"runtime_type": "io.containerd.runc.v2", "options": {"BinaryName": binary}}
    effective = {
        "version": 2,
        "imports": ["/etc/containerd/conf.d/99-nvidia.toml"],
        "plugins": {
            "io.containerd.grpc.v1.cri": {"containerd": {"default_runtime_name": "runc", "runtimes": runtimes}}
        },
    }
    request = ct.Request(runtime={"name": "nvidia", "path": "/usr/bin/nvidia-container-runtime"}, effective=effective)
    with pytest.raises(ct.ContainerdConfigError) as raised:
        ct.plan_inplace(root, "/etc/containerd/config.toml", request)
    message = str(raised.value)
    assert cri not in message  # the message names entries, not tables
    for name, binary in OPERATOR_ENTRIES.items():
        assert (f"{name} ({binary})" in message) or (f"'{name}' runtime as BinaryName = '{binary}'" in message)
    assert "also registers NVIDIA's runtime as nvidia-cdi" in message and "nvidia-legacy" in message


STANDIN_RUNTIME = (
    Path(__file__).resolve().parents[2]
    / "tests/fixtures/nvidia-container-toolkit-standin/files/scripts/nvidia-container-runtime"
)


@pytest.mark.parametrize(
    ("script", "plain"),
    [
        (STANDIN_RUNTIME.read_text(), "runc"),
        ('#!/bin/sh\nexec /usr/bin/crun "$@"\n', "/usr/bin/crun"),
        # not followed: NVIDIA's runtime named anywhere, a computed command, more than the call, no exec
        ('#!/bin/sh\nR=/x/nvidia-container-runtime.real\nexec runc "$@"\n', None),
        ('#!/bin/sh\nexec $REAL "$@"\n', None),
        ('#!/bin/sh\nexec runc --debug "$@"\n', None),
        ('#!/bin/sh\nrunc "$@"\n', None),
    ],
)
def test_a_script_that_hands_every_call_to_runc_is_no_door(script, plain):
    """The demo's TEST STAND-IN runtime (a script that execs runc) reads no toolkit config and injects nothing: its
    door row is ok and no refusal names it; any other script stays a problem (refused, door row fails)."""
    files = {"/usr/bin/nvidia-container-runtime": script.encode()}
    found = nvidia_runtime.config_read_by("/usr/bin/nvidia-container-runtime", files.get)
    assert nvidia_runtime.plain_oci_runtime(script) == plain
    assert (found["config"], found["problem"] == "") == (None, plain is not None)
    row = gpu_validate_doors.entry_row(
        params(),
        {"runtime": "docker", "name": "nvidia", "binary": "/usr/bin/nvidia-container-runtime"},
        FakeNode(files={"/usr/bin/nvidia-container-runtime": script}),
    )
    assert row["status"] == ("ok" if plain else "fail")
