# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""A connection plugin's fully qualified names and its short name, for the controller-side plugins that compare or
hand on a host's ``ansible_connection`` (the gpunode_mitogen strategy, nvidia_driver_plan's reboot guard).

ansible-core ships ``ssh`` and ``local`` as ``ansible.builtin.<name>`` and ``ansible.legacy.<name>``; the others are
the collections' plugins that mitogen redirects by their short names (its REDIRECTED_CONNECTION_PLUGINS,
ansible_mitogen/loaders.py, checked against mitogen 0.3.54 by tests/unit/test_strategy_mitogen.py)."""

from __future__ import annotations

SHORT_CONNECTION_NAMES = {
    **{f"{ns}.{name}": name for ns in ("ansible.builtin", "ansible.legacy") for name in ("ssh", "local")},
    "community.docker.docker": "docker",
    "containers.podman.podman": "podman",
    "containers.podman.buildah": "buildah",
    "kubernetes.core.kubectl": "kubectl",
    "community.general.lxc": "lxc",
    "community.general.lxd": "lxd",
    "community.general.jail": "jail",
}


def short_connection_name(name: object) -> str:
    """The short name of a connection named by its fully qualified name (``ansible.builtin.local`` -> ``local``);
    any other name as it is."""
    return SHORT_CONNECTION_NAMES.get(str(name), str(name))
