# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The module side of this collection's controller-side actions (containerd_config, toml_merge, role_read,
role_variables, fleet_report_write, gpu_validate_outcome): their plugins/modules file carries the documentation and
the argument spec (ansible-doc, ansible-test's validate-modules); run as a module on a node, it only fails, saying how
to call it."""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule


def fail_outside_action(name: str, argument_spec: dict, **module_args) -> None:
    """Fail the module ``name`` run without its action plugin, naming the plugin and how to call it."""
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True, **module_args)
    module.fail_json(
        msg=f"{name} must run through its action plugin (plugins/action/{name}.py) on the controller: call it as "
        f"gpunode.provisioning.{name}."
    )
