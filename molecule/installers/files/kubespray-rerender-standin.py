#!/usr/bin/python3
"""TEST STAND-IN for a kubespray run's containerd step (kubespray itself is not run on the build machines).

What kubespray v2.24-v2.27 does to containerd at every run (kubernetes-sigs/kubespray, roles/container-engine/
containerd: tasks/main.yml "Containerd | Copy containerd config file", notify "Restart containerd"): renders
/etc/containerd/config.toml from its templates/config.toml.j2 (version 2) with its defaults/main.yml values and
bin_dir /usr/local/bin, and restarts containerd when the file changed. The rendered text follows the template's
loop over [containerd_runc_runtime] + containerd_additional_runtimes (runtime_type, runtime_engine and
runtime_root, base_runtime_spec below /etc/containerd, options: a value whose string is "true"/"false" bare,
any other quoted); the runc options are spelled systemdCgroup / binaryName as kubespray did until #12170
(v2.28.0). Written from that reading, not copied; tests/fixtures/containerd/v2-kubespray-2.27.toml is the same
render with no additional runtime (a unit test holds them together).

With containerd_version 2.0 or later in the inventory, what kubespray renders today instead (kubernetes-sigs/
kubespray at 46dbdd3994b32640bcd806b0097f50e8fdf1d514, 2026-08-21; templates/config.toml.j2 last changed in
a72ea49b2e2844bd6e74dc5351279a191e39defc): `version = 4` for containerd_version >= 2.3.0, else 3; the CRI tables
plugins."io.containerd.cri.v1.runtime" and ."io.containerd.cri.v1.images" (pinned_images.sandbox, registry
config_path), runc's options Root, SystemdCgroup, BinaryName (defaults/main.yml containerd_runc_runtime), each
runtime's type, base_runtime_spec and options only (no engine/root), no discard_unpacked_layers from 2.1 on, NRI
on (nri_enabled: container_manager == 'containerd'), and the pause image of kube 1.36 (registry.k8s.io/pause:
3.10.2, roles/kubespray_defaults vars/main/main.yml pod_infra_supported_versions).

  kubespray-rerender-standin [--no-restart]
      inventory: /etc/gpunode-standin/kubespray-inventory.json when it exists, with the keys
      containerd_additional_runtimes (list), containerd_default_runtime (default "runc"), enable_cdi and
      containerd_version (default: kubespray v2.24-v2.27's version 2 render); from containerd 2.0 on also
      containerd_extra_runtime_args (a mapping written into the CRI runtime table, as kubespray's template does).

Never shipped in a role.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

CONFIG = "/etc/containerd/config.toml"
INVENTORY = "/etc/gpunode-standin/kubespray-inventory.json"
CFG_DIR = "/etc/containerd"
RUNC = {
    "name": "runc",
    "type": "io.containerd.runc.v2",
    "engine": "",
    "root": "",
    "base_runtime_spec": "cri-base.json",
    "options": {"systemdCgroup": "true", "binaryName": "/usr/local/bin/runc"},
}

HEAD = """version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
oom_score = 0


[grpc]
  max_recv_message_size = 16777216
  max_send_message_size = 16777216

[debug]
  address = ""
  level = "info"
  format = ""
  uid = 0
  gid = 0

[metrics]
  address = ""
  grpc_histogram = false

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "registry.k8s.io/pause:3.10"
    max_container_log_line_size = 16384
    enable_unprivileged_ports = false
    enable_unprivileged_icmp = false
    enable_selinux = false
    disable_apparmor = false
    tolerate_missing_hugetlb_controller = true
    disable_hugetlb_controller = true
    image_pull_progress_timeout = "5m"
"""
CDI = '    enable_cdi = true\n    cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]\n'
TAIL = """    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "/etc/containerd/certs.d"

  [plugins."io.containerd.nri.v1.nri"]
    disable = true
