# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The nvidia_driver role's plan for one node, worked out once per run (issue 51 item 4).

The role's decisions were a program of lazy variables in its vars/main.yml and its platform files (vars/<platform>.yml),
each rendered again in every task that read it, in an order nothing wrote down. They are now these filters:

- ``nvidia_driver_plan_check(inputs)``: the variable check's rules, {name: {ok, msg}} (tasks/main.yml, the
  role_variables task's ``__nvidia_driver_variable_checks``), before anything else: versions, branch, the CUDA key's
  fingerprint, IMEX. Platform-free, so a node without a GPU is checked too and pays for nothing else.
- ``nvidia_driver_plan(inputs)``: everything the role decides from its variables, the facts and its platform's data
  (the platform file, now data only), rendered once by tasks/set_vars.yml (a set_fact, ``__nvidia_driver_plan``):
  the branch, the kernel modules' flavour, the package names and their pins, the package sources, the fabric
  services, Secure Boot, the reboot's blocker.
- ``nvidia_driver_installed(plan, packages)``: what follows from the installed packages (``ansible_facts.packages``,
  read again by the role after it installs): the installed driver's version, the fabric manager's and IMEX's, whether
  they are apart, the specs that pin them to the driver, whether a reboot is pending, whether this run would change
  the driver. vars/main.yml renders it where it is read (``__nvidia_driver_installed``), as the facts change.
- ``nvidia_driver_preflight_checks(plan, installed, mok)``: the preflight's checks ({name: {ok, msg}}), on the plan,
  the installed packages and the MOK probe's findings (tasks/preflight.yml).

