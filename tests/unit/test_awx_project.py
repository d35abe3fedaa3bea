"""The repository as an AWX/AAP project (README "AWX and Ansible Automation Platform"): checked offline.

AWX's project update installs collections from collections/requirements.yml (and the root requirements.yml)
with ansible-galaxy; its jobs run the playbooks from the project root with its ansible.cfg.
"""

from __future__ import annotations

import configparser
import json
import re
from pathlib import Path

import ansible_collections
import yaml
from conftest import ROOT

REQUIREMENTS = ROOT / "collections" / "requirements.yml"
JOB_PLAYBOOKS = ["site.yml", "playbooks/validate.yml", "playbooks/upgrade_driver.yml"]


def _collections() -> dict[str, str]:
    data = yaml.safe_load(REQUIREMENTS.read_text())
    return {item["name"]: str(item["version"]) for item in data["collections"]}


def test_awx_finds_the_one_collection_requirements_file():
    assert REQUIREMENTS.is_symlink() and REQUIREMENTS.resolve() == (ROOT / "requirements.yml").resolve()
    assert set(_collections()) == {"community.general", "community.docker"}


def test_every_pinned_collection_is_the_one_the_tests_run_with():
    for name, version in _collections().items():
        namespace, collection = name.split(".")
        manifests = [Path(p) / namespace / collection / "MANIFEST.json" for p in ansible_collections.__path__]
        manifest = next(m for m in manifests if m.is_file())
        assert json.loads(manifest.read_text())["collection_info"]["version"] == version, name


def test_every_collection_the_roles_and_playbooks_name_is_required():
    used = set()
    for path in [*ROOT.glob("roles/**/*.yml"), *ROOT.glob("playbooks/*.yml"), ROOT / "site.yml"]:
        used |= set(re.findall(r"\b(community\.[a-z_]+)\.[a-z_]+", path.read_text()))
    assert used and used <= set(_collections()), used - set(_collections())


def test_the_job_playbooks_and_the_paths_of_ansible_cfg_are_in_the_project():
    for playbook in JOB_PLAYBOOKS:
        assert yaml.safe_load((ROOT / playbook).read_text()), playbook
    config = configparser.ConfigParser()
    config.read(ROOT / "ansible.cfg")
    for key in (
        "roles_path",
        "library",
        "action_plugins",
        "strategy_plugins",
    ):
        assert (ROOT / config["defaults"][key]).is_dir(), key
    # the collection gpunode.provisioning, through the link in the project (no install step in a job)
    collections = ROOT / config["defaults"]["collections_path"].split(":")[0]
    assert (collections / "ansible_collections/gpunode/provisioning/galaxy.yml").is_file()
