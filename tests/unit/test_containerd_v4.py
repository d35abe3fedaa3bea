"""containerd config version 4 (containerd 2.3, issue 36), with containerd itself as the oracle.

The containerd 2.3.4 build in the upstream directory (fixture upstream_dir: $GPUNODE_UPSTREAM_DIR, else
../shared/upstream; its containerd/BUILD.md) is static, and `containerd --config FILE config dump` reads FILE and
its imports without a daemon. Each test plans with the pure layer (containerd_toml), writes the result into a
temporary directory, and asks that binary how it reads it: the runtime is there with NVIDIA's binary, runc stays
the default, and the daemon-verified reading (verify_reading) accepts the dump containerd 2.3 migrated to
version 4. The imports of the files point into the temporary directory, never at the host's /etc/containerd.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import tomlkit
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import config as ct
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import versions as cv
from ansible_collections.gpunode.provisioning.plugins.module_utils.files.merge import get_path
from conftest import UPSTREAM_VARIABLE, upstream_path
from test_containerd_toml import PATH, FakeNode, removed_lines, run_action

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "containerd"
V2_KEPT = (FIXTURES / "v2-debian12-containerd-1.6.toml").read_text()  # a 1.6 file kept through the upgrade to 2.3
NVIDIA = {"name": "nvidia", "path": "/usr/bin/nvidia-container-runtime"}
BINARY = NVIDIA["path"]
V4_RUNTIMES = ["plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes"]
V4_DEFAULT = ["plugins", "io.containerd.cri.v1.runtime", "containerd", "default_runtime_name"]
SHIPPED_IMPORT = "/etc/containerd/conf.d/*.toml"


@pytest.fixture(scope="module")
def containerd(upstream_dir) -> Path:
    binary = upstream_dir / "containerd" / "bin" / "containerd"
    if not binary.is_file():
        pytest.fail(f"{binary} is missing: see {upstream_dir}/containerd/BUILD.md", pytrace=False)
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True).stdout
    assert cv.containerd_version_tuple(out)[:2] == (2, 3), out
    return binary


def dump(containerd: Path, root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(containerd), "--config", str(root), "config", "dump"], capture_output=True, text=True, check=False
    )


def reading(containerd: Path, root: Path) -> dict:
    """containerd's reading of ``root`` (parsed `config dump`); the test fails with containerd's words if it refuses."""
    result = dump(containerd, root)
    assert result.returncode == 0, result.stderr
    return tomlkit.parse(result.stdout).unwrap()


@pytest.fixture(scope="module")
def defaults(containerd) -> dict:
    out = subprocess.run([str(containerd), "config", "default"], capture_output=True, text=True, check=True).stdout
    return tomlkit.parse(out).unwrap()


@pytest.fixture
def default_v4(upstream_dir, tmp_path) -> tuple[Path, str]:
    """(root path, text): 2.3's `config default` as shipped (version 4, imports conf.d), conf.d in tmp_path."""
    text = (upstream_dir / "containerd" / "config-default-v4.toml").read_text()
    assert SHIPPED_IMPORT in text
    (tmp_path / "conf.d").mkdir()
    return tmp_path / "config.toml", text.replace(SHIPPED_IMPORT, f"{tmp_path}/conf.d/*.toml")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def assert_nvidia_not_default(read: dict) -> None:
    """The reading (version 4 whatever the files say) has the nvidia runtime with NVIDIA's binary, runc the default."""
    assert read["version"] == 4
    nvidia = get_path(read, [*V4_RUNTIMES, "nvidia"])
    assert nvidia["options"]["BinaryName"] == BINARY
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert get_path(read, V4_DEFAULT) == "runc"


def test_the_upstream_directory_comes_from_the_variable_else_beside_the_project_and_never_skips(tmp_path):
    assert upstream_path({UPSTREAM_VARIABLE: str(tmp_path)}) == tmp_path
    assert upstream_path({}) == Path(__file__).resolve().parents[3] / "shared" / "upstream"
    with pytest.raises(pytest.fail.Exception, match=rf"not at {tmp_path}/none: set {UPSTREAM_VARIABLE} to the dir"):
        upstream_path({UPSTREAM_VARIABLE: str(tmp_path / "none")})


# --------------------------------------------------------------------------- version 4 as 2.3 writes it


