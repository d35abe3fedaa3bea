#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_node_facts
short_description: Gather the facts that GPU node provisioning depends on
description:
  - Sets C(ansible_facts.gpu_node) with what the other roles decide on, read from the node itself.
  - NVIDIA GPUs come from sysfs PCI (C(/sys/bus/pci/devices)), so they are found before any driver is installed.
    A GPU is an NVIDIA (vendor C(0x10de)) function of PCI class C(0x0300xx) (VGA compatible controller) or
    C(0x0302xx) (3D controller); SR-IOV virtual functions are counted apart in RV(ansible_facts.gpu_node.gpu_vf_count).
  - NVSwitches are NVIDIA functions of class C(0x0680xx) (bridge, other), as on HGX-2, HGX A100 and HGX H100/H200
    baseboards. The NVSwitches of HGX B200 and later are not PCI functions of the host and are not counted.
  - The loaded driver and its version come from C(/proc/driver/nvidia/version), else C(/sys/module/nvidia/version).
  - Docker, containerd and CRI-O (C(dockerd), C(containerd), C(crio)) and the kubelet are found by their binaries;
    their versions come from C(<binary> --version); whether they run comes from C(systemctl is-active) when systemd
    is the init system, otherwise from the process table, and where that cannot be read, from their sockets.
  - Also reports whether the node is a container or a virtual machine, whether AppArmor is enabled, the Secure Boot
    state, and FUSE.
  - What GPU pods rely on now, read before anything is written so that a run can refuse a change that would take
    GPUs away from them; NVIDIA's device plugin and its device-list strategy, the workloads that hold GPUs, each
    runtime's current default and the toolkit config's C(accept-nvidia-visible-devices-*) keys.
  - The module is read-only. It never changes the node and never reports a change. A missing file or command is
    not an error, it just leaves the matching fact false or null.
  - Runs on the managed node with the Python standard library only.
  - Where the play has not gathered facts (no C(ansible_facts.os_family)), its action plugin runs the setup module
    with the C(min) subset first, and the task sets those facts too (the distribution and OS family the roles
    decide on).
version_added: "0.1.0"
author: gpu-node-provisioning
options:
  root:
    description:
      - Top of the filesystem tree to inspect. Every C(/sys), C(/proc), C(/dev), C(/run) and binary path is read
        below it.
      - Any other value than V(/) is meant for tests and for inspecting a mounted image. Commands are then never run,
        because they would describe the running system and not the tree.
    type: path
    default: /
  gather_runtimes:
    description:
      - Run read-only commands on the node to learn more than files tell. These are C(dockerd --version),
        C(containerd --version), C(crio --version), C(kubelet --version), C(systemctl is-active),
        C(systemd-detect-virt) and C(mokutil --sb-state), each only when its binary exists.
      - When V(false) only files are read. Runtime and kubelet versions are then null, and whether a service runs comes
        from the process table (or its socket).
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
    details: The module changes nothing, so it gathers the same facts in check mode.
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: posix
notes:
  - Container and VM types use the names of C(systemd-detect-virt) (V(docker), V(podman), V(lxc), V(kvm),
    V(qemu), V(vmware), V(microsoft), ...). Without that command they are guessed from files (C(/.dockerenv),
    C(/run/.containerenv), C(container=) in the environment of PID 1, C(/proc/1/cgroup), DMI and the CPU's
    C(hypervisor) flag); a guess that names no type gives V(container-other) or V(vm-other).
  - C(secure_boot) is null when the node did not boot with EFI or its EFI variables cannot be read (containers
    usually do not see C(/sys/firmware)).
seealso:
  - name: NVIDIA Fabric Manager user guide
    description: Which systems have NVSwitches that need the fabric manager.
    link: https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/
  - name: PCI sysfs interface
    description: The files below C(/sys/bus/pci/devices) that the GPU facts come from.
    link: https://www.kernel.org/doc/html/latest/PCI/sysfs-pci.html
"""

EXAMPLES = r"""
- name: Gather the GPU node facts
  gpu_node_facts:

- name: Show whether the node needs the NVIDIA fabric manager
  ansible.builtin.debug:
    msg: "{{ ansible_facts.gpu_node.nvswitch_count }} NVSwitches, fabric manager needed"
  when: ansible_facts.gpu_node.nvswitch_count > 0

