"""Tests of containerd config.toml editing: the pure layer (containerd_toml) and the action plugin."""

from __future__ import annotations

import difflib
import hashlib
import re
from pathlib import Path
from unittest import mock

import pytest
import tomlkit
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import config as ct
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import versions as containerd_versions
from ansible_collections.gpunode.provisioning.plugins.module_utils.files.merge import get_path, merge
from conftest import documented_options, fake_node_files, load_module, run_module

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "containerd"
V1 = (FIXTURES / "v1-containerd-1.4.toml").read_text()
V2 = (FIXTURES / "v2-debian12-containerd-1.6.toml").read_text()
V3 = (FIXTURES / "v3-containerd-2.1.toml").read_text()
PATH = "/etc/containerd/config.toml"
NVIDIA = {"name": "nvidia", "path": "/usr/bin/nvidia-container-runtime"}
CRI = {
    1: ["plugins", "cri"],
    2: ["plugins", "io.containerd.grpc.v1.cri"],
    3: ["plugins", "io.containerd.cri.v1.runtime"],
}
TEXTS = {1: V1, 2: V2, 3: V3}


def plain(text: str) -> dict:
    return tomlkit.parse(text).unwrap()


def removed_lines(before: str, after: str) -> list[str]:
    """Lines of ``before`` that ``after`` lost or changed (a pure addition gives [])."""
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [line for line in diff if line.startswith("-") and not line.startswith("---")]


def comment_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "#" in line]


# --------------------------------------------------------------------------- versions and tables


@pytest.mark.parametrize("version", [1, 2, 3])
def test_fixture_versions_are_detected(version):
    assert ct.config_version(tomlkit.parse(TEXTS[version]), PATH) == version


@pytest.mark.parametrize("version", [1, 2, 3])
def test_runtime_added_under_the_versions_table_with_runc_options_copied(version):
    outcome = ct.plan_inplace(TEXTS[version], PATH, ct.Request(runtime=NVIDIA))
    after = plain(outcome.after)
    runtimes = get_path(after, [*CRI[version], "containerd", "runtimes"])
    nvidia = runtimes["nvidia"]
    assert outcome.changed is True
    assert outcome.version == version
    assert outcome.options_copied_from == "runc"
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert nvidia["options"]["SystemdCgroup"] is True
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    # every other runc option is copied too, and runc itself is untouched
    expected = dict(runtimes["runc"]["options"], BinaryName="/usr/bin/nvidia-container-runtime")
    assert nvidia["options"] == expected
    assert runtimes["runc"] == get_path(plain(TEXTS[version]), [*CRI[version], "containerd", "runtimes", "runc"])
    # nothing else moved: the merge only added lines
    assert removed_lines(TEXTS[version], outcome.after) == []


def test_runtime_table_names_the_dotted_key_path_per_version():
    tables = {v: ct.plan_inplace(TEXTS[v], PATH, ct.Request(runtime=NVIDIA)).runtime_table for v in (1, 2, 3)}
    assert tables == {
        1: "plugins.cri.containerd.runtimes.nvidia",
        2: 'plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia',
        3: 'plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia',
    }


