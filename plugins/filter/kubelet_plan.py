# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The kubelet role's plan for one node, worked out once per run (issue 47, issue 51 item 4).

The role's decisions were a program of lazy variables in its vars/main.yml. Ansible renders a lazy variable again in
every task that reads it, and each of those reads rendered most of the program again (the variable check, the files
read, the KubeletConfiguration, the flags): on a no-op re-run of site.yml that was the largest controller cost of the
role. The same program is now these two filters, built from the role's other filters, rendered once each:

- ``kubelet_plan_check(inputs)``: the problems the variable check reports (the role_read task's rule,
  ``__kubelet_variable_checks``), before anything is read on the node: the values (kubelet_validate; with them the
  variables that start with kubelet_ but are not the role's) and DRA's kubelet version.
- ``kubelet_plan(inputs, reads)``: everything the role decides from its variables, the GPU node facts and what the
  role_read task read (``reads``: that task's reads, the slurp of the kubelet files and the two stat looks), rendered
  by that task after its reads; its result (``plan``) is registered with the read (``__kubelet_node.plan``), and the
  role's tasks and handlers read it from there.

``inputs`` (vars/main.yml ``__kubelet_plan_inputs``): ``params`` (the role's public variables, as the play has them),
``variable_names`` (every variable whose name starts with kubelet_), ``gpu_node`` (the facts), ``installer`` and
``installer_managed``, ``hostname``, ``verbosity``, ``gpu_allocation``, ``dropin_min``, ``dra_min``, and the role's
paths and names: ``env_file_path``, ``dropin_path``, ``kubeadm_flags_file``, ``alpha_env_dropin``, ``root_dir``,
``dra_label``, ``dra_artifacts``, ``userns_gate_from``, ``userns_default_on``.

What depends on a later task's result stays a variable reading the plan (vars/main.yml): the drop-in's text (a
template), the report (whether a file changed), the restart transaction's outcome and the RKE2/k3s agent config (read
by tasks/installer.yml). So does the old effective configuration, rendered only by the handlers, when a file changed
(the role's own drop-in is parsed only there, as before).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible.plugins.filter.core import to_bool
from ansible.plugins.test.core import version_compare
from ansible_collections.gpunode.provisioning.plugins.filter import kubelet as _kubelet
from ansible_collections.gpunode.provisioning.plugins.filter import kubelet_config as _config
from ansible_collections.gpunode.provisioning.plugins.filter import kubelet_tasks as _tasks
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts import dra as _dra

_USERNS_VERSION = re.compile(r"^v?[0-9]+[.][0-9]+")
_DRA_VERSION = re.compile(r"[0-9]+[.][0-9]+")


def _facts(inputs: Mapping) -> dict:
    """What the check and the plan both work out from the variables and the facts."""
    gpu_node = inputs.get("gpu_node") or {}
    raw = inputs["params"]
    installed = to_bool((gpu_node.get("kubelet") or {}).get("installed", False))
    version = _tasks.kubelet_planned_version(gpu_node, installed, raw.get("kubelet_assumed_version"))
    userns_version = re.sub(r"^v", "", str(version))
    userns_gates = (
        {"UserNamespacesSupport": True}
        if to_bool(raw.get("kubelet_user_namespaces"))
        and _USERNS_VERSION.match(userns_version)
        and version_compare(userns_version, inputs["userns_gate_from"], ">=")
        and version_compare(userns_version, inputs["userns_default_on"], "<")
        else {}
    )
    # the role's gates under the user's (the user's win)
    params = {**raw, "kubelet_feature_gates": {**userns_gates, **(raw.get("kubelet_feature_gates") or {})}}
    unknown = sorted(set(inputs.get("variable_names") or []) - set(raw))
    return {
        "gpu_node": gpu_node,
        "installed": installed,
        "version": version,
        "userns_version": userns_version,
        "userns_gates": userns_gates,
        "params": params,
        "unknown": unknown,
        "unknown_message": (
            "These variables start with kubelet_ but are not variables of the kubelet role, so they have no effect: "
            f"{', '.join(unknown)}. See roles/kubelet/README.md for the variable names."
        ),
        "dra": inputs.get("gpu_allocation") == "dra",
    }


def kubelet_plan_check(inputs: Mapping) -> list[str]:
    """The variable check's problems, in order: the values' (with the unknown kubelet_ variables, named only then),
    then DRA's kubelet version. Empty when the variables hold."""
    facts = _facts(inputs)
    problems = list(_kubelet.kubelet_validate(facts["params"], facts["version"], inputs["dropin_min"]))
    if problems and facts["unknown"]:
        problems.append(facts["unknown_message"])
    version, dra_min = facts["userns_version"], inputs["dra_min"]
    # DRA (issue 39) needs a kubelet in which DynamicResourceAllocation is GA: the installed one, else the assumed one
    if facts["dra"] and not (_DRA_VERSION.match(version) and version_compare(version, dra_min, ">=")):
        planned = "is" if facts["installed"] else "planned for (kubelet_assumed_version) is"
        problems.append(
            f"gpu_node_facts_gpu_allocation=dra on {inputs['hostname']} needs kubelet {dra_min} or later"
            f" (DynamicResourceAllocation is GA and on from {dra_min}), but the kubelet {planned} {version}."
            " Upgrade the kubelet first, or keep gpu_node_facts_gpu_allocation=device-plugin. Nothing on the node was"
            " changed."
        )
    return problems


def _stat_results(*registered) -> dict:
    """The stat looks of the read, as one registered loop (kubelet_parts, kubelet_rollback_plan read it so)."""
    return {"results": [result for one in registered for result in (one or {}).get("results") or []]}


def kubelet_plan(inputs: Mapping, reads) -> dict:
    """The node's plan, from the variables, the facts and the read (module docstring). ``reads``: the role_read task's
    reads, in its order: the slurp of the kubelet files, the stat look that follows links, the one that does not."""
    facts = _facts(inputs)
    params, gpu_node = facts["params"], facts["gpu_node"]
    main_path, dropin_path = params["kubelet_main_config_path"], inputs["dropin_path"]
    files = _tasks.kubelet_read_files(reads[0])
    config = _kubelet.kubelet_config_plan(facts["version"], params["kubelet_config_mode"], inputs["dropin_min"])
    runtime = _kubelet.kubelet_runtime_endpoint(gpu_node, params["kubelet_container_runtime_endpoint"])
    main_current = _config.kubelet_parse_config(files.get(main_path, ""), main_path)
    has_gpu = to_bool(gpu_node.get("has_gpu", False))
    running = to_bool((gpu_node.get("kubelet") or {}).get("running", False))
    fields = _kubelet.kubelet_compose_config(params, runtime["endpoint"], has_gpu, main_current)

    labels = _kubelet.kubelet_compose_labels(params, has_gpu)
    if facts["dra"]:
        labels = {**labels, "labels": {**labels["labels"], inputs["dra_label"]: "dra"}}
    else:
        labels = {**labels, "absent": [*labels["absent"], inputs["dra_label"]]}

    installer_managed = bool(inputs["installer_managed"])
    # the merge into the main file (merge mode: tasks/config_merge.yml writes it)
    merge = None
    if config["mode"] == "merge":
        merge = _config.kubelet_merge_config(
            files.get(main_path, ""), fields, params["kubelet_config_absent"], main_path
        )
    new_effective = merge["config"] if merge else _config.kubelet_effective_config(main_current, fields)
    flag_changes = _kubelet.kubelet_flag_changes(params, config, fields)

    before = _stat_results(*reads[1:3])
    dra_root_dir = (params.get("kubelet_flags") or {}).get("root-dir") or (
        (gpu_node.get("dra") or {}).get("kubelet_root_dir") or inputs["root_dir"]
    )
    endpoint_var = params["kubelet_container_runtime_endpoint"]
    return {
        "version": facts["version"],
        "installed": facts["installed"],
        "running": running,
        "has_gpu": has_gpu,
        "params": params,
        "files": files,
        "config": config,
        "runtime": runtime,
        "main_current": main_current,
        "fields": fields,
        "labels": labels,
        "merge": merge,
        "new_effective": new_effective,
        "healthz_url": _config.kubelet_healthz_url(new_effective),
        "restart_wanted": bool(params["kubelet_restart_on_change"] and facts["installed"] and running),
        "dra": facts["dra"],
        # the DRA plugin's directories and checkpoint under the kubelet's --root-dir (shared with the facts, the doctor)
        "dra_paths": _dra.dra_paths(str(dra_root_dir).rstrip("/") or "/"),
        "parts": _tasks.kubelet_parts(
            before,
            facts["dra"],
            inputs["dra_artifacts"],
            installer_managed,
            params.get("kubelet_user_namespaces_subid_start") is not None,
            config["mode"],
        ),
        # the file tasks of tasks/apply.yml (their drop-in writes: vars/main.yml, a template)
        "dropins_unread": ([dropin_path] if config["mode"] == "merge" else [])
        + ([] if config["alpha_env"] else [inputs["alpha_env_dropin"]]),
        "flags_args": {
            "path": inputs["env_file_path"],
            "flags": flag_changes["flags"],
            "flags_absent": flag_changes["flags_absent"],
            "node_labels": labels["labels"],
            "node_labels_absent": labels["absent"],
            "backup": params["kubelet_backup"],
            "owner": "root",
            "group": "root",
            "mode": "0644",
        },
        # kubelet_report_messages' values but whether a file changed (the report adds it)
        "report": {
            "hostname": inputs["hostname"],
            "unknown_message": facts["unknown_message"] if facts["unknown"] else "",
            "userns_gates": len(facts["userns_gates"]) > 0,
            "userns_version": facts["userns_version"],
            "userns_gate": (inputs["params"].get("kubelet_feature_gates") or {}).get("UserNamespacesSupport", True),
            "installed": facts["installed"],
            "running": running,
            "mode": config["mode"],
            "version": config["version"],
            "runtime_message": runtime["message"]
            if (endpoint_var == "auto" and runtime["endpoint"] == "") or int(inputs.get("verbosity") or 0) >= 1
            else "",
            "kubeadm_flags_file": inputs["kubeadm_flags_file"],
            "overridden": _config.kubelet_flags_in_text(
                files.get(inputs["kubeadm_flags_file"], ""), [_kubelet.flag_for_field(field) for field in fields]
            ),
        },
    }


class FilterModule:
    """The kubelet role's plan (see the module docstring)."""

    def filters(self):
        return {"kubelet_plan_check": kubelet_plan_check, "kubelet_plan": kubelet_plan}