- name: Gather the facts from files only, running no command on the node
  gpu_node_facts:
    gather_runtimes: false
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to C(ansible_facts).
  returned: always
  type: complex
  contains:
    gpu_node:
      description: What the node has and runs, for GPU node provisioning.
      returned: always
      type: complex
      contains:
        has_gpu:
          description: An NVIDIA GPU (display or 3D controller class PCI function) is present, with or without a driver.
          type: bool
          returned: always
          sample: true
        gpu_count:
          description: Number of NVIDIA GPUs (physical functions).
          type: int
          returned: always
          sample: 8
        gpu_vf_count:
          description: Number of NVIDIA GPU SR-IOV virtual functions, which are not in RV(ansible_facts.gpu_node.gpus).
          type: int
          returned: always
          sample: 0
        gpus:
          description:
            - One entry per NVIDIA GPU, in PCI address order.
            - Each has C(pci_address), C(vendor_id), C(device_id), C(class) (hex strings as sysfs writes them),
              C(class_name), C(numa_node) (null when the platform does not say), C(iommu_group) (null without an
              IOMMU) and C(driver), the driver the function is bound to (V(nvidia), V(nouveau), V(vfio-pci)) or null.
          type: list
          elements: dict
          returned: always
          sample:
            - pci_address: "0000:10:00.0"
              vendor_id: "0x10de"
              device_id: "0x20b2"
              class: "0x030200"
              class_name: 3D controller
              numa_node: 0
              iommu_group: 21
              driver: nvidia
        nvswitch_count:
          description: Number of NVSwitches seen on PCI.
          type: int
          returned: always
          sample: 6
        nvswitches:
          description: One entry per NVSwitch, with C(pci_address), C(device_id), C(class), C(numa_node) and C(driver).
          type: list
          elements: dict
          returned: always
          sample:
            - pci_address: "0000:54:00.0"
              device_id: "0x1af1"
              class: "0x068000"
              numa_node: 0
              driver: nvidia-nvswitch
        driver:
          description:
            - The NVIDIA kernel driver. C(loaded) is true when the C(nvidia) module is loaded.
            - C(version) is its version (null when not loaded), C(source) where the version was read (V(proc) or
              V(sysfs)), C(kernel_module_type) V(open) or V(proprietary) (null when unknown), and C(modules) the
              NVIDIA kernel modules loaded, among C(nvidia), C(nvidia_uvm), C(nvidia_modeset), C(nvidia_drm) and
              C(nvidia_peermem).
          type: dict
          returned: always
          sample:
            loaded: true
            version: 535.183.01
            source: proc
            kernel_module_type: proprietary
            modules: [nvidia, nvidia_modeset, nvidia_uvm]
        nouveau_loaded:
          description: The C(nouveau) kernel module is loaded.
          type: bool
          returned: always
          sample: false
        nvidia_smi:
          description: Path of C(nvidia-smi), or null when it is not installed.
          type: str
          returned: always
          sample: /usr/bin/nvidia-smi
        runtimes:
          description:
            - C(docker), C(containerd) and C(crio), each with C(installed) (its daemon binary exists), C(binary)
              (its path or null), C(version) (numeric, for comparisons, such as V(1.6.20)), C(version_full) (as the
              binary prints it, such as V(1.6.20~ds1)), C(running), C(service_state) (what C(systemctl is-active) said,
              null when not asked) and C(socket) (the API socket path when it exists, else null).
          type: dict
          returned: always
          sample:
            containerd:
              installed: true
              binary: /usr/bin/containerd
              version: 1.7.24
              version_full: 1.7.24~ds1
              running: true
              service_state: active
              socket: /run/containerd/containerd.sock
        runtimes_installed:
          description: Names of the installed runtimes, in the order docker, containerd, crio.
          type: list
          elements: str
          returned: always
          sample: [docker, containerd]
        runtimes_running:
          description: Names of the running runtimes, in the order docker, containerd, crio.
          type: list
          elements: str
          returned: always
          sample: [containerd]
        kubelet:
          description:
            - The kubelet, with the same keys as a runtime (C(socket) is always null) and C(config_dir_supported),
              true when the kubelet reads a C(--config-dir) drop-in directory without a feature gate (1.30 and
              later), null when its version is unknown.
          type: dict
          returned: always
          sample:
            installed: true
            binary: /usr/bin/kubelet
            version: 1.31.2
            version_full: 1.31.2
            running: true
            service_state: active
            socket: null
            config_dir_supported: true
        container:
          description: The node is a container.
          type: bool
          returned: always
          sample: false
        container_type:
          description: Kind of container (V(docker), V(podman), V(lxc), ...), null when not a container.
          type: str
          returned: always
          sample: docker
        vm:
          description: The node (or the host of the container) is a virtual machine.
          type: bool
          returned: always
          sample: false
        vm_type:
          description: Kind of virtual machine (V(kvm), V(qemu), V(vmware), V(microsoft), ...), null when not a VM.
          type: str
          returned: always
          sample: kvm
        apparmor_enabled:
          description: AppArmor is enabled in the kernel and its securityfs is mounted, so profiles can be loaded.
          type: bool
          returned: always
          sample: true
        apparmor:
          description: C(kernel_enabled) (the kernel has AppArmor enabled) and C(securityfs)
            (C(/sys/kernel/security/apparmor) is there).
          type: dict
          returned: always
          sample: {kernel_enabled: true, securityfs: true}
        secure_boot:
          description: Secure Boot is enabled; null when unknown (no EFI, or EFI variables not readable).
          type: bool
          returned: always
          sample: false
        kernel:
          description:
            - The running kernel. C(release) as C(uname -r) prints it (read from /proc/sys/kernel/osrelease below the
              root), C(version) its numeric part for comparisons (V(6.3) and later mount idmapped tmpfs, which
              user-namespaced pods need), C(max_user_namespaces) from /proc/sys/user/max_user_namespaces
              (V(0) means user namespaces are off, null that it is unreadable) and C(seccomp), true when the
              kernel filters system calls (a Seccomp line in /proc/self/status).
          type: dict
          returned: always
          sample: {release: 6.12.48+deb13-amd64, version: "6.12.48", max_user_namespaces: 63413, seccomp: true}
        oci_runtimes:
          description:
            - The low-level OCI runtimes C(runc) and C(crun), each with C(installed), C(binary) and C(version)
              (numeric, null when unknown) and C(version_full). User-namespaced pods need runc 1.2 or crun 1.9.
          type: dict
          returned: always
          sample:
            runc: {installed: true, binary: /usr/sbin/runc, version: 1.1.5, version_full: 1.1.5+ds1}
            crun: {installed: false, binary: null, version: null, version_full: null}
        installer:
          description:
            - The cluster installer that laid the node out, and where it keeps containerd and the kubelet's settings.
            - C(name) is V(rke2), V(k3s), V(kubespray), V(kubeadm) (the distribution's kubelet package with kubeadm's
              unit drop-in C(10-kubeadm.conf)) or V(unknown); C(found) lists every installer with traces on the node
              (the one whose agent service is active wins, else the first of rke2, k3s, kubespray, kubeadm);
              C(evidence) the paths that gave it away.
            - C(version) (numeric) and C(version_full) from C(rke2 --version) / C(k3s --version), the kubelet's for
              kubeadm, null for kubespray (it leaves no version on the node) and without commands.
            - C(binary) the installer's binary, C(data_dir) and C(bin_dir) where it keeps containerd, runc and
              crictl, C(service) its agent unit (the active one of C(rke2-server)/C(rke2-agent),
              C(k3s)/C(k3s-agent)) and C(service_state).
            - C(containerd) has C(binary), C(version), C(socket) (V(/run/k3s/containerd/containerd.sock) on RKE2
              and k3s), C(running) (the socket exists), C(config) (the file containerd reads),
              C(config_regenerated) (V(agent start) on RKE2/k3s, V(kubespray run) on kubespray; never edit that
              file in place), C(template) (the template the installer renders it from on this version,
              C(config-v3.toml.tmpl) with containerd 2.x, else C(config.toml.tmpl); null when unknown),
              C(templates), C(template_base) (the template may start with C({{ template "base" . }})),
              C(nvidia_detection) (the agent registers nvidia-container-runtime by itself; null where not
              verified) and C(default_runtime_option) (the default runtime is set through the installer's
              configuration, the agent option C(default-runtime) or kubespray's C(containerd_default_runtime)).
            - C(kubelet) has C(settings) (V(agent_config_dropin), labels, taints and kubelet args go into a file in
              C(dropin_dir) (C(/etc/rancher/<name>/config.yaml.d)); V(kubespray_inventory), kubespray renders
              C(files) from its inventory on every run; V(kubelet_flags), the kubelet role's own files),
              C(config), C(dropin_dir) and on RKE2/k3s C(dropin), the kubelet role's drop-in there (the doctor
              reads it too).
            - Sources, version gates and paths are cited in the module's code and the gpu_node_facts role README.
          type: dict
          returned: always
          sample:
            name: rke2
            found: [rke2]
            version: 1.32.2
            version_full: 1.32.2+rke2r1
            binary: /usr/local/bin/rke2
            data_dir: /var/lib/rancher/rke2
            bin_dir: /var/lib/rancher/rke2/bin
            service: rke2-agent.service
            service_state: active
            evidence: [/usr/local/bin/rke2, /usr/local/lib/systemd/system/rke2-agent.service]
            containerd:
              binary: /var/lib/rancher/rke2/bin/containerd
              version: 2.0.2
              socket: /run/k3s/containerd/containerd.sock
              running: true
              config: /var/lib/rancher/rke2/agent/etc/containerd/config.toml
              config_regenerated: agent start
              template: /var/lib/rancher/rke2/agent/etc/containerd/config-v3.toml.tmpl
              templates:
                - /var/lib/rancher/rke2/agent/etc/containerd/config-v3.toml.tmpl
                - /var/lib/rancher/rke2/agent/etc/containerd/config.toml.tmpl
              template_base: true
              nvidia_detection: true
              default_runtime_option: true
            kubelet:
              settings: agent_config_dropin
              config: /etc/rancher/rke2/config.yaml
              dropin_dir: /etc/rancher/rke2/config.yaml.d
              dropin: /etc/rancher/rke2/config.yaml.d/90-gpu-node-kubelet.yaml
              files: [/etc/rancher/rke2/config.yaml, /etc/rancher/rke2/config.yaml.d]
        fuse:
          description: C(device) (C(/dev/fuse) exists), C(module_loaded) (the fuse module is loaded or built in) and
            C(builtin) (fuse is built into the kernel, so it cannot and need not be loaded).
          type: dict
          returned: always
          sample: {device: true, module_loaded: true, builtin: false}
        device_plugin:
          description:
            - NVIDIA's Kubernetes device plugin on this node, read from its process (C(/proc/<pid>/comm)
              C(nvidia-device-p), or C(nvidia-device-plugin) as the first argument) and its sockets
              C(/var/lib/kubelet/device-plugins/nvidia-*.sock) (C(nvidia-gpu.sock) for C(nvidia.com/gpu)).
            - C(running) (a process was found), C(present) (a process or a socket), C(pids), C(strategies) (the
              device-list strategies from C(--device-list-strategy), else C(DEVICE_LIST_STRATEGY), else the config
              file's C(deviceListStrategy), else the default V(envvar); empty when unknown), C(source) (V(flag),
              V(env), V(config-file), V(default), V(unknown) for a socket whose process cannot be read, null without
              a plugin), C(sockets) and C(managed_by) (V(gpu-operator) when C(/run/nvidia/validations) exists,
              V(standalone), null without a plugin).
          type: dict
          returned: always
          sample: {running: true, present: true, pids: [4711], strategies: [envvar], source: env,
                   sockets: [/var/lib/kubelet/device-plugins/nvidia-gpu.sock], managed_by: standalone}
        dra:
          description:
            - GPU allocation through the kubelet (plugins/module_utils/node_facts_dra.py, issue 39). C(kubelet_root_dir)
              (the running kubelet's C(--root-dir), else C(/var/lib/kubelet)), C(plugins_registry), C(plugins_dir),
              C(device_plugins_dir) and C(checkpoint) (NVIDIA's DRA GPU plugin's
              C(plugins/gpu.nvidia.com/checkpoint.json)) under it, whether the two directories exist,
              C(registrations) (the sockets in plugins_registry),
              C(dra_drivers) (their driver names), C(dra_gpu_registered) (C(gpu.nvidia.com) registered),
              C(device_plugin_sockets) and C(device_plugin_registered) (NVIDIA's device plugin's C(nvidia-*.sock)),
              C(checkpoint_exists).
          type: dict
          returned: always
          sample: {kubelet_root_dir: /var/lib/kubelet, plugins_registry: /var/lib/kubelet/plugins_registry,
                   plugins_dir: /var/lib/kubelet/plugins, device_plugins_dir: /var/lib/kubelet/device-plugins,
                   checkpoint: /var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json, plugins_registry_exists: true,
                   plugins_dir_exists: true, registrations: [gpu.nvidia.com-reg.sock], dra_drivers: [gpu.nvidia.com],
                   dra_gpu_registered: true, device_plugin_sockets: [], device_plugin_registered: false,
                   checkpoint_exists: true}
        gpu_workloads:
          description: Processes other than host daemons that were given GPUs (C(NVIDIA_VISIBLE_DEVICES) naming
            devices in their environment) or hold an open C(/dev/nvidia<N>), each with C(pid), C(comm),
            C(visible_devices) and C(open_devices).
          type: list
          elements: dict
          returned: always
          sample: [{pid: 5120, comm: python3, visible_devices: GPU-8c1f..., open_devices: [/dev/nvidia0]}]
        runtime_defaults:
          description:
            - Per installed runtime (V(docker), V(containerd), V(crio)), its current C(default) runtime and C(cdi),
              whether CDI devices reach containers. containerd's come from C(containerd config dump) (else
              config.toml and its imports; C(source) says which) with C(cdi_supported) (1.7 and later); CRI-O's from
              crio.conf and crio.conf.d (C(default) null when unset); docker's from daemon.json.
            - C(default_binary) is the default entry's binary (containerd C(options.BinaryName), CRI-O
              C(runtime_path), docker C(path); null where the config names none) and C(default_nvidia) whether the
              default is NVIDIA's runtime, whatever its name (C(nvidia-container-runtime), C(.cdi) or C(.legacy) in any
              directory; an entry named V(nvidia) without a binary counts too; plugins/module_utils/nvidia_runtime.py).
          type: dict
          returned: always
          sample: {containerd: {default: nvidia-cdi,
                                default_binary: /usr/local/nvidia/toolkit/nvidia-container-runtime.cdi,
                                default_nvidia: true, cdi: true, cdi_supported: true, source: containerd config dump}}
        toolkit_config:
          description:
            - The NVIDIA container toolkit's C(/etc/nvidia-container-runtime/config.toml) C(exists), and its
              C(accept_envvar_when_unprivileged), C(accept_volume_mounts) and C(cdi_annotation_prefixes)
              (C(nvidia-container-runtime.modes.cdi.annotation-prefixes)) as the file sets them (null when unset)
              and as they act (C(*_effective), the toolkit's defaults true, false and C(["cdi.k8s.io/"]) for unset
              keys).
          type: dict
          returned: always
          sample: {path: /etc/nvidia-container-runtime/config.toml, exists: true,
                   accept_envvar_when_unprivileged: null, accept_envvar_when_unprivileged_effective: true,
                   accept_volume_mounts: null, accept_volume_mounts_effective: false,
                   cdi_annotation_prefixes: [], cdi_annotation_prefixes_effective: []}