@pytest.mark.parametrize("version", [1, 2, 3])
def test_default_runtime_name_is_set_in_the_containerd_table(version):
    outcome = ct.plan_inplace(TEXTS[version], PATH, ct.Request(runtime=NVIDIA, default_runtime="nvidia"))
    after = plain(outcome.after)
    assert get_path(after, [*CRI[version], "containerd", "default_runtime_name"]) == "nvidia"
    assert removed_lines(TEXTS[version], outcome.after) == [
        line for line in removed_lines(TEXTS[version], outcome.after) if "default_runtime_name" in line
    ]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_enable_cdi_and_spec_dirs_are_set_in_the_cri_table(version):
    request = ct.Request(enable_cdi=True, cdi_spec_dirs=["/etc/cdi", "/var/run/cdi"])
    after = plain(ct.plan_inplace(TEXTS[version], PATH, request).after)
    cri = get_path(after, CRI[version])
    assert cri["enable_cdi"] is True
    assert cri["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]


def test_v3_with_cdi_already_enabled_is_unchanged_byte_for_byte():
    request = ct.Request(enable_cdi=True, cdi_spec_dirs=["/etc/cdi", "/var/run/cdi"])
    outcome = ct.plan_inplace(V3, PATH, request)
    assert outcome.changed is False
    assert outcome.after == V3


def test_cdi_spec_dirs_follow_the_list_strategy():
    text = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  cdi_spec_dirs = ["/opt/cdi"]\n'
    appended = ct.plan_inplace(text, PATH, ct.Request(cdi_spec_dirs=["/etc/cdi"], list_strategy="append_unique"))
    replaced = ct.plan_inplace(text, PATH, ct.Request(cdi_spec_dirs=["/etc/cdi"]))
    assert plain(appended.after)["plugins"]["io.containerd.grpc.v1.cri"]["cdi_spec_dirs"] == ["/opt/cdi", "/etc/cdi"]
    assert plain(replaced.after)["plugins"]["io.containerd.grpc.v1.cri"]["cdi_spec_dirs"] == ["/etc/cdi"]


def test_raw_settings_are_merged_at_top_level_keeping_siblings():
    settings = {
        "plugins": {"io.containerd.grpc.v1.cri": {"sandbox_image": "registry.example/pause:3.9", "registry": {}}},
        "debug": {"level": "info"},
    }
    outcome = ct.plan_inplace(V2, PATH, ct.Request(settings=settings))
    after, before = plain(outcome.after), plain(V2)
    cri = after["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == "registry.example/pause:3.9"
    assert cri["registry"] == before["plugins"]["io.containerd.grpc.v1.cri"]["registry"]
    assert after["debug"] == dict(before["debug"], level="info")
    assert cri["containerd"] == before["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]
    # the changed values are edited in place, their comments stay
    assert removed_lines(V2, outcome.after) == [
        '-  level = ""',
        '-    sandbox_image = "registry.internal.example/pause:3.6"',
    ]
    assert "    # admin: pinned to the mirror, the nodes have no internet access\n" in outcome.after


def test_typed_options_win_over_raw_settings():
    settings = {"plugins": {"io.containerd.grpc.v1.cri": {"enable_cdi": False}}}
    after = plain(ct.plan_inplace(V2, PATH, ct.Request(enable_cdi=True, settings=settings)).after)
    assert after["plugins"]["io.containerd.grpc.v1.cri"]["enable_cdi"] is True


# --------------------------------------------------------------------------- layout, comments, idempotence


@pytest.mark.parametrize("version", [1, 2, 3])
def test_comments_of_untouched_parts_survive(version):
    request = ct.Request(runtime=NVIDIA, default_runtime="runc", enable_cdi=True, cdi_spec_dirs=["/etc/cdi"])
    after = ct.plan_inplace(TEXTS[version], PATH, request).after
    comments = comment_lines(TEXTS[version])
    assert len(comments) >= 2
    for line in comments:
        assert line in after.splitlines()


@pytest.mark.parametrize("version", [1, 2, 3])
def test_second_application_gives_identical_text_and_no_change(version):
    request = ct.Request(runtime=NVIDIA, default_runtime="runc", enable_cdi=True, cdi_spec_dirs=["/etc/cdi"])
    first = ct.plan_inplace(TEXTS[version], PATH, request)
    second = ct.plan_inplace(first.after, PATH, request)
    assert first.changed is True
    assert second.changed is False
    assert second.after == first.after


def test_new_tables_follow_the_indentation_and_blank_lines_of_a_containerd_generated_file():
    after = ct.plan_inplace(V2, PATH, ct.Request(runtime=NVIDIA)).after
    block = (
        "            SystemdCgroup = true\n"
        "\n"
        '        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        '          base_runtime_spec = ""\n'
    )
    assert (
        '          runtime_type = "io.containerd.runc.v2"\n'
        "\n"
        '          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        '            BinaryName = "/usr/bin/nvidia-container-runtime"\n'
    ) in after
    assert block in after
    untrusted = '      [plugins."io.containerd.grpc.v1.cri".containerd.untrusted_workload_runtime]\n'
    assert "            SystemdCgroup = true\n\n" + untrusted in after


def test_new_tables_in_a_tight_file_get_no_blank_lines():
    after = ct.plan_inplace(V1, PATH, ct.Request(runtime=NVIDIA, enable_cdi=True)).after
    assert ("    max_container_log_line_size = 16384\n    enable_cdi = true\n    [plugins.cri.containerd]\n") in after
    assert (
        "          NoPivotRoot = false\n"
        "      [plugins.cri.containerd.runtimes.nvidia]\n"
        '        runtime_type = "io.containerd.runc.v2"\n'
        "        [plugins.cri.containerd.runtimes.nvidia.options]\n"
    ) in after


def test_only_formatting_differences_are_not_a_change():
    text = "version = 2\n[plugins.'io.containerd.grpc.v1.cri']\nenable_cdi=true   # on\ncdi_spec_dirs=['/etc/cdi']\n"
    outcome = ct.plan_inplace(text, PATH, ct.Request(enable_cdi=True, cdi_spec_dirs=["/etc/cdi"]))
    assert outcome.changed is False
    assert outcome.after == text


def test_implicit_tables_get_keys_without_breaking_the_file():
    text = (
        "version = 2\n"
        "# admin: keep the pause image pinned\n"
        '[plugins."io.containerd.grpc.v1.cri"]\n'
        '  sandbox_image = "registry.k8s.io/pause:3.9"\n'
        '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
        '    runtime_type = "io.containerd.runc.v2"\n'
        '    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n'
        "      SystemdCgroup = true  # kubelet uses systemd\n"
    )
    outcome = ct.plan_inplace(text, PATH, ct.Request(runtime=NVIDIA, default_runtime="runc"))
    after = plain(outcome.after)
    containerd = after["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]
    assert containerd["default_runtime_name"] == "runc"
    assert containerd["runtimes"]["nvidia"]["options"] == {
        "SystemdCgroup": True,
        "BinaryName": "/usr/bin/nvidia-container-runtime",
    }
    assert "      SystemdCgroup = true  # kubelet uses systemd\n" in outcome.after
    assert '  [plugins."io.containerd.grpc.v1.cri".containerd]\n    default_runtime_name = "runc"\n' in outcome.after
    assert removed_lines(text, outcome.after) == []


# --------------------------------------------------------------------------- option sources


def test_without_a_runc_runtime_only_explicit_options_are_written():
    text = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause"\n'
    bare = ct.plan_inplace(text, PATH, ct.Request(runtime=NVIDIA))
    explicit = ct.plan_inplace(text, PATH, ct.Request(runtime=dict(NVIDIA, options={"SystemdCgroup": True})))
    runtimes = ["plugins", "io.containerd.grpc.v1.cri", "containerd", "runtimes", "nvidia", "options"]
    assert bare.options_copied_from is None
    assert get_path(plain(bare.after), runtimes) == {"BinaryName": "/usr/bin/nvidia-container-runtime"}
    assert get_path(plain(explicit.after), runtimes) == {
        "SystemdCgroup": True,
        "BinaryName": "/usr/bin/nvidia-container-runtime",
    }


def test_options_come_from_the_default_runtime_when_it_is_runc_typed():
    text = V2.replace('default_runtime_name = "runc"', 'default_runtime_name = "crun"') + (
        '\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun]\n'
        '  runtime_type = "io.containerd.runc.v2"\n'
        '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.crun.options]\n'
        '    BinaryName = "/usr/bin/crun"\n'
        "    SystemdCgroup = true\n"
        '    Root = "/run/crun"\n'
    )
    outcome = ct.plan_inplace(text, PATH, ct.Request(runtime=NVIDIA))
    options = plain(outcome.after)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]
    assert outcome.options_copied_from == "crun"
    assert options["options"] == {
        "BinaryName": "/usr/bin/nvidia-container-runtime",
        "SystemdCgroup": True,
        "Root": "/run/crun",
    }


def test_a_default_runtime_of_another_type_is_not_copied_from():
    text = V2.replace('default_runtime_name = "runc"', 'default_runtime_name = "kata"') + (
        '\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]\n'
        '  runtime_type = "io.containerd.kata.v2"\n'
        '  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata.options]\n'
        '    ConfigPath = "/etc/kata/configuration.toml"\n'
    )
    outcome = ct.plan_inplace(text, PATH, ct.Request(runtime=NVIDIA))
    nvidia = plain(outcome.after)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]
    assert outcome.options_copied_from == "runc"
    assert "ConfigPath" not in nvidia["options"]
    assert nvidia["options"]["SystemdCgroup"] is True


def test_runtime_that_is_already_the_default_copies_from_runc_and_stays_stable():
    request = ct.Request(runtime=NVIDIA, default_runtime="nvidia")
    first = ct.plan_inplace(V2, PATH, request)
    second = ct.plan_inplace(first.after, PATH, request)
    assert second.options_copied_from == "runc"
    assert second.changed is False


def test_explicit_runtime_options_are_merged_over_copied_ones():
    runtime = dict(NVIDIA, runtime_type="io.containerd.runc.v2", options={"SystemdCgroup": False, "Root": "/x"})
    after = plain(ct.plan_inplace(V2, PATH, ct.Request(runtime=runtime)).after)
    options = after["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]["options"]
    assert options["SystemdCgroup"] is False
    assert options["Root"] == "/x"
    assert options["CriuPath"] == ""


# --------------------------------------------------------------------------- errors and empty files


def test_an_unknown_version_fails_naming_file_version_and_supported_versions():
    with pytest.raises(ct.ContainerdConfigError) as err:
        ct.plan_inplace("version = 5\n[plugins]\n", PATH, ct.Request(runtime=NVIDIA))
    message = str(err.value)
    assert PATH in message
    assert "version 5" in message
    assert (
        "supported: 1 (no version key, containerd 1.x), 2 (containerd 1.x and 2.x), 3 (containerd 2.x) and 4" in message
    )


def test_non_integer_version_fails():
    with pytest.raises(ct.ContainerdConfigError, match=r"'version' must be an integer, found '2'"):
        ct.config_version(tomlkit.parse('version = "2"\n'), PATH)


def test_garbage_toml_fails_naming_file_and_position():
    text = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = yes please\n'
    with pytest.raises(ct.ContainerdConfigError) as err:
        ct.plan_inplace(text, PATH, ct.Request(enable_cdi=True))
    message = str(err.value)
    assert message.startswith(f"{PATH} is not valid TOML (line 3, column ")
    assert "restore a backup" in message


@pytest.mark.parametrize("text", ["", "\n\n", "# nothing configured yet\n"])
def test_empty_text_is_version_2_and_gets_a_version_key(text):
    outcome = ct.plan_inplace(text, PATH, ct.Request(runtime=NVIDIA, enable_cdi=True))
    after = plain(outcome.after)
    assert outcome.version == 2
    assert after["version"] == 2
    assert after["plugins"]["io.containerd.grpc.v1.cri"]["enable_cdi"] is True
    assert after["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]["options"] == {
        "BinaryName": "/usr/bin/nvidia-container-runtime"
    }
    assert "\n\n\n" not in outcome.after
    assert outcome.after.startswith(text.strip())


def test_empty_text_on_containerd_2_is_version_3():
    outcome = ct.plan_inplace("", PATH, ct.Request(enable_cdi=True), empty_version=3)
    assert outcome.after == 'version = 3\n\n[plugins."io.containerd.cri.v1.runtime"]\nenable_cdi = true\n'


def test_missing_version_key_in_a_non_empty_file_is_version_1():
    assert ct.config_version(tomlkit.parse('root = "/var/lib/containerd"\n'), PATH) == 1


def test_a_missing_file_is_always_written():
    outcome = ct.plan_inplace(V2, PATH, ct.Request(), existed=False)
    assert outcome.changed is True
    assert outcome.after == V2


def test_source_label_names_the_text_in_errors():
    with pytest.raises(ct.ContainerdConfigError, match=r"^/etc/c.toml \(from containerd config default\) uses"):
        ct.plan_inplace(
            "version = 5\n", "/etc/c.toml", ct.Request(), source_label="/etc/c.toml (from containerd config default)"
        )


@pytest.mark.parametrize(
    ("request_kwargs", "message"),
    [
        ({"runtime": {"name": "", "path": "/x"}}, "runtime.name must be a non-empty string"),
        ({"runtime": {"name": "nvidia"}}, "runtime.path must be a non-empty string"),
        ({"runtime": dict(NVIDIA, options=["SystemdCgroup"])}, "runtime.options must be a dict"),
        ({"list_strategy": "merge"}, "list_strategy 'merge' is unknown: use one of replace, append_unique"),
    ],
)
def test_bad_requests_are_rejected(request_kwargs, message):
    with pytest.raises(ct.ContainerdConfigError, match=re.escape(message)):
        ct.plan_inplace(V2, PATH, ct.Request(**request_kwargs))


# --------------------------------------------------------------------------- containerd versions and drop-ins


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3", (1, 6, 20)),
        ("containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da", (1, 7, 27)),
        ("containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7193e4e490e9fbdc236c0e811ccaba3376", (2, 1, 4)),
        ("containerd github.com/containerd/containerd/v2 2.1.4~ds2 2.1.4~ds2-1", (2, 1, 4)),
        ("2.0", (2, 0, 0)),
        ("", None),
        ("containerd: command not found", None),
    ],
)
def test_containerd_version_parsing(text, expected):
    assert containerd_versions.containerd_version_tuple(text) == expected


def test_dropin_refused_for_containerd_1_7_with_the_reason_and_the_fix():
    with pytest.raises(ct.ContainerdConfigError) as err:
        ct.check_dropin_allowed((1, 7, 24), PATH)
    message = str(err.value)
    assert "refused for containerd 1.7.24" in message
    assert "containerd 1.x replaces a whole plugins.<id> table" in message
    assert "SystemdCgroup" in message
    assert "Use method=inplace" in message


def test_dropin_needs_a_known_version():
    with pytest.raises(ct.ContainerdConfigError, match="Set containerd_version, or use method=inplace"):
        ct.check_dropin_allowed(None, PATH)


@pytest.mark.parametrize("version", [(2, 0, 0), (2, 1, 4), (3, 0, 0)])
def test_dropin_allowed_from_containerd_2(version):
    assert ct.check_dropin_allowed(version, PATH) is None


def test_default_dropin_path():
    assert ct.default_dropin_path(NVIDIA) == "/etc/containerd/conf.d/99-nvidia.toml"
    assert ct.default_dropin_path(None) == "/etc/containerd/conf.d/99-gpu-node.toml"


def test_dropin_for_v3_holds_version_3_and_only_our_tables():
    dropin_path = "/etc/containerd/conf.d/99-nvidia.toml"
    request = ct.Request(runtime=NVIDIA, default_runtime="runc", enable_cdi=True)
    _, dropin = ct.plan_dropin(V3, PATH, None, dropin_path, request)
    content = plain(dropin.after)
    assert dropin.changed is True
    assert dropin.version == 3
    assert dropin.after.startswith("# Managed by Ansible")
    assert content == {
        "version": 3,
        "plugins": {
            "io.containerd.cri.v1.runtime": {
                "enable_cdi": True,
                "containerd": {
                    "default_runtime_name": "runc",
                    "runtimes": {
                        "nvidia": {
                            **{
                                key: value
                                for key, value in plain(V3)["plugins"]["io.containerd.cri.v1.runtime"]["containerd"][
                                    "runtimes"
                                ]["runc"].items()
                                if key != "options"
                            },
                            "runtime_type": "io.containerd.runc.v2",
                            "options": dict(
                                plain(V3)["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]["runc"][
                                    "options"
                                ],
                                BinaryName="/usr/bin/nvidia-container-runtime",
                            ),
                        }
                    },
                },
            }
        },
    }
    assert content["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]["nvidia"]["options"][
        "SystemdCgroup"
    ]
    assert dropin.runtime_table == 'plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia'


def test_dropin_adds_the_imports_glob_to_the_root_once():
    dropin_path = "/etc/containerd/conf.d/99-nvidia.toml"
    request = ct.Request(runtime=NVIDIA)
    root, dropin = ct.plan_dropin(V3, PATH, None, dropin_path, request)
    assert root.changed is True
    assert removed_lines(V3, root.after) == ["-imports = []"]
    assert '\nimports = ["/etc/containerd/conf.d/*.toml"]\n' in root.after
    again_root, again_dropin = ct.plan_dropin(root.after, PATH, dropin.after, dropin_path, request)
    assert again_root.changed is False
    assert again_root.after == root.after
    assert again_dropin.changed is False
    assert again_dropin.after == dropin.after
    assert again_root.after.count("conf.d/*.toml") == 1


def test_dropin_keeps_other_imports_and_accepts_a_covering_entry():
    dropin_path = "/etc/containerd/conf.d/99-nvidia.toml"
    text = V3.replace("imports = []", 'imports = ["/etc/containerd/extra.toml"]')
    root, _ = ct.plan_dropin(text, PATH, None, dropin_path, ct.Request(runtime=NVIDIA))
    assert plain(root.after)["imports"] == ["/etc/containerd/extra.toml", "/etc/containerd/conf.d/*.toml"]
    for covering in (
        '"conf.d/*.toml"',
        '"/etc/containerd/conf.d/99-*.toml"',
        '"/etc/containerd/conf.d/99-nvidia.toml"',
    ):
        covered, _ = ct.plan_dropin(
            V3.replace("imports = []", f"imports = [{covering}]"), PATH, None, dropin_path, ct.Request()
        )
        assert covered.changed is False, covering


def test_dropin_rewrites_a_drifted_dropin_but_not_a_reformatted_one():
    dropin_path = "/etc/containerd/conf.d/99-nvidia.toml"
    request = ct.Request(enable_cdi=True)
    _, first = ct.plan_dropin(V3, PATH, None, dropin_path, request)
    reformatted = "version=3\n[plugins.'io.containerd.cri.v1.runtime']\nenable_cdi=true\n"
    _, same = ct.plan_dropin(V3, PATH, reformatted, dropin_path, request)
    _, drifted = ct.plan_dropin(V3, PATH, reformatted.replace("true", "false"), dropin_path, request)
    assert same.changed is False
    assert same.after == reformatted
    assert drifted.changed is True
    assert drifted.after == first.after


def test_dropin_for_an_empty_root_writes_version_and_imports():
    root, dropin = ct.plan_dropin(
        "", PATH, None, "/etc/containerd/conf.d/99-gpu-node.toml", ct.Request(enable_cdi=True)
    )
    assert root.after == 'version = 3\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
    assert plain(dropin.after) == {"version": 3, "plugins": {"io.containerd.cri.v1.runtime": {"enable_cdi": True}}}


def test_dropin_for_a_v2_root_uses_v2_tables():
    _, dropin = ct.plan_dropin(V2, PATH, None, "/etc/containerd/conf.d/99-nvidia.toml", ct.Request(runtime=NVIDIA))
    assert plain(dropin.after)["version"] == 2
    assert "io.containerd.grpc.v1.cri" in plain(dropin.after)["plugins"]


# --------------------------------------------------------------------------- the module file (documentation only)


def test_module_file_refuses_to_run_without_its_action_plugin():
    result = run_module(load_module("containerd_config"), {"path": PATH})
    assert result.failed is True
    assert "must run through its action plugin (plugins/action/containerd_config.py)" in result.result["msg"]


def test_documentation_matches_the_action_argument_spec():
    module = load_module("containerd_config")
    action = load_module("containerd_config", subdir="plugins/action")
    doc = {"options": documented_options(module)}
    fragment_options = {
        "owner",
        "group",
        "mode",
        "seuser",
        "serole",
        "setype",
        "selevel",
        "unsafe_writes",
        "attributes",
    }
    assert set(doc["options"]) | fragment_options == set(action.ARGUMENT_SPEC)
    for name, spec in doc["options"].items():
        assert spec["type"] == action.ARGUMENT_SPEC[name]["type"], name
        assert spec.get("default") == action.ARGUMENT_SPEC[name].get("default"), name
        assert spec.get("choices") == action.ARGUMENT_SPEC[name].get("choices"), name
    suboptions = doc["options"]["runtime"]["suboptions"]
    spec_suboptions = action.ARGUMENT_SPEC["runtime"]["options"]
    assert set(suboptions) == set(spec_suboptions)
    for name, spec in suboptions.items():
        assert spec.get("default") == spec_suboptions[name].get("default"), name
        assert bool(spec.get("required")) == bool(spec_suboptions[name].get("required")), name


# --------------------------------------------------------------------------- the action plugin


def _bytes(data) -> bytes:
    return data if isinstance(data, bytes) else data.encode()


class FakeNode:
    """The node as the action sees it: files, `containerd` on PATH, and what the copy action received."""

    def __init__(self, files: dict, containerd: str | None = "containerd github.com/containerd/containerd 1.7.24 abc"):
        self.files = dict(files)
        self.containerd = containerd
        self.commands: list[str] = []
        self.pair_commands: list[str] = []
        self.copies: list[dict] = []
        self.modules: list[tuple[str, dict]] = []
        self.copy_result: dict = {}
        self.transferred: dict = {}
        # containerd's reading of a candidate file: here the candidate itself (a test may replace it)
        self.read_candidate = lambda text: {"rc": 0, "stdout": text, "stderr": ""}
        # containerd's reading of a staged root file with its drop-in (method=dropin): containerd 2.x's (a test may
        # replace it); the drop-in's directory is staged as a copy of the node's with the candidate in it
        self.read_pair = self.merged_reading

    def transfer(self, remote_path, data):
        self.transferred[remote_path] = data
        return remote_path

    def low_level(self, cmd, sudoable=True, **_kwargs):
        self.commands.append(cmd)
        if self.containerd is None:
            return {"rc": 127, "stdout": "", "stderr": "containerd: not found"}
        if cmd.startswith("/bin/sh -c ") and "containerd-root-" in cmd:  # a staged root file with its drop-in
            root = next(path for path in self.transferred if "containerd-root-" in path and path in cmd)
            dropin = next((path for path in self.transferred if "containerd-dropin-" in path and path in cmd), None)
            stage = re.search(r"s='?([^ ';]+containerd-dropin-[a-z0-9]+)'?;", cmd).group(1)
            name = re.search(r"rm -f \"\$s\"/'?([^ ';]+)'?;", cmd).group(1)
            directory = re.search(r"if \[ -d '?([^ ';]+)'? \]", cmd).group(1)
            self.pair_commands.append(cmd)
            return self.read_pair(self.transferred[root], stage, directory, name, self.transferred.get(dropin))
        if cmd.startswith("/bin/sh -c ") and "config dump" in cmd:  # the candidate, staged beside the file
            source = next(path for path in self.transferred if path in cmd)
            return self.read_candidate(self.transferred[source])
        if cmd.endswith("--version"):
            return {"rc": 0, "stdout": f"/usr/bin/containerd\n{self.containerd}\n", "stderr": ""}
        if cmd.endswith("config default"):
            return {"rc": 0, "stdout": V2, "stderr": ""}
        if cmd.endswith("config dump"):  # the effective config: here the file itself (no imports)
            path = cmd.split("--config ", 1)[1].rsplit(" config dump", 1)[0].strip("'")
            return {"rc": 0, "stdout": self.files[path], "stderr": ""}
        raise AssertionError(f"unexpected command {cmd}")

    def merged_reading(self, root_text: str, stage: str, directory: str, name: str, dropin_text) -> dict:
        """What containerd 2.x reads: the root file, then each import in order, plugin tables deep-merged; files
        of the staged directory are the node's files there, the candidate drop-in in place of ``name``."""
        import fnmatch
        import posixpath

        staged = {p: t for p, t in self.files.items() if posixpath.dirname(p) == directory and not p.endswith(name)}
        staged = {posixpath.join(stage, posixpath.basename(p)): t for p, t in staged.items()}
        if dropin_text is not None:
            staged[posixpath.join(stage, name)] = dropin_text
        reading = plain(root_text)
        imported = []
        for entry in reading.get("imports", []):
            pool = staged if entry.startswith(stage + "/") else self.files
            for path in sorted(p for p in pool if fnmatch.fnmatchcase(p, entry)):
                reading = merge(reading, {k: v for k, v in plain(pool[path]).items() if k != "version"})
                imported.append(path)
        reading["imports"] = imported
        return {"rc": 0, "stdout": tomlkit.dumps(reading), "stderr": ""}

    def stat(self, path, all_vars, follow, checksum=True):
        directories = {p.rsplit("/", 1)[0] for p in self.files} | {"/etc/containerd"}
        return {"exists": path in self.files or path in directories, "isdir": path in directories}

    def execute_module(self, module_name, module_args, task_vars=None, wrap_async=False, **_kwargs):
        self.modules.append((module_name, module_args))
        if module_name.endswith("node_files"):
            return fake_node_files(
                module_args, self.files, {p.rsplit("/", 1)[0] for p in self.files} | {"/etc/containerd"}
            )
        if module_name == "ansible.legacy.file":
            return {"changed": True}
        if module_name == "gpunode.provisioning.config_file_write":
            return self.write(module_args)
        raise AssertionError(f"unexpected module {module_name}")

    def write(self, args: dict) -> dict:
        """What config_file_write does with the bytes: compare with what was read, then write."""
        self.copies.append(dict(args))
        if self.copy_result.get("failed"):
            return dict(self.copy_result)
        current = self.files.get(args["dest"])
        current_sha1 = "" if current is None else hashlib.sha1(_bytes(current)).hexdigest()
        if "expected_sha1" in args and args["expected_sha1"] != current_sha1:
            return {"failed": True, "conflict": True, "msg": f"{args['dest']} changed on the node after it was read"}
        self.files[args["dest"]] = args["content"]
        self.on_write(args["dest"])
        return {"changed": True, "path": args["dest"], **self.copy_result}

    def on_write(self, path: str) -> None:
        """Hook for tests: runs after each write."""


def run_action(node: FakeNode, args: dict, check_mode: bool = False) -> dict:
    plugin = load_module("containerd_config", subdir="plugins/action")
    task = mock.MagicMock()
    task.args = args
    task.check_mode = check_mode
    task.diff = True
    task.async_val = 0
    task.action = "containerd_config"
    task.copy.side_effect = lambda: mock.MagicMock(args={})
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    connection._shell.join_path.side_effect = lambda *parts: "/".join(parts)
    action = plugin.ActionModule(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), None)
    with (
        mock.patch.object(action, "_make_tmp_path", return_value="/root/.ansible/tmp/ansible-tmp-1"),
        mock.patch.object(action, "_transfer_data", side_effect=node.transfer),
        mock.patch.object(action, "_fixup_perms2"),
        mock.patch.object(action, "_on_node", side_effect=node.low_level),
        mock.patch.object(action, "_execute_remote_stat", side_effect=node.stat),
        mock.patch.object(action, "_execute_module", side_effect=node.execute_module),
        mock.patch.object(action, "_remove_tmp_path"),
    ):
        return action.run(task_vars={})


