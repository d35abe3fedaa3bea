#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's checks (role gpu_validate), run on the node in one process."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_validate_checks
short_description: Run the GPU node doctor's checks on the node and return one row per check
description:
  - Runs the checks of the families asked for, in one process on the node, and returns their rows
    C({check, status, detail, fix, family}) in the doctor's order (driver, toolkit, runtime, the runtimes of
    O(runtimes) in their order, isolation, doors, cdi, mig, fabric, health, fuse, security, confinement, kubelet,
    dra), whatever the order of O(families). The families and their order are those of
    C(plugins/module_utils/gpu_validate/families.py).
    The role gpu_validate prints them as a table, writes the report files and fails the node on a failed check;
    this module never fails on a check.
  - "The checks ask the node as it is now: the loaded driver and C(nvidia-smi), the installed kernels and their
    NVIDIA module (the kernel the boot loader starts next), the toolkit package and C(nvidia-ctk --version),
    docker's runtimes (C(docker info)) and test containers through the nvidia runtime and docker's default
    runtime (with and without CAP_SYS_ADMIN; only with O(test_image)), NVIDIA's device plugin against the node (its
    device-list strategy, the runtimes' defaults and the toolkit's config as the facts read them), containerd's
    effective configuration
    (C(containerd config dump)), its CRI plugin (C(ctr plugins ls), C(crictl info)), whether it started after its
    config files were written, whether a file its config imports (a drop-in) carries a higher config version on
    disk than the root file (containerd 2.3 refuses to start then; the files, not C(config dump), which prints
    version 4 for every file on 2.3), and test containers through the nvidia binary and CRI's default runtime
    (only with O(containerd_test_image)), CRI-O's effective configuration
    (C(crio config)), the running CRI-O (C(crio status config), C(crictl info)) and test pods through its nvidia
    handler and its default handler with CAP_SYS_ADMIN (C(crictl run); only with O(crio_test_image)),
    every CDI spec in the runtimes' CDI directories against the node (its device nodes and their major and minor
    numbers against /dev, the driver version NVIDIA's spec was generated for against the loaded driver, a device name
    that two specs claim),
    C(/dev/fuse), the AppArmor profile file and the kernel's list of loaded profiles, the
    seccomp profile under the kubelet's seccomp root, how FUSE pods can be confined (user namespaces,
    AppArmor + seccomp, seccomp only), the kubelet drop-in, the kubelet's main configuration and the
    environment file that passes C(--config-dir)."
  - "Per cluster installer (C(installer) of O(node)): on RKE2/k3s the containerd rows ask the installer's own
    containerd (its binary with the generated config, C(ctr) and C(crictl) from its bin directory on its socket,
    the agent unit's start against the template and agent config files) and the kubelet row reads the agent
    config (C(config.yaml), then C(config.yaml.d)) for the kubelet role's drop-in; on kubespray the nvidia runtime
    row names kubespray's inventory variable when a kubespray run re-rendered config.toml without the runtime,
    and the kubelet row says that kubespray renders the kubelet's files."
  - A command that fails or is missing becomes a row with status V(fail) or V(warn) and its message in the
    detail; commands run from argument lists, without a shell, with a time limit.
  - Reads only, never reports a change, and runs the same in check mode.
version_added: "0.3.0"
author:
  - gpu-node-provisioning contributors (!UNKNOWN)
extends_documentation_fragment:
  - gpunode.provisioning.gpunode_read_only
options:
  families:
    description: Which checks to run.
    type: list
    elements: str
    choices: [driver, toolkit, runtime, docker, containerd, crio, isolation, doors, cdi, mig, fabric, health, fuse,
      security, confinement, kubelet, dra]
    required: true
  node:
    description:
      - The node facts of the gpu_node_facts module (C(ansible_facts.gpu_node)) as they are now; the checks read
        C(has_gpu), C(gpu_count), C(nouveau_loaded), C(driver), C(nvidia_smi), C(kubelet), C(apparmor_enabled)
        and C(apparmor).
    type: dict
    required: true
  has_gpu:
    description:
      - Whether the node has an NVIDIA GPU; unset takes C(has_gpu) of O(node). The role passes its own
        settled value, which tests may override to pretend a GPU.
    type: bool
  driver_version:
    description: Driver pin, an exact version or its prefix (V(580.95)); empty for no version pin.
    type: str
    default: ""
  driver_branch:
    description: Driver branch pin (V(580)); empty for none. O(driver_version) wins when both are set.
    type: str
    default: ""
  peermem:
    description: Whether nvidia-peermem must be loaded and loaded at boot; V(false) skips that row.
    type: bool
    default: false
  peermem_file:
    description: The modules-load.d file that loads nvidia-peermem at boot.
    type: path
    default: /etc/modules-load.d/nvidia-peermem.conf
  kernels_root:
    description: Filesystem tree whose C(/boot) and C(/lib/modules) the "driver after next reboot" row reads.
    type: path
    default: /
  toolkit_version:
    description: Toolkit package version pin (V(1.17.8-1)); empty for any version.
    type: str
    default: ""
  toolkit_package:
    description: The toolkit package whose version the package manager reports.
    type: str
    default: nvidia-container-toolkit
  package_version_argv:
    description: Command that prints the installed version of a package (the package is appended); empty to
      rely on C(nvidia-ctk --version) alone.
    type: list
    elements: str
    default: []
  runtimes:
    description:
      - The container runtimes to check, in the order of their rows (the families V(docker) and V(crio) run for
        the runtimes named here); V(isolation) checks docker's default runtime when docker is named.
    type: list
    elements: str
    default: []
  test_image:
    description:
      - An image already present in docker on the node (never pulled) with sh, ls and wc; empty skips the
        container runs ("no test image").
    type: str
    default: ""
  docker_run_options:
    description: Extra C(docker run) options for the test containers.
    type: list
    elements: str
    default: [--network, none]
  container_timeout:
    description: Seconds a test container may take (C(timeout <seconds> docker run ...)) before its row fails.
    type: int
    default: 120
  containerd_test_image:
    description:
      - Full reference of an image present in the ctr namespace O(containerd_namespace) (never pulled) with sh,
        ls and wc; empty skips containerd's container runs.
    type: str
    default: ""
  containerd_namespace:
    description: ctr namespace of O(containerd_test_image).
    type: str
    default: default
  containerd_run_options:
    description: Extra C(ctr run) options for the test containers.
    type: list
    elements: str
    default: []
  containerd_config:
    description:
      - "The system containerd's root config file, whose config version and imported files (drop-ins, on disk) the
        row C(containerd: drop-in versions) compares. RKE2/k3s nodes use the installer's generated config instead."
    type: path
    default: /etc/containerd/config.toml
  crio_test_image:
    description:
      - An image present in CRI-O's image store (never pulled) with sh, ls and wc; empty skips CRI-O's test pods.
        They run through CRI-O's CRI with C(crictl run) (the nvidia handler, and CRI-O's default handler with
        CAP_SYS_ADMIN), on the node's network, and are removed.
    type: str
    default: ""
  runtime_binary:
    description: The nvidia runtime binary; ctr runs containerd's test containers through it (C(--runc-binary)).
    type: path
    required: true
  runtime_name:
    description: The runtime name that the container runtimes must have registered.
    type: str
    default: nvidia
  nvidia_default_allowed:
    description: Whether nvidia as a runtime's default was asked for; then that row warns instead of failing.
    type: bool
    default: false
  toolkit_config:
    description: NVIDIA's runtime configuration, read for the rows of the doors to a GPU without a request.
    type: path
    required: true
  volume_mounts_allowed:
    description:
      - Whether C(accept-nvidia-visible-devices-as-volume-mounts = true) was asked for (the device plugin's
        C(volume-mounts) strategy); then the row about GPUs by volume mount warns instead of failing.
    type: bool
    default: false
  envvar_allowed:
    description:
      - Whether C(accept-nvidia-visible-devices-envvar-when-unprivileged = true) was asked for (or kept,
        C(nvidia_container_toolkit_keep_gpu_pod_access)); then a door row of an NVIDIA runtime entry whose config
        accepts the variable warns instead of failing.
    type: bool
    default: false
  toolkit_installed:
    description:
      - Whether the toolkit is installed, as an earlier run of the V(toolkit) family returned it; used when
        O(families) has no V(toolkit). With the toolkit (or a GPU) a runtime without the nvidia runtime fails.
    type: bool
    default: false
  cdi_spec_dirs:
    description:
      - The CDI spec directories the V(cdi) family always reads, in CDI's order of precedence (a later directory's
        device wins); the directories named by containerd's and CRI-O's C(cdi_spec_dirs), docker's
        C(cdi-spec-dirs) in O(docker_daemon_json) and the toolkit's C(nvidia-container-runtime.modes.cdi.spec-dirs)
        in O(toolkit_config) are read after them. The C(*.json) and C(*.yaml) files in them are the specs, as CDI
        reads them.
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  xid_fail:
    description:
      - "The Xids that fail the row C(GPU health: Xid events) (the GPU needs a reset, a drain or a replacement in
        NVIDIA's Xid catalogue); any other Xid since boot warns."
    type: list
    elements: int
    default: [48, 64, 79, 94, 95, 119, 120, 154]
  dcgm_diag:
    description: Whether the V(health) family runs NVIDIA DCGM's level-1 diagnostics (C(dcgmi diag -r 1)) as a row.
    type: bool
    default: false
  settings_record:
    description:
      - The gpu_settings role's record of the declared GPU settings (JSON), which the row C(GPU settings) compares with
        the driver's values; empty, or no such file, skips the row.
    type: path
    default: ""
  mig_selected:
    description:
      - The MIG layout the V(mig) family checks. Empty (the default) reads it from the MIG manager's unit,
        C(MIG_PARTED_SELECTED_CONFIG) and C(MIG_PARTED_CONFIG_FILE) of C(nvidia-mig-manager.service), as the
        nvidia_mig role sets them; the GPU acceptance check names a layout of its own as a control.
    type: str
    default: ""
  mig_config:
    description: The mig-parted config file of O(mig_selected) (used only where O(mig_selected) is given).
    type: path
    default: /etc/nvidia-mig-manager/config.yaml
  imex:
    description:
      - How the node runs NVIDIA IMEX (nvidia_driver_imex), which the V(fabric) family's row "IMEX" checks
        C(nvidia-imex.service) against. V(host) - loaded, enabled and running; V(dra) - masked and not running
        (NVIDIA's DRA driver runs IMEX); V(none) - the row is skipped.
    type: str
    choices: [none, host, dra]
    default: none
  docker_daemon_json:
    description: docker's daemon configuration, read for C(cdi-spec-dirs).
    type: path
    default: /etc/docker/daemon.json
  fuse_device:
    description: The FUSE device node.
    type: path
    default: /dev/fuse
  apparmor_os:
    description: Whether AppArmor confines containers on this OS; V(false) skips the AppArmor row.
    type: bool
    default: true
  apparmor_profile:
    description: Name of the FUSE AppArmor profile.
    type: str
    required: true
  apparmor_dir:
    description: Directory of the AppArmor profile files.
    type: path
    default: /etc/apparmor.d
  apparmor_profiles_file:
    description: The kernel's list of loaded AppArmor profiles.
    type: path
    default: /sys/kernel/security/apparmor/profiles
  seccomp_root:
    description: The kubelet's seccomp root; the profile is C(<root>/profiles/<seccomp_profile>.json).
    type: path
    required: true
  seccomp_profile:
    description: Name of the FUSE seccomp profile.
    type: str
    required: true
  kubelet_config_dir:
    description: The kubelet's drop-in directory (C(--config-dir)).
    type: path
    required: true
  kubelet_dropin_name:
    description: File name of the drop-in the kubelet role writes.
    type: str
    required: true
  kubelet_main_config:
    description: The kubelet's main configuration file.
    type: path
    required: true
  kubelet_env_file:
    description: The file that passes KUBELET_EXTRA_ARGS to the kubelet.
    type: path
    default: /etc/default/kubelet
  kubelet_config_mode:
    description: The kubelet role's C(kubelet_config_mode); V(merge) means the role merged into the main file.
    type: str
    default: auto
  kubelet_dropin_min:
    description: The first kubelet version that reads drop-ins; an older kubelet gets the main file merged.
    type: str
    required: true
  gpu_allocation:
    description:
      - How this node's GPUs are allocated (V(gpu_node_facts_gpu_allocation)), which the dra family's rows check
        against what is registered with the kubelet (C(GPU allocation)); V(dra) also checks C(DRA prerequisites).
    type: str
    choices: [device-plugin, dra]
    required: true
  dra_device_nodes_unit:
    description: The systemd unit that creates the GPU device nodes at boot before the kubelet (DRA nodes).
    type: str
    required: true
  command_timeout:
    description: Seconds each command may take before its row reports it as failed.
    type: int
    default: 60
  report_files:
    description:
      - Files whose state the module returns in RV(report_files) (the role's validate.txt and validate.json), so
        that the role rewrites them only when they differ from the new report. Read only, never written.
    type: list
    elements: path
    default: []
"""

EXAMPLES = r"""
- name: Check the driver, the toolkit and /dev/fuse
  gpu_validate_checks:
    families: [driver, toolkit, fuse]
    node: "{{ ansible_facts.gpu_node }}"
    driver_version: 580.95.05
    runtime_binary: "{{ __gpu_node_facts_runtime_binary }}"  # the values the roles share (gpu_node_facts vars)
    kubelet_dropin_name: "{{ __gpu_node_facts_kubelet_dropin_name }}"
    kubelet_dropin_min: "{{ __gpu_node_facts_kubelet_dropin_min }}"
    gpu_allocation: "{{ gpu_node_facts_gpu_allocation }}"
    dra_device_nodes_unit: "{{ __gpu_node_facts_dra_device_nodes_unit }}"
  register: doctor

- name: Show the rows
  ansible.builtin.debug:
    msg: "{{ doctor.checks | gpu_validate_table(inventory_hostname) }}"
"""

RETURN = r"""
checks:
  description:
    - One row per check, in the doctor's order, C({check, status, detail, fix, family}).
    - C(family) is the family whose checks built the row (a choice of O(families)); the fleet report groups the rows
      by it.
  returned: always
  type: list
  elements: dict
  sample:
    - {check: NVIDIA driver, status: ok, detail: "580.95.05 loaded (pin: version 580.95.05)", fix: "", family: driver}
toolkit_installed:
  description: Whether the toolkit is installed (package or C(nvidia-ctk)); null when O(families) has no V(toolkit).
  returned: always
  type: bool
  sample: true
fuse_confinement:
  description: How FUSE pods are confined (V(user_namespaces), V(apparmor), V(seccomp_only), V(not_possible)); null
    when O(families) has no V(confinement).
  returned: always
  type: str
  sample: seccomp_only
report_files:
  description: Each file of O(report_files) with its SHA-1, octal mode, uid and gid; null for a file that is not there.
  returned: always
  type: dict
  sample:
    /srv/reports/validate.txt:
      {sha1: 2aae6c35c94fcfb415dbe95f408b9ce91ee846ed, mode: "0644", uid: 0, gid: 0}
    /srv/reports/validate.json: null
"""

import os
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.cdi import check_cdi
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.containerd import (
    check_containerd,
    check_containerd_isolation,
    containerd_state,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.containers import (
    check_runtime,
    device_plugin_row,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.crio import (
    check_crio,
    check_crio_isolation,
    crio_state,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.docker import (
    check_docker,
    check_docker_isolation,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.doors import check_doors
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.dra import check_dra
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.driver import (
    check_driver,
    check_toolkit,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.fabric import check_fabric
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.families import NAMES
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.fuse import (
    check_confinement,
    check_fuse,
    check_security,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.health import XID_FAIL, check_health
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.host import Node
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.kubelet import check_kubelet
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate.mig import check_mig

FAMILIES = NAMES  # the families in the doctor's order (plugins/module_utils/gpu_validate/families.py)


def of_family(family: str, rows: list) -> list:
    """The rows of one family's checks, each carrying its family (a name of FAMILIES)."""
    return [{**row, "family": family} for row in rows]


def run_checks(params: dict, host: Node) -> dict:
    """The rows of the families in params["families"], in the doctor's order, each with its family, and whether the
    toolkit is installed."""
    node = dict(params["node"] or {})
    if params.get("has_gpu") is not None:
        node["has_gpu"] = params["has_gpu"]
    families = set(params["families"])
    rows = []
    toolkit_installed = None
    confinement = None
    if "driver" in families:
        rows += of_family("driver", check_driver(params, node, host))
    if "toolkit" in families:
        toolkit_rows, toolkit_installed = check_toolkit(params, node, host)
        rows += of_family("toolkit", toolkit_rows)
    known = toolkit_installed if toolkit_installed is not None else bool(params["toolkit_installed"])
    if "runtime" in families:
        rows += of_family("runtime", check_runtime(params, node, host))
    # The runtimes in the order asked (gpu_validate_runtimes, else as the facts list them).
    containerd = crio = None
    for runtime in params["runtimes"]:
        if runtime == "docker" and "docker" in families:
            rows += of_family("docker", check_docker(params, node, host, known))
        elif runtime == "containerd" and "containerd" in families:
            containerd = containerd_state(params, node, host)
            rows += of_family("containerd", check_containerd(params, node, host, known, containerd))
        elif runtime == "crio" and "crio" in families:
            crio = crio_state(params, node, host)
            rows += of_family("crio", check_crio(params, node, host, known, crio))
    if "isolation" in families:
        isolation = list(check_docker_isolation(params, node, host))
        if "containerd" in params["runtimes"]:
            containerd = containerd or containerd_state(params, node, host)
            isolation += check_containerd_isolation(params, node, host, containerd)
        if "crio" in params["runtimes"]:
            crio = crio or crio_state(params, node, host)
            isolation += check_crio_isolation(params, node, host, crio)
        isolation.append(device_plugin_row(params, node))
        rows += of_family("isolation", isolation)
    if "doors" in families:
        if "containerd" in params["runtimes"]:
            containerd = containerd or containerd_state(params, node, host)
        if "crio" in params["runtimes"]:
            crio = crio or crio_state(params, node, host)
        doors = check_doors(
            params,
            node,
            host,
            known,
            containerd if "containerd" in params["runtimes"] else None,
            crio if "crio" in params["runtimes"] else None,
        )
        rows += of_family("doors", doors)
    if "cdi" in families:
        if "containerd" in params["runtimes"]:
            containerd = containerd or containerd_state(params, node, host)
        if "crio" in params["runtimes"]:
            crio = crio or crio_state(params, node, host)
        rows += of_family("cdi", check_cdi(params, node, host, containerd, crio))
    if "mig" in families:
        rows += of_family("mig", check_mig(params, node, host))
    if "fabric" in families:
        rows += of_family("fabric", check_fabric(params, node, host))
    if "health" in families:
        rows += of_family("health", check_health(params, node, host))
    if "fuse" in families:
        rows += of_family("fuse", check_fuse(params, node, host))
    if "security" in families:
        rows += of_family("security", check_security(params, node, host))
    if "confinement" in families:
        confinement_rows, confinement = check_confinement(params, node, host)
        rows += of_family("confinement", confinement_rows)
    if "kubelet" in families:
        rows += of_family("kubelet", check_kubelet(params, node, host))
    if "dra" in families:
        if "containerd" in params["runtimes"]:
            containerd = containerd or containerd_state(params, node, host)
        if "crio" in params["runtimes"]:
            crio = crio or crio_state(params, node, host)
        rows += of_family("dra", check_dra(params, node, host, containerd, crio))
    return {"checks": rows, "toolkit_installed": toolkit_installed, "fuse_confinement": confinement}


ARGUMENT_SPEC = dict(
    families=dict(type="list", elements="str", choices=list(FAMILIES), required=True),
    node=dict(type="dict", required=True),
    has_gpu=dict(type="bool"),
    driver_version=dict(type="str", default=""),
    driver_branch=dict(type="str", default=""),
    peermem=dict(type="bool", default=False),
    peermem_file=dict(type="path", default="/etc/modules-load.d/nvidia-peermem.conf"),
    kernels_root=dict(type="path", default="/"),
    toolkit_version=dict(type="str", default=""),
    toolkit_package=dict(type="str", default="nvidia-container-toolkit"),
    package_version_argv=dict(type="list", elements="str", default=[]),
    runtimes=dict(type="list", elements="str", default=[]),
    runtime_name=dict(type="str", default="nvidia"),
    test_image=dict(type="str", default=""),
    docker_run_options=dict(type="list", elements="str", default=["--network", "none"]),
    container_timeout=dict(type="int", default=120),
    containerd_test_image=dict(type="str", default=""),
    containerd_namespace=dict(type="str", default="default"),
    containerd_run_options=dict(type="list", elements="str", default=[]),
    containerd_config=dict(type="path", default="/etc/containerd/config.toml"),
    crio_test_image=dict(type="str", default=""),
    runtime_binary=dict(type="path", required=True),
    nvidia_default_allowed=dict(type="bool", default=False),
    toolkit_installed=dict(type="bool", default=False),
    toolkit_config=dict(type="path", required=True),
    volume_mounts_allowed=dict(type="bool", default=False),
    envvar_allowed=dict(type="bool", default=False),
    cdi_spec_dirs=dict(type="list", elements="path", default=["/etc/cdi", "/var/run/cdi"]),
    xid_fail=dict(type="list", elements="int", default=list(XID_FAIL)),
    dcgm_diag=dict(type="bool", default=False),
    settings_record=dict(type="path", default=""),
    mig_selected=dict(type="str", default=""),
    mig_config=dict(type="path", default="/etc/nvidia-mig-manager/config.yaml"),
    imex=dict(type="str", choices=["none", "host", "dra"], default="none"),
    docker_daemon_json=dict(type="path", default="/etc/docker/daemon.json"),
    fuse_device=dict(type="path", default="/dev/fuse"),
    apparmor_os=dict(type="bool", default=True),
    apparmor_profile=dict(type="str", required=True),
    apparmor_dir=dict(type="path", default="/etc/apparmor.d"),
    apparmor_profiles_file=dict(type="path", default="/sys/kernel/security/apparmor/profiles"),
    seccomp_root=dict(type="path", required=True),
    seccomp_profile=dict(type="str", required=True),
    kubelet_config_dir=dict(type="path", required=True),
    kubelet_dropin_name=dict(type="str", required=True),
    kubelet_main_config=dict(type="path", required=True),
    kubelet_env_file=dict(type="path", default="/etc/default/kubelet"),
    kubelet_config_mode=dict(type="str", default="auto"),
    kubelet_dropin_min=dict(type="str", required=True),
    gpu_allocation=dict(type="str", choices=["device-plugin", "dra"], required=True),
    dra_device_nodes_unit=dict(type="str", required=True),
    command_timeout=dict(type="int", default=60),
    report_files=dict(type="list", elements="path", default=[]),
)


def report_file_state(module, path):
    """{sha1, mode, uid, gid} of the file ``path``, or None where there is no such file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return {"sha1": module.sha1(path), "mode": f"{stat.S_IMODE(st.st_mode):04o}", "uid": st.st_uid, "gid": st.st_gid}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = dict(module.params)
    for key in ("driver_version", "driver_branch", "toolkit_version"):
        params[key] = params[key] or ""
    result = run_checks(params, Node(timeout=module.params["command_timeout"]))
    result["report_files"] = {path: report_file_state(module, path) for path in module.params["report_files"]}
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