"""

import glob
import os
import re
from typing import TYPE_CHECKING

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpu_pods import (
    containerd_runtime_state,
    crio_runtime_state,
    device_plugin_facts,
    docker_runtime_state,
    gpu_processes,
    toolkit_config_facts,
)
from ansible.module_utils.node_facts_dra import dra_facts

NVIDIA_VENDOR_ID = "0x10de"
# PCI base class 03 (display controller): subclass 00 is VGA compatible (workstation and consumer cards),
# 02 is 3D controller (datacenter GPUs: A100, H100, ...). Keyed by the first 6 characters of sysfs `class`.
GPU_CLASS_NAMES = {"0x0300": "VGA compatible controller", "0x0302": "3D controller"}
# Base class 06 subclass 80 (bridge, other): what an NVSwitch reports; its driver is nvidia-nvswitch.
NVSWITCH_CLASS_PREFIX = "0x0680"
NVIDIA_KERNEL_MODULES = ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem")
EFI_GLOBAL_VARIABLE_GUID = "8be4df61-93ca-11d2-aa0d-00e098032b8c"
SECURE_BOOT_EFIVARFS = f"/sys/firmware/efi/efivars/SecureBoot-{EFI_GLOBAL_VARIABLE_GUID}"
SECURE_BOOT_SYSFS = f"/sys/firmware/efi/vars/SecureBoot-{EFI_GLOBAL_VARIABLE_GUID}/data"
# Where binaries are looked for besides PATH (and the only places looked at below a `root` other than /).
BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
KUBELET_CONFIG_DIR_MIN = (1, 30)
OCI_RUNTIMES = ("runc", "crun")


def _parse_version_token(token: str) -> tuple[str | None, str | None]:
    """Split a version token ("v1.31.2", "20.10.24+dfsg1,", "1.6.20~ds1") into (numeric, as printed)."""
    token = token.strip().rstrip(",;")
    match = re.fullmatch(r"v?(\d+\.\d+(?:\.\d+)*)(\S*)", token)
    if not match:
        return None, None
    return match.group(1), token[1:] if token.startswith("v") else token


def parse_docker_version(text: str | None) -> tuple[str | None, str | None]:
    """`dockerd --version`: "Docker version 20.10.24+dfsg1, build 297e128"."""
    match = re.search(r"Docker version\s+(\S+)", text or "")
    return _parse_version_token(match.group(1)) if match else (None, None)


def parse_containerd_version(text: str | None) -> tuple[str | None, str | None]:
    """`containerd --version`: "containerd <package> <version> <revision>".

    The package is "github.com/containerd/containerd" (or ".../v2") from source builds and distributions,
    "containerd.io" from Docker's packages; the version may carry a "v" and a distribution suffix.
    """
    for line in (text or "").splitlines():
        tokens = line.split()
        if len(tokens) >= 3 and tokens[0] == "containerd":
            for token in tokens[1:]:
                version = _parse_version_token(token)
                if version[0]:
                    return version
    return None, None


def parse_crio_version(text: str | None) -> tuple[str | None, str | None]:
    """`crio --version`: "crio version 1.30.0" and/or a "Version:  1.30.0" line (log lines may come first)."""
    lines = (text or "").splitlines()
    for line in lines:
        match = re.match(r"\s*crio version\s+(\S+)", line, re.IGNORECASE)
        if match:
            return _parse_version_token(match.group(1))
    for line in lines:
        match = re.match(r"Version:\s+(\S+)", line.strip())
        if match:
            return _parse_version_token(match.group(1))
    return None, None


def parse_kubelet_version(text: str | None) -> tuple[str | None, str | None]:
    """`kubelet --version`: "Kubernetes v1.31.2"."""
    match = re.search(r"Kubernetes\s+(\S+)", text or "")
    return _parse_version_token(match.group(1)) if match else (None, None)


def parse_oci_runtime_version(text: str | None) -> tuple[str | None, str | None]:
    """`runc --version` / `crun --version`: first line "runc version 1.1.5+ds1" / "crun version 1.9.2"."""
    match = re.search(r"^\s*(?:runc|crun) version\s+(\S+)", text or "", re.MULTILINE)
    return _parse_version_token(match.group(1)) if match else (None, None)


def parse_kernel_release(text: str | None) -> tuple[str | None, str | None]:
    """A kernel release ("6.1.0-28-amd64", "6.12.48+deb13-amd64", "5.14.0-427.el9.x86_64") -> (numeric, as is)."""
    release = (text or "").strip()
    match = re.match(r"(\d+\.\d+(?:\.\d+)?)", release)
    return (match.group(1), release) if match else (None, release or None)


def parse_nvidia_driver_version(text: str | None) -> tuple[str | None, str | None]:
    """First line of /proc/driver/nvidia/version -> (version, "open" | "proprietary").

    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024"
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build  (dvs-builder@...)  ..."
    """
    for line in (text or "").splitlines():
        match = re.search(r"NVRM version:.*?Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)", line)
        if match:
            return match.group(1), "open" if "Open Kernel Module" in line else "proprietary"
    return None, None


def parse_secure_boot_efivar(data: bytes | None) -> bool | None:
    """efivarfs SecureBoot variable: 4 bytes of attributes, then one byte, 1 when Secure Boot is enabled."""
    if data is None or len(data) < 5:
        return None
    return data[4] == 1


def parse_mokutil_sb_state(text: str | None) -> bool | None:
    """`mokutil --sb-state`: "SecureBoot enabled" / "SecureBoot disabled"; anything else is unknown."""
    text = (text or "").lower()
    if "secureboot enabled" in text:
        return True
    if "secureboot disabled" in text or "doesn't support secure boot" in text:
        return False
    return None


def parse_numa_node(text: str | None) -> int | None:
    """sysfs numa_node: -1 (no NUMA information) and anything unreadable are null."""
    try:
        node = int((text or "").strip())
    except ValueError:
        return None
    return node if node >= 0 else None


def version_at_least(version: str | None, minimum: tuple[int, ...]) -> bool | None:
    if not version:
        return None
    return tuple(int(part) for part in version.split(".")[: len(minimum)]) >= minimum


def rooted(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except (OSError, ValueError):
        return None


def read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (OSError, ValueError):
        return None


def _first_line(path: str) -> str:
    text = read_text(path)
    return text.splitlines()[0].strip() if text and text.strip() else ""


def _hex_id(text: str | None) -> str | None:
    value = (text or "").strip().lower()
    return value if re.fullmatch(r"0x[0-9a-f]+", value) else None


def _link_name(path: str) -> str | None:
    """Basename of what a sysfs link (driver, iommu_group) points at; null when there is no link."""
    try:
        target = os.readlink(path)
    except OSError:
        return None
    return os.path.basename(target.rstrip("/")) or None


def read_pci_functions(root: str, vendor_id: str = NVIDIA_VENDOR_ID) -> list[dict]:
    """The PCI functions of one vendor, from /sys/bus/pci/devices, in PCI address order."""
    base = rooted(root, "/sys/bus/pci/devices")
    try:
        addresses = sorted(os.listdir(base))
    except OSError:
        return []
    functions = []
    for address in addresses:
        path = os.path.join(base, address)
        if _hex_id(read_text(os.path.join(path, "vendor"))) != vendor_id:
            continue
        iommu_group = _link_name(os.path.join(path, "iommu_group"))
        functions.append(
            {
                "pci_address": address,
                "vendor_id": vendor_id,
                "device_id": _hex_id(read_text(os.path.join(path, "device"))),
                "class": _hex_id(read_text(os.path.join(path, "class"))),
                "numa_node": parse_numa_node(read_text(os.path.join(path, "numa_node"))),
                "iommu_group": int(iommu_group) if iommu_group and iommu_group.isdigit() else None,
                "driver": _link_name(os.path.join(path, "driver")),
                "virtual_function": os.path.lexists(os.path.join(path, "physfn")),
            }
        )
    return functions


def classify_nvidia_functions(functions: list[dict]) -> tuple[list[dict], list[dict], int]:
    """NVIDIA PCI functions -> (GPUs, NVSwitches, number of GPU virtual functions)."""
    gpus, nvswitches, virtual_functions = [], [], 0
    for function in functions:
        if function["vendor_id"] != NVIDIA_VENDOR_ID or not function["class"]:
            continue
        class_prefix = function["class"][:6]
        if class_prefix in GPU_CLASS_NAMES:
            if function["virtual_function"]:
                virtual_functions += 1
                continue
            gpus.append(
                {
                    "pci_address": function["pci_address"],
                    "vendor_id": function["vendor_id"],
                    "device_id": function["device_id"],
                    "class": function["class"],
                    "class_name": GPU_CLASS_NAMES[class_prefix],
                    "numa_node": function["numa_node"],
                    "iommu_group": function["iommu_group"],
                    "driver": function["driver"],
                }
            )
        elif class_prefix == NVSWITCH_CLASS_PREFIX:
            nvswitches.append(
                {
                    "pci_address": function["pci_address"],
                    "device_id": function["device_id"],
                    "class": function["class"],
                    "numa_node": function["numa_node"],
                    "driver": function["driver"],
                }
            )
    return gpus, nvswitches, virtual_functions


def driver_facts(root: str) -> dict:
    proc_text = read_text(rooted(root, "/proc/driver/nvidia/version"))
    version, module_type = parse_nvidia_driver_version(proc_text)
    source = "proc" if version else None
    if version is None:
        sysfs_version = (read_text(rooted(root, "/sys/module/nvidia/version")) or "").strip()
        if re.fullmatch(r"\d+(?:\.\d+)+", sysfs_version):
            version, source = sysfs_version, "sysfs"
    modules = [name for name in NVIDIA_KERNEL_MODULES if os.path.isdir(rooted(root, f"/sys/module/{name}"))]
    return {
        "loaded": proc_text is not None or "nvidia" in modules,
        "version": version,
        "source": source,
        "kernel_module_type": module_type,
        "modules": modules,
    }


def apparmor_facts(root: str) -> dict:
    enabled = (read_text(rooted(root, "/sys/module/apparmor/parameters/enabled")) or "").strip()
    return {
        "kernel_enabled": enabled.upper().startswith("Y"),
        "securityfs": os.path.isdir(rooted(root, "/sys/kernel/security/apparmor")),
    }


def fuse_facts(root: str) -> dict:
    module_dir = rooted(root, "/sys/module/fuse")
    loaded = os.path.isdir(module_dir)
    return {
        "device": os.path.exists(rooted(root, "/dev/fuse")),
        "module_loaded": loaded,
        # Only a loadable module has an initstate file; a built-in one has just its parameters.
        "builtin": loaded and not os.path.exists(os.path.join(module_dir, "initstate")),
    }


def kernel_facts(root: str) -> dict:
    release_text = read_text(rooted(root, "/proc/sys/kernel/osrelease"))
    if release_text is None and root == "/":
        release_text = os.uname().release
    version, release = parse_kernel_release(release_text)
    max_userns = (read_text(rooted(root, "/proc/sys/user/max_user_namespaces")) or "").strip()
    status = read_text(rooted(root, "/proc/self/status")) or ""
    return {
        "release": release,
        "version": version,
        "max_user_namespaces": int(max_userns) if max_userns.isdigit() else None,
        "seccomp": re.search(r"^Seccomp:", status, re.MULTILINE) is not None,
    }


def oci_runtime_facts(run_command: RunCommand | None, which: Which) -> dict:
    facts = {}
    for name in OCI_RUNTIMES:
        binary = which(name)
        output = _output(run_command, [binary, "--version"]) if binary else None
        version, version_full = parse_oci_runtime_version(output)
        facts[name] = {
            "installed": binary is not None,
            "binary": binary,
            "version": version,
            "version_full": version_full,
        }
    return facts


def secure_boot_from_files(root: str) -> bool | None:
    if not os.path.isdir(rooted(root, "/sys/firmware/efi")):
        return None
    state = parse_secure_boot_efivar(read_bytes(rooted(root, SECURE_BOOT_EFIVARFS)))
    if state is None:
        # Kernels before efivarfs: the data file holds only the value byte.
        data = read_bytes(rooted(root, SECURE_BOOT_SYSFS))
        state = data[0] == 1 if data else None
    return state


# /proc/1/cgroup path fragments and the container kind they show (cgroup v1 and hybrid hierarchies).
CGROUP_CONTAINER_HINTS = (
    ("/docker/", "docker"),
    ("/docker-", "docker"),
    ("libpod", "podman"),
    ("/lxc/", "lxc"),
    ("/lxc.payload", "lxc"),
    ("/kubepods", "container-other"),
)


def container_type_from_files(root: str) -> str | None:
    for path in ("/run/systemd/container", "/run/host/container-manager"):
        value = _first_line(rooted(root, path))
        if value:
            return value
    environ = read_bytes(rooted(root, "/proc/1/environ")) or b""
    for item in environ.split(b"\0"):
        if item.startswith(b"container=") and item[len(b"container=") :]:
            return item[len(b"container=") :].decode("utf-8", "replace")
    if os.path.exists(rooted(root, "/run/.containerenv")):
        return "podman"
    if os.path.exists(rooted(root, "/.dockerenv")):
        return "docker"
    for line in (read_text(rooted(root, "/proc/1/cgroup")) or "").splitlines():
        cgroup_path = line.split(":", 2)[-1]
        for hint, kind in CGROUP_CONTAINER_HINTS:
            if hint in cgroup_path:
                return kind
    return None


# DMI value prefixes that name a hypervisor, with systemd-detect-virt's name for it.
DMI_VM_VENDORS = (
    ("KVM", "kvm"),
    ("OpenStack", "kvm"),
    ("KubeVirt", "kvm"),
    ("QEMU", "qemu"),
    ("VMware", "vmware"),
    ("VMW", "vmware"),
    ("innotek GmbH", "oracle"),
    ("VirtualBox", "oracle"),
    ("Xen", "xen"),
    ("Bochs", "bochs"),
    ("Parallels", "parallels"),
    ("BHYVE", "bhyve"),
    ("Hyper-V", "microsoft"),
    ("Google Compute Engine", "google"),
    ("Amazon EC2", "amazon"),
)
DMI_FIELDS = ("product_name", "sys_vendor", "board_vendor", "bios_vendor")


def vm_type_from_files(root: str) -> str | None:
    dmi = {field: _first_line(rooted(root, f"/sys/class/dmi/id/{field}")) for field in DMI_FIELDS}
    if dmi["sys_vendor"].startswith("Microsoft") and dmi["product_name"].startswith("Virtual Machine"):
        return "microsoft"
    for field in DMI_FIELDS:
        for prefix, kind in DMI_VM_VENDORS:
            if dmi[field].startswith(prefix):
                # EC2 bare-metal instances carry Amazon's DMI too; their instance type ends in .metal.
                if kind == "amazon" and dmi["product_name"].endswith(".metal"):
                    return None
                return kind
    for line in (read_text(rooted(root, "/proc/cpuinfo")) or "").splitlines():
        if line.startswith("flags") and "hypervisor" in line.split(":", 1)[-1].split():
            return "vm-other"
    return None


def running_processes(root: str) -> set[str] | None:
    """Command names (comm) of the processes in <root>/proc; null when no process can be read."""
    proc = rooted(root, "/proc")
    try:
        entries = os.listdir(proc)
    except OSError:
        return None
    names = set()
    for entry in entries:
        if entry.isdigit():
            comm = read_text(os.path.join(proc, entry, "comm"))
            if comm and comm.strip():
                names.add(comm.strip())
    return names or None


def find_binary(root: str, name: str, directories: tuple[str, ...] = BIN_DIRS) -> str | None:
    """Path (as seen on the node) of an executable `name` in `directories` below `root`."""
    for directory in directories:
        candidate = os.path.join(directory, name)
        real = rooted(root, candidate)
        if os.path.isfile(real) and os.access(real, os.X_OK):
            return candidate
    return None


# name, binary, systemd unit, API sockets, version parser
RUNTIMES = (
    ("docker", "dockerd", "docker.service", ("/run/docker.sock", "/var/run/docker.sock"), parse_docker_version),
    ("containerd", "containerd", "containerd.service", ("/run/containerd/containerd.sock",), parse_containerd_version),
    ("crio", "crio", "crio.service", ("/var/run/crio/crio.sock", "/run/crio/crio.sock"), parse_crio_version),
)
KUBELET = ("kubelet", "kubelet", "kubelet.service", (), parse_kubelet_version)

if TYPE_CHECKING:  # annotations only: `X | Y` and list[str] are not valid at run time before Python 3.10/3.9
    from collections.abc import Callable

    RunCommand = Callable[[list[str]], tuple[int, str, str] | None]
    Which = Callable[[str], str | None]


def _output(run_command: RunCommand | None, argv: list[str]) -> str | None:
    """stdout and stderr of a command, or null when commands are off or it could not run."""
    if run_command is None:
        return None
    result = run_command(argv)
    if result is None:
        return None
    _rc, out, err = result
    return f"{out}\n{err}"


def _detect_virt(run_command: RunCommand | None, which: Which, flag: str) -> str | None:
    """What `systemd-detect-virt <flag>` prints ("none" when it finds nothing), null when it did not run."""
    binary = which("systemd-detect-virt") if run_command else None
    if not binary:
        return None
    result = run_command([binary, flag])
    if result is None:
        return None
    value = result[1].strip()
    return value.splitlines()[0] if value else None


def _unit_states(run_command: RunCommand | None, which: Which, root: str, units: list[str]) -> dict:
    """Unit -> `systemctl is-active` answer, when systemd is the init system and commands are on."""
    if run_command is None or not os.path.isdir(rooted(root, "/run/systemd/system")):
        return {}
    systemctl = which("systemctl")
    if not systemctl:
        return {}
    result = run_command([systemctl, "is-active", *units])
    if result is None:
        return {}
    states = result[1].split()
    return dict(zip(units, states)) if len(states) == len(units) else {}


def service_facts(
    root: str,
    spec: tuple,
    binary: str | None,
    version_output: str | None,
    service_state: str | None,
    processes: set[str] | None,
) -> dict:
    _name, binary_name, _unit, sockets, parse_version = spec
    version, version_full = parse_version(version_output) if version_output else (None, None)
    socket = next((path for path in sockets if os.path.exists(rooted(root, path))), None)
    if service_state is not None:
        running = service_state == "active" or binary_name in (processes or ())
    elif processes is not None:
        running = binary_name in processes
    else:
        running = socket is not None
    return {
        "installed": binary is not None,
        "binary": binary,
        "version": version,
        "version_full": version_full,
        "running": running,
        "service_state": service_state,
        "socket": socket,
    }


# --------------------------------------------------------------------------- cluster installers
# How each installer lays containerd and the kubelet out on a node. Checked against the installers' sources
# (commit ids from the mirrors used; upstream repositories k3s-io/k3s, rancher/rke2, kubernetes-sigs/kubespray):
# - RKE2: data dir /var/lib/rancher/rke2 (pkg/cli/cmds/server.go rke2Path); binaries in <data-dir>/bin, a
#   symlink to data/<digest>/bin (pkg/bootstrap/bootstrap.go symlinkBinDir); units rke2-server.service and
#   rke2-agent.service running /usr/local/bin/rke2 (bundle/lib/systemd/system/); RPM installs put the binary in
#   /usr/bin, the install script's tarball in /usr/local/bin (or /opt/rke2/bin where /usr/local is read-only);
#   containerd socket /run/k3s/containerd/containerd.sock (pkg/executor/staticpod/spw.go ContainerdSock);
#   containerd 2.x (config version 3, template config-v3.toml.tmpl) from v1.31.6+rke2r1 / v1.32.2+rke2r1
#   (Dockerfile: rancher/hardened-containerd:v2.x, commits 6e232d5ca/554b43e03, Feb 2025).
# - k3s: data dir /var/lib/rancher/k3s; the k3s binary (install.sh: /usr/local/bin/k3s) unpacks its tools into
#   <data-dir>/data/<hash>/bin with a symlink <data-dir>/data/current (cmd/k3s/main.go extract); units k3s.service
#   (server) and k3s-agent.service (agent) from install.sh.
# - Both: containerd's config is written at every agent start to <data-dir>/agent/etc/containerd/config.toml
#   from <data-dir>/agent/etc/containerd/config.toml.tmpl when it exists, else from the built-in template
#   (k3s pkg/agent/config/config.go Containerd.Config/Template, pkg/agent/containerd/config.go
#   writeContainerdConfig); with containerd 2.x the template is config-v3.toml.tmpl. `{{ template "base" . }}`
#   extends the built-in config from v1.24.17, v1.25.13, v1.26.8, v1.27.5 and v1.28.1 (k3s docs, "Base
#   template", k3s-io/docs#213). nvidia-container-runtime in /usr/bin or /usr/local/nvidia/toolkit becomes the
#   runtimes "nvidia"/"nvidia-experimental" at agent start (k3s pkg/agent/containerd/nvidia.go); the agent
#   option `default-runtime` (k3s-io/k3s#8700, #8751; RKE2 71ac57d72 and its backports) is in v1.26.12,
#   v1.27.9, v1.28.5 and v1.29.0+. The detection is older than that option, but this module only claims it
#   where it checked it (those releases); older versions report null. Agent config /etc/rancher/<name>/
#   config.yaml plus config.yaml.d/*.yaml (keys node-label, node-taint, kubelet-arg).
# - kubespray: renders /etc/containerd/config.toml from roles/container-engine/containerd/templates/
#   config.toml.j2 (config-v1.toml.j2 for containerd 1.x) on every run, binaries in bin_dir /usr/local/bin
#   (roles/kubespray_defaults: containerd_bin_dir), the kubelet's flags in /etc/kubernetes/kubelet.env and its config in
#   /etc/kubernetes/kubelet-config.yaml (roles/kubernetes/node/tasks/kubelet.yml), base runtime spec
#   /etc/containerd/cri-base.json (roles/container-engine/containerd/defaults). It leaves no version on the node.
# - kubeadm-style: the distribution's kubelet package with kubeadm's unit drop-in 10-kubeadm.conf.

RANCHER_INSTALLERS = {
    # name: (data dir, installer binary candidates, bin dir below the data dir, units (server first))
    "rke2": (
        "/var/lib/rancher/rke2",
        ("/usr/local/bin/rke2", "/usr/bin/rke2", "/opt/rke2/bin/rke2"),
        "bin",
        ("rke2-server.service", "rke2-agent.service"),
    ),
    "k3s": (
        "/var/lib/rancher/k3s",
        ("/usr/local/bin/k3s", "/usr/bin/k3s", "/opt/bin/k3s"),
        "data/current/bin",
        ("k3s.service", "k3s-agent.service"),
    ),
}
RANCHER_SOCKET = "/run/k3s/containerd/containerd.sock"
UNIT_DIRS = ("/etc/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")
KUBEADM_DROPINS = tuple(f"{d}/kubelet.service.d/10-kubeadm.conf" for d in UNIT_DIRS)
KUBESPRAY_KUBELET_ENV = "/etc/kubernetes/kubelet.env"
KUBESPRAY_KUBELET_CONFIG = "/etc/kubernetes/kubelet-config.yaml"
KUBESPRAY_BASE_SPEC = "/etc/containerd/cri-base.json"
# the kubelet role's drop-in in the agent config directory (read after config.yaml and earlier drop-ins)
KUBELET_AGENT_DROPIN = "90-gpu-node-kubelet.yaml"
# {minor: first patch release}; minors after the last key have it from .0
BASE_TEMPLATE_GATE = {24: 17, 25: 13, 26: 8, 27: 5, 28: 1}
DEFAULT_RUNTIME_GATE = {26: 12, 27: 9, 28: 5}
CONTAINERD2_GATE = {"rke2": {31: 6, 32: 2}, "k3s": {31: 6, 32: 2}}


def parse_rancher_version(text: str | None) -> tuple[str | None, str | None]:
    """`rke2 --version` / `k3s --version`: "rke2 version v1.31.6+rke2r1 (2a0aa7b...)" -> ("1.31.6", "1.31.6+rke2r1")."""
    match = re.search(r"^\s*(?:rke2|k3s) version\s+(\S+)", text or "", re.MULTILINE)
    return _parse_version_token(match.group(1)) if match else (None, None)


def release_gate(version: str | None, gate: dict, first: int | None = None) -> bool | None:
    """True when ``version`` ("1.28.5") is at or after the gate's release for its minor (1.x only); null when
    the version is unknown. Minors below the gate's lowest key are before it, above its highest are after."""
    if not version:
        return None
    parts = [int(part) for part in version.split(".")[:3]] + [0, 0]
    major, minor, patch = parts[:3]
    if major != 1:
        return major > 1
    lowest = first if first is not None else min(gate)
    if minor < lowest:
        return False
    if minor > max(gate):
        return True
    return minor in gate and patch >= gate[minor]


