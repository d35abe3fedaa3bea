# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The platforms of the nvidia_driver role: which releases its platform data files support.

The role's platform data lives in ``roles/nvidia_driver/vars/<platform>.yml`` (Debian.yml, Ubuntu.yml, RedHat.yml,
default.yml), one of which tasks/set_vars.yml loads (the first found of gpu_node_facts'
``__gpu_node_facts_platform_files``). Each lists the releases it supports in ``__nvidia_driver_releases``, a mapping
keyed by major version. The refusal of an unsupported platform names them all, so a release added to a file shows in
the message with nothing else to keep in step.

- ``nvidia_driver_releases(files)``: ``["<platform> <major>", ...]`` of every file's ``__nvidia_driver_releases``,
  sorted as text (e.g. ``Debian 12, ..., RedHat 10, RedHat 8``); ``files`` are the paths of the platform files on
  the controller (``query('ansible.builtin.fileglob', role_path ~ '/vars/*.yml')``). Files without the key (main.yml,
  default.yml) add nothing.

Caller: roles/nvidia_driver/vars/main.yml (``__nvidia_driver_plan_inputs.releases``, for the preflight's refusal).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml
from ansible.errors import AnsibleFilterError

RELEASES = "__nvidia_driver_releases"


def nvidia_driver_releases(files) -> list[str]:
    """The name "<platform> <major>" of each release of each platform file's __nvidia_driver_releases, sorted."""
    names = []
    for file in files:
        path = Path(file)
        data = yaml.safe_load(path.read_text()) or {}
        releases = data.get(RELEASES) if isinstance(data, Mapping) else None
        if releases is None or path.stem == "main":
            continue
        if not isinstance(releases, Mapping):
            raise AnsibleFilterError(f"{path}: {RELEASES} must map a major version to that release's values")
        names += [f"{path.stem} {major}" for major in releases]
    return sorted(names)


class FilterModule:
    def filters(self):
        return {"nvidia_driver_releases": nvidia_driver_releases}