"""


def _value(value) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return text if text in ("true", "false") else f'"{text}"'


def render(inventory: dict) -> str:
    cri = 'plugins."io.containerd.grpc.v1.cri".containerd'
    out = HEAD + (CDI if inventory.get("enable_cdi") else "")
    out += f"    [{cri}]\n"
    out += f'      default_runtime_name = "{inventory.get("containerd_default_runtime", "runc")}"\n'
    out += '      snapshotter = "overlayfs"\n      discard_unpacked_layers = true\n'
    out += f"      [{cri}.runtimes]\n"
    for runtime in [RUNC, *inventory.get("containerd_additional_runtimes", [])]:
        out += f"        [{cri}.runtimes.{runtime['name']}]\n"
        out += f'          runtime_type = "{runtime["type"]}"\n'
        out += f'          runtime_engine = "{runtime["engine"]}"\n'  # KeyError: the template's undefined error
        out += f'          runtime_root = "{runtime["root"]}"\n'
        if "base_runtime_spec" in runtime:
            out += f'          base_runtime_spec = "{CFG_DIR}/{runtime["base_runtime_spec"]}"\n'
        out += f"\n          [{cri}.runtimes.{runtime['name']}.options]\n"
        for key, value in runtime.get("options", {}).items():
            out += f"            {key} = {_value(value)}\n"
    return out + TAIL


RUNC_2X = {
    "name": "runc",
    "type": "io.containerd.runc.v2",
    "base_runtime_spec": "cri-base.json",
    "options": {"Root": "", "SystemdCgroup": "true", "BinaryName": "/usr/local/bin/runc"},
}
HEAD_2X = """

root = "/var/lib/containerd"
state = "/run/containerd"
oom_score = 0



[grpc]
  max_recv_message_size = 16777216
  max_send_message_size = 16777216

[debug]
  address = ""
  level = "info"
  format = ""
  uid = 0
  gid = 0

[metrics]
  address = ""
  grpc_histogram = false

[plugins]
  [plugins."io.containerd.cri.v1.runtime"]
    max_container_log_line_size = 16384
    enable_unprivileged_ports = false
    enable_unprivileged_icmp = false
    enable_selinux = false
    disable_apparmor = false
    tolerate_missing_hugetlb_controller = true
    disable_hugetlb_controller = true
"""
TAIL_2X = """
  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "overlayfs"
{discard}    image_pull_progress_timeout = "5m"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "registry.k8s.io/pause:3.10.2"
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = "/etc/containerd/certs.d"

  [plugins."io.containerd.nri.v1.nri"]
    disable = false

"""


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.lstrip("v").split("-")[0].split(".")[:3])


def render_2x(inventory: dict) -> str:
    """kubespray's render for containerd 2.x (version 3, or 4 from containerd 2.3 on)."""
    release = _release(inventory["containerd_version"])
    cri = 'plugins."io.containerd.cri.v1.runtime".containerd'
    out = f"version = {4 if release >= (2, 3) else 3}\n" + HEAD_2X + (CDI if inventory.get("enable_cdi") else "")
    for key, value in inventory.get("containerd_extra_runtime_args", {}).items():  # the template's types
        if isinstance(value, bool):
            out += f"    {key} = {str(value).lower()}\n"
        else:
            out += f'    {key} = "{value}"\n' if isinstance(value, str) else f"    {key} = {value}\n"
    out += f'\n   [{cri}]\n     default_runtime_name = "{inventory.get("containerd_default_runtime", "runc")}"\n'
    out += f"     [{cri}.runtimes]\n"
    for runtime in [RUNC_2X, *inventory.get("containerd_additional_runtimes", [])]:
        out += f"       [{cri}.runtimes.{runtime['name']}]\n"
        out += f'         runtime_type = "{runtime["type"]}"\n'
        if "base_runtime_spec" in runtime:
            out += f'         base_runtime_spec = "{CFG_DIR}/{runtime["base_runtime_spec"]}"\n'
        out += f"\n         [{cri}.runtimes.{runtime['name']}.options]\n"
        for key, value in runtime.get("options", {}).items():
            out += f"           {key} = {_value(value)}\n"
    discard = "    discard_unpacked_layers = true\n" if release < (2, 1) else ""
    return out + TAIL_2X.format(discard=discard)


def main() -> int:
    inventory = {}
    if os.path.exists(INVENTORY):
        with open(INVENTORY, encoding="utf-8") as handle:
            inventory = json.load(handle)
    try:
        text = (
            render_2x(inventory)
            if _release(inventory.get("containerd_version", "1.7")) >= (2, 0)
            else render(inventory)
        )
    except KeyError as exc:
        print(f"kubespray stand-in: a runtime of containerd_additional_runtimes has no {exc}", file=sys.stderr)
        return 2
    old = None
    if os.path.exists(CONFIG):
        with open(CONFIG, encoding="utf-8") as handle:
            old = handle.read()
    if old == text:
        print("ok: config.toml unchanged")
        return 0
    with open(CONFIG + ".standin-tmp", "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(CONFIG + ".standin-tmp", 0o640)
    os.replace(CONFIG + ".standin-tmp", CONFIG)
    print("changed: config.toml rendered")
    if "--no-restart" not in sys.argv[1:]:
        subprocess.run(["systemctl", "restart", "containerd"], check=True)
        print("changed: containerd restarted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