def _unit_file(root: str, unit: str) -> str | None:
    return next((f"{d}/{unit}" for d in UNIT_DIRS if os.path.isfile(rooted(root, f"{d}/{unit}"))), None)


def _executable(root: str, path: str) -> bool:
    real = rooted(root, path)
    return os.path.isfile(real) and os.access(real, os.X_OK)


def _rancher_installer(root: str, name: str, run_command: RunCommand | None, states: dict) -> dict | None:
    data_dir, binaries, bin_subdir, units = RANCHER_INSTALLERS[name]
    binary = next((path for path in binaries if _executable(root, path)), None)
    unit_files = {unit: _unit_file(root, unit) for unit in units}
    config_dir = f"/etc/rancher/{name}"
    evidence = [path for path in (binary, *unit_files.values()) if path]
    if os.path.isdir(rooted(root, f"{data_dir}/agent")):
        evidence.append(f"{data_dir}/agent")
    if not evidence:
        return None
    active = [unit for unit in units if states.get(unit) == "active"]
    service = (active or [unit for unit in units if unit_files[unit]] or [units[-1]])[0]
    version, version_full = parse_rancher_version(_output(run_command, [binary, "--version"]) if binary else None)
    bin_dir = f"{data_dir}/{bin_subdir}"
    containerd_binary = f"{bin_dir}/containerd" if _executable(root, f"{bin_dir}/containerd") else None
    containerd_version = None
    if containerd_binary:
        containerd_version = parse_containerd_version(_output(run_command, [containerd_binary, "--version"]))[0]
    if containerd_version:
        containerd2 = int(containerd_version.split(".")[0]) >= 2
    else:
        containerd2 = release_gate(version, CONTAINERD2_GATE[name])
    etc = f"{data_dir}/agent/etc/containerd"
    template = f"{etc}/config-v3.toml.tmpl" if containerd2 else f"{etc}/config.toml.tmpl"
    return {
        "name": name,
        "version": version,
        "version_full": version_full,
        "binary": binary,
        "data_dir": data_dir,
        "bin_dir": bin_dir,
        "service": service,
        "service_state": states.get(service),
        "evidence": evidence,
        "containerd": {
            "binary": containerd_binary,
            "version": containerd_version,
            "socket": RANCHER_SOCKET,
            "running": os.path.exists(rooted(root, RANCHER_SOCKET)),
            "config": f"{etc}/config.toml",
            "config_regenerated": "agent start",
            "template": template if containerd2 is not None else None,
            "templates": [f"{etc}/config-v3.toml.tmpl", f"{etc}/config.toml.tmpl"],
            "template_base": release_gate(version, BASE_TEMPLATE_GATE),
            "nvidia_detection": True if release_gate(version, DEFAULT_RUNTIME_GATE) else None,
            "default_runtime_option": release_gate(version, DEFAULT_RUNTIME_GATE),
        },
        "kubelet": {
            "settings": "agent_config_dropin",
            "config": f"{config_dir}/config.yaml",
            "dropin_dir": f"{config_dir}/config.yaml.d",
            "dropin": f"{config_dir}/config.yaml.d/{KUBELET_AGENT_DROPIN}",
            "files": [f"{config_dir}/config.yaml", f"{config_dir}/config.yaml.d"],
        },
    }


