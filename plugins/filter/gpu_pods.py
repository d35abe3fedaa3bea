# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Filter of the toolkit and runtime_config roles: the refusal before any change on a node whose GPU pods would
lose their GPUs (issue 25; plugins/module_utils/kubernetes/gpu_pods.py, which the node-side modules share).

`gpu_pods_refusal(facts, node, targets, set_as_default, enable_cdi, settings={}, name='nvidia', keep_var=...)`
    The message that names the node, what runs there and the two ways forward, or "" when the run takes
    no GPU away from a GPU pod. facts: ansible_facts.gpu_node; targets: the runtimes the run configures;
    settings: the toolkit config.toml keys it merges.

    own_config (the toolkit role's config.toml) and keep (nvidia_container_toolkit_keep_gpu_pod_access) add the
    checks of every NVIDIA runtime entry (issue 46): a config that cannot be told, GPUs had by the envvar.

`gpu_pods_config_targets(facts, own_config, settings, keep=False)`
    The toolkit configs the toolkit role merges into, [{path, settings, label}]: its own, then every other config an
    NVIDIA runtime entry reads (the GPU Operator's), with the isolation keys only.

`gpu_pods_mig_refusal(facts, node, layout)`
    The nvidia_mig role's refusal of a MIG layout change while processes hold GPUs, or "".
"""

from __future__ import annotations

from ansible_collections.gpunode.provisioning.plugins.module_utils.kubernetes import gpu_pods as _logic


def gpu_pods_refusal(
    facts,
    node,
    targets,
    set_as_default,
    enable_cdi,
    settings=None,
    name="nvidia",
    keep_var="nvidia_container_toolkit_keep_gpu_pod_access",
    own_config=None,
    keep=False,
):
    return _logic.refusal_for_run(
        dict(facts or {}),
        str(node),
        list(targets or []),
        bool(set_as_default),
        bool(enable_cdi),
        dict(settings or {}),
        str(name),
        str(keep_var),
        str(own_config) if own_config else None,
        bool(keep),
    )


def gpu_pods_config_targets(facts, own_config, settings, keep=False):
    return _logic.config_targets(dict(facts or {}), str(own_config), dict(settings or {}), bool(keep))


def gpu_pods_mig_refusal(facts, node, layout):
    return _logic.mig_refusal(dict(facts or {}), str(node), str(layout))


class FilterModule:
    """Filters of the GPU pods guard."""

    def filters(self):
        return {
            "gpu_pods_refusal": gpu_pods_refusal,
            "gpu_pods_mig_refusal": gpu_pods_mig_refusal,
            "gpu_pods_config_targets": gpu_pods_config_targets,
        }