def test_action_check_mode_reports_the_change_and_writes_nothing():
    node = FakeNode({PATH: V2})
    result = run_action(node, {"runtime": NVIDIA, "enable_cdi": True}, check_mode=True)
    assert result["changed"] is True
    assert result["msg"] == f"would update {PATH} (check mode, nothing written)"
    assert node.copies == []
    assert node.files[PATH] == V2
    assert result["diff"][0]["before"] == V2
    assert "runtimes.nvidia]" in result["diff"][0]["after"]
    assert result["version"] == 2
    assert result["containerd_version"] == "1.7.24"
    assert result["runtime_table"] == 'plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia'


def test_action_writes_through_config_file_write_with_backup_validate_and_file_attributes():
    node = FakeNode({PATH: V2})
    node.copy_result = {"backup_file": PATH + ".1.bak~"}
    result = run_action(node, {"runtime": NVIDIA, "backup": True, "owner": "root", "mode": "0640"})
    expected = ct.plan_inplace(V2, PATH, ct.Request(runtime=NVIDIA)).after
    assert result["changed"] is True
    assert result["backup_file"] == PATH + ".1.bak~"
    assert node.copies == [
        {
            "content": expected,
            "dest": PATH,
            "backup": True,
            "expected_sha1": hashlib.sha1(V2.encode()).hexdigest(),
            "owner": "root",
            "mode": "0640",
            "unsafe_writes": False,
            "validate": "/usr/bin/containerd --config %s config dump",
        }
    ]
    assert result["msg"] == f"updated {PATH}; restart containerd to apply"


