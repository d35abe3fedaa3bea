"""The CRI-O drop-in of runtime_config, rendered the way Ansible renders it.

No CRI-O package exists for the Debian releases the molecule nodes run, so the
drop-in is checked here: it must parse as TOML and register the runtime in the
table CRI-O reads (REFERENCE.md: [crio.runtime.runtimes.<name>]), as a copy of the
default runtime's effective entry from `crio config` (fixture:
tests/fixtures/crio/crio-config-1.31.toml, modelled on CRI-O 1.31's output).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.plugins.filter.core import comment
from conftest import load_module, role_defaults

ROLE = Path(__file__).resolve().parents[2] / "roles" / "runtime_config"
TEMPLATE = ROLE / "templates" / "etc" / "crio" / "crio.conf.d" / "99-runtime.conf.j2"


CRIO_CONFIG = (Path(__file__).resolve().parents[1] / "fixtures" / "crio" / "crio-config-1.31.toml").read_text()
# the real `crio config` of CRI-O 1.35.6 (GPUNODE_UPSTREAM_DIR) on a molecule CRI-O node (runc the default)
CRIO_NODE = (Path(__file__).resolve().parents[1] / "fixtures" / "crio" / "crio-config-1.35.6-node.toml").read_text()
NVIDIA = "/usr/bin/nvidia-container-runtime"


def render(crio_config: str = "", **overrides) -> dict:
    variables = role_defaults("runtime_config")
    variables.update(overrides, ansible_managed="Ansible managed")
    variables["__runtime_config_crio_config"] = {"stdout": crio_config}
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["comment"] = comment
    filters = load_module("crio", subdir="plugins/filter").FilterModule().filters()
    env.filters.update({f"gpunode.provisioning.{name}": function for name, function in filters.items()})
    text = env.from_string(TEMPLATE.read_text()).render(**variables)
    assert text.startswith("#")
    return tomllib.loads(text)


def test_registers_the_runtime_as_an_oci_runtime():
    config = render()
    assert config["crio"]["runtime"]["runtimes"]["nvidia"] == {
        "runtime_path": "/usr/bin/nvidia-container-runtime",
        "runtime_type": "oci",
    }


def test_is_not_the_default_runtime_unless_asked():
    assert "default_runtime" not in render()["crio"]["runtime"]
    assert render(runtime_config_set_as_default=True)["crio"]["runtime"]["default_runtime"] == "nvidia"


@pytest.mark.parametrize("name,binary", [("nvidia", "/usr/bin/nvidia-container-runtime"), ("crun", "/usr/bin/crun")])
def test_name_and_binary_come_from_the_variables(name, binary):
    runtimes = render(runtime_config_name=name, runtime_config_binary=binary)["crio"]["runtime"]["runtimes"]
    assert list(runtimes) == [name]
    assert runtimes[name]["runtime_path"] == binary


def test_drop_in_lands_where_crio_reads_drop_ins():
    vars_main = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    assert vars_main["__runtime_config_crio_dropin"].startswith("{{ runtime_config_crio_dropin_dir }}/")
    assert yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())["runtime_config_crio_dropin_dir"] == (
        "/etc/crio/crio.conf.d"
    )


def test_the_runtime_copies_the_default_runtimes_effective_entry():
    """Packaged CRI-O keeps conmon in /usr/libexec/crio: without monitor_path its config validation fails."""
    nvidia = render(CRIO_CONFIG)["crio"]["runtime"]["runtimes"]["nvidia"]
    crun = tomllib.loads(CRIO_CONFIG)["crio"]["runtime"]["runtimes"]["crun"]
    assert nvidia["runtime_path"] == "/usr/bin/nvidia-container-runtime"
    assert nvidia["monitor_path"] == "/usr/libexec/crio/conmon"
    assert nvidia["runtime_root"] == "/run/crun"
    assert nvidia["allowed_annotations"] == ["io.containers.trace-syscall"]
    assert nvidia["runtime_type"] == "oci"
    copied = {k: v for k, v in crun.items() if k not in ("runtime_path", "runtime_type", "runtime_config_path")}
    assert {k: v for k, v in nvidia.items() if k in copied} == copied


def test_the_copy_follows_the_configured_default_runtime():
    config = CRIO_CONFIG.replace('default_runtime = "crun"', 'default_runtime = "runc"')
    nvidia = render(config)["crio"]["runtime"]["runtimes"]["nvidia"]
    assert nvidia["runtime_root"] == "/run/runc"
    assert "allowed_annotations" not in nvidia


def test_a_default_nvidia_copies_from_crun_not_from_itself():
    rendered = render(CRIO_CONFIG, runtime_config_set_as_default=True)["crio"]["runtime"]
    assert rendered["default_runtime"] == "nvidia"
    assert rendered["runtimes"]["nvidia"]["monitor_path"] == "/usr/libexec/crio/conmon"


def _filters():
    return load_module("crio", subdir="plugins/filter").FilterModule().filters()


def test_the_drop_in_copies_runcs_entry_from_the_real_crio_config_of_crio_1_35():
    nvidia = render(CRIO_NODE)["crio"]["runtime"]["runtimes"]["nvidia"]
    runc = tomllib.loads(CRIO_NODE)["crio"]["runtime"]["runtimes"]["runc"]
    # runtime_config_path (a VM runtime's own file) is left out: it means nothing to an OCI runtime wrapper
    assert nvidia == {**{k: v for k, v in runc.items() if k != "runtime_config_path"}, "runtime_path": NVIDIA}
    assert nvidia["monitor_path"] == "/usr/bin/conmon" and nvidia["monitor_cgroup"] == "pod"


def test_settings_are_merged_over_the_drop_in():
    settings = {"crio": {"runtime": {"runtimes": {"nvidia": {"monitor_cgroup": "pod", "monitor_env": ["A=b"]}}}}}
    nvidia = render(CRIO_NODE, runtime_config_crio_settings=settings)["crio"]["runtime"]["runtimes"]["nvidia"]
    assert nvidia["monitor_env"] == ["A=b"] and nvidia["runtime_path"] == NVIDIA


def _reading(text: str, **changes) -> str:
    """`crio config` text with tables changed, as CRI-O would print it with another drop-in."""
    import tomlkit

    doc = tomlkit.parse(text)
    for dotted, value in changes.items():
        *parents, key = dotted.split("__")
        table = doc
        for parent in parents:
            if parent not in table:
                table[parent] = tomlkit.table()
            table = table[parent]
        table[key] = value
    return tomlkit.dumps(doc)


def test_crio_reading_of_the_candidate_as_meant_passes():
    problems = _filters()["runtime_config_crio_reading_problems"]
    runc = dict(tomllib.loads(CRIO_NODE)["crio"]["runtime"]["runtimes"]["runc"])
    after = _reading(CRIO_NODE, crio__runtime__runtimes__nvidia={**runc, "runtime_path": NVIDIA})
    assert problems(CRIO_NODE, after, "nvidia", NVIDIA) == []
    asked = _reading(after, crio__runtime__default_runtime="nvidia")
    assert problems(CRIO_NODE, asked, "nvidia", NVIDIA, True) == []


def test_crio_reading_that_differs_is_refused_naming_the_tables():
    problems = _filters()["runtime_config_crio_reading_problems"]
    runc = dict(tomllib.loads(CRIO_NODE)["crio"]["runtime"]["runtimes"]["runc"])
    # a later drop-in of the directory gives nvidia another binary and makes it the default
    other = _reading(
        CRIO_NODE,
        crio__runtime__runtimes__nvidia={**runc, "runtime_path": "/usr/local/bin/other"},
        crio__runtime__default_runtime="nvidia",
    )
    said = problems(CRIO_NODE, other, "nvidia", NVIDIA)
    assert "crio.runtime.runtimes.nvidia.runtime_path is '/usr/local/bin/other', not '/usr/bin/nvidia" in said[0]
    assert "crio.runtime.default_runtime is 'nvidia': every pod without a RuntimeClass" in said[1]
    assert problems(CRIO_NODE, CRIO_NODE, "nvidia", NVIDIA) == [
        "CRI-O's reading has no [crio.runtime.runtimes.nvidia] (runtimes: crun, runc)"
    ]
    changed = _reading(
        CRIO_NODE,
        crio__runtime__runtimes__nvidia={**runc, "runtime_path": NVIDIA},
        crio__runtime__cgroup_manager="systemd",
    )
    assert problems(CRIO_NODE, changed, "nvidia", NVIDIA) == [
        "it also changes what was not asked for: crio.runtime.cgroup_manager"
    ]
    settings = {"crio": {"runtime": {"cgroup_manager": "systemd"}}}
    assert problems(CRIO_NODE, changed, "nvidia", NVIDIA, False, settings) == []