def test_the_table_mapping_of_version_4_is_what_containerd_2_3_writes(defaults, default_v4):
    _root, text = default_v4
    assert ct.config_version(tomlkit.parse(text), "config-default-v4.toml") == 4
    paths = ct.table_paths(4)
    assert get_path(defaults, list(paths.runtimes))["runc"]["runtime_type"] == "io.containerd.runc.v2"
    assert get_path(defaults, [*paths.containerd, "default_runtime_name"]) == "runc"
    assert get_path(defaults, [*paths.cri, "enable_cdi"]) is True
    assert ct.empty_version_for((2, 3, 4)) == defaults["version"] == 4
    assert [ct.empty_version_for(v) for v in ((1, 7, 30), (2, 0, 0), (2, 2, 7), None)] == [2, 3, 3, 2]


def test_inplace_on_2_3s_default_is_read_with_nvidia_not_the_default_and_is_stable(containerd, defaults, default_v4):
    root, text = default_v4
    write(root, text)
    before = reading(containerd, root)
    request = ct.Request(runtime=NVIDIA, unset_default=True, enable_cdi=True, effective=before, defaults=defaults)
    outcome = ct.plan_inplace(text, str(root), request, empty_version=4)
    assert outcome.changed and outcome.version == 4
    assert outcome.runtime_table == 'plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia'
    assert removed_lines(text, outcome.after) == []  # a pure addition: the rest of the file stays as it was
    write(root, outcome.after)
    after = reading(containerd, root)
    assert_nvidia_not_default(after)
    written = tomlkit.parse(outcome.after).unwrap()
    ct.verify_reading(str(root), before, after, request, written, outcome.runtime_table)
    again = ct.plan_inplace(outcome.after, str(root), ct.Request(**{**request.__dict__, "effective": after}), 4)
    assert not again.changed


def test_dropin_on_2_3s_default_carries_version_4_and_is_read_with_nvidia_not_the_default(
    containerd, defaults, default_v4
):
    root, text = default_v4
    write(root, text)
    before = reading(containerd, root)
    dropin = root.parent / "conf.d" / "99-nvidia.toml"
    request = ct.Request(runtime=NVIDIA, unset_default=True, enable_cdi=True, effective=before, defaults=defaults)
    root_plan, dropin_plan = ct.plan_dropin(text, str(root), None, str(dropin), request, empty_version=4)
    assert not root_plan.changed  # 2.3's default already imports conf.d/*.toml
    assert tomlkit.parse(dropin_plan.after)["version"] == 4
    write(dropin, dropin_plan.after)
    after = reading(containerd, root)
    assert_nvidia_not_default(after)
    written = tomlkit.parse(dropin_plan.after).unwrap()
    ct.verify_reading(str(dropin), before, after, request, written, dropin_plan.runtime_table, (("imports",),))
    request.effective = after
    assert [o.changed for o in ct.plan_dropin(text, str(root), dropin_plan.after, str(dropin), request, 4)] == [
        False,
        False,
    ]


# --------------------------------------------------------------------------- a version 2 file on containerd 2.3


@pytest.mark.parametrize("method", ["inplace", "dropin"])
def test_a_v2_root_on_2_3_is_edited_as_v2_and_verified_on_the_dump_2_3_migrated(containerd, defaults, tmp_path, method):
    root, dropin = tmp_path / "config.toml", tmp_path / "conf.d" / "99-nvidia.toml"
    write(root, V2_KEPT)
    before = reading(containerd, root)
    assert before["version"] == 4 and "io.containerd.cri.v1.runtime" in before["plugins"]  # migrated in memory
    request = ct.Request(runtime=NVIDIA, unset_default=True, effective=before, defaults=defaults)
    if method == "inplace":
        outcome = ct.plan_inplace(V2_KEPT, str(root), request, empty_version=4)
        write(root, outcome.after)
        expected, label = (), str(root)
    else:
        root_plan, outcome = ct.plan_dropin(V2_KEPT, str(root), None, str(dropin), request, empty_version=4)
        assert tomlkit.parse(root_plan.after)["version"] == 2  # the root file keeps its version on disk
        write(root, root_plan.after)
        write(dropin, outcome.after)
        expected, label = (("imports",),), str(dropin)
    written = tomlkit.parse(outcome.after).unwrap()
    assert written["version"] == 2 and outcome.version == 2  # never the dump's 4
    assert get_path(written, ["plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes", "nvidia"])
    after = reading(containerd, root)
    assert_nvidia_not_default(after)
    # runc's SystemdCgroup of the v2 file reaches nvidia through containerd's migration
    assert get_path(after, [*V4_RUNTIMES, "nvidia", "options", "SystemdCgroup"]) is True
    ct.verify_reading(label, before, after, request, written, outcome.runtime_table, expected)


