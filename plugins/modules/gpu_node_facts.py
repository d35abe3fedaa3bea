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
  - Where the play has not gathered facts (no C(ansible_facts.os_family)), its action plugin sets O(gather_minimal),
    and the same module run also gathers the C(min) subset of the setup module's facts (the distribution and OS
    family the roles decide on). The task sets both kinds of facts, with no setup module run of its own.
version_added: "0.1.0"
author: gpu-node-provisioning contributors (!UNKNOWN)
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
  toolkit_config:
    description:
      - The NVIDIA container toolkit's config file, read for RV(ansible_facts.gpu_node.toolkit_config) (below O(root)).
      - Its one home is C(__gpu_node_facts_toolkit_config) in C(roles/gpu_node_facts/vars/main.yml); the module's
        action plugin passes that value when the task gives none.
    type: path
    required: true
  gather_minimal:
    description:
      - Also gather the facts of the setup module's C(min) subset, through ansible-core's fact collectors, under the
        names setup gives them (C(ansible_distribution), C(ansible_os_family), C(ansible_pkg_mgr),
        C(ansible_service_mgr), C(ansible_kernel), C(ansible_architecture), ...), with C(gather_subset) and
        C(module_setup) as setup sets them. No hardware or network facts.
      - They describe the running system whatever O(root) is, and their collectors run the commands setup's C(min)
        subset runs whatever O(gather_runtimes) says. Local facts (C(/etc/ansible/facts.d)) are not read, so
        C(ansible_local) is empty.
      - The action plugin sets it where the play has not gathered facts (no C(ansible_facts.os_family)); a task need
        not.
    type: bool
    default: false
  test_paths:
    description:
      - Paths on the node (below O(root)) whose existence RV(ansible_facts.gpu_node.path_exists) reports.
      - The role's task passes C(__gpu_node_facts_test_paths) (C(roles/gpu_node_facts/vars/main.yml)), the files an
        earlier declaration of the gpu_settings role left. With nothing declared and none of them there, the
        gpu_settings action runs no module.
    type: list
    elements: path
    default: []
  spec:
    description:
      - Path of the role's C(meta/argument_specs.yml) on the controller. When given, the action plugin checks the
        role's variables first, exactly as the C(role_variables) action does with the same O(spec) and O(checks),
        and fails the task with its messages before anything on the node is read. Not passed to the module.
    type: path
  checks:
    description:
      - The name of the role variable that holds the role's rules (C(role_variables)'s O(checks)), checked after the
        types when O(spec) is given. Not passed to the module.
    type: str
  entry_point:
    description:
      - The entry point of O(spec) whose options are checked (C(role_variables)'s O(entry_point)). Not passed to the
        module.
    type: str
    default: variables
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

- name: Gather the GPU node facts and the distribution, in a play that gathered no facts
  gpu_node_facts:
    gather_minimal: true
"""

RETURN = r"""
ansible_facts:
  description:
    - Facts to add to C(ansible_facts).
    - With O(gather_minimal), also the setup module's C(min) subset under setup's names (C(ansible_distribution),
      C(ansible_distribution_version), C(ansible_os_family), C(ansible_pkg_mgr), C(ansible_service_mgr),
      C(ansible_kernel), C(ansible_architecture), ...) and C(gather_subset) (V([min])) and C(module_setup).
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
        grace:
          description:
            - Whether the GPUs are those of NVIDIA Grace superchips (attached to a Grace CPU by NVLink-C2C; the node is
              aarch64), from their PCI device IDs. C(superchip) is C(GH200) (Grace Hopper), C(GB200) (Grace Blackwell)
              or null; C(gpus) lists the superchip GPUs' PCI addresses.
          type: dict
          returned: always
          sample: {superchip: GB200, gpus: ["0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"]}
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
            - GPU allocation through the kubelet (plugins/module_utils/node_facts/dra.py, issue 39). C(kubelet_root_dir)
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
            C(visible_devices) and C(open_devices); C(privileged) (C(CAP_SYS_ADMIN) in its bounding set, which NVIDIA's
            runtime calls privileged), C(container) (a mount namespace of its own) and C(by_envvar) (an unprivileged
            container whose C(NVIDIA_VISIBLE_DEVICES) names devices and that has NVIDIA device nodes, what it loses
            when the config of its NVIDIA runtime refuses that variable from unprivileged containers).
          type: list
          elements: dict
          returned: always
          sample: [{pid: 5120, comm: python3, visible_devices: GPU-8c1f..., open_devices: [/dev/nvidia0]}]
        nvidia_runtimes:
          description:
            - Every entry of docker, containerd and CRI-O whose binary is NVIDIA's runtime, whatever its name, with
              the toolkit config its runtime really reads (plugins/module_utils/nvidia/runtime.py config_read_by), a
              wrapper script's C(NVIDIA_CTK_CONFIG_FILE_PATH) or C(XDG_CONFIG_HOME) (the GPU Operator's), else
              C(/etc/nvidia-container-runtime/config.toml).
            - Each has C(runtime), C(name), C(binary), C(path) (null where the binary is not there), C(wrapper),
              C(exec), C(config), C(via), C(problem) (why the config cannot be told, else empty), C(own) (the toolkit
              role's config) and C(toolkit) (that config's keys, as in C(toolkit_config); null without a config).
            - C(runtime_defaults) carries each runtime's C(nvidia_entries), a dict of name to binary, these come from.
          type: list
          elements: dict
          returned: always
          sample: [{runtime: containerd, name: nvidia-cdi, wrapper: true, own: false,
                    binary: /usr/local/nvidia/toolkit/nvidia-container-runtime.cdi,
                    config: /usr/local/nvidia/toolkit/.config/nvidia-container-runtime/config.toml}]
        runtime_defaults:
          description:
            - Per installed runtime (V(docker), V(containerd), V(crio)), its current C(default) runtime and C(cdi),
              whether CDI devices reach containers. containerd's come from C(containerd config dump) (else
              config.toml and its imports; C(source) says which) with C(cdi_supported) (1.7 and later); CRI-O's from
              crio.conf and crio.conf.d (C(default) null when unset); docker's from daemon.json.
            - C(default_binary) is the default entry's binary (containerd C(options.BinaryName), CRI-O
              C(runtime_path), docker C(path); null where the config names none) and C(default_nvidia) whether the
              default is NVIDIA's runtime, whatever its name (C(nvidia-container-runtime), C(.cdi) or C(.legacy) in any
              directory; an entry named V(nvidia) without a binary counts too; plugins/module_utils/nvidia/runtime.py).
          type: dict
          returned: always
          sample: {containerd: {default: nvidia-cdi,
                                default_binary: /usr/local/nvidia/toolkit/nvidia-container-runtime.cdi,
                                default_nvidia: true, cdi: true, cdi_supported: true, source: containerd config dump,
                                nvidia_entries: {nvidia-cdi: /usr/local/nvidia/toolkit/nvidia-container-runtime.cdi}}}
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
        nvlink_fabric:
          description:
            - Whether the node is an NVLink5 (NVL5+) system whose fabric manager needs NVIDIA's NVLink Subnet Manager
              (C(nvl5)), told as NVIDIA's fabric manager start script tells it, and the Mellanox PCI functions whose
              Vital Product Data names them NVSwitch management ports (C(SW_MNG)) that showed it
              (C(switch_management_functions)). See C(plugins/module_utils/node_facts/fabric.py).
          type: dict
          returned: always
          sample: {nvl5: true, switch_management_functions: ["0000:03:00.0"]}
        path_exists:
          description:
            - Whether each path of O(test_paths) exists, keyed by the path tested (the path as given where O(root) is
              V(/), else the path below O(root), so that a caller looking up a path of the running system finds no
              answer about another tree). A path that cannot be told (no permission to look) counts as existing.
              Empty without O(test_paths).
            - The gpu_settings action reads it (plugins/action/gpu_settings.py); a path missing here is not known.
          type: dict
          returned: always
          sample: {/var/lib/gpu-node-provisioning/gpu-settings.json: false,
                   /etc/systemd/system/gpu-node-provisioning-gpu-settings.service: false,
                   /etc/modprobe.d/gpu-node-provisioning-nvidia.conf: false}
