"""Tests of toml_merge: the pure plan() and the action plugin (through a fake node), plus its documentation."""

from __future__ import annotations

import hashlib
from unittest import mock

import pytest
import tomlkit
from conftest import documented_options, fake_node_files, load_module, run_module

PATH = "/etc/nvidia-container-runtime/config.toml"

# The file as the NVIDIA toolkit package writes it (1.17.x), shortened: comments, top-level keys, tables.
PACKAGE_DEFAULT = """\
#accept-nvidia-visible-devices-as-volume-mounts = false
#accept-nvidia-visible-devices-envvar-when-unprivileged = true
disable-require = false
supported-driver-capabilities = "compat32,compute,display,graphics,ngx,utility,video"
#swarm-resource = "DOCKER_RESOURCE_GPU"

[nvidia-container-cli]
#debug = "/var/log/nvidia-container-toolkit.log"
environment = []
ldconfig = "@/sbin/ldconfig"
load-kmods = true

[nvidia-container-runtime]
#debug = "/var/log/nvidia-container-runtime.log"
log-level = "info"
mode = "auto"
runtimes = ["docker-runc", "runc", "crun"]

[nvidia-container-runtime.modes.cdi]
annotation-prefixes = ["cdi.k8s.io/"]
default-kind = "nvidia.com/gpu"
spec-dirs = ["/etc/cdi", "/var/run/cdi"]
"""

HARDENING = {
    "accept-nvidia-visible-devices-envvar-when-unprivileged": False,
    "accept-nvidia-visible-devices-as-volume-mounts": True,
}

tm = load_module("toml_merge", subdir="plugins/action")


def parsed(text: str) -> dict:
    return tomlkit.parse(text).unwrap()


# --------------------------------------------------------------------------- plan(): the pure merge


def test_hardening_keys_are_set_at_the_top_level_and_everything_else_is_kept_byte_for_byte():
    outcome = tm.plan(PACKAGE_DEFAULT, PATH, HARDENING)
    assert outcome.changed is True
    value = parsed(outcome.after)
    assert value["accept-nvidia-visible-devices-envvar-when-unprivileged"] is False
    assert value["accept-nvidia-visible-devices-as-volume-mounts"] is True
    # top-level keys must come before the first table, or they would land inside it
    head = outcome.after.split("[nvidia-container-cli]")[0]
    assert "accept-nvidia-visible-devices-as-volume-mounts = true" in head
    assert "accept-nvidia-visible-devices-envvar-when-unprivileged = false" in head
    # every line of the package's file (comments included) is still there, in order
    kept = [line for line in outcome.after.splitlines() if line in PACKAGE_DEFAULT.splitlines()]
    assert kept == PACKAGE_DEFAULT.splitlines()
    assert value["nvidia-container-runtime"]["modes"]["cdi"]["spec-dirs"] == ["/etc/cdi", "/var/run/cdi"]


def test_merging_again_changes_nothing_and_returns_the_text_unchanged():
    first = tm.plan(PACKAGE_DEFAULT, PATH, HARDENING)
    second = tm.plan(first.after, PATH, HARDENING)
    assert second.changed is False
    assert second.after == second.before == first.after


def test_an_existing_value_is_replaced_in_place():
    text = "accept-nvidia-visible-devices-as-volume-mounts = false  # from the package\n[x]\ny = 1\n"
    outcome = tm.plan(text, PATH, {"accept-nvidia-visible-devices-as-volume-mounts": True})
    assert outcome.after == "accept-nvidia-visible-devices-as-volume-mounts = true  # from the package\n[x]\ny = 1\n"


def test_nested_tables_merge_key_by_key():
    outcome = tm.plan(PACKAGE_DEFAULT, PATH, {"nvidia-container-runtime": {"mode": "cdi", "debug": "/var/log/r.log"}})
    runtime = parsed(outcome.after)["nvidia-container-runtime"]
    assert runtime["mode"] == "cdi"
    assert runtime["debug"] == "/var/log/r.log"
    assert runtime["log-level"] == "info"
    assert runtime["runtimes"] == ["docker-runc", "runc", "crun"]
    assert runtime["modes"]["cdi"]["default-kind"] == "nvidia.com/gpu"


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("replace", ["/opt/cdi"]),
        ("append_unique", ["/etc/cdi", "/var/run/cdi", "/opt/cdi"]),
        ("prepend_unique", ["/opt/cdi", "/etc/cdi", "/var/run/cdi"]),
    ],
)
def test_list_strategies(strategy, expected):
    settings = {"nvidia-container-runtime": {"modes": {"cdi": {"spec-dirs": ["/opt/cdi", "/etc/cdi"]}}}}
    if strategy == "replace":
        settings["nvidia-container-runtime"]["modes"]["cdi"]["spec-dirs"] = ["/opt/cdi"]
    outcome = tm.plan(PACKAGE_DEFAULT, PATH, settings, list_strategy=strategy)
    assert parsed(outcome.after)["nvidia-container-runtime"]["modes"]["cdi"]["spec-dirs"] == expected