def _kubespray_installer(root: str) -> dict | None:
    markers = [path for path in (KUBESPRAY_KUBELET_ENV, KUBESPRAY_BASE_SPEC) if os.path.isfile(rooted(root, path))]
    if not markers:
        return None
    binary = "/usr/local/bin/containerd"
    return {
        "name": "kubespray",
        "version": None,  # kubespray leaves no version on the node
        "version_full": None,
        "binary": None,
        "data_dir": None,
        "bin_dir": "/usr/local/bin",
        "service": "kubelet.service",
        "service_state": None,
        "evidence": markers,
        "containerd": {
            "binary": binary if _executable(root, binary) else None,
            "version": None,
            "socket": "/run/containerd/containerd.sock",
            "running": os.path.exists(rooted(root, "/run/containerd/containerd.sock")),
            "config": "/etc/containerd/config.toml",
            "config_regenerated": "kubespray run",
            "template": None,
            "templates": [],
            "template_base": None,
            "nvidia_detection": False,
            "default_runtime_option": True,  # inventory: containerd_default_runtime
        },
        "kubelet": {
            "settings": "kubespray_inventory",
            "config": KUBESPRAY_KUBELET_CONFIG,
            "dropin_dir": None,
            "files": [KUBESPRAY_KUBELET_ENV, KUBESPRAY_KUBELET_CONFIG],
        },
    }