``inputs`` (vars/main.yml ``__nvidia_driver_plan_inputs``): ``params`` (the role's public variables),
``facts`` (ansible_facts: distribution, its versions and release, architecture, kernel, gpu_node), ``platform``
(the platform file's data over ``platform_defaults``), ``hostname``, ``connection``, ``this_month``, ``branches``,
``releases`` (every platform file's releases, for the refusal), and the role's constants: ``version_regex``,
``branch_regex``, ``ip_regex``, ``imex_keys``, ``imex_nodes_file``.

What depends on a later task's result stays a variable reading the plan (vars/main.yml): the headers and kernel
lookups, the MOK probe, the CUDA key's probe, the check-mode guesses and whether services start now.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from ansible.plugins.filter.core import to_bool
from ansible_collections.gpunode.provisioning.plugins.filter import nvidia_driver as _driver
from ansible_collections.gpunode.provisioning.plugins.filter import nvidia_driver_branches as _branches
from ansible_collections.gpunode.provisioning.plugins.filter import nvidia_driver_packages as _packages
from ansible_collections.gpunode.provisioning.plugins.filter import nvidia_driver_run as _run
from ansible_collections.gpunode.provisioning.plugins.module_utils.plugins.connection_names import short_connection_name

_UPSTREAM = re.compile(r"^(?:[0-9]+:)?([0-9]+(?:\.[0-9]+)+)")
_DEB_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}
# NVIDIA's CUDA repositories call 64-bit Arm servers "sbsa".
_CUDA_ARCH = {"x86_64": "x86_64", "aarch64": "sbsa"}


def _text(value) -> str:
    """A variable as Jinja's ``| string`` shows it ('' for none)."""
    return "" if value is None else str(value)


def _bool(value) -> bool:
    return to_bool(value) if isinstance(value, (bool, str, int)) else bool(value)


def _upstream_version(packages: Mapping, name: str) -> str:
    """The upstream part of an installed package's version (epoch and revision dropped), '' when not installed."""
    if not name or name not in packages:
        return ""
    found = _UPSTREAM.search(str(packages[name][0]["version"]))
    return found.group(1) if found else ""


def _pin(separator: str, version: str, revision: str) -> str:
    return f"{separator}{version}{revision}" if version else ""


# ---------------------------------------------------------------------------------------------- the variable check
def nvidia_driver_plan_check(inputs: Mapping) -> dict:
    """The variable check's rules, {name: {ok, msg}} in order (the role_variables task fails with the msg of each
    that is not ok)."""
    params = inputs["params"]
    version, branch = _text(params["nvidia_driver_version"]), _text(params["nvidia_driver_branch"])
    imex, nodes = params["nvidia_driver_imex"], params["nvidia_driver_imex_nodes"]
    bad = [str(node) for node in nodes if not re.match(inputs["ip_regex"], str(node))]
    settings = params["nvidia_driver_imex_settings"]
    unknown = [key for key in settings if key not in inputs["imex_keys"]]
    rules = {
        "version": (
            version == "" or bool(re.match(inputs["version_regex"], version)),
            f"nvidia_driver_version is '{version}', which is not an NVIDIA driver version: use the upstream version as"
            ' nvidia-smi prints it, e.g. "580.95.05" (no package revision such as "-1ubuntu1"), or "" for the newest'
            " driver of the branch.",
        ),
        "branch": (
            bool(re.match(inputs["branch_regex"], branch)),
            f'nvidia_driver_branch is \'{branch}\': use a three-digit branch such as "580", or "" for the platform\'s'
            " default branch.",
        ),
        "version_of_branch": (
            version == "" or branch == "" or version.split(".", maxsplit=1)[0] == branch,
            f"nvidia_driver_version {version} is not a version of branch {branch}: set nvidia_driver_branch to"
            f' "{version.split(".", maxsplit=1)[0]}" or leave it empty.',
        ),
        "cuda_repo_key_fingerprint": (
            bool(re.fullmatch("[0-9A-F]{40}", _fingerprint(params))),
            "nvidia_driver_cuda_repo_key_fingerprint is"
            f" {json.dumps(params['nvidia_driver_cuda_repo_key_fingerprint'])}: give the 40 hex digits of the CUDA"
            " repository key's full fingerprint (spaces allowed), as `gpg --show-keys` prints it.",
        ),
        "imex_nodes": (
            imex != "host" or len(nodes) > 0,
            f"nvidia_driver_imex is host, so nvidia-imex reads the IP addresses of its domain's nodes from"
            f" {inputs['imex_nodes_file']}, but nvidia_driver_imex_nodes is empty: list the IP addresses of every node"
            " of the IMEX domain (the same list on each), or set nvidia_driver_imex to dra (NVIDIA's DRA driver runs"
            " IMEX) or none.",
        ),
        "imex_node_addresses": (
            len(bad) == 0,
            f"nvidia_driver_imex_nodes has {', '.join(bad)}, which {'is' if len(bad) == 1 else 'are'} not an IP"
            " address: nvidia-imex takes the nodes of its domain by IPv4 or IPv6 address, one a line.",
        ),
        "imex_settings": (
            len(unknown) == 0,
            f"nvidia_driver_imex_settings sets {', '.join(unknown)}, which the config.cfg of NVIDIA IMEX does not have:"
            f" use its keys ({', '.join(inputs['imex_keys'])}).",
        ),
        "imex_setting_values": (
            not any(re.search("[\r\n]", str(value)) for value in settings.values()),
            "a value of nvidia_driver_imex_settings spans lines, which /etc/nvidia-imex/config.cfg (one KEY=VALUE a"
            " line) cannot hold: give each setting a one-line value.",
        ),
    }
    return {name: {"ok": ok, "msg": msg} for name, (ok, msg) in rules.items()}


def _fingerprint(params: Mapping) -> str:
    return re.sub(r"\s+", "", _text(params["nvidia_driver_cuda_repo_key_fingerprint"]).upper())


# ---------------------------------------------------------------------------------------------- the platforms
def _ubuntu_names(plan: dict, params: Mapping) -> dict:
    """Ubuntu's package names: "580-server" from Ubuntu's archive, "580" from the CUDA repository."""
    name = f"{plan['branch']}{'' if _bool(params['nvidia_driver_ubuntu_cuda_repo']) else '-server'}"
    open_suffix = "-open" if plan["open"] else ""
    flavour = params["nvidia_driver_ubuntu_kernel_flavour"]
    return {
        "ubuntu_name": name,
        "ubuntu_open": open_suffix,
        # precompiled (headless-no-dkms + utils), driver, or headless + utils (plugins/filter/nvidia_driver_packages.py)
        "ubuntu_packages": _packages.nvidia_driver_ubuntu_packages(
            name, open_suffix, params["nvidia_driver_ubuntu_precompiled"], params["nvidia_driver_ubuntu_packages"]
        ),
        "ubuntu_modules_package": f"linux-modules-nvidia-{name}{open_suffix}-{flavour}",
    }


def _ubuntu(plan: dict, params: Mapping, facts: Mapping) -> dict:
    """Ubuntu: the archive's -server packages (or the CUDA repository's), precompiled modules or DKMS."""
    cuda = _bool(params["nvidia_driver_ubuntu_cuda_repo"])
    branch, flavour = plan["branch"], params["nvidia_driver_ubuntu_kernel_flavour"]
    dist = "ubuntu" + str(facts["distribution_version"]).replace(".", "")
    return {
        "branch_choices": [] if cuda else plan["release"].get("branch_choices", []),
        "supported": plan["release_known"],
        "pinned_packages": plan["ubuntu_packages"],
        "extra_packages": [plan["ubuntu_modules_package"]] if plan["precompiled"] else [],
        "version_package": f"nvidia-kernel-common-{plan['ubuntu_name']}",
        "fabricmanager_package": f"nvidia-fabricmanager-{branch}",
        "imex_package": "nvidia-imex" if cuda and _int(branch) >= 580 else f"nvidia-imex-{branch}",
        "kernel_headers_meta": f"linux-headers-{flavour}",
        "kernel_hold_packages": [f"linux-{flavour}", f"linux-image-{flavour}", f"linux-headers-{flavour}"],
        "cuda_repo_dist": dist,
        "cuda_source_file": f"/etc/apt/sources.list.d/cuda-{dist}-{plan['cuda_arch']}.list",
    }


def _el(plan: dict, params: Mapping, facts: Mapping, platform: Mapping) -> dict:
    """RHEL, Rocky Linux and AlmaLinux: NVIDIA's CUDA repository, module streams on EL 8/9."""
    major, distribution = str(facts["distribution_major_version"]), facts["distribution"]
    persistenced = ["nvidia-persistenced"] if _bool(params["nvidia_driver_persistenced"]) else []
    dist = f"rhel{major}"
    if distribution == "RedHat":
        crb = f"codeready-builder-for-rhel-{major}-{facts['architecture']}-rpms"
    else:
        crb = "powertools" if major == "8" else "crb"
    return {
        "supported": plan["release_known"] and distribution in platform["distributions"],
        "crb_repo": crb,
        "branch_pin": "" if plan["dnf_module_streams"] else f"-{plan['branch']}.*",
        "pinned_packages": ["nvidia-driver-cuda", plan["el_kernel_package"], *persistenced],
        "extra_packages": [],
        "version_package": plan["el_kernel_package"],
        "imex_package": "nvidia-imex" if _int(plan["branch"]) >= 580 else f"nvidia-imex-{plan['branch']}",
        "cuda_repo_dist": dist,
        "cuda_source_file": f"/etc/yum.repos.d/cuda-{dist}.repo",
    }


def _debian(plan: dict, params: Mapping, facts: Mapping) -> dict:
    """Debian: its archive's one branch, or NVIDIA's flat CUDA repository (the default)."""
    release = plan["release"]
    cuda = _bool(params["nvidia_driver_debian_cuda_repo"]) and _bool(release.get("cuda_repo", False))
    persistenced = ["nvidia-persistenced"] if _bool(params["nvidia_driver_persistenced"]) else []
    if plan["open"]:
        kernel = "nvidia-kernel-open-dkms" if cuda else "nvidia-open-kernel-dkms"
    else:
        kernel = "nvidia-kernel-dkms"
    deb_arch = plan["deb_arch"]
    return {
        "debian_cuda": cuda,
        "supported": facts["distribution"] == "Debian",
        "branch_choices": [] if cuda else release.get("branch_choices", []),
        "debian_kernel_package": kernel,
        # without nvidia_driver_version the CUDA repository (every branch in one suite) stays on the branch
        "branch_pin": f"={plan['branch']}.*" if cuda else "",
        "pinned_packages": ["nvidia-driver-cuda", kernel, *persistenced]
        if cuda
        else ["nvidia-driver", kernel, "firmware-nvidia-gsp"],
        "extra_packages": [] if cuda else ["firmware-misc-nonfree", *persistenced],
        "version_package": kernel,
        "kernel_headers_meta": f"linux-headers-{deb_arch}",
        "kernel_hold_packages": [f"linux-image-{deb_arch}", f"linux-headers-{deb_arch}"],
        "module_name": "nvidia" if cuda else "nvidia-current" + ("-open" if plan["open"] else ""),
        "cuda_repo_dist": f"debian{facts['distribution_major_version']}",
    }


def _debian_default_branch(params: Mapping, release: Mapping) -> str:
    cuda = _bool(params["nvidia_driver_debian_cuda_repo"]) and _bool(release.get("cuda_repo", False))
    return "580" if cuda else str(release.get("default_branch", ""))


def _int(value) -> int:
    text = _text(value).strip()
    return int(text) if re.fullmatch("[+-]?[0-9]+", text) else 0


# ---------------------------------------------------------------------------------------------- the plan
def nvidia_driver_plan(inputs: Mapping) -> dict:
    """The node's plan, from the variables, the facts and the platform's data (module docstring)."""
    params, facts = inputs["params"], inputs["facts"]
    gpu_node = facts.get("gpu_node") or {}
    driver = gpu_node.get("driver") or {}
    # the platform file's values (their names without the role's prefix) over the values most platforms share
    platform = {**inputs["platform_defaults"]}
    platform.update({re.sub("^__nvidia_driver_", "", key): value for key, value in inputs["platform"].items()})
    family = platform["family"]
    major = str(facts["distribution_major_version"])
    version, branch_var = _text(params["nvidia_driver_version"]), _text(params["nvidia_driver_branch"])
    host_mode = params["nvidia_driver_managed_by"] == "host"

    plan: dict = {key: platform[key] for key in platform if key not in ("distributions",)}
    releases = platform.get("releases") or {}
    plan["release_known"] = major in releases
    plan["release"] = dict(releases.get(major) or {})
    plan["branch_choices"] = plan["release"].get("branch_choices", [])
    plan["dnf_module_streams"] = plan["release"].get("dnf_module_streams", False)
    if family == "debian":
        plan["default_branch"] = _debian_default_branch(params, plan["release"])
    default_branch = _text(plan.get("default_branch"))
    plan["branch"] = branch_var or (version.split(".", maxsplit=1)[0] if version else default_branch)
    branch = plan["branch"]

    architecture = facts.get("architecture", "x86_64")
    plan["flavour_choice"] = _driver.nvidia_kernel_module(
        gpu_node.get("gpus") or [], params["nvidia_driver_flavour"], branch, driver.get("kernel_module_type"),
        architecture,
    )  # fmt: skip
    plan["open"] = plan["flavour_choice"]["flavour"] == "open"
    plan["host_mode"] = host_mode
    plan["has_gpu"] = _bool(gpu_node.get("has_gpu", False))
    plan["container"] = _bool(gpu_node.get("container", False))
    plan["precompiled"] = family == "ubuntu" and _bool(params["nvidia_driver_ubuntu_precompiled"])
    plan["builds_modules"] = host_mode and not plan["precompiled"]
    plan["deb_arch"] = _DEB_ARCH.get(architecture, "")
    plan["cuda_arch"] = _CUDA_ARCH.get(architecture, "")
    plan["debian_kernel_package"] = "nvidia-open-kernel-dkms" if plan["open"] else "nvidia-kernel-dkms"
    plan["el_kernel_package"] = "kmod-nvidia-open-dkms" if plan["open"] else "kmod-nvidia-latest-dkms"
    plan.update(_ubuntu_names(plan, params))
    if family == "ubuntu":
        plan.update(_ubuntu(plan, params, facts))
    elif family == "el":
        plan.update(_el(plan, params, facts, platform))
    elif family == "debian":
        plan.update(_debian(plan, params, facts))
    else:
        plan["version_package"] = plan["el_kernel_package"]

    # the pins: a version (a two-part one is a prefix: "=580.95.*"), else the branch where the platform pins it
    plan["version_is_prefix"] = len(version.split(".")) == 2
    plan["version_suffix"] = (
        plan["pin_separator"] + version + (".*" if plan["version_is_prefix"] else plan["pin_revision"])
        if version
        else plan.get("branch_pin", "")
    )
    plan["package_specs"] = [f"{name}{plan['version_suffix']}" for name in plan["pinned_packages"]] + list(
        plan["extra_packages"]
    )
    plan["dnf_module_stream"] = f"{branch}-{'open' if plan['open'] else 'dkms'}"
    plan["dnf_module_enabled_regex"] = rf"(?m)^nvidia-driver\s+{re.escape(plan['dnf_module_stream'])}\s+(\[d\])?\[e\]"

    # the fabric services
    fabricmanager = params["nvidia_driver_fabricmanager"]
    plan["fabricmanager_enabled"] = fabricmanager == "always" or (
        fabricmanager == "auto" and _int(gpu_node.get("nvswitch_count", 0)) > 0
    )
    plan["imex_enabled"] = host_mode and params["nvidia_driver_imex"] != "none"
    plan["imex_settings"] = {
        "IMEX_NODE_CONFIG_FILE": inputs["imex_nodes_file"],
        **params["nvidia_driver_imex_settings"],
    }
    nvlsm = params["nvidia_driver_nvlsm"]
    plan["nvlsm_enabled"] = nvlsm == "always" or (
        nvlsm == "auto"
        and plan["fabricmanager_enabled"]
        and _bool((gpu_node.get("nvlink_fabric") or {}).get("nvl5", False))
        and (branch == "" or _int(branch) >= 570)
    )
    plan["hold_packages"] = _packages.nvidia_driver_hold_packages(
        plan["pinned_packages"],
        [
            [plan["fabricmanager_enabled"], plan["fabricmanager_package"]],
            [plan["imex_enabled"], plan["imex_package"]],
            [host_mode and plan["nvlsm_enabled"], plan["nvlsm_package"]],
        ],
    )

    # kernels: the running kernel's headers, and the package of one kernel's module (append its release)
    plan["running_kernel_headers"] = f"{plan['headers_prefix']}{facts['kernel']}"
    plan["kernel_package_prefix"] = (
        f"linux-modules-nvidia-{plan['ubuntu_name']}{plan['ubuntu_open']}-"
        if plan["precompiled"]
        else plan["headers_prefix"]
    )

    # the package sources
    release_name = facts.get("distribution_release", "")
    plan["apt_suites"] = [release_name] + [release_name + suffix for suffix in ("-updates", "-security", "-backports")]
    repo_url = params["nvidia_driver_cuda_repo_url"]
    plan["cuda_repo_path"] = f"{plan.get('cuda_repo_dist', '')}/{plan['cuda_arch']}"
    plan["cuda_keyring_url"] = f"{repo_url}/{plan['cuda_repo_path']}/cuda-keyring_1.1-1_all.deb"
    plan["cuda_repo_file_url"] = f"{repo_url}/{plan['cuda_repo_path']}/cuda-{plan.get('cuda_repo_dist', '')}.repo"
    plan["cuda_apt_uri"] = f"{re.sub('/+$', '', repo_url)}/{plan['cuda_repo_path']}/"
    plan["cuda_key_url"] = f"{re.sub('/+$', '', repo_url)}/{plan['cuda_repo_path']}/3bf863cc.pub"
    plan["cuda_fingerprint"] = _fingerprint(params)
    epel = params["nvidia_driver_epel_url"]
    plan["epel_release_url"] = f"{epel}/epel-release-latest-{major}.noarch.rpm"
    plan["epel_gpg_key_url"] = f"{epel}/RPM-GPG-KEY-EPEL-{major}"

    # Secure Boot: DKMS signs the modules it builds with the MOK
    plan["driver_loaded"] = _bool(driver.get("loaded", False))
    plan["secure_boot"] = gpu_node.get("secure_boot") is True
    plan["signs_modules"] = plan["secure_boot"] and plan["builds_modules"]
    plan["mok_key_path"] = params["nvidia_driver_mok_key"] or plan["mok_default_key"]
    plan["mok_cert_path"] = params["nvidia_driver_mok_cert"] or plan["mok_default_cert"]
    plan["mok_from_inventory"] = len(params["nvidia_driver_mok_key_content"]) > 0

    # the driver the node runs, and what may reboot it
    plan["loaded_version"] = _text(driver.get("version")) if driver.get("version") else ""
    plan["refuses_changes"] = host_mode and params["nvidia_driver_version_change"] == "refuse"
    if params["nvidia_driver_reboot"] == "never":
        plan["reboot_blocker"] = "nvidia_driver_reboot is never"
    elif plan["container"]:
        plan["reboot_blocker"] = "the node is a container"
    elif short_connection_name(inputs.get("connection") or "ssh") == "local":
        plan["reboot_blocker"] = "the play runs over a local connection"
    else:
        plan["reboot_blocker"] = ""
    plan["branch_warning"] = _branches.nvidia_driver_branch_warning(branch, inputs["branches"], inputs["this_month"])
    # what the preflight's messages name (nvidia_driver_preflight_checks)
    plan["node"] = {
        "hostname": inputs["hostname"],
        "distribution": facts["distribution"],
        "distribution_major_version": major,
        "distribution_version": facts["distribution_version"],
        "architecture": architecture,
        "nvswitch_count": gpu_node.get("nvswitch_count", 0),
        "releases": list(inputs.get("releases") or []),
        "params": {
            name: params[name]
            for name in (
                "nvidia_driver_version",
                "nvidia_driver_branch",
                "nvidia_driver_imex",
                "nvidia_driver_ubuntu_precompiled",
                "nvidia_driver_ubuntu_cuda_repo",
                "nvidia_driver_mok_key_content",
                "nvidia_driver_mok_cert_content",
                "nvidia_driver_mok_password",
                "nvidia_driver_version_change",
            )
        },
    }
    return plan


# ---------------------------------------------------------------------------------------------- the installed packages
def nvidia_driver_installed(plan: Mapping, packages, host_package_regex: str = "") -> dict:
    """What the installed packages (ansible_facts.packages, {} when not read) say against the plan."""
    packages = packages or {}
    version = _text(plan["node"]["params"]["nvidia_driver_version"])
    installed = _upstream_version(packages, plan["version_package"])
    fabricmanager_version = installed if version == "" or plan["version_is_prefix"] else version
    pin = _pin(plan["pin_separator"], fabricmanager_version, plan["pin_revision"])
    imex_spec = plan["imex_package"] + pin
    fabricmanager_installed = _upstream_version(packages, plan["fabricmanager_package"])
    imex_installed = _upstream_version(packages, plan["imex_package"])
    driver_version = installed or plan["loaded_version"]
    fix = plan["fabricmanager_fix_command"].replace("{package}", plan["fabricmanager_package"])
    fix = fix.replace("{driver}", driver_version)
    current = plan["loaded_version"] or installed
    return {
        "installed_version": installed,
        "fabricmanager_version": fabricmanager_version,
        "fabricmanager_spec": plan["fabricmanager_package"] + pin,
        "imex_spec": imex_spec,
        "fabric_services_specs": ([imex_spec] if plan["imex_enabled"] else [])
        + ([plan["nvlsm_package"]] if plan["nvlsm_enabled"] else []),
        "fabricmanager_installed_version": fabricmanager_installed,
        "fabricmanager_driver_version": driver_version,
        "fabricmanager_apart": bool(
            plan["fabricmanager_enabled"]
            and fabricmanager_installed
            and driver_version
            and fabricmanager_installed != driver_version
        ),
        "fabricmanager_fix_command": fix,
        "imex_installed_version": imex_installed,
        "imex_apart": bool(
            plan["imex_enabled"] and imex_installed and driver_version and imex_installed != driver_version
        ),
        "imex_fix_command": fix.replace(plan["fabricmanager_package"], plan["imex_package"])
        if plan["fabricmanager_package"]
        else "",
        "reboot_required": installed != "" and installed != plan["loaded_version"],
        "current_version": current,
        "changes_version": _run.nvidia_driver_changes_version(
            current, plan["node"]["params"]["nvidia_driver_version"], plan["node"]["params"]["nvidia_driver_branch"]
        ),
        "host_packages_found": sorted(name for name in packages if re.match(host_package_regex, name))
        if host_package_regex
        else [],
        "kernel_hold_installed": [name for name in plan["kernel_hold_packages"] if name in packages],
    }


# ---------------------------------------------------------------------------------------------- the preflight
def nvidia_driver_preflight_checks(plan: Mapping, installed: Mapping, mok: Mapping) -> dict:
    """The preflight's checks, {name: {ok, msg}} in order; ``mok``: {present, state} of the MOK probe."""
    node, p = plan["node"], plan["node"]["params"]
    host, distribution = node["hostname"], node["distribution"]
    present, state = list(mok.get("present") or []), mok.get("state", "absent")
    signs = plan["signs_modules"]
    choices = plan["branch_choices"]
    checks: dict = {}

    def check(name: str, ok, msg: str) -> None:
        checks[name] = {"ok": bool(ok), "msg": msg}

    check(
        "platform",
        _bool(plan["supported"]),
        "The nvidia_driver role supports Debian and the releases its vars/ platform files list: "
        f"{', '.join(node['releases'])} (RedHat: RHEL, Rocky Linux and AlmaLinux); {host} runs {distribution}"
        f" {node['distribution_version']}.",
    )
    cuda_hint = (
        ", or set nvidia_driver_debian_cuda_repo to true for NVIDIA's CUDA repository, which carries the supported"
        " branches"
        if plan["family"] == "debian"
        else ""
    )
    check(
        "branch_packaged",
        len(choices) == 0 or plan["branch"] in choices,
        f"{distribution} {node['distribution_major_version']} packages only the NVIDIA {', '.join(choices)} driver,"
        f" not {plan['branch']}: leave nvidia_driver_branch and nvidia_driver_version empty or pick a"
        f" {' or '.join(choices)} version{cuda_hint}.",
    )
    check(
        "flavour",
        plan["flavour_choice"]["error"] == "",
        f"{host}: {plan['flavour_choice']['error']} Nothing was changed.",
    )
    check(
        "open_packaged",
        not plan["open"] or _bool(plan["open_available"]),
        f"{distribution} {node['distribution_version']} has no package of the open GPU kernel modules: set"
        " nvidia_driver_flavour to proprietary.",
    )
    check(
        "architecture",
        plan["deb_arch"] != "",
        f"NVIDIA driver packages exist for x86_64 and aarch64 only; {host} is {node['architecture']}.",
    )
    check(
        "ubuntu_sources",
        not (
            plan["family"] == "ubuntu"
            and _bool(p["nvidia_driver_ubuntu_precompiled"])
            and _bool(p["nvidia_driver_ubuntu_cuda_repo"])
        ),
        "nvidia_driver_ubuntu_precompiled uses Canonical's signed modules from Ubuntu's archive, which match only the"
        " archive's driver, not the CUDA repository's: set one of nvidia_driver_ubuntu_precompiled and"
        " nvidia_driver_ubuntu_cuda_repo to false.",
    )
    key_set = len(p["nvidia_driver_mok_key_content"]) > 0
    check(
        "mok_content",
        not signs or key_set == (len(p["nvidia_driver_mok_cert_content"]) > 0),
        f"nvidia_driver_mok_{'cert' if key_set else 'key'}_content is empty but"
        f" nvidia_driver_mok_{'key' if key_set else 'cert'}_content is set: a Machine Owner Key from the inventory"
        " needs both its PEM private key and its PEM certificate. Set both, or neither to let the role create the key"
        " on the node. Nothing was changed.",
    )
    key, cert = plan["mok_key_path"], plan["mok_cert_path"]
    check(
        "mok_files",
        not signs or plan["mok_from_inventory"] or len(present) != 1,
        f"Secure Boot is enabled on {host} and DKMS signs the NVIDIA module with the Machine Owner Key {key} and"
        f" certificate {cert}, but only {' and '.join(present)} exists. Copy the other file of the pair there (or"
        " give both as nvidia_driver_mok_key_content and nvidia_driver_mok_cert_content), or remove it to let the"
        " role create a new pair. Nothing was changed.",
    )
    enrolled = "the firmware has not enrolled yet" if cert in present else "the role creates"
    precompiled_hint = (
        " Or set nvidia_driver_ubuntu_precompiled to true to use Canonical's signed modules."
        if plan["family"] == "ubuntu"
        else ""
    )
    check(
        "mok_password",
        not signs or len(p["nvidia_driver_mok_password"]) > 0 or state == "enrolled",
        f"Secure Boot is enabled on {host}, so the kernel loads only signed modules, and DKMS builds the NVIDIA"
        f" module here: the role signs it with a Machine Owner Key ({cert}), which {enrolled}. Enrolling it takes"
        " `mokutil --import` with a one-time password that someone at the node's console types in the MOK manager at"
        " the next boot. Set nvidia_driver_mok_password (keep it in Ansible Vault). Nothing was changed."
        + precompiled_hint,
    )
    check(
        "fabricmanager_packaged",
        not (plan["host_mode"] and plan["fabricmanager_enabled"] and plan["fabricmanager_package"] == ""),
        f"{host} has {node['nvswitch_count']} NVSwitches, which need NVIDIA Fabric Manager at the driver's exact"
        f" version, and {distribution} does not package it. Use Ubuntu or an EL distribution for NVSwitch systems, or"
        " set nvidia_driver_fabricmanager to never and install the fabric manager yourself.",
    )
    version, branch = p["nvidia_driver_version"], p["nvidia_driver_branch"]
    current = installed["current_version"]
    wanted = f"nvidia_driver_version is {version}" if _text(version) != "" else f"nvidia_driver_branch is {branch}"
    check(
        "version_kept",
        not plan["refuses_changes"] or not installed["changes_version"],
        f"{host} has NVIDIA driver {current} ({'loaded' if plan['loaded_version'] != '' else 'installed'}), but"
        f" {wanted}. Changing it replaces the driver under running GPU pods and reboots the node, and this play would"
        " do that to all its nodes at once, without a drain. Nothing was changed. Upgrade with the rolling playbook,"
        " which drains and reboots one batch at a time: ansible-playbook -i <inventory> playbooks/upgrade_driver.yml"
        f" -e nvidia_driver_version={version or '<version>'}; or set nvidia_driver_version to {current} to keep the"
        " node's driver.",
    )
    driver = installed["fabricmanager_driver_version"]
    check(
        "fabricmanager_with_driver",
        not plan["refuses_changes"] or not installed["fabricmanager_apart"],
        f"{host} has NVIDIA Fabric Manager {installed['fabricmanager_installed_version']}"
        f" ({plan['fabricmanager_package']}) but NVIDIA driver {driver}. The fabric manager starts only at the"
        " driver's exact version, so the NVSwitch fabric is down or goes down at the fabric manager's next restart."
        " Nothing was changed: putting them together restarts the fabric manager under running GPU jobs. Fix: drain"
        " the node and run ansible-playbook -i <inventory> playbooks/upgrade_driver.yml"
        f" -e nvidia_driver_version={driver}, which installs and holds the fabric manager at the driver's version; or"
        f" by hand on the drained node: {installed['fabricmanager_fix_command']}",
    )
    check(
        "imex_packaged",
        not (plan["imex_enabled"] and plan["imex_package"] == ""),
        f"nvidia_driver_imex is {p['nvidia_driver_imex']}, which needs NVIDIA IMEX at the driver's exact version, and"
        f" {distribution} does not package it. Use Ubuntu or an EL distribution for multi-node NVLink systems, or set"
        " nvidia_driver_imex to none and install IMEX yourself. Nothing was changed.",
    )
    check(
        "imex_with_driver",
        not plan["refuses_changes"] or not installed["imex_apart"],
        f"{host} has NVIDIA IMEX {installed['imex_installed_version']} ({plan['imex_package']}) but NVIDIA driver"
        f" {driver}. IMEX works only at the driver's exact version. Nothing was changed: putting them together"
        " restarts IMEX under running GPU jobs. Fix: drain the node and run ansible-playbook -i <inventory>"
        f" playbooks/upgrade_driver.yml -e nvidia_driver_version={driver}; or by hand on the drained node:"
        f" {installed['imex_fix_command']}",
    )
    check(
        "nvlsm_packaged",
        not (plan["host_mode"] and plan["nvlsm_enabled"] and plan["nvlsm_package"] == ""),
        f"{host} is an NVLink5 system whose fabric manager needs NVIDIA's NVLink Subnet Manager (nvlsm), and"
        f" {distribution} does not package it. Use Ubuntu or an EL distribution with NVIDIA's CUDA repository, or set"
        " nvidia_driver_nvlsm to never and install nvlsm yourself. Nothing was changed.",
    )
    found = installed["host_packages_found"]
    check(
        "no_host_driver",
        plan["host_mode"] or len(found) == 0,
        f"nvidia_driver_managed_by is operator, so the GPU Operator's driver container loads the NVIDIA kernel module,"
        f" but {host} has host driver packages installed: {', '.join(found)}. The driver container cannot load its"
        " module while a host driver exists. Remove these packages (and reboot), or set nvidia_driver_managed_by to"
        " host.",
    )
    return checks


def nvidia_driver_mok(probe) -> dict:
    """What tasks/preflight.yml's MOK probe found: the MOK files present, and the certificate's state (enrolled,
    pending: queued for the console at the next boot, or absent)."""
    stdout = (probe or {}).get("stdout", "") or ""
    if re.search("is already enrolled", stdout):
        state = "enrolled"
    elif re.search("(?m)^pending$", stdout):
        state = "pending"
    else:
        state = "absent"
    return {"present": re.findall("(?m)^present: (.*)$", stdout), "state": state}


class FilterModule:
    """The nvidia_driver role's plan (see the module docstring)."""

    def filters(self):
        return {
            "nvidia_driver_plan_check": nvidia_driver_plan_check,
            "nvidia_driver_plan": nvidia_driver_plan,
            "nvidia_driver_installed": nvidia_driver_installed,
            "nvidia_driver_preflight_checks": nvidia_driver_preflight_checks,
            "nvidia_driver_mok": nvidia_driver_mok,
        }