def test_remove_deletes_keys_first_and_missing_keys_are_fine():
    outcome = tm.plan(
        PACKAGE_DEFAULT,
        PATH,
        {},
        remove=[["nvidia-container-runtime", "log-level"], "disable-require", ["no", "such", "key"]],
    )
    value = parsed(outcome.after)
    assert outcome.changed is True
    assert "log-level" not in value["nvidia-container-runtime"]
    assert "disable-require" not in value
    assert value["nvidia-container-runtime"]["mode"] == "auto"


def test_remove_and_set_the_same_value_is_no_change():
    outcome = tm.plan(PACKAGE_DEFAULT, PATH, {"disable-require": False}, remove=["disable-require"])
    assert outcome.changed is False
    assert outcome.after == PACKAGE_DEFAULT


def test_a_type_change_is_a_change():
    outcome = tm.plan("load = 1\n", PATH, {"load": True})
    assert outcome.changed is True
    assert outcome.after == "load = true\n"


def test_a_missing_file_is_created_even_without_settings():
    outcome = tm.plan(None, PATH, HARDENING)
    assert outcome.changed is True
    assert outcome.existed is False
    assert outcome.before == ""
    assert parsed(outcome.after) == HARDENING
    assert tm.plan(None, PATH, {}).changed is True


def test_a_missing_file_with_create_false_fails_and_says_how_to_fix_it():
    with pytest.raises(tm.TomlMergeError, match=r"^/etc/nvidia-container-runtime/config.toml does not exist: .*create"):
        tm.plan(None, PATH, HARDENING, create=False)


def test_invalid_toml_fails_naming_the_file_and_the_fix():
    with pytest.raises(tm.TomlMergeError) as exc:
        tm.plan("mode = \n[broken", PATH, HARDENING)
    message = str(exc.value)
    assert message.startswith(f"{PATH} is not valid TOML (")
    assert "fix the file by hand" in message
    assert message.endswith("nothing was changed")


def test_null_values_are_refused_with_their_key_path():
    with pytest.raises(tm.TomlMergeError, match=r"^settings\.nvidia-container-runtime\.debug is null"):
        tm.plan(PACKAGE_DEFAULT, PATH, {"nvidia-container-runtime": {"debug": None}})


def test_non_string_keys_and_bad_remove_paths_are_refused():
    with pytest.raises(tm.TomlMergeError, match="TOML keys are strings"):
        tm.plan("", PATH, {"a": {1: "x"}})
    with pytest.raises(tm.TomlMergeError, match="remove must list key paths"):
        tm.plan("", PATH, {}, remove=[[]])


def test_plain_converts_string_and_dict_subclasses():
    class Tagged(str):
        pass

    value = tm.plain({"a": [Tagged("x"), 1, 2.5, True], "b": {"c": Tagged("y")}})
    assert value == {"a": ["x", 1, 2.5, True], "b": {"c": "y"}}
    assert type(value["a"][0]) is str
    assert type(value["b"]["c"]) is str


def test_a_value_that_replaces_a_table_is_written_as_a_value():
    outcome = tm.plan("[a]\nb = 1\n", PATH, {"a": "flat"})
    assert parsed(outcome.after) == {"a": "flat"}


# --------------------------------------------------------------------------- the action plugin


def _bytes(data) -> bytes:
    return data if isinstance(data, bytes) else data.encode()