def test_action_does_not_write_when_nothing_changes():
    node = FakeNode({PATH: ct.plan_inplace(V2, PATH, ct.Request(runtime=NVIDIA)).after})
    result = run_action(node, {"runtime": NVIDIA})
    assert result["changed"] is False
    assert result["diff"] == []
    assert node.copies == []
    assert "already as requested" in result["msg"]


def test_action_starts_a_missing_file_from_containerd_config_default():
    node = FakeNode({})
    result = run_action(node, {"runtime": NVIDIA})
    assert result["changed"] is True
    assert any(cmd.endswith("config default") for cmd in node.commands)
    assert node.copies[0]["mode"] == "0644"
    assert plain(node.files[PATH])["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]


def test_action_without_containerd_needs_when_missing_empty_and_skips_validation():
    node = FakeNode({}, containerd=None)
    failed = run_action(node, {"runtime": NVIDIA})
    assert failed["failed"] is True
    assert "containerd is not installed" in failed["msg"]
    assert "when_missing=empty" in failed["msg"]
    node = FakeNode({}, containerd=None)
    result = run_action(node, {"runtime": NVIDIA, "when_missing": "empty"})
    assert result["changed"] is True
    assert "validate" not in node.copies[0]
    assert plain(node.files[PATH])["version"] == 2


def test_action_fails_on_an_unknown_version_without_writing():
    node = FakeNode({PATH: "version = 5\n"})
    result = run_action(node, {"runtime": NVIDIA})
    assert result["failed"] is True
    assert f"{PATH} uses containerd config version 5" in result["msg"]
    assert node.copies == []


def test_action_refuses_dropin_on_containerd_1_7():
    node = FakeNode({PATH: V2})
    result = run_action(node, {"runtime": NVIDIA, "method": "dropin"})
    assert result["failed"] is True
    assert "method=dropin is refused for containerd 1.7.24" in result["msg"]
    assert node.copies == []


def test_action_dropin_on_containerd_2_writes_the_dropin_first_then_the_root():
    node = FakeNode({PATH: V3}, containerd="containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7")
    result = run_action(node, {"runtime": NVIDIA, "method": "dropin"})
    dropin_path = "/etc/containerd/conf.d/99-nvidia.toml"
    assert result["changed"] is True
    assert [copy["dest"] for copy in node.copies] == [dropin_path, PATH]
    assert result["dropin_path"] == dropin_path
    assert plain(node.files[PATH])["imports"] == ["/etc/containerd/conf.d/*.toml"]
    assert plain(node.files[dropin_path])["version"] == 3
    assert (
        "ansible.legacy.file",
        {"path": "/etc/containerd/conf.d", "state": "directory", "mode": "0755"},
    ) in node.modules
    again = run_action(node, {"runtime": NVIDIA, "method": "dropin"})
    assert again["changed"] is False


def test_action_dropin_asks_containerd_how_it_reads_the_root_file_with_the_dropin():
    """Issue 24 item 6 for method=dropin: the current pair and the candidate pair are read by containerd from a
    staged copy of the drop-in directory (root only, removed at once); the first run has no drop-in yet."""
    node = FakeNode({PATH: V3}, containerd="containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7")
    result = run_action(node, {"runtime": NVIDIA, "method": "dropin"})
    assert result["changed"] is True, result
    assert len(node.pair_commands) == 2
    for command in node.pair_commands:
        assert "umask 077" in command and "rm -rf" in command and "cp -a" in command
        assert "/etc/containerd/conf.d" in command and "config dump" in command
    current, candidate = node.pair_commands
    assert "cat " not in current and "cat " in candidate  # no drop-in yet; then the new one


DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
ADMIN_OVERRIDE = """version = 3
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]
  BinaryName = "/usr/sbin/runc"
"""


def test_action_dropin_refuses_what_a_later_import_reads_otherwise_and_writes_nothing():
    """An admin's drop-in after ours gives nvidia another binary: containerd's reading of the pair says so, the
    refusal names the table, and neither file is written."""
    root = V3  # imports = []: the run adds conf.d/*.toml, which then reads the admin's file after ours
    admin = "/etc/containerd/conf.d/99-zz-admin.toml"
    node = FakeNode({PATH: root, admin: ADMIN_OVERRIDE}, "containerd github.com/containerd/containerd/v2 v2.1.4 a")
    before = dict(node.files)
    result = run_action(node, {"runtime": NVIDIA, "method": "dropin"})
    assert result["failed"] is True, result
    said = result["msg"]
    assert f"containerd reads the new {DROPIN} (imported by {PATH}) otherwise than meant" in said, said
    assert "runtimes.nvidia.options.BinaryName is '/usr/sbin/runc', not '/usr/bin/nvidia-container-runtime'" in said
    assert f"{DROPIN} (imported by {PATH}) was left as it was" in said
    assert node.copies == [] and node.files == before


def test_stage_imports_moves_the_dropin_directory_and_makes_the_rest_absolute():
    root = 'version = 3\nimports = ["conf.d/*.toml", "/etc/containerd/other.toml", "../x/*.toml"]\n'
    staged = plain(ct.stage_imports(root, PATH, DROPIN, "/tmp/stage"))
    assert staged["imports"] == ["/tmp/stage/*.toml", "/etc/containerd/other.toml", "/etc/x/*.toml"]
    assert ct.stage_imports("version = 3\n", PATH, DROPIN, "/tmp/stage") == "version = 3\n"
    reading = {"version": 3, "imports": ["/tmp/root.toml", "/tmp/stage/99-nvidia.toml", "/etc/x/a.toml"]}
    assert ct.unstage_reading(reading, "/tmp/root.toml", PATH, "/tmp/stage", DROPIN)["imports"] == [
        PATH,
        DROPIN,
        "/etc/x/a.toml",
    ]


def test_action_reports_a_failed_validation_and_names_the_file():
    node = FakeNode({PATH: V2})
    node.copy_result = {"failed": True, "msg": "failed to validate", "stderr": "containerd: failed to unmarshal TOML"}
    result = run_action(node, {"settings": {"oom_score": "abc"}})
    assert result["failed"] is True
    assert result["msg"].startswith(f"{PATH} was not changed: writing the new config failed: failed to validate")
    assert "containerd rejected the candidate" in result["msg"]
    assert result["stderr"] == "containerd: failed to unmarshal TOML"
    assert node.files[PATH] == V2


def test_action_rejects_unknown_options():
    from ansible.errors import AnsibleActionFail

    with pytest.raises(AnsibleActionFail, match="Unsupported parameters"):
        run_action(FakeNode({PATH: V2}), {"runtime": NVIDIA, "mode_of_operation": "x"})


def test_action_reads_and_merges_again_when_another_run_wrote_the_file_in_between():
    node = FakeNode({PATH: V2})
    other = V2.replace("oom_score = 0", "oom_score = -999")
    reads = []
    execute = node.execute_module

    def racing(module_name, module_args, **kwargs):
        result = execute(module_name, module_args, **kwargs)
        if module_name.endswith("node_files"):
            reads.append(module_args["files"][0]["path"])
            if len(reads) == 1:
                node.files[PATH] = other  # another run writes between our read and our write
        return result

    node.execute_module = racing
    result = run_action(node, {"runtime": NVIDIA})
    assert result["changed"] is True, result
    assert len(reads) == 2 and len(node.copies) == 2, "the first write was refused, the second attempt re-read"
    assert plain(node.files[PATH])["oom_score"] == -999, "the other run's change is kept"
    assert plain(node.files[PATH])["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["nvidia"]


# --------------------------------------------------------------------------- the effective config (issue 12)

PACKAGED = (FIXTURES / "debian-packaged-config.toml").read_text()
DUMPS = {
    name: plain((FIXTURES / f"dump-{name}-packaged.toml").read_text()) for name in ("debian12", "debian13", "forky")
}


def _effective_runtimes(dump: dict) -> dict:
    version = dump.get("version", 1)
    return get_path(dump, [*CRI[version], "containerd", "runtimes"])


@pytest.mark.parametrize("node", ["debian12", "debian13", "forky"])
def test_debian_packaged_config_gets_the_default_runtime_table_and_a_whole_copy_for_nvidia(node):
    """Debian's packaged config.toml has no runtimes table: a table holding only nvidia would drop containerd's
    built-in runc, and containerd 1.6/1.7's CRI plugin then fails to load (default_runtime_name "runc" missing)."""
    dump = DUMPS[node]
    outcome = ct.plan_inplace(PACKAGED, PATH, ct.Request(runtime=NVIDIA, effective=dump, defaults=dump))
    runtimes = get_path(plain(outcome.after), [*CRI[2], "containerd", "runtimes"])
    runc = _effective_runtimes(dump)["runc"]
    assert outcome.default_table_written == "runc"
    assert runtimes["runc"] == runc
    expected = {**runc, "options": {**runc["options"], "BinaryName": "/usr/bin/nvidia-container-runtime"}}
    assert runtimes["nvidia"] == expected
    assert set(runtimes) == {"runc", "nvidia"}
    assert removed_lines(PACKAGED, outcome.after) == []


def test_debian_packaged_config_is_stable_on_the_second_run():
    dump = DUMPS["debian12"]
    request = ct.Request(runtime=NVIDIA, effective=dump, defaults=dump)
    first = ct.plan_inplace(PACKAGED, PATH, request)
    # containerd's dump after the first run: its defaults with the file's tables over them
    second_request = ct.Request(runtime=NVIDIA, effective=merge(dump, plain(first.after)), defaults=dump)
    second = ct.plan_inplace(first.after, PATH, second_request)
    assert second.changed is False
    assert second.default_table_written is None


def test_the_copy_follows_the_effective_default_runtime_not_only_the_file():
    dump = merge(
        DUMPS["debian13"],
        {
            "plugins": {
                "io.containerd.grpc.v1.cri": {
                    "containerd": {
                        "runtimes": {
                            "runc": {
                                "base_runtime_spec": "/etc/containerd/base-spec.json",
                                "pod_annotations": ["io.kubernetes.cri.*"],
                                "options": {"SystemdCgroup": True},
                            }
                        }
                    }
                }
            }
        },
    )
    outcome = ct.plan_inplace(PACKAGED, PATH, ct.Request(runtime=NVIDIA, effective=dump, defaults=DUMPS["debian13"]))
    nvidia = get_path(plain(outcome.after), [*CRI[2], "containerd", "runtimes", "nvidia"])
    assert nvidia["base_runtime_spec"] == "/etc/containerd/base-spec.json"
    assert nvidia["pod_annotations"] == ["io.kubernetes.cri.*"]
    assert nvidia["options"]["SystemdCgroup"] is True
    assert nvidia["privileged_without_host_devices_all_devices_allowed"] is False
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"


def test_set_as_default_false_removes_nvidia_as_the_default():
    text = V2.replace('default_runtime_name = "runc"', 'default_runtime_name = "nvidia"')
    first = ct.plan_inplace(text, PATH, ct.Request(runtime=NVIDIA, default_runtime="nvidia"))
    outcome = ct.plan_inplace(first.after, PATH, ct.Request(runtime=NVIDIA, unset_default=True))
    after = plain(outcome.after)
    assert outcome.changed is True
    assert "default_runtime_name" not in get_path(after, [*CRI[2], "containerd"])
    assert removed_lines(first.after, outcome.after) == ['-      default_runtime_name = "nvidia"']
    # nothing else to do the next time
    assert ct.plan_inplace(outcome.after, PATH, ct.Request(runtime=NVIDIA, unset_default=True)).changed is False


def test_unset_default_leaves_another_default_alone():
    text = V2.replace('default_runtime_name = "runc"', 'default_runtime_name = "crun"')
    outcome = ct.plan_inplace(text, PATH, ct.Request(runtime=NVIDIA, unset_default=True))
    assert get_path(plain(outcome.after), [*CRI[2], "containerd", "default_runtime_name"]) == "crun"


def test_an_imported_file_that_makes_nvidia_the_default_is_refused_with_what_to_do():
    dump = merge(
        DUMPS["debian12"],
        {
            "imports": ["/etc/containerd/conf.d/*.toml"],
            "plugins": {"io.containerd.grpc.v1.cri": {"containerd": {"default_runtime_name": "nvidia"}}},
        },
    )
    with pytest.raises(ct.ContainerdConfigError) as err:
        ct.plan_inplace(PACKAGED, PATH, ct.Request(runtime=NVIDIA, unset_default=True, effective=dump))
    message = str(err.value)
    assert "makes 'nvidia' the default runtime" in message
    assert "/etc/containerd/conf.d/*.toml" in message
    assert "Remove default_runtime_name from that file" in message


def test_an_imported_file_that_overrides_the_nvidia_binary_is_refused():
    nvidia = {"runtime_type": "io.containerd.runc.v2", "options": {"BinaryName": "/opt/old/nvidia-container-runtime"}}
    dump = merge(
        DUMPS["forky"],
        {
            "imports": ["/etc/containerd/conf.d/*.toml"],
            "plugins": {"io.containerd.cri.v1.runtime": {"containerd": {"runtimes": {"nvidia": nvidia}}}},
        },
    )
    with pytest.raises(ct.ContainerdConfigError) as err:
        ct.plan_inplace(PACKAGED, PATH, ct.Request(runtime=NVIDIA, effective=dump))
    assert "BinaryName = '/opt/old/nvidia-container-runtime'" in str(err.value)
    assert "Remove runtimes.nvidia from that file" in str(err.value)


def test_dotted_key_quotes_a_key_with_a_trailing_newline():
    assert ct.dotted_key(("plugins", "cri\n")) == 'plugins."cri\n"'
    assert ct.dotted_key(("plugins", "io.containerd.grpc.v1.cri")) == 'plugins."io.containerd.grpc.v1.cri"'


def _dropin_runs(first_request: dict, second_request: dict):
    """plan_dropin on containerd 2.1's config twice, the second time with the effective config containerd would
    dump after the first run: its defaults, the root file and our drop-in over them."""
    dump, dropin_path = DUMPS["forky"], "/etc/containerd/conf.d/99-nvidia.toml"
    root, dropin = ct.plan_dropin(
        V3, PATH, None, dropin_path, ct.Request(runtime=NVIDIA, effective=merge(dump, plain(V3)), **first_request)
    )
    effective = merge(merge(dump, plain(root.after)), plain(dropin.after))
    again = ct.plan_dropin(
        root.after, PATH, dropin.after, dropin_path, ct.Request(runtime=NVIDIA, effective=effective, **second_request)
    )
    return (root, dropin), again


def test_dropin_method_is_stable_on_the_second_run_with_the_effective_config():
    """Our own drop-in defines runtimes.nvidia: it must not be taken for an import that overrides the root file."""
    _, (root, dropin) = _dropin_runs({}, {})
    assert root.changed is False and dropin.changed is False


def test_dropin_method_takes_nvidia_back_out_of_the_default():
    (_, first), (_, second) = _dropin_runs({"default_runtime": "nvidia"}, {"unset_default": True})
    assert 'default_runtime_name = "nvidia"' in first.after
    assert second.changed is True
    assert 'default_runtime_name = "nvidia"' not in second.after


# --------------------------------------------------------------------------- option keys, case-insensitively
# containerd decodes a runtime's options case-insensitively: kubespray 2.24-2.27's `binaryName` and our
# `BinaryName` are one field, so the nvidia table must spell it once (ours).

KUBESPRAY = (FIXTURES / "v2-kubespray-2.27.toml").read_text()
KS_RUNTIMES = [*CRI[2], "containerd", "runtimes"]


def binary_keys(options: dict) -> list:
    return [key for key in options if key.lower() == "binaryname"]


def test_kubespray_lower_case_binary_name_is_not_copied_next_to_ours():
    outcome = ct.plan_inplace(KUBESPRAY, PATH, ct.Request(runtime=NVIDIA))
    runtimes = get_path(plain(outcome.after), KS_RUNTIMES)
    nvidia = runtimes["nvidia"]
    assert binary_keys(nvidia["options"]) == ["BinaryName"]
    assert nvidia["options"] == {"systemdCgroup": True, "BinaryName": "/usr/bin/nvidia-container-runtime"}
    # the rest of runc's table is copied, runc itself untouched, nothing removed from the file
    assert nvidia["base_runtime_spec"] == "/etc/containerd/cri-base.json"
    assert runtimes["runc"]["options"] == {"systemdCgroup": True, "binaryName": "/usr/local/bin/runc"}
    assert removed_lines(KUBESPRAY, outcome.after) == []
    again = ct.plan_inplace(outcome.after, PATH, ct.Request(runtime=NVIDIA))
    assert again.changed is False


def test_a_stale_other_spelling_in_the_nvidia_table_is_removed():
    # an nvidia table that kubespray (or an older run of ours) wrote with binaryName = runc
    first = ct.plan_inplace(KUBESPRAY, PATH, ct.Request(runtime=NVIDIA)).after
    stale = first.replace('BinaryName = "/usr/bin/nvidia-container-runtime"', 'binaryName = "/usr/local/bin/runc"')
    assert stale != first
    outcome = ct.plan_inplace(stale, PATH, ct.Request(runtime=NVIDIA))
    nvidia = get_path(plain(outcome.after), [*KS_RUNTIMES, "nvidia"])
    assert outcome.changed is True
    assert binary_keys(nvidia["options"]) == ["BinaryName"]
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"


def test_both_spellings_in_the_nvidia_table_end_as_ours_only():
    text = KUBESPRAY + (
        '        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
        '          runtime_type = "io.containerd.runc.v2"\n'
        '          [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        '            BinaryName = "/usr/bin/nvidia-container-runtime"\n'
        '            binaryName = "/usr/local/bin/runc"\n'
        "            systemdCgroup = true\n"
    )
    outcome = ct.plan_inplace(text, PATH, ct.Request(runtime=NVIDIA))
    options = get_path(plain(outcome.after), [*KS_RUNTIMES, "nvidia", "options"])
    assert outcome.changed is True
    assert binary_keys(options) == ["BinaryName"]
    assert options["BinaryName"] == "/usr/bin/nvidia-container-runtime"


def test_explicit_options_replace_other_spellings_of_the_same_option():
    request = ct.Request(runtime={**NVIDIA, "options": {"SystemdCgroup": False}})
    options = get_path(plain(ct.plan_inplace(KUBESPRAY, PATH, request).after), [*KS_RUNTIMES, "nvidia", "options"])
    assert options == {"SystemdCgroup": False, "BinaryName": "/usr/bin/nvidia-container-runtime"}


def test_dropin_removes_the_other_spelling_from_the_root_file():
    root_text = ct.plan_inplace(KUBESPRAY, PATH, ct.Request(runtime=NVIDIA)).after.replace(
        'BinaryName = "/usr/bin/nvidia-container-runtime"', 'binaryName = "/usr/local/bin/runc"'
    )
    root, dropin = ct.plan_dropin(
        root_text, PATH, None, "/etc/containerd/conf.d/99-nvidia.toml", ct.Request(runtime=NVIDIA)
    )
    assert root.changed is True
    assert binary_keys(get_path(plain(root.after), [*KS_RUNTIMES, "nvidia", "options"])) == []
    assert binary_keys(get_path(plain(dropin.after), [*KS_RUNTIMES, "nvidia", "options"])) == ["BinaryName"]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"BinaryName": "/a"}, "/a"),
        ({"binaryName": "/a"}, "/a"),
        ({"binaryname": "/a", "BinaryName": "/a"}, "/a"),
        ({"binaryName": "/a", "BinaryName": "/b"}, frozenset({"/a", "/b"})),
        ({"SystemdCgroup": True}, None),
        (None, None),
    ],
)
def test_option_value_reads_like_containerd(options, expected):
    assert ct.option_value(options, "BinaryName") == expected


