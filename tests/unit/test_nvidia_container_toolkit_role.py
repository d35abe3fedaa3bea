"""roles/nvidia_container_toolkit: tags, README, and that each OS family's tasks find the variables they use."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "nvidia_container_toolkit"
PREFIX = "__nvidia_container_toolkit_"

# --list-tasks does not expand includes: the one include of tasks/run.yml (the read: variables, packages, config.toml,
# CDI, which gpu_node_facts' task runs ahead in site.yml; then the include of the changes, tasks/apply.yml) and the
# runtime registration. --tags runtime lists the same tasks; of what the includes run, only the read and the report of
# what the role leaves out carry the runtime tag (test_runtime_reaches_only_the_left_out_report_in_the_included_files).
ALL_TASKS = [
    "nvidia_container_toolkit : Check, read and change the toolkit where the read ahead says so",
    "Register the nvidia runtime in the container runtimes",
]
RUNTIME_TASKS = ALL_TASKS


def list_tasks(tmp_path: Path, *options: str) -> list[tuple[str, str]]:
    """(task name, tags) of `ansible-playbook --list-tasks` for a play that only applies the role."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        "- name: Apply the toolkit role\n"
        "  hosts: all\n"
        "  gather_facts: false\n"
        "  roles:\n"
        "    - nvidia_container_toolkit\n"
    )
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    ansible_playbook = Path(sys.executable).parent / "ansible-playbook"
    result = subprocess.run(
        [str(ansible_playbook), "-i", "gpu-node-1,", "--list-tasks", *options, str(playbook)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    tasks = []
    in_tasks = False
    for line in result.stdout.splitlines():
        if line.strip() == "tasks:":
            in_tasks = True
            continue
        # the gpu_node_facts dependency's own tasks are not this role's
        if in_tasks and line.strip() and not line.strip().startswith("gpu_node_facts : "):
            name, _, tags = line.strip().partition("\tTAGS: ")
            tasks.append((name.strip(), tags.strip()))
    return tasks


def test_tag_runtime_lists_only_the_runtime_registration_and_its_preflight(tmp_path):
    # no argument validation of Ansible's before them: the role's one variable check is its own task
    tasks = list_tasks(tmp_path, "--tags", "runtime")
    assert tasks == [(name, "[runtime, toolkit]") for name in RUNTIME_TASKS]


def test_tag_toolkit_lists_every_step_of_the_role(tmp_path):
    tasks = list_tasks(tmp_path, "--tags", "toolkit")
    assert [name for name, _ in tasks] == ALL_TASKS
    assert all("toolkit" in tags for _, tags in tasks)


def _main_tasks() -> list[dict]:
    """The tasks of tasks/main.yml, then those of tasks/run.yml (which the first includes), the read (tasks/read.yml)
    in place of its import."""
    tasks = []
    for name in ("main.yml", "run.yml"):
        for task in yaml.safe_load((ROLE / "tasks" / name).read_text()):
            if task.get("ansible.builtin.import_tasks") == "read.yml":
                tasks += yaml.safe_load((ROLE / "tasks" / "read.yml").read_text())
            else:
                tasks.extend(task.get("block", [task]))
    return tasks


def test_every_task_of_main_carries_both_tags_and_the_include_applies_only_toolkit():
    assert [task["tags"] for task in _main_tasks()] == [["toolkit", "runtime"]] * 4
    for task in _main_tasks():
        include = task.get("ansible.builtin.include_tasks")
        if include == "run.yml":  # the read and the include of the changes: their own tags
            continue
        if include:  # the changes and reports: runtime reaches only the report
            assert include["apply"]["tags"] == ["toolkit"], task["name"]
        if "ansible.builtin.include_role" in task:
            assert task["ansible.builtin.include_role"]["apply"]["tags"] == task["tags"], task["name"]


def _included_tasks(name: str, seen: set[str] | None = None) -> list[dict]:
    """The tasks of a task file and of every file it includes or imports (blocks opened)."""
    seen = set() if seen is None else seen
    seen.add(name)
    tasks = []
    pending = list(yaml.safe_load((ROLE / "tasks" / name).read_text()))
    while pending:
        task = pending.pop(0)
        pending[:0] = [*task.get("block", []), *task.get("always", [])]
        if "block" in task:
            continue
        tasks.append(task)
        include = task.get("ansible.builtin.include_tasks") or task.get("ansible.builtin.import_tasks")
        file = include.get("file") if isinstance(include, dict) else include
        files = []
        if file and "__gpu_node_facts_toolkit_package_manager" in file:
            files = ["packages_apt.yml", "packages_dnf.yml"]
        elif file and "__nvidia_container_toolkit_apt_step" in file:
            files = ["repository_apt.yml", "install_apt.yml"]
        elif file:
            files = re.findall(r"[a-z_]+\.yml", file)
        for found in files:
            if found not in seen:
                tasks += _included_tasks(found, seen)
    return tasks


@pytest.mark.parametrize("name", ["apply.yml"])
def test_runtime_reaches_only_the_left_out_report_in_the_included_files(name):
    """--tags runtime runs the include of tasks/run.yml (it applies only toolkit): of its tasks, only the report of
    what the role leaves out carries runtime; neither the repository nor the packages nor the CDI spec."""
    tasks = _included_tasks(name)
    assert len(tasks) > 10
    tagged = [task["name"] for task in tasks if "runtime" in task.get("tags", [])]
    assert tagged == [next(t["name"] for t in tasks if "ansible.builtin.debug" in t)]
    assert "leaves out" in tagged[0]


def test_main_dispatches_with_import_tasks_where_the_file_name_is_fixed():
    for task in _main_tasks():
        include = task.get("ansible.builtin.include_tasks")
        if include:
            file = include if isinstance(include, str) else include["file"]
            assert "{{" in file or "when" in task, task["name"]


# --------------------------------------------------------------------------- OS families as data


def _defined_in_tasks(node, found: set[str]) -> None:
    """Names a task file defines: register, loop_var, set_fact keys, vars of blocks and tasks."""
    if isinstance(node, list):
        for item in node:
            _defined_in_tasks(item, found)
    elif isinstance(node, dict):
        if isinstance(node.get("register"), str):
            found.add(node["register"])
        if isinstance(node.get("loop_control"), dict) and "loop_var" in node["loop_control"]:
            found.add(node["loop_control"]["loop_var"])
        if isinstance(node.get("vars"), dict):
            found.update(node["vars"])
        set_fact = node.get("ansible.builtin.set_fact")
        if isinstance(set_fact, dict):
            found.update(set_fact)
        for value in node.values():
            _defined_in_tasks(value, found)


def _task_files(manager: str) -> list[Path]:
    common = ["main", "apply", "key", "version", "cdi", "cdi_finish", "cdi_report", "cdi_apply"]
    own = [f"repository_{manager}", f"packages_{manager}", *(["install_apt"] if manager == "apt" else [])]
    return [ROLE / "tasks" / f"{name}.yml" for name in [*common, *own]]


MANAGERS = {"Debian": "apt", "RedHat": "dnf"}


@pytest.mark.parametrize(("family", "manager"), MANAGERS.items())
def test_every_internal_variable_a_family_uses_is_defined(family, manager):
    """vars/main.yml, the family's platform file (gpu_node_facts' vars/<os_family>.yml) and the vars of
    packages_<manager>.yml's block define every internal variable the family's task files and templates use."""
    files = _task_files(manager)
    assert all(path.is_file() for path in files), [str(path) for path in files if not path.is_file()]
    defined = set(yaml.safe_load((ROLE / "vars" / "main.yml").read_text()))
    defined.update(yaml.safe_load((ROOT / "roles" / "gpu_node_facts" / "vars" / f"{family}.yml").read_text()))
    templates = [
        ROLE / "templates" / source for path in files for source in re.findall(r"src: (\S+\.j2)", path.read_text())
    ]
    used = set()
    for path in [*files, *templates]:
        text = path.read_text()
        used.update(re.findall(rf"\b(?:{PREFIX}|__gpu_node_facts_toolkit_)[a-z0-9_]+", text))
        if path.suffix == ".yml":
            _defined_in_tasks(yaml.safe_load(text), defined)
    assert sorted(used - defined) == []


# The platform data (gpu_node_facts' tasks/set_vars.yml loads the first of __gpu_node_facts_platform_files found in its
# vars/, once per play): each platform's values, and default.yml's for a platform without a file.
PLATFORM_DATA = {
    "Debian": {
        "package_manager": "apt",
        "repo_tools": ["gpg"],
        "keyring": "/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg",
        "apt_source": "/etc/apt/sources.list.d/nvidia-container-toolkit.list",
    },
    "RedHat": {
        "package_manager": "dnf",
        "repo_tools": ["gnupg2"],
        "versionlock_packages": ["python3-dnf-plugin-versionlock"],
        "rpm_key": "/etc/pki/rpm-gpg/RPM-GPG-KEY-nvidia-container-toolkit",
        "yum_repo_name": "nvidia-container-toolkit",
    },
    "default": {"package_manager": ""},
}


# (distribution, its version, os_family) -> the platform file the role loads
PLATFORMS = [
    (("Debian", "12.7", "Debian"), "Debian"),
    (("Ubuntu", "24.04", "Debian"), "Debian"),
    (("Rocky", "9.5", "RedHat"), "RedHat"),
    (("AlmaLinux", "10.0", "RedHat"), "RedHat"),
    (("SLES", "15.6", "Suse"), "default"),
    (("Archlinux", "", "Archlinux"), "default"),
]


@pytest.mark.parametrize(("node", "platform"), PLATFORMS)
def test_each_platform_loads_its_data_and_an_unsupported_one_the_default(node, platform):
    from conftest import PLATFORM_DATA_IN_GPU_NODE_FACTS, platform_file, platform_names

    assert platform_file(ROLE.name, *node).name == f"{platform}.yml"
    data = yaml.safe_load((ROOT / "roles" / "gpu_node_facts" / "vars" / f"{platform}.yml").read_text())
    prefix = PLATFORM_DATA_IN_GPU_NODE_FACTS[ROLE.name]
    data = platform_names(ROLE.name, data)
    assert data == {f"{prefix}{key}": value for key, value in PLATFORM_DATA[platform].items()}


def test_the_role_loads_no_platform_data_itself_and_nothing_picks_a_platform():
    """gpu_node_facts, its dependency, loads the platform data once per play (issue 47)."""
    assert not (ROLE / "tasks" / "set_vars.yml").exists()
    for path in [*(ROLE / "tasks").glob("*.yml"), ROLE / "vars" / "main.yml"]:
        text = path.read_text()
        assert "first_found" not in text, path
        assert not re.search(r"\}\[ansible_facts\.(os_family|distribution)", text), path


@pytest.mark.parametrize(
    ("installed", "installer", "configure", "expected"),
    [
        (["containerd"], {"name": "kubeadm", "containerd": {"config_regenerated": None}}, True, True),
        ([], {"name": "k3s", "containerd": {"config_regenerated": "agent start"}}, True, True),  # not on PATH
        ([], {"name": "rke2", "containerd": {"config_regenerated": "agent start"}}, False, False),
        ([], {"name": "unknown", "containerd": None}, True, False),
        ([], {"name": "kubespray", "containerd": {"config_regenerated": "kubespray run"}}, True, False),
    ],
)
def test_runtime_config_is_included_on_rke2_and_k3s_whose_containerd_is_not_on_path(
    installed, installer, configure, expected
):
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    loaded = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    variables = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in loaded.items()}
    variables.update(
        nvidia_container_toolkit_runtimes=[],
        nvidia_container_toolkit_configure_runtimes=configure,
        ansible_facts={"gpu_node": {"runtimes_installed": installed, "installer": installer}},
    )
    templar = Templar(loader=DataLoader(), variables=variables)
    assert templar.template(trust_as_template("{{ __nvidia_container_toolkit_register | bool }}")) is expected


# ---- the CDI spec stays true (issue 38) ----------------------------------------------------------------------


def _templar(**extra):
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    role = {**defaults, **yaml.safe_load((ROLE / "vars" / "main.yml").read_text())}

    def trusted(value):  # as Ansible trusts the strings of a role's vars files, nested ones too
        if isinstance(value, str):
            return trust_as_template(value)
        if isinstance(value, dict):
            return {key: trusted(item) for key, item in value.items()}
        return [trusted(item) for item in value] if isinstance(value, list) else value

    variables = {
        **{k: trusted(v) for k, v in role.items()},
        **{k: trust_as_template(v) if isinstance(v, str) else v for k, v in extra.items()},
    }
    return Templar(loader=DataLoader(), variables=variables), trust_as_template


@pytest.mark.parametrize(
    ("spec_path", "wanted"),
    [
        (None, False),  # the role's default is NVIDIA's default: no drop-in
        ("/run/cdi/nvidia.yaml", False),  # /var/run is /run
        ("/etc/cdi/nvidia.yaml", True),
        ("/var/run/cdi/gpus.yaml", True),
    ],
)
def test_nvidia_cdi_refresh_is_pointed_at_the_roles_spec_path_only_where_it_differs(spec_path, wanted):
    extra = {} if spec_path is None else {"nvidia_container_toolkit_cdi_spec_path": spec_path}
    templar, trust = _templar(**extra)
    assert templar.template(trust("{{ __nvidia_container_toolkit_cdi_refresh_dropin_wanted | bool }}")) is wanted


def test_the_refresh_dropin_sets_the_output_path_the_service_reads():
    import configparser

    templar, trust = _templar(nvidia_container_toolkit_cdi_spec_path="/etc/cdi/nvidia.yaml", ansible_managed="managed")
    source = ROLE / "templates" / "etc" / "systemd" / "system" / "nvidia-cdi-refresh.service.d"
    text = templar.template(trust((source / "50-gpu-node-output.conf.j2").read_text()))
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read_string(text)
    # NVIDIA's unit (v1.20.0) reads the output path from this variable: Environment=NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=...
    assert unit["Service"]["Environment"] == '"NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/etc/cdi/nvidia.yaml"'
    assert templar.template(trust("{{ __nvidia_container_toolkit_cdi_refresh_dropin }}")).endswith(
        "/nvidia-cdi-refresh.service.d/50-gpu-node-output.conf"
    )


def test_the_refresh_dropin_is_written_or_removed_and_systemd_reloaded_when_it_changed():
    block = next(t for t in yaml.safe_load((ROLE / "tasks" / "cdi_apply.yml").read_text()) if "block" in t)["block"]
    dropin = next(t for t in block if t["name"].startswith("Make nvidia-cdi-refresh write the spec"))
    assert "'nvidia-cdi-refresh.service' in __nvidia_container_toolkit_refresh_units" in dropin["when"]
    steps = {t["name"]: t for t in dropin["block"]}
    written = next(t for t in steps.values() if "ansible.builtin.template" in t)
    removed = next(t for t in steps.values() if t.get("ansible.builtin.file", {}).get("state") == "absent")
    assert written["when"] == "__nvidia_container_toolkit_cdi_refresh_dropin_wanted | bool"
    assert removed["when"] == "not __nvidia_container_toolkit_cdi_refresh_dropin_wanted | bool"
    enable = next(t for t in block if "ansible.builtin.systemd_service" in t)
    assert block.index(enable) > block.index(dropin)  # the drop-in is in place before the units are (re)started
    reload = enable["ansible.builtin.systemd_service"]["daemon_reload"]
    assert written["register"] in reload and removed["register"] in reload


def test_the_driver_upgrade_regenerates_the_cdi_spec_after_the_reboot_and_before_the_doctor():
    # the driver upgrade's change (playbooks/upgrade_driver.yml on the rollout mechanism)
    tasks = yaml.safe_load((ROOT / "playbooks" / "tasks" / "upgrade_driver_change.yml").read_text())
    reboot = next(i for i, t in enumerate(tasks) if t.get("ansible.builtin.meta") == "flush_handlers")
    regenerate = next(
        i
        for i, t in enumerate(tasks)
        if t.get("ansible.builtin.include_role", {}).get("name") == "nvidia_container_toolkit"
    )
    assert regenerate > reboot
    include = tasks[regenerate]["ansible.builtin.include_role"]
    assert include == {"name": "nvidia_container_toolkit", "tasks_from": "cdi.yml"}
    assert (ROLE / "tasks" / include["tasks_from"]).is_file()
    # the mechanism runs the doctor after the change
    (block,) = [t for t in yaml.safe_load((ROOT / "playbooks" / "tasks" / "rollout.yml").read_text()) if "block" in t]
    names = [t["name"] for t in block["block"]]
    assert names.index("Make the change") < names.index("Validate the node after the change")


# ---- the one read decides the path (tasks/read.yml, vars/main.yml) ---------------------------------------------------
# The read's results as role_read registers them (reads: the apt read, the config.toml probe, the CDI read), and what
# the include of tasks/run.yml and the tasks of tasks/apply.yml make of them. Each drift a user can make by hand shows
# as a change that the next run repairs: a config.toml key edited (the probe), the apt source or keyring removed (the
# apt read), another installed version (the apt read), the CDI spec changed (the CDI read).

PIN = "1.17.8-1"
SKIPPED = {"skipped": True, "changed": False}
SETTLED_CDI = {
    "stdout_lines": ["/tmp/x.nvidia-cdi", "settled", "nvidia-cdi-refresh.path", "nvidia-cdi-refresh.service"]
}


def _apt(trusted: str = "trusted", version: str = PIN) -> dict:
    names = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__nvidia_container_toolkit_packages"]
    return {"stdout_lines": [trusted, *[f"{name} {version} hold" for name in names]]}


def _probe(changed: bool) -> dict:
    return {"changed": changed, "results": [{"changed": changed, "item": {"path": "/etc/x.toml"}}]}


def _decide(reads, manager="apt", tags=("all",), driver_loaded=True, runtimes=("containerd",)) -> dict:
    """What tasks/run.yml and tasks/apply.yml make of the read: the file the include runs (None: skipped), and the
    tasks of apply.yml that run."""
    given = dict(
        nvidia_container_toolkit_force=True,
        nvidia_container_toolkit_version=PIN,
        __gpu_node_facts_toolkit_package_manager=manager,
        ansible_run_tags=list(tags),
        inventory_hostname="gpu-1",
        ansible_facts={"gpu_node": {"driver": {"loaded": driver_loaded}, "runtimes_installed": list(runtimes)}},
    )
    node = {"reads": list(reads)}
    templar, trust = _templar(**given, __nvidia_container_toolkit_node=node)
    # the read task's plan: role_read renders it after the reads, the read registered so far
    node["plan"] = templar.template(trust("{{ __nvidia_container_toolkit_plan_after_read }}"))
    templar, trust = _templar(**given, __nvidia_container_toolkit_node=node)

    def holds(condition) -> bool:
        conditions = condition if isinstance(condition, list) else [condition]
        return all(templar.template(trust("{{ (" + c + ") | bool }}")) for c in conditions)

    # what the read task shows (role_read's report, rendered last)
    shown = templar.template(trust("{{ __nvidia_container_toolkit_report_after_read }}"))
    # the include of the changes in tasks/run.yml (tasks/main.yml's include runs it where the read ahead says so)
    main = next(t for t in yaml.safe_load((ROLE / "tasks" / "run.yml").read_text()) if "when" in t and "file" in str(t))
    if not holds(main["when"]):
        return {"file": None, "runs": [], **({"shown": shown} if shown else {})}
    assert not shown, "the read shows a report where apply.yml runs (it renders its own)"
    file = templar.template(trust(main["ansible.builtin.include_tasks"]["file"]))
    (block,) = [t for t in yaml.safe_load((ROLE / "tasks" / "apply.yml").read_text()) if "block" in t]
    runs = [task["name"] for task in block["block"] if holds(task["when"])]
    return {"file": file, "runs": runs}


def _reads_skipped(**extra) -> list:
    """Which reads of tasks/read.yml's role_read are skipped (True) on a node the toolkit applies to."""
    from conftest import render_role_value

    variables = {
        **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
        **yaml.safe_load((ROLE / "vars" / "main.yml").read_text()),
        "nvidia_container_toolkit_force": True,
        "ansible_run_tags": ["all"],
        "__gpu_node_facts_toolkit_package_manager": "apt",
        "__gpu_node_facts_toolkit_keyring": "/k.gpg",
        "__gpu_node_facts_toolkit_apt_source": "/s.list",
        "__gpu_node_facts_toolkit_config": "/etc/nvidia-container-runtime/config.toml",
        "__gpu_node_facts_runtime_binary": "/usr/bin/nvidia-container-runtime",
        "inventory_hostname": "gpu-1",
        "ansible_managed": "managed",
        "ansible_facts": {"gpu_node": {"driver": {"loaded": True}}},
        **extra,
    }
    reads = render_role_value("{{ __nvidia_container_toolkit_reads }}", variables)
    return [read.get("skip") for read in reads]


MERGE = "Merge the toolkit settings into its config.toml"
PACKAGES = "Install the toolkit packages"
CDI_AGAIN = "Read the CDI spec again after the packages, and put it in place"
CDI = "Put the CDI spec in place, or say who writes it"


def test_a_node_where_all_is_in_place_skips_the_include():
    assert _decide([_apt(), _probe(False), SETTLED_CDI]) == {"file": None, "runs": []}


@pytest.mark.parametrize(
    ("drift", "reads", "runs"),
    [
        ("a config.toml key edited by hand", [_apt(), _probe(True), SETTLED_CDI], [MERGE, CDI_AGAIN]),
        ("the apt source or keyring removed", [_apt("untrusted"), _probe(False), SETTLED_CDI], [PACKAGES]),
        ("another version installed", [_apt(version="1.18.0-1"), _probe(False), SETTLED_CDI],
         [PACKAGES, MERGE, CDI_AGAIN]),
        ("nothing installed yet", [{"stdout_lines": ["untrusted"]}, _probe(True), {"stdout_lines": []}],
         [PACKAGES, MERGE, CDI_AGAIN]),
        ("the CDI spec changed", [_apt(), _probe(False), {"stdout_lines": ["/tmp/x.nvidia-cdi", "spec"]}], [CDI]),
    ],
)  # fmt: skip
def test_each_drift_runs_the_changes_that_repair_it(drift, reads, runs):
    assert _decide(reads) == {"file": "apply.yml", "runs": runs}, drift


def test_the_apt_read_names_the_steps_the_packages_include_takes():
    templar, trust = _templar(
        nvidia_container_toolkit_version=PIN,
        __nvidia_container_toolkit_node={"reads": [_apt("untrusted", "1.18.0-1"), SKIPPED, SKIPPED]},
    )
    assert templar.template(trust("{{ __nvidia_container_toolkit_apt_steps }}")) == ["repository_apt", "install_apt"]


def test_where_only_a_report_is_due_the_read_shows_it_and_nothing_is_included():
    # no driver loaded: the CDI read says who writes the spec; the role leaves the CDI spec out
    decided = _decide([_apt(), _probe(False), {"stdout_lines": ["-", "settled", "nvidia-cdi-refresh.service"]}],
                      driver_loaded=False)  # fmt: skip
    assert decided["file"] is None
    assert [said.split(" ")[:2] for said in decided["shown"]] == [["Not", "generating"], ["No", "NVIDIA"]]


def test_tags_runtime_reads_nothing_and_includes_only_the_left_out_report():
    skipped = [SKIPPED] * 3
    assert _decide(skipped, tags=("runtime",)) == {"file": None, "runs": []}
    decided = _decide(skipped, tags=("runtime",), runtimes=())
    assert decided["file"] is None
    assert [said.startswith("No container runtime to register") for said in decided["shown"]] == [True]
    assert _reads_skipped(ansible_run_tags=["runtime"]) == [True, True, True]
    for tags, read in ((["toolkit"], True), (["all"], True), (["tagged"], True), (["runtime"], False)):
        templar, trust = _templar(
            ansible_run_tags=tags, nvidia_container_toolkit_force=True, __gpu_node_facts_toolkit_package_manager="apt"
        )
        assert templar.template(trust("{{ __nvidia_container_toolkit_read_apt | bool }}")) is read, tags


def test_el_reads_nothing_first_and_runs_its_package_tasks_then_the_merge_and_the_cdi_read():
    assert _decide([SKIPPED] * 3, manager="dnf") == {"file": "apply.yml", "runs": [PACKAGES, MERGE, CDI_AGAIN]}
    assert _reads_skipped(__gpu_node_facts_toolkit_package_manager="dnf") == [True, True, True]


def test_the_config_probe_takes_the_merge_tasks_own_arguments():
    """The probe (role_read, check mode) and the merge task (tasks/apply.yml) take their arguments from the same
    variables: the config targets (without the label, which only names the loop item) and the file arguments."""
    variables = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    probe = variables["__nvidia_container_toolkit_config_probe"]
    assert probe["action"] == "gpunode.provisioning.toml_merge" and probe["check_mode"] is True
    assert probe["args"] == "{{ __nvidia_container_toolkit_config_file_args }}"
    assert "__nvidia_container_toolkit_config_targets" in probe["items"]
    (block,) = [t for t in yaml.safe_load((ROLE / "tasks" / "apply.yml").read_text()) if "block" in t]
    merge = next(task for task in block["block"] if task["name"] == MERGE)
    assert merge["loop"] == "{{ __nvidia_container_toolkit_config_targets }}"
    assert merge["gpunode.provisioning.toml_merge"] == {
        "path": "{{ item.path }}",
        "settings": "{{ item.settings }}",
        **{key: f"{{{{ __nvidia_container_toolkit_config_file_args.{key} }}}}" for key in variables[
            "__nvidia_container_toolkit_config_file_args"]},
    }  # fmt: skip
    targets = [
        {"path": "/a.toml", "settings": {"k": 1}, "label": "a"},
        {"path": "/b.toml", "settings": {}, "label": "b"},
    ]
    templar, trust = _templar(__nvidia_container_toolkit_config_targets=targets)
    assert templar.template(trust(probe["items"])) == [
        {"path": "/a.toml", "settings": {"k": 1}},
        {"path": "/b.toml", "settings": {}},
    ]