def test_containerd_2_3_refuses_a_v4_dropin_under_a_v2_root_and_the_rule_says_so(containerd, tmp_path):
    """What NVIDIA's toolkit <= 1.19.1 wrote (NVIDIA/aicr#1688): a drop-in with the dump's version 4."""
    root, dropin = tmp_path / "config.toml", tmp_path / "conf.d" / "99-nvidia.toml"
    root_plan, ours = ct.plan_dropin(V2_KEPT, str(root), None, str(dropin), ct.Request(runtime=NVIDIA), 4)
    write(root, root_plan.after)
    theirs = tomlkit.parse(ct.render_dropin(str(root), 4, {"plugins": {"io.containerd.cri.v1.runtime": {}}}))
    theirs["plugins"]["io.containerd.cri.v1.runtime"]["enable_cdi"] = True
    write(dropin, tomlkit.dumps(theirs))
    refused = dump(containerd, root)
    assert refused.returncode != 0
    assert "drop-in config version 4 higher than root config version 2" in refused.stderr
    assert cv.dropin_refusal_hint(refused.stderr).startswith("containerd refuses a drop-in")
    write(dropin, ours.after)  # ours: the root's version
    assert dump(containerd, root).returncode == 0


def _versions(path: Path) -> list:
    def read_parsed(name):
        try:
            return tomlkit.parse(Path(name).read_text()).unwrap()
        except OSError:
            return None

    order = cv.load_order(str(path), read_parsed, lambda pattern: sorted(map(str, Path("/").glob(pattern[1:]))))
    return [(name, cv.file_version(parsed)) for name, parsed in order]


@pytest.mark.parametrize(
    ("root_version", "dropins"),
    [
        (2, [2]),
        (2, [4]),
        (2, [3]),
        (3, [2, 4]),
        (4, [2, 3, 4]),
        (4, [None]),  # a drop-in without a version key: 0, never above
        (None, [2, 3]),  # a root without one: the first drop-in's version is the root version
        (None, [3, 2]),
    ],
)
def test_the_dropin_rule_predicts_containerd_2_3s_refusal(containerd, tmp_path, root_version, dropins):
    root = tmp_path / "config.toml"
    head = f"version = {root_version}\n" if root_version else ""
    write(root, f"{head}imports = ['conf.d/*.toml']\n")
    for index, version in enumerate(dropins):
        write(tmp_path / "conf.d" / f"{index:02d}.toml", f"version = {version}\n" if version else "oom_score = 0\n")
    conflicts = cv.dropin_version_conflicts(_versions(root))
    result = dump(containerd, root)
    assert (result.returncode != 0) == bool(conflicts), (result.stderr, conflicts)
    if conflicts:
        path, version, above = conflicts[0]
        assert f"drop-in config version {version} higher than root config version {above}" in result.stderr
        assert path == str(tmp_path / "conf.d" / f"{dropins.index(version):02d}.toml")


# --------------------------------------------------------------------------- nvidia out of the default on version 4