class FakeNode:
    """The node as the action sees it: files, and what the copy action received."""

    def __init__(self, files: dict, directories=("/etc",)):
        self.files = dict(files)
        self.directories = set(directories) | {p.rsplit("/", 1)[0] for p in self.files}
        self.copies: list[dict] = []
        self.modules: list[tuple[str, dict]] = []
        self.copy_result: dict = {}

    def stat(self, path, all_vars, follow, checksum=True):
        return {"exists": path in self.files or path in self.directories, "isdir": path in self.directories}

    def execute_module(self, module_name, module_args, task_vars=None, wrap_async=False, **_kwargs):
        self.modules.append((module_name, module_args))
        if module_name.endswith("node_files"):
            return fake_node_files(module_args, self.files, self.directories)
        if module_name == "ansible.legacy.file":
            self.directories.add(module_args["path"])
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


def run_action(node: FakeNode, args: dict, check_mode: bool = False, diff: bool = True) -> dict:
    plugin = load_module("toml_merge", subdir="plugins/action")
    task = mock.MagicMock()
    task.args = args
    task.check_mode = check_mode
    task.diff = diff
    task.async_val = 0
    task.action = "toml_merge"
    task.copy.side_effect = lambda: mock.MagicMock(args={})
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    action = plugin.ActionModule(task, connection, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), None)
    with (
        mock.patch.object(action, "_execute_remote_stat", side_effect=node.stat),
        mock.patch.object(action, "_execute_module", side_effect=node.execute_module),
        mock.patch.object(action, "_remove_tmp_path"),
    ):
        return action.run(task_vars={})


def test_action_check_mode_reports_the_change_with_a_diff_and_writes_nothing():
    node = FakeNode({PATH: PACKAGE_DEFAULT})
    result = run_action(node, {"path": PATH, "settings": HARDENING}, check_mode=True)
    assert result["changed"] is True
    assert result["msg"] == f"would update {PATH} (check mode, nothing written)"
    assert result["diff"]["before"] == PACKAGE_DEFAULT
    assert "accept-nvidia-visible-devices-as-volume-mounts = true" in result["diff"]["after"]
    assert result["diff"]["before_header"] == result["diff"]["after_header"] == PATH
    assert node.copies == []
    assert node.files[PATH] == PACKAGE_DEFAULT


def test_action_writes_through_copy_with_backup_validate_and_file_attributes():
    node = FakeNode({PATH: PACKAGE_DEFAULT})
    node.copy_result = {"backup_file": f"{PATH}.1.2025-01-01@00:00:00~"}
    result = run_action(
        node,
        {"path": PATH, "settings": HARDENING, "backup": True, "owner": "root", "mode": "0640", "validate": "check %s"},
        diff=False,
    )
    assert result["changed"] is True, result
    assert result["msg"] == f"updated {PATH}"
    assert result["backup_file"] == f"{PATH}.1.2025-01-01@00:00:00~"
    assert "diff" not in result
    [copy] = node.copies
    assert copy["dest"] == PATH
    assert copy["backup"] is True
    assert copy["validate"] == "check %s"
    assert copy["owner"] == "root"
    assert copy["mode"] == "0640"
    assert copy["expected_sha1"] == hashlib.sha1(PACKAGE_DEFAULT.encode()).hexdigest()
    assert "group" not in copy
    assert parsed(node.files[PATH])["accept-nvidia-visible-devices-envvar-when-unprivileged"] is False


def test_action_does_not_write_when_nothing_changes():
    node = FakeNode({PATH: tm.plan(PACKAGE_DEFAULT, PATH, HARDENING).after})
    result = run_action(node, {"path": PATH, "settings": HARDENING, "backup": True})
    assert result["changed"] is False
    assert result["msg"] == f"{PATH} already has these settings, nothing to change"
    assert node.copies == []
    assert "diff" not in result


def test_action_creates_a_missing_file_and_its_directory_with_mode_0644():
    node = FakeNode({}, directories=("/etc",))
    result = run_action(node, {"path": PATH, "settings": HARDENING})
    assert result["changed"] is True
    assert result["msg"] == f"created {PATH}"
    assert ("ansible.legacy.file", {"path": "/etc/nvidia-container-runtime", "state": "directory", "mode": "0755"}) in (
        node.modules
    )
    [copy] = node.copies
    assert copy["mode"] == "0644"
    assert parsed(node.files[PATH]) == HARDENING


def test_action_fails_on_invalid_toml_without_writing():
    node = FakeNode({PATH: "[broken"})
    result = run_action(node, {"path": PATH, "settings": HARDENING})
    assert result["failed"] is True
    assert result["changed"] is False
    assert result["msg"].startswith(f"{PATH} is not valid TOML")
    assert node.copies == []