def _kubeadm_installer(root: str, kubelet: dict) -> dict | None:
    dropin = next((path for path in KUBEADM_DROPINS if os.path.isfile(rooted(root, path))), None)
    if dropin is None:
        return None
    return {
        "name": "kubeadm",
        "version": kubelet.get("version"),
        "version_full": kubelet.get("version_full"),
        "binary": None,
        "data_dir": None,
        "bin_dir": None,
        "service": "kubelet.service",
        "service_state": kubelet.get("service_state"),
        "evidence": [dropin],
        "containerd": {
            "binary": None,
            "version": None,
            "socket": "/run/containerd/containerd.sock",
            "running": os.path.exists(rooted(root, "/run/containerd/containerd.sock")),
            "config": "/etc/containerd/config.toml",
            "config_regenerated": None,
            "template": None,
            "templates": [],
            "template_base": None,
            "nvidia_detection": False,
            "default_runtime_option": None,
        },
        "kubelet": {
            "settings": "kubelet_flags",
            "config": "/var/lib/kubelet/config.yaml",
            "dropin_dir": "/etc/kubernetes/kubelet.conf.d",
            "files": [dropin],
        },
    }


def installer_facts(root: str, run_command: RunCommand | None, which: Which, kubelet: dict) -> dict:
    """Which cluster installer laid the node out (rke2, k3s, kubespray, kubeadm, unknown) and where it keeps
    containerd and the kubelet's settings. RKE2 and k3s first: they run their own containerd; kubespray before
    kubeadm: kubespray runs kubeadm too."""
    units = [unit for name in RANCHER_INSTALLERS for unit in RANCHER_INSTALLERS[name][3]]
    present = [unit for unit in units if _unit_file(root, unit)]
    states = _unit_states(run_command, which, root, present) if present else {}
    found = []
    for name in RANCHER_INSTALLERS:
        entry = _rancher_installer(root, name, run_command, states)
        if entry:
            found.append(entry)
    for entry in (_kubespray_installer(root), _kubeadm_installer(root, kubelet)):
        if entry:
            found.append(entry)
    if not found:
        return {
            "name": "unknown",
            "found": [],
            "version": None,
            "version_full": None,
            "binary": None,
            "data_dir": None,
            "bin_dir": None,
            "service": None,
            "service_state": None,
            "evidence": [],
            "containerd": None,
            "kubelet": None,
        }
    active = [entry for entry in found if entry.get("service_state") == "active"]
    chosen = dict((active or found)[0])
    chosen["found"] = [entry["name"] for entry in found]
    return chosen


