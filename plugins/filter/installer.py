# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Filters of runtime_config for nodes whose containerd a cluster installer runs (RKE2, k3s).

RKE2 and k3s regenerate containerd's config.toml at every agent start, from
``<data-dir>/agent/etc/containerd/config.toml.tmpl`` (``config-v3.toml.tmpl`` with containerd 2.x) when it exists,
else from their built-in template; ``{{ template "base" . }}`` in that file stands for the built-in config (k3s docs
"Base template"; the paths and version gates are cited in plugins/module_utils/node_facts/installers.py). So the
generated config.toml is never edited. ``installer_runtime_plan`` decides, from the installer facts (gpu_node_facts
``installer``), the config the agent generated at its last start and the template on the node, what the node needs:
nothing (the agent registers the runtime by itself), our template, or a refusal that says why and what to do. The
runtime's table in the template is a copy of the default runtime's table of the generated config with only
``BinaryName`` replaced (copy, don't invent), keys compared case-insensitively as containerd decodes them
(containerd_toml.fold_options). ``containerd_dump_problems`` reads a
`containerd config dump` for the restart's health check, on installer nodes and elsewhere (tasks/health.yml).
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import config as _containerd_config
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd.parse import require_tomlkit, tomlkit

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover - Ansible is always there when the role runs

    class AnsibleFilterError(Exception):
        pass


def _containerd_toml():
    return _containerd_config


TEMPLATE_MARK = "# Managed by Ansible (runtime_config): the nvidia runtime for the installer's containerd."
TEMPLATE_HEAD = (
    TEMPLATE_MARK + "\n"
    "# {installer} renders config.toml from this file at every agent start; the base template on the next line is\n"
    "# its own config. Local changes are overwritten: set runtime_config_installer_template_extra instead.\n"
)
BASE_LINE = '{{ template "base" . }}'
# where the installers look for nvidia-container-runtime (k3s pkg/agent/containerd/nvidia.go)
DETECTED_DIRS = ("/usr/local/nvidia/toolkit", "/usr/bin")


def _generated(text: str | None, path: str) -> dict:
    require_tomlkit()
    if not text or not text.strip():
        return {}
    try:
        return tomlkit.parse(text).unwrap()
    except Exception as exc:  # tomlkit raises several error types
        raise AnsibleFilterError(
            f"{path} (the config the installer generated) is not valid TOML: {exc}. The agent wrote it at its last "
            "start; restart the agent, or fix the template it renders it from."
        ) from exc


def _runtimes(config: Mapping) -> tuple[int, dict, str | None]:
    ct = _containerd_toml()
    version = config.get("version", 1) if config else 2
    if version not in ct.CRI_TABLES:
        return version, {}, None
    paths = ct.table_paths(version)
    node = config
    for key in paths.containerd:
        node = node.get(key, {}) if isinstance(node, Mapping) else {}
    runtimes = node.get("runtimes", {}) if isinstance(node, Mapping) else {}
    default = node.get("default_runtime_name") if isinstance(node, Mapping) else None
    return version, dict(runtimes) if isinstance(runtimes, Mapping) else {}, default


def installer_runtime_entry(generated_text: str, name: str, binary: str, path: str = "config.toml") -> dict:
    """The table for runtime ``name``: the default runtime's table of the generated config (else runc's), with
    BinaryName = ``binary`` and every other spelling of it dropped."""
    ct = _containerd_toml()
    _version, runtimes, default = _runtimes(_generated(generated_text, path))
    source = None
    for candidate in (default, "runc"):
        entry = runtimes.get(candidate) if candidate and candidate != name else None
        if isinstance(entry, Mapping) and entry.get("runtime_type", ct.DEFAULT_RUNTIME_TYPE) == ct.DEFAULT_RUNTIME_TYPE:
            source = dict(entry)
            break
    source = source or {"runtime_type": ct.DEFAULT_RUNTIME_TYPE}
    options = source.get("options") if isinstance(source.get("options"), Mapping) else {}
    return {**source, "options": ct.fold_options(options, {"BinaryName": binary})}


def installer_template(generated_text: str, installer: str, name: str, binary: str, extra: str = "") -> str:
    """Our template: a header, the installer's base config, the runtime's tables, and ``extra`` verbatim."""
    ct = _containerd_toml()
    version, _runtimes_now, _default = _runtimes(_generated(generated_text, "config.toml"))
    paths = ct.table_paths(version if version in ct.CRI_TABLES else 2)
    doc = tomlkit.document()
    node = doc
    for key in paths.runtimes:
        node = node.setdefault(key, tomlkit.table(is_super_table=True))
    node[name] = installer_runtime_entry(generated_text, name, binary)
    body = tomlkit.dumps(doc).strip()
    text = TEMPLATE_HEAD.format(installer=installer) + BASE_LINE + "\n\n" + body + "\n"
    if extra and extra.strip():
        text += "\n" + extra.strip() + "\n"
    return text


def installer_runtime_plan(
    installer: Mapping,
    generated_text: str | None,
    template_text: str | None,
    name: str,
    binary: str,
    set_as_default: bool,
    extra: str = "",
) -> dict:
    """What the node needs; keys: ``template`` (the text to write, '' for none), ``remove_template`` (ours is
    there and no longer needed), ``refuse`` (a message: nothing may change), ``detected`` (the agent registers
    the runtime by itself), ``why`` (one line for the operator)."""
    containerd = installer.get("containerd") or {}
    label = f"{installer.get('name')} {installer.get('version') or '(version unknown)'}"
    template_path = containerd.get("template") or (containerd.get("templates") or [""])[-1]
    plan = {"template": "", "remove_template": False, "refuse": "", "detected": False, "why": ""}
    ours = template_text is not None and TEMPLATE_MARK in template_text
    if template_text is not None and not ours:
        plan["refuse"] = (
            f"{template_path} exists and is not ours: {installer.get('name')} renders containerd's config from it, "
            f"and a Go template cannot be merged. Add the {name} runtime to it yourself (a table "
            f"[...containerd.runtimes.{name}] copied from runc's with BinaryName = {binary!r}), or move it away so "
            'that runtime_config writes one that starts with {{ template "base" . }}. Nothing was changed.'
        )
        return plan
    detected_dirs = tuple(f"{directory}/" for directory in DETECTED_DIRS)
    installer_finds = binary.startswith(detected_dirs) and binary.rsplit("/", 1)[-1] == "nvidia-container-runtime"
    _version, runtimes, _default = _runtimes(_generated(generated_text, containerd.get("config") or "config.toml"))
    entry = runtimes.get(name) if isinstance(runtimes.get(name), Mapping) else None
    served = entry is not None and _containerd_toml().option_value(entry.get("options"), "BinaryName") == binary
    by_itself = containerd.get("nvidia_detection") or (served and not ours)
    if name == "nvidia" and installer_finds and not (extra and extra.strip()) and by_itself:
        plan.update(detected=True, remove_template=ours, why=f"{label} registers {name} by itself at agent start")
        return plan
    if not containerd.get("template_base"):
        plan["refuse"] = (
            f"{label} cannot get the {name} runtime without editing its generated config: "
            + (
                "its version is unknown (gpu_node_facts could not run it), "
                if containerd.get("template_base") is None
                else 'this release has no {{ template "base" . }} (from v1.24.17, v1.25.13, v1.26.8, v1.27.5, '
                "v1.28.1), "
            )
            + f"and it does not register {name} by itself. Upgrade {installer.get('name')}, or write {template_path} "
            "yourself from the installer's full template. Nothing was changed."
        )
        return plan
    plan["template"] = installer_template(generated_text or "", str(installer.get("name")), name, binary, extra)
    plan["why"] = f"{label}: {template_path} extends the installer's config with the {name} runtime"
    del set_as_default  # the default runtime goes through the agent config (installer_agent_dropin)
    return plan


def installer_agent_dropin(installer: Mapping, name: str, set_as_default: bool) -> str:
    """The agent config drop-in that makes ``name`` the default runtime ('' when it must not exist)."""
    if not set_as_default:
        return ""
    containerd = installer.get("containerd") or {}
    if not containerd.get("default_runtime_option"):
        raise AnsibleFilterError(
            f"runtime_config_set_as_default is true, but {installer.get('name')} "
            f"{installer.get('version') or '(version unknown)'} has no agent option default-runtime (from v1.26.12, "
            "v1.27.9, v1.28.5, v1.29.0) and its generated config.toml must not be edited. Upgrade it, or leave "
            "runtime_config_set_as_default false and give GPU pods runtimeClassName: nvidia. Nothing was changed."
        )
    return (
        "# Managed by Ansible (runtime_config). Local changes are overwritten.\n"
        f"# The default runtime of {installer.get('name')}'s containerd (agent option default-runtime).\n"
        f"default-runtime: {name}\n"
    )


# kubespray (kubernetes-sigs/kubespray, roles/container-engine/containerd) renders /etc/containerd/config.toml from
# templates/config.toml.j2 (containerd 2.x) or config-v1.toml.j2 (1.x; v2.24-v2.27: config.toml.j2 with version 2)
# at every run ("Containerd | Copy containerd config file", notify: Restart containerd), looping over
# [containerd_runc_runtime] + containerd_additional_runtimes: per runtime `type`, `base_runtime_spec` (a file name
# below containerd_cfg_dir), `options` (a value whose string is "true"/"false" is written bare, any other quoted)
# and, in the version-2 templates, `engine` and `root` without a default (v2.24.0 to v2.27.x and config-v1.toml.j2
# at 46dbdd3, 2026-08). Its templates have no `imports` line; containerd_extra_args is written verbatim at the top.
KUBESPRAY_CFG_DIR = "/etc/containerd"


def kubespray_runtime(config_text: str | None, name: str, binary: str) -> dict:
    """The containerd_additional_runtimes entry that makes kubespray render the runtime itself: the default
    runtime's table of the rendered config with BinaryName replaced (installer_runtime_entry), in kubespray's
    form."""
    entry = installer_runtime_entry(config_text or "", name, binary, f"{KUBESPRAY_CFG_DIR}/config.toml")
    result: dict = {"name": name, "type": entry.get("runtime_type", "io.containerd.runc.v2"), "engine": "", "root": ""}
    spec = entry.get("base_runtime_spec")
    if (
        isinstance(spec, str)
        and spec.startswith(f"{KUBESPRAY_CFG_DIR}/")
        and "/" not in spec[len(KUBESPRAY_CFG_DIR) + 1 :]
    ):
        result["base_runtime_spec"] = spec[len(KUBESPRAY_CFG_DIR) + 1 :]
    options = {}
    for key, value in (entry.get("options") or {}).items():
        options[key] = ("true" if value else "false") if isinstance(value, bool) else value
    result["options"] = options
    return result


def containerd_dump_problems(
    dump_text: str | None, name: str, set_as_default: bool = False, what: str = "containerd's effective config"
) -> list:
    """What the restart's health check finds missing in ``dump_text``, the output of `containerd --config <file>
    config dump` (roles/runtime_config/tasks/health.yml): the runtimes.``name`` table in the CRI plugin's table of
    the dump's version and, with ``set_as_default``, default_runtime_name = ``name``. The dump is read as TOML:
    containerd 1.x prints basic strings ("nvidia"), 2.x literal ones ('nvidia'), and a table name may be quoted or
    not; [] when all is there."""
    require_tomlkit()
    try:
        config = tomlkit.parse(dump_text or "").unwrap()
    except Exception as exc:  # tomlkit raises several error types
        return [f"{what} is not TOML ({exc})"]
    if not config:
        return [f"{what} is empty"]
    version, runtimes, default = _runtimes(config)
    if version not in _containerd_toml().CRI_TABLES:
        return [f"{what} has config version {version!r}, which this role does not know"]
    problems = []
    if not isinstance(runtimes.get(name), Mapping):
        problems.append(f"{what} has no runtimes.{name} table")
    if set_as_default and default != name:
        problems.append(f"{what} does not make {name} the default runtime (default_runtime_name = {default!r})")
    return problems


class FilterModule:
    def filters(self):
        return {
            "runtime_config_containerd_dump_problems": containerd_dump_problems,
            "runtime_config_installer_plan": installer_runtime_plan,
            "runtime_config_installer_dropin": installer_agent_dropin,
            "runtime_config_kubespray_runtime": kubespray_runtime,
        }