def _nvidia_default(text: str) -> str:
    """2.3's default with nvidia the default runtime (a copy of runc, NVIDIA's binary), as `nvidia-ctk runtime
    configure --set-as-default` leaves it."""
    doc = tomlkit.parse(text)
    containerd = doc["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]
    containerd["default_runtime_name"] = "nvidia"
    nvidia = containerd["runtimes"]["runc"].unwrap()
    nvidia.setdefault("options", {})["BinaryName"] = BINARY
    containerd["runtimes"]["nvidia"] = nvidia
    return tomlkit.dumps(doc)


@pytest.mark.parametrize("method", ["inplace", "dropin"])
def test_unset_default_takes_nvidia_out_of_the_default_on_version_4(containerd, defaults, default_v4, method):
    root, text = default_v4
    text = _nvidia_default(text)
    write(root, text)
    before = reading(containerd, root)
    assert get_path(before, V4_DEFAULT) == "nvidia"
    request = ct.Request(runtime=NVIDIA, unset_default=True, effective=before, defaults=defaults)
    if method == "inplace":
        outcome = ct.plan_inplace(text, str(root), request, empty_version=4)
        write(root, outcome.after)
        label, expected, written = str(root), (), outcome.after
    else:
        dropin = root.parent / "conf.d" / "99-nvidia.toml"
        root_plan, outcome = ct.plan_dropin(text, str(root), None, str(dropin), request, empty_version=4)
        assert root_plan.changed  # default_runtime_name = 'nvidia' leaves the root file
        write(root, root_plan.after)
        write(dropin, outcome.after)
        label, expected, written = str(dropin), (("imports",),), outcome.after
    after = reading(containerd, root)
    assert_nvidia_not_default(after)
    ct.verify_reading(label, before, after, request, tomlkit.parse(written).unwrap(), outcome.runtime_table, expected)


def test_a_top_level_server_setting_of_a_v2_file_is_read_where_2_3_moves_it(containerd, defaults, tmp_path):
    """serviceMigrate: containerd 2.3 reads a version 2/3 file's [grpc] as plugins.'io.containerd.server.v1.grpc'."""
    root = tmp_path / "config.toml"
    write(root, V2_KEPT)
    before = reading(containerd, root)
    settings = {"grpc": {"max_recv_message_size": 33554432}}
    request = ct.Request(runtime=NVIDIA, settings=settings, effective=before, defaults=defaults)
    outcome = ct.plan_inplace(V2_KEPT, str(root), request, empty_version=4)
    assert tomlkit.parse(outcome.after)["grpc"]["max_recv_message_size"] == 33554432
    write(root, outcome.after)
    after = reading(containerd, root)
    assert "grpc" not in after and after["plugins"]["io.containerd.server.v1.grpc"]["max_recv_message_size"] == 33554432
    ct.verify_reading(str(root), before, after, request, tomlkit.parse(outcome.after).unwrap(), outcome.runtime_table)


# --------------------------------------------------------------------------- the action on a containerd 2.3 node

CONTAINERD_2_3 = "containerd github.com/containerd/containerd/v2 v2.3.4 db8809540e1a7a9da5d518876894933ff55692ab"


def test_the_action_starts_an_empty_file_at_version_4_where_containerd_2_3_runs():
    node = FakeNode({PATH: ""}, containerd=CONTAINERD_2_3)
    result = run_action(node, {"runtime": NVIDIA, "when_missing": "empty"}, check_mode=True)
    assert result["containerd_version"] == "2.3.4" and result["version"] == 4, result
    assert result["diff"][0]["after"].startswith("version = 4\n")
    assert result["runtime_table"] == 'plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia'


class RefusingNode(FakeNode):
    """containerd 2.3 whose `config dump` of the current file refuses a drop-in above the root's version."""

    def low_level(self, cmd, sudoable=True, **kwargs):
        if cmd.endswith("config dump") and not cmd.startswith("/bin/sh"):
            self.commands.append(cmd)
            return {"rc": 1, "stdout": "", "stderr": REFUSAL}
        return super().low_level(cmd, sudoable, **kwargs)


REFUSAL = "containerd: drop-in config version 4 higher than root config version 2"


def test_the_action_says_what_to_do_when_containerd_refuses_a_dropin_above_its_roots_version():
    node = RefusingNode({PATH: V2_KEPT}, containerd=CONTAINERD_2_3)
    result = run_action(node, {"runtime": NVIDIA, "method": "dropin"})
    assert result["failed"] is True and node.copies == []
    assert REFUSAL in result["msg"]
    assert "set that drop-in's version (and its table names) to version 2" in result["msg"], result["msg"]
    assert "NVIDIA/aicr#1688" in result["msg"]


def test_our_dropin_found_above_its_roots_version_is_rewritten_at_the_roots(containerd, tmp_path):
    """A drop-in at our path with version 4 over a version 2 root (as NVIDIA's toolkit <= 1.19.1 left
    conf.d/99-nvidia.toml): the plan renders it again at version 2, which containerd 2.3 accepts."""
    root, dropin = tmp_path / "config.toml", tmp_path / "conf.d" / "99-nvidia.toml"
    root_plan, first = ct.plan_dropin(V2_KEPT, str(root), None, str(dropin), ct.Request(runtime=NVIDIA), 4)
    write(root, root_plan.after)
    stale = first.after.replace("version = 2", "version = 4", 1)
    assert stale != first.after
    write(dropin, stale)
    assert "higher than root config version 2" in dump(containerd, root).stderr
    _root, again = ct.plan_dropin(root_plan.after, str(root), stale, str(dropin), ct.Request(runtime=NVIDIA), 4)
    assert again.changed and tomlkit.parse(again.after)["version"] == 2
    write(dropin, again.after)
    assert_nvidia_not_default(reading(containerd, root))


# --------------------------------------------------------------------------- the whole action, containerd 2.3.4 reading


class RealContainerdNode(FakeNode):
    """The node as the action sees it (FakeNode's files, slurp and writes), but every `containerd` command the action
    runs (`config default`, the current file's and the candidates' `config dump`, the staged drop-in pair) runs the
    real containerd 2.3.4 on a copy of the node's files under ``tmp``: node paths (/etc/containerd, the remote
    temporary directory) prefixed with it in the commands and in the files' imports, stripped again from what
    containerd prints."""

    PREFIXES = ("/etc/containerd", "/root/.ansible")

    def __init__(self, files: dict, binary: Path, tmp: Path):
        super().__init__(files, containerd=CONTAINERD_2_3)
        self.binary, self.tmp, self.ran = binary, tmp, []

    def materialize(self) -> None:
        for path, text in [*self.files.items(), *self.transferred.items()]:
            write(Path(f"{self.tmp}{path}"), self.on_tmp(text))
        Path(f"{self.tmp}/root/.ansible/tmp/ansible-tmp-1").mkdir(parents=True, exist_ok=True)

    def on_tmp(self, text: str) -> str:
        for prefix in self.PREFIXES:
            text = text.replace(prefix, f"{self.tmp}{prefix}")
        return text

    def low_level(self, cmd, sudoable=True, **kwargs):
        if "containerd" not in cmd or cmd.endswith("--version"):
            return super().low_level(cmd, sudoable, **kwargs)
        self.commands.append(cmd)
        self.ran.append(cmd)
        self.materialize()
        real = self.on_tmp(cmd.replace("/usr/bin/containerd", str(self.binary)))
        done = subprocess.run(real, shell=True, capture_output=True, text=True, check=False)
        return {"rc": done.returncode, "stdout": done.stdout.replace(str(self.tmp), ""), "stderr": done.stderr}


@pytest.mark.parametrize("method", ["inplace", "dropin"])
@pytest.mark.parametrize("root", ["2.3's config default (version 4)", "a version 2 file kept"])
def test_the_action_on_containerd_2_3_4_both_methods_both_roots(containerd, upstream_dir, tmp_path, method, root):
    text = (upstream_dir / "containerd" / "config-default-v4.toml").read_text() if "default" in root else V2_KEPT
    node = RealContainerdNode({PATH: text}, containerd, tmp_path / "node")
    args = {"runtime": NVIDIA, "method": method, "unset_default": True, "enable_cdi": True}
    result = run_action(node, args)
    assert result.get("failed") is not True, result.get("msg")
    assert result["changed"] is True and result["version"] == (4 if "default" in root else 2)
    assert any("config dump" in cmd and "containerd-root-" in cmd for cmd in node.ran) == (method == "dropin")
    node.materialize()
    read = reading(containerd, tmp_path / "node" / PATH.lstrip("/"))
    assert_nvidia_not_default(read)
    if method == "dropin":
        dropin = tomlkit.parse(node.files["/etc/containerd/conf.d/99-nvidia.toml"])
        assert dropin["version"] == tomlkit.parse(text)["version"]  # the root's on disk, never the dump's 4
    again = run_action(node, args)
    assert again.get("failed") is not True and again["changed"] is False, again.get("msg")


def test_the_action_on_containerd_2_3_4_names_the_fix_for_a_toolkit_dropin_above_the_root(containerd, tmp_path):
    """NVIDIA's toolkit <= 1.19.1 left conf.d/99-nvidia.toml at version 4 under a version 2 root: containerd 2.3.4
    refuses the current config, and the action changes nothing and says what to do."""
    root = V2_KEPT.replace("imports = []", "imports = ['/etc/containerd/conf.d/*.toml']")
    toolkit = "version = 4\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nvidia]\n"
    node = RealContainerdNode({PATH: root, "/etc/containerd/conf.d/99-nvidia.toml": toolkit}, containerd, tmp_path)
    before = dict(node.files)
    result = run_action(node, {"runtime": NVIDIA, "method": "dropin"})
    assert result["failed"] is True and node.files == before and node.copies == []
    assert "drop-in config version 4 higher than root config version 2" in result["msg"]
    assert "set that drop-in's version (and its table names) to version 2" in result["msg"]


# ---- kubespray and the role on containerd 2.3: a fixed point (issue 36) -------------------------------------------


@pytest.mark.parametrize("kubespray_options", ["the printed entry", "the entry with SystemdCgroup false"])
def test_after_kubespray_renders_the_printed_entry_the_role_changes_nothing(containerd, tmp_path, kubespray_options):
    """The role writes nvidia as runc's entry of `config dump`, values 2.3 fills in included; kubespray renders the
    printed containerd_additional_runtimes entry without them. containerd reads both alike (runtime_reading), so the
    role leaves kubespray's render as it is and the next kubespray run renders the same file: a fixed point, where
    each run of either changed the file before. An entry that reads otherwise (the mutation: SystemdCgroup false,
    another cgroup driver than the kubelet's) is still rewritten."""
    from test_installer_filters import _kubespray_standin, installer

    standin = _kubespray_standin()
    inventory = {"containerd_version": "2.3.4", "enable_cdi": True}
    node = RealContainerdNode({PATH: standin.render_2x(inventory)}, containerd, tmp_path / "node")
    args = {"runtime": NVIDIA, "unset_default": True, "enable_cdi": True, "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"]}
    first = run_action(node, args)
    assert first.get("failed") is not True and first["changed"] is True, first.get("msg")
    entry = installer.kubespray_runtime(node.files[PATH], "nvidia", BINARY)
    if kubespray_options != "the printed entry":
        entry = {**entry, "options": {**entry["options"], "SystemdCgroup": "false"}}
    inventory["containerd_additional_runtimes"] = [entry]
    rendered = standin.render_2x(inventory)
    nvidia = get_path(tomlkit.parse(rendered).unwrap(), [*V4_RUNTIMES, "nvidia"])
    assert "sandboxer" not in nvidia and "IoUid" not in nvidia["options"]  # none of the values the dump fills in
    node.files[PATH] = rendered
    again = run_action(node, args)
    assert again.get("failed") is not True, again.get("msg")
    if kubespray_options == "the printed entry":
        assert again["changed"] is False, again.get("diff")
        assert node.files[PATH] == rendered == standin.render_2x(inventory)
        node.materialize()
        runtimes = get_path(reading(containerd, tmp_path / "node" / PATH.lstrip("/")), V4_RUNTIMES)
        runc = {**runtimes["runc"], "options": {**runtimes["runc"]["options"], "BinaryName": BINARY}}
        assert runtimes["nvidia"] != runc  # the dump fills in runc's entry, not nvidia's ...
        assert ct.runtime_reading(runtimes["nvidia"]) == ct.runtime_reading(runc)  # ... which reads the same
    else:
        assert again["changed"] is True
        options = get_path(tomlkit.parse(node.files[PATH]).unwrap(), [*V4_RUNTIMES, "nvidia", "options"])
        assert options["SystemdCgroup"] is True