def test_fold_options_keeps_one_spelling_per_option_the_last_layers():
    folded = ct.fold_options(
        {"binaryName": "/runc", "systemdCgroup": True, "Root": ""}, {"SystemdCgroup": False}, {"BinaryName": "/nv"}
    )
    assert folded == {"Root": "", "SystemdCgroup": False, "BinaryName": "/nv"}


def test_an_import_with_the_other_spelling_of_another_binary_is_refused():
    effective = plain(KUBESPRAY)
    get_path(effective, KS_RUNTIMES)["nvidia"] = {
        "runtime_type": "io.containerd.runc.v2",
        "options": {"BinaryName": "/usr/bin/nvidia-container-runtime", "binaryName": "/usr/local/bin/runc"},
    }
    text = ct.plan_inplace(KUBESPRAY, PATH, ct.Request(runtime=NVIDIA)).after
    with pytest.raises(ct.ContainerdConfigError, match="BinaryName"):
        ct.plan_inplace(text, PATH, ct.Request(runtime=NVIDIA, effective=effective))
    # the same binary under the other spelling is the same runtime: accepted
    get_path(effective, KS_RUNTIMES)["nvidia"]["options"] = {"binaryName": "/usr/bin/nvidia-container-runtime"}
    assert ct.plan_inplace(text, PATH, ct.Request(runtime=NVIDIA, effective=effective)).changed is False


