"""The CRI-O drop-in of runtime_config, rendered the way Ansible renders it.

No CRI-O package exists for the Debian releases the molecule nodes run, so the
drop-in is checked here: it must parse as TOML and register the runtime in the
table CRI-O reads (REFERENCE.md: [crio.runtime.runtimes.<name>]).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.plugins.filter.core import comment

ROLE = Path(__file__).resolve().parents[2] / "roles" / "runtime_config"
TEMPLATE = ROLE / "templates" / "etc" / "crio" / "crio.conf.d" / "99-runtime.conf.j2"


def render(**overrides) -> dict:
    variables = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    variables.update(overrides, ansible_managed="Ansible managed")
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["comment"] = comment
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