CONTAINERD_CONFIG = "/etc/containerd/config.toml"
CRIO_CONFIGS = ("/etc/crio/crio.conf", "/etc/crio/crio.conf.d/*")
DOCKER_DAEMON_JSON = "/etc/docker/daemon.json"


def _containerd_texts(root: str) -> list:
    """config.toml and the files its `imports` name, in the order containerd reads them."""
    text = read_text(rooted(root, CONTAINERD_CONFIG))
    texts = [text]
    match = re.search(r"^[ \t]*imports[ \t]*=[ \t]*\[([^\]]*)\]", text or "", re.MULTILINE)
    for pattern in re.findall(r"""["']([^"']+)["']""", match.group(1) if match else ""):
        texts += [read_text(path) for path in sorted(glob.glob(rooted(root, pattern)))]
    return texts


def runtime_defaults(root: str, services: dict, run_command: RunCommand | None, installer: dict | None = None) -> dict:
    """Per installed runtime, its current default runtime and whether CDI is on (plugins/module_utils/gpu_pods.py):
    containerd from `containerd config dump` when commands run (else config.toml and its imports), CRI-O from
    crio.conf and crio.conf.d, docker from daemon.json. On RKE2/k3s the containerd is the installer's (its binary
    dumps the config the agent generated), which wins over a distribution containerd the node may also have."""
    states = {}
    docker = services["docker"]
    if docker["installed"]:
        states["docker"] = docker_runtime_state(read_text(rooted(root, DOCKER_DAEMON_JSON)))
    containerd = services["containerd"]
    own = (installer or {}).get("containerd") or {}
    if (installer or {}).get("name") in RANCHER_INSTALLERS and own.get("binary"):
        containerd = {
            "installed": True,
            "binary": own["binary"],
            "version": own.get("version"),
            "config": own["config"],
        }
    if containerd["installed"]:
        dump = None
        config = containerd.get("config")
        if run_command is not None:
            argv = [containerd["binary"], *(["--config", config] if config else []), "config", "dump"]
            result = run_command(argv)
            dump = result[1] if result and result[0] == 0 else None
        if dump:
            texts = [dump]
        elif config:
            texts = [read_text(rooted(root, config))]
        else:
            texts = _containerd_texts(root)
        state = containerd_runtime_state(texts, containerd["version"])
        state["cdi_supported"] = version_at_least(containerd["version"], (1, 7)) is not False
        state["source"] = "containerd config dump" if dump else "files"
        states["containerd"] = state
    if services["crio"]["installed"]:
        texts = [read_text(rooted(root, CRIO_CONFIGS[0]))]
        texts += [read_text(path) for path in sorted(glob.glob(rooted(root, CRIO_CONFIGS[1])))]
        states["crio"] = crio_runtime_state(texts)
    return states