# --------------------------------------------------------------------------- a default that moves (issue 25)

# The EKS GPU AMI's shape: only an nvidia runtime, the default, with SystemdCgroup = true.
NVIDIA_ONLY = {
    2: (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "nvidia"\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n  runtime_type = "io.containerd.runc.v2"\n'
        '  base_runtime_spec = "/etc/containerd/base-runtime-spec.json"\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
        '  BinaryName = "/usr/bin/nvidia-container-runtime"\n  SystemdCgroup = true\n'
    ),
    3: (
        'version = 3\n[plugins."io.containerd.cri.v1.runtime".containerd]\n  default_runtime_name = "nvidia"\n'
        '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia]\n'
        '  runtime_type = "io.containerd.runc.v2"\n'
        '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia.options]\n'
        '  binaryName = "/usr/bin/nvidia-container-runtime"\n  SystemdCgroup = true\n'
    ),
}


@pytest.mark.parametrize("version", [2, 3])
def test_a_default_that_moves_keeps_the_old_defaults_options_in_runc_and_nvidia(version):
    defaults = DUMPS["debian13"] if version == 2 else None
    request = ct.Request(runtime=NVIDIA, unset_default=True, defaults=defaults)
    outcome = ct.plan_inplace(NVIDIA_ONLY[version], PATH, request)
    runtimes = get_path(plain(outcome.after), [*CRI[version], "containerd", "runtimes"])
    assert "default_runtime_name" not in get_path(plain(outcome.after), [*CRI[version], "containerd"])
    assert runtimes["runc"]["options"] == {"SystemdCgroup": True}  # only the binary differs
    assert runtimes["runc"]["runtime_type"] == "io.containerd.runc.v2"
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    if version == 2:
        assert runtimes["runc"]["base_runtime_spec"] == "/etc/containerd/base-runtime-spec.json"
    assert outcome.options_copied_from == "nvidia"
    # stable: the next run copies nvidia from the runc table it wrote and changes nothing
    again = ct.plan_inplace(outcome.after, PATH, ct.Request(runtime=NVIDIA, unset_default=True, defaults=defaults))
    assert again.changed is False, again.after