def test_a_runtime_entry_reads_as_containerd_decodes_it():
    """Zero values and the defaults ValidateRuntimeConfig fills in read as absent; runc's options case-insensitively;
    the options of another runtime type are passed on as written (containerd v2.3.4 internal/cri/config/config.go)."""
    runc = {"runtime_type": "io.containerd.runc.v2", "sandboxer": "podsandbox", "io_type": "", "pod_annotations": []}
    full = {**runc, "options": {"BinaryName": "/b", "IoUid": 0, "NoNewKeyring": False, "SystemdCgroup": True}}
    short = {"runtime_type": "io.containerd.runc.v2", "options": {"binaryName": "/b", "systemdCgroup": True}}
    assert ct.runtime_reading(full) == ct.runtime_reading(short)
    assert ct.runtime_reading({**short, "sandboxer": "shim"}) != ct.runtime_reading(short)
    assert ct.runtime_reading({**short, "privileged_without_host_devices": True}) != ct.runtime_reading(short)
    assert ct.runtime_reading({**full, "options": {**full["options"], "SystemdCgroup": False}}) != ct.runtime_reading(
        short
    )
    kata = {"runtime_type": "io.containerd.kata.v2", "options": {"ConfigPath": "", "Debug": False}}
    assert ct.runtime_reading(kata) != ct.runtime_reading({**kata, "options": {}})