def test_action_fails_on_binary_content_naming_the_file():
    node = FakeNode({PATH: b"\xff\xfe\x00"})
    result = run_action(node, {"path": PATH, "settings": HARDENING})
    assert result["failed"] is True
    assert result["msg"].startswith(f"{PATH} is not UTF-8 text (")
    assert result["msg"].endswith("toml_merge edits TOML text files only")


def test_action_fails_on_a_directory():
    node = FakeNode({}, directories=("/etc", PATH))
    result = run_action(node, {"path": PATH, "settings": HARDENING})
    assert result["failed"] is True
    assert result["msg"] == f"{PATH} is a directory; point the path at a file"


def test_action_reports_a_failed_validation_and_names_the_file():
    node = FakeNode({PATH: PACKAGE_DEFAULT})
    node.copy_result = {"failed": True, "msg": "failed to validate", "stderr": "bad key", "exit_status": 1}
    result = run_action(node, {"path": PATH, "settings": HARDENING, "validate": "check %s"})
    assert result["failed"] is True
    assert result["changed"] is False
    assert result["msg"] == (
        f"{PATH} was not changed: writing the merged file failed: failed to validate (bad key). "
        "The validate command rejected the candidate: fix the settings"
    )
    assert result["stderr"] == "bad key"
    assert node.files[PATH] == PACKAGE_DEFAULT


def test_action_rejects_unknown_options():
    with pytest.raises(Exception, match=r"Unsupported parameters for .*: sort_keys"):
        run_action(FakeNode({PATH: PACKAGE_DEFAULT}), {"path": PATH, "settings": {}, "sort_keys": True})


# --------------------------------------------------------------------------- documentation


def test_module_file_refuses_to_run_without_its_action_plugin():
    result = run_module(load_module("toml_merge"), {"path": PATH})
    assert result.failed
    assert "must run through its action plugin (plugins/action/toml_merge.py)" in result.result["msg"]


def test_documentation_matches_the_action_argument_spec():
    doc = {"options": documented_options(load_module("toml_merge"))}
    file_args = set(load_module("controller_files", subdir="plugins/plugin_utils").FILE_ARGUMENT_SPEC)
    assert set(doc["options"]) | file_args == set(tm.ARGUMENT_SPEC)
    for name, spec in doc["options"].items():
        assert spec["type"] == tm.ARGUMENT_SPEC[name]["type"], name
        assert spec.get("default") == tm.ARGUMENT_SPEC[name].get("default"), name
        assert spec.get("choices") == tm.ARGUMENT_SPEC[name].get("choices"), name
        assert spec.get("required", False) == tm.ARGUMENT_SPEC[name].get("required", False), name
        assert spec.get("elements") == tm.ARGUMENT_SPEC[name].get("elements"), name


def test_action_merges_again_when_another_run_wrote_the_file_in_between():
    node = FakeNode({PATH: PACKAGE_DEFAULT})
    other = PACKAGE_DEFAULT.replace("disable-require = false", "disable-require = true")
    execute = node.execute_module
    reads = []

    def racing(module_name, module_args, **kwargs):
        result = execute(module_name, module_args, **kwargs)
        if module_name.endswith("node_files"):
            reads.append(1)
            if len(reads) == 1:
                node.files[PATH] = other
        return result

    node.execute_module = racing
    result = run_action(node, {"path": PATH, "settings": HARDENING})
    assert result["changed"] is True, result
    assert len(reads) == 2 and len(node.copies) == 2
    assert parsed(node.files[PATH])["disable-require"] is True, "the other run's change is kept"
    assert parsed(node.files[PATH])["accept-nvidia-visible-devices-envvar-when-unprivileged"] is False


def test_action_gives_up_when_the_file_keeps_changing_and_writes_nothing():
    node = FakeNode({PATH: PACKAGE_DEFAULT})
    execute = node.execute_module
    counter = []

    def always_racing(module_name, module_args, **kwargs):
        result = execute(module_name, module_args, **kwargs)
        if module_name.endswith("node_files"):
            counter.append(1)
            node.files[PATH] = PACKAGE_DEFAULT + f"\n# edit {len(counter)}\n"
        return result

    node.execute_module = always_racing
    result = run_action(node, {"path": PATH, "settings": HARDENING})
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"] == (
        f"{PATH} changed on the node after it was read Gave up after 3 attempts: something rewrites the file "
        "continuously; stop it, then run again."
    )
    assert node.files[PATH] == PACKAGE_DEFAULT + "\n# edit 3\n"