def test_a_default_that_moves_leaves_a_runc_table_of_the_file_alone():
    cns = (Path(__file__).parents[1] / "fixtures/gpu_pods/cns-containerd-config.toml").read_text()
    outcome = ct.plan_inplace(cns, PATH, ct.Request(runtime=NVIDIA, unset_default=True))
    runtimes = get_path(plain(outcome.after), [*CRI[2], "containerd", "runtimes"])
    assert runtimes["runc"]["options"] == {"SystemdCgroup": True}
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert runtimes["nvidia"]["runtime_type"] == "io.containerd.runc.v2"
    assert removed_lines(cns, outcome.after) == [
        '-      default_runtime_name = "nvidia"',
        '-            runtime_type = "io.containerd.runc.v1"',
    ]


def test_a_default_that_stays_keeps_its_own_table_when_the_file_has_no_runc():
    # nvidia_container_toolkit_keep_gpu_pod_access on the EKS shape: nvidia stays the default with SystemdCgroup
    request = ct.Request(runtime=NVIDIA, default_runtime="nvidia", defaults=DUMPS["debian13"])
    outcome = ct.plan_inplace(NVIDIA_ONLY[2], PATH, request)
    runtimes = get_path(plain(outcome.after), [*CRI[2], "containerd", "runtimes"])
    assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
    assert outcome.changed is False, outcome.after


# --------------------------------------------------------------------------- the daemon's reading (issue 24)

# A version 2 file with containerd 2.x table names, as AKS ships for containerd 2.0: containerd 2.x reads a
# version 2 file's runtimes from io.containerd.grpc.v1.cri (migrated to version 3), so what this file says
# under io.containerd.cri.v1.runtime, and the nvidia entry the plan writes, are not what it runs.
AKS_STYLE = """version = 2
[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "runc"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  SystemdCgroup = true
"""


def _dump(runtimes: dict, default: str = "runc", **cri) -> dict:
    """A containerd 2.x reading (`config dump`, version 3) with these runtimes."""
    return {
        "version": 3,
        "root": "/var/lib/containerd",
        "plugins": {
            "io.containerd.cri.v1.runtime": {
                "enable_cdi": True,
                **cri,
                "containerd": {"default_runtime_name": default, "runtimes": runtimes},
            },
            "io.containerd.cri.v1.images": {"registry": {"config_path": ""}},
        },
    }


RUNC = {"runtime_type": "io.containerd.runc.v2", "options": {"SystemdCgroup": True}}
NVIDIA_READ = {
    "runtime_type": "io.containerd.runc.v2",
    "options": {"SystemdCgroup": True, "BinaryName": NVIDIA["path"]},
}


def test_verify_reading_accepts_the_runtime_with_our_binary_and_nothing_else_changed():
    before = _dump({"runc": RUNC})
    ct.verify_reading(PATH, before, _dump({"runc": RUNC, "nvidia": NVIDIA_READ}), ct.Request(runtime=NVIDIA))
    # a missing file: only the runtime and the default are compared
    ct.verify_reading(PATH, None, _dump({"runc": RUNC, "nvidia": NVIDIA_READ}), ct.Request(runtime=NVIDIA))


def test_verify_reading_refuses_a_file_whose_version_does_not_match_its_table_names():
    written = plain(ct.plan_inplace(AKS_STYLE, PATH, ct.Request(runtime=NVIDIA)).after)
    # what containerd 2.x reads of it: the file's v3-named tables are not the runtimes it runs
    with pytest.raises(ct.ContainerdConfigError) as err:
        ct.verify_reading(
            PATH,
            _dump({"runc": {"runtime_type": "io.containerd.runc.v2", "options": {}}}),
            _dump({"runc": {"runtime_type": "io.containerd.runc.v2", "options": {}}}),
            ct.Request(runtime=NVIDIA),
            written,
            'plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia',
        )
    said = str(err.value)
    assert 'has no plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia (runtimes it reads: runc)' in said
    assert 'The plan wrote plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia' in said
    assert 'plugins."io.containerd.cri.v1.runtime".containerd.runtimes (runc)' in said  # the file's own table
    assert "make 'version' match the table names" in said
    assert f"{PATH} was left as it was" in said


def test_verify_reading_refuses_another_binary_or_runtime_type():
    other = {**NVIDIA_READ, "options": {**NVIDIA_READ["options"], "BinaryName": "/usr/local/bin/other"}}
    with pytest.raises(ct.ContainerdConfigError, match=r"runtimes\.nvidia\.options\.BinaryName is '/usr/local/bin/"):
        ct.verify_reading(PATH, _dump({"runc": RUNC}), _dump({"runc": RUNC, "nvidia": other}), ct.Request(NVIDIA))
    kata = {**NVIDIA_READ, "runtime_type": "io.containerd.kata.v2"}
    with pytest.raises(ct.ContainerdConfigError, match=r"runtime_type is 'io.containerd.kata.v2', not 'io.containerd"):
        ct.verify_reading(PATH, _dump({"runc": RUNC}), _dump({"runc": RUNC, "nvidia": kata}), ct.Request(NVIDIA))