read_ahead:
  description:
    - Set by the action. The read ahead (plugins/plugin_utils/read_ahead.py) per role instance (C(role_uuid)) it
      decided - C(role), C(changes) (whether that role's read found something to change),
      C(seen) (the host's changed results in this run so far), C(index) (its package index refreshes, where the read
      asked the index) and, where it found a change, C(result), C(register) and C(args) (the read's result, for the
      role's own read task while nothing changed since).
    - The role's one task (C(read_ahead_pending) filter) reads it from this task's registered result.
  returned: always
  type: dict
  sample: {02fc0000-0001-4024-5c48-00000000008d: {role: fuse, changes: false, seen: 0}}
read_ahead_left:
  description:
    - Set by the action. Each later role the read ahead could not decide, and why; that role reads for itself.
  returned: where a role was left to itself
  type: dict
  sample: {kubelet: "the tags leave it out"}
"""

import os
from typing import TYPE_CHECKING

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.facts import ansible_collector, default_collectors
from ansible.module_utils.facts.namespace import PrefixFactNamespace
from ansible_collections.gpunode.provisioning.plugins.module_utils.kubernetes.gpu_pods import nvidia_runtime_facts
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.dra import dra_facts
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.fabric import nvlink_fabric_facts
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.gpu import gpu_facts
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.host import BIN_DIRS, find_binary
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.installers import installer_facts
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.kernel import kernel_security_facts
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.platform import platform_facts
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.runtimes import runtime_facts
from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.workloads import (
    runtime_defaults,
    workload_facts,
)

if TYPE_CHECKING:  # annotations only
    from collections.abc import Sequence

    from ansible_collections.gpunode.provisioning.plugins.module_utils.node_facts.host import RunCommand, Which


# The fact collectors of the setup module's `min` subset (ansible-core's setup names this set for gather_subset min):
# the platform, the distribution, the package and service managers and the like; no hardware, network or virtual facts.
MINIMAL_COLLECTORS = frozenset(
    {
        "apparmor",
        "caps",
        "cmdline",
        "date_time",
        "distribution",
        "dns",
        "env",
        "fips",
        "local",
        "lsb",
        "pkg_mgr",
        "platform",
        "python",
        "selinux",
        "service_mgr",
        "ssh_pub_keys",
        "user",
    }
)


def minimal_facts(module) -> dict:
    """The facts that setup with gather_subset min returns, with its names: each fact prefixed with ``ansible_``
    (ansible_os_family, ansible_pkg_mgr, ...), plus gather_subset and module_setup unprefixed, as setup sets them."""
    collector = ansible_collector.get_ansible_collector(
        all_collector_classes=default_collectors.collectors,
        namespace=PrefixFactNamespace(namespace_name="ansible", prefix="ansible_"),
        gather_subset=["min"],
        minimal_gather_subset=MINIMAL_COLLECTORS,
    )
    return collector.collect(module=module)


def path_exists(root: str, paths) -> dict:
    """Whether each of ``paths`` exists below ``root``, keyed by the path tested (as given where root is /). A path
    that cannot be told (a directory on the way that cannot be searched) counts as existing: its reader must look."""
    answers = {}
    for path in paths:
        tested = path if root == "/" else os.path.join(root, path.lstrip("/"))
        try:
            os.stat(tested)
        except (FileNotFoundError, NotADirectoryError):
            answers[tested] = False
        except OSError:
            answers[tested] = True
        else:
            answers[tested] = True
    return answers


def gather_gpu_node_facts(
    root: str = "/",
    run_command: RunCommand | None = None,
    which: Which | None = None,
    *,
    toolkit_config: str,
    test_paths: Sequence[str] = (),
) -> dict:
    """All the gpu_node facts for the tree at `root`, one subject file (plugins/module_utils/node_facts/*.py) each.

    run_command(argv) -> (rc, stdout, stderr), or None when the command could not run; pass None to run no
    command at all. which(name) -> path or None; the default looks below `root`. toolkit_config: the path of the
    toolkit's config file on the node (the module's parameter). test_paths: the paths whose existence path_exists
    reports (the module's parameter).
    """
    if which is None:

        def which(name: str) -> str | None:
            return find_binary(root, name)

    facts = {}
    facts.update(gpu_facts(root, which))
    facts.update(runtime_facts(root, run_command, which))
    facts.update(platform_facts(root, run_command, which))
    facts.update(kernel_security_facts(root))
    facts.update(workload_facts(root, toolkit_config))
    facts["nvlink_fabric"] = nvlink_fabric_facts(root)
    facts["dra"] = dra_facts(root)
    facts["installer"] = installer_facts(root, run_command, which, facts["kubelet"])
    facts["runtime_defaults"] = runtime_defaults(root, facts["runtimes"], run_command, facts["installer"])
    facts["nvidia_runtimes"] = nvidia_runtime_facts(root, facts["runtime_defaults"], toolkit_config)
    facts["path_exists"] = path_exists(root, test_paths)
    return facts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", default="/"),
            gather_runtimes=dict(type="bool", default=True),
            toolkit_config=dict(type="path", required=True),
            gather_minimal=dict(type="bool", default=False),
            test_paths=dict(type="list", elements="path", default=[]),
            # the action's options (plugins/action/gpu_node_facts.py checks the role's variables and drops them)
            spec=dict(type="path"),
            checks=dict(type="str"),
            entry_point=dict(type="str", default="variables"),
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
    facts = gather_gpu_node_facts(
        root,
        run_command=commands,
        which=which,
        toolkit_config=module.params["toolkit_config"],
        test_paths=module.params["test_paths"],
    )
    gathered = minimal_facts(module) if module.params["gather_minimal"] else {}
    module.exit_json(changed=False, ansible_facts={**gathered, "gpu_node": facts})


if __name__ == "__main__":
    main()