def gather_gpu_node_facts(root: str = "/", run_command: RunCommand | None = None, which: Which | None = None) -> dict:
    """All the gpu_node facts for the tree at `root`.

    run_command(argv) -> (rc, stdout, stderr), or None when the command could not run; pass None to run no
    command at all. which(name) -> path or None; the default looks below `root`.
    """
    if which is None:

        def which(name: str) -> str | None:
            return find_binary(root, name)

    gpus, nvswitches, gpu_vf_count = classify_nvidia_functions(read_pci_functions(root))
    processes = running_processes(root)
    specs = (*RUNTIMES, KUBELET)
    binaries = {spec[0]: which(spec[1]) for spec in specs}
    states = _unit_states(run_command, which, root, [spec[2] for spec in specs])
    services = {}
    for spec in specs:
        binary = binaries[spec[0]]
        version_output = _output(run_command, [binary, "--version"]) if binary else None
        services[spec[0]] = service_facts(root, spec, binary, version_output, states.get(spec[2]), processes)
    kubelet = services.pop("kubelet")
    kubelet["config_dir_supported"] = version_at_least(kubelet["version"], KUBELET_CONFIG_DIR_MIN)

    # systemd-detect-virt knows more kinds than the files show; "none" from --vm is trusted (EC2 .metal hosts
    # carry a hypervisor's DMI), "none" from --container is not (it misses some container managers).
    container_virt = _detect_virt(run_command, which, "--container")
    container_type = container_virt if container_virt not in (None, "none") else container_type_from_files(root)
    vm_virt = _detect_virt(run_command, which, "--vm")
    vm_type = vm_type_from_files(root) if vm_virt is None else (None if vm_virt == "none" else vm_virt)

    secure_boot = secure_boot_from_files(root)
    if secure_boot is None and run_command and os.path.isdir(rooted(root, "/sys/firmware/efi")):
        mokutil = which("mokutil")
        if mokutil:
            secure_boot = parse_mokutil_sb_state(_output(run_command, [mokutil, "--sb-state"]))

    apparmor = apparmor_facts(root)
    device_plugin = device_plugin_facts(root)
    installer = installer_facts(root, run_command, which, kubelet)
    return {
        "has_gpu": bool(gpus),
        "gpu_count": len(gpus),
        "gpu_vf_count": gpu_vf_count,
        "gpus": gpus,
        "nvswitch_count": len(nvswitches),
        "nvswitches": nvswitches,
        "driver": driver_facts(root),
        "nouveau_loaded": os.path.isdir(rooted(root, "/sys/module/nouveau")),
        "nvidia_smi": which("nvidia-smi"),
        "runtimes": services,
        "runtimes_installed": [name for name, facts in services.items() if facts["installed"]],
        "runtimes_running": [name for name, facts in services.items() if facts["running"]],
        "kubelet": kubelet,
        "container": container_type is not None,
        "container_type": container_type,
        "vm": vm_type is not None,
        "vm_type": vm_type,
        "apparmor_enabled": apparmor["kernel_enabled"] and apparmor["securityfs"],
        "apparmor": apparmor,
        "secure_boot": secure_boot,
        "fuse": fuse_facts(root),
        "kernel": kernel_facts(root),
        "oci_runtimes": oci_runtime_facts(run_command, which),
        "installer": installer,
        "device_plugin": device_plugin,
        "gpu_workloads": gpu_processes(root, exclude=device_plugin["pids"]),
        "runtime_defaults": runtime_defaults(root, services, run_command, installer),
        "toolkit_config": toolkit_config_facts(root),
        "dra": dra_facts(root),
    }


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            gather_runtimes=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    root = os.path.realpath(module.params["root"])
    if not os.path.isdir(root):
        module.fail_json(
            msg=f"root {root} is not a directory: set root to the top of the filesystem tree to inspect,"
            " or leave it at /."
        )
    live = root == "/"

    def which(name: str) -> str | None:
        if live:
            return module.get_bin_path(name, opt_dirs=list(BIN_DIRS))
        return find_binary(root, name)

    def run_command(argv: list[str]) -> tuple[int, str, str] | None:
        try:
            return module.run_command(
                argv, environ_update={"LC_ALL": "C"}, errors="surrogate_or_replace", handle_exceptions=False
            )
        except OSError:
            return None

    commands = run_command if live and module.params["gather_runtimes"] else None
    facts = gather_gpu_node_facts(root, run_command=commands, which=which)
    module.exit_json(changed=False, ansible_facts={"gpu_node": facts})


if __name__ == "__main__":
    main()