def test_verify_reading_checks_the_default_as_asked():
    after = _dump({"runc": RUNC, "nvidia": NVIDIA_READ}, default="nvidia")
    with pytest.raises(ct.ContainerdConfigError, match="default_runtime_name is 'nvidia': every pod without"):
        ct.verify_reading(PATH, _dump({"runc": RUNC}), after, ct.Request(runtime=NVIDIA))
    ct.verify_reading(PATH, _dump({"runc": RUNC}), after, ct.Request(runtime=NVIDIA, default_runtime="nvidia"))
    with pytest.raises(ct.ContainerdConfigError, match="default_runtime_name is 'runc', not 'nvidia' as asked"):
        ct.verify_reading(
            PATH,
            _dump({"runc": RUNC}),
            _dump({"runc": RUNC, "nvidia": NVIDIA_READ}),
            ct.Request(runtime=NVIDIA, default_runtime="nvidia"),
        )
    # nvidia stays the default where it already was and nothing asks otherwise; unset_default refuses it
    before = _dump({"runc": RUNC, "nvidia": NVIDIA_READ}, default="nvidia")
    ct.verify_reading(PATH, before, after, ct.Request(runtime=NVIDIA))
    with pytest.raises(ct.ContainerdConfigError, match="every pod without a RuntimeClass"):
        ct.verify_reading(PATH, before, after, ct.Request(runtime=NVIDIA, unset_default=True))


def test_verify_reading_refuses_changes_that_were_not_asked_for_and_names_them():
    before = _dump({"runc": RUNC})
    lost = _dump({"runc": {"runtime_type": "io.containerd.runc.v2", "options": {}}, "nvidia": NVIDIA_READ})
    with pytest.raises(ct.ContainerdConfigError) as err:
        ct.verify_reading(PATH, before, lost, ct.Request(runtime=NVIDIA))
    assert 'changes what was not asked for: plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc' in str(
        err.value
    )
    # CDI and the request's settings may change; a version 2 setting is found under containerd 2.x's plugin id
    request = ct.Request(
        runtime=NVIDIA,
        enable_cdi=True,
        settings={"plugins": {"io.containerd.grpc.v1.cri": {"registry": {"config_path": "/etc/containerd/certs.d"}}}},
    )
    after = _dump({"runc": RUNC, "nvidia": NVIDIA_READ}, cdi_spec_dirs=["/etc/cdi"])
    after["plugins"]["io.containerd.cri.v1.images"]["registry"]["config_path"] = "/etc/containerd/certs.d"
    ct.verify_reading(PATH, before, after, request)
    after["root"] = "/data/containerd"
    with pytest.raises(ct.ContainerdConfigError, match="changes what was not asked for: root"):
        ct.verify_reading(PATH, before, after, request)


def test_action_refuses_a_candidate_containerd_reads_without_the_runtime_and_writes_nothing():
    """The action asks containerd how it reads the candidate before writing (here: a reading without nvidia, as
    containerd 2.x reads the AKS-style file); the refusal names the tables and nothing is written."""
    node = FakeNode({PATH: AKS_STYLE}, containerd="containerd github.com/containerd/containerd/v2 v2.1.4 abc")
    runc_only = tomlkit.dumps(_dump({"runc": {"runtime_type": "io.containerd.runc.v2", "options": {}}}))
    node.read_candidate = lambda _text: {"rc": 0, "stdout": runc_only, "stderr": ""}
    result = run_action(node, {"runtime": NVIDIA})
    assert result["failed"] is True
    assert "containerd reads the new /etc/containerd/config.toml otherwise than meant" in result["msg"]
    assert 'has no plugins."io.containerd.cri.v1.runtime".containerd.runtimes.nvidia' in result["msg"]
    assert node.copies == [] and node.files[PATH] == AKS_STYLE
    staged = [c for c in node.commands if c.startswith("/bin/sh -c ")]
    assert len(staged) == 2 and all("/etc/containerd/.config.toml." in c and ".tmp" in c for c in staged)
    assert all("umask 077" in c and "rm -f" in c for c in staged)


def test_action_refuses_a_candidate_containerd_cannot_read():
    node = FakeNode({PATH: V2})
    node.read_candidate = lambda _text: {"rc": 1, "stdout": "", "stderr": "failed to load TOML: bad"}
    result = run_action(node, {"runtime": NVIDIA})
    assert result["failed"] is True
    assert "containerd cannot read the config" in result["msg"] and "failed to load TOML: bad" in result["msg"]
    assert node.copies == []


def test_a_reading_of_a_staged_copy_names_the_file_itself_in_imports():
    """containerd 1.6/1.7 list the file they were given in the dump's imports: two staged copies of one file
    (current and candidate, each under its own temporary name) must read alike, or every edit is refused
    as a change of `imports` (seen on the demo node's containerd 1.6.20)."""
    staged = {"version": 2, "imports": ["/etc/containerd/.config.toml.ab12cd34.tmp", "/etc/containerd/conf.d/x.toml"]}
    assert ct.reading_as(staged, "/etc/containerd/.config.toml.ab12cd34.tmp", PATH) == {
        "version": 2,
        "imports": [PATH, "/etc/containerd/conf.d/x.toml"],
    }
    before = {**_dump({"runc": RUNC}), "imports": ["/etc/containerd/.config.toml.aaaaaaaa.tmp"]}
    after = {**_dump({"runc": RUNC, "nvidia": NVIDIA_READ}), "imports": ["/etc/containerd/.config.toml.bbbbbbbb.tmp"]}
    with pytest.raises(ct.ContainerdConfigError, match="changes what was not asked for: imports"):
        ct.verify_reading(PATH, before, after, ct.Request(runtime=NVIDIA))
    ct.verify_reading(
        PATH,
        ct.reading_as(before, "/etc/containerd/.config.toml.aaaaaaaa.tmp", PATH),
        ct.reading_as(after, "/etc/containerd/.config.toml.bbbbbbbb.tmp", PATH),
        ct.Request(runtime=NVIDIA),
    )


def test_verify_reading_accepts_the_runc_table_a_default_that_moves_brings():
    """Issue 25 on an EKS-shaped file: the default moves from nvidia to runc, and the runc table written keeps the
    old default's options, so containerd's runc reading changes: asked for, not refused."""
    before = _dump({"runc": {"runtime_type": "io.containerd.runc.v2", "options": {}}, "nvidia": NVIDIA_READ}, "nvidia")
    after = _dump({"runc": RUNC, "nvidia": NVIDIA_READ}, default="runc")
    ct.verify_reading(PATH, before, after, ct.Request(runtime=NVIDIA, unset_default=True))
    # the same runc change without a default that moves is still refused
    with pytest.raises(ct.ContainerdConfigError, match=r"not asked for: .*runtimes\.runc"):
        ct.verify_reading(
            PATH,
            _dump({"runc": {"runtime_type": "io.containerd.runc.v2", "options": {}}, "nvidia": NVIDIA_READ}),
            after,
            ct.Request(runtime=NVIDIA),
        )


def test_verify_reading_reads_the_binary_name_case_insensitively_as_containerd_does():
    lower = {"runtime_type": "io.containerd.runc.v2", "options": {"binaryName": NVIDIA["path"]}}
    ct.verify_reading(PATH, _dump({"runc": RUNC}), _dump({"runc": RUNC, "nvidia": lower}), ct.Request(NVIDIA))


def test_kubesprays_render_of_the_entry_the_role_reports_is_what_the_merge_wants():
    """kubespray with the containerd_additional_runtimes entry runtime_config reports (plugins/filter/installer.py)
    renders the nvidia runtime itself; the role's merge then changes nothing (rendered by the scenario's TEST
    STAND-IN, molecule/installers/files/kubespray-rerender-standin.py)."""
    import importlib.util

    from conftest import load_module

    entry = load_module("installer", subdir="plugins/filter").kubespray_runtime(
        KUBESPRAY, "nvidia", "/usr/bin/nvidia-container-runtime"
    )
    path = FIXTURES.parents[2] / "molecule/installers/files/kubespray-rerender-standin.py"
    spec = importlib.util.spec_from_file_location("kubespray_rerender_standin", path)
    standin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(standin)
    rendered = standin.render({"containerd_additional_runtimes": [entry]})
    assert ct.plan_inplace(rendered, PATH, ct.Request(runtime=NVIDIA)).changed is False
    assert ct.plan_inplace(standin.render({}), PATH, ct.Request(runtime=NVIDIA)).changed is True
