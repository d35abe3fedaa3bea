#!/usr/bin/python3
"""TEST STAND-IN for the k3s / RKE2 binary (neither can be built or installed on the build machines).

Installed as /usr/local/bin/k3s or /usr/local/bin/rke2; the name it is called by says which. It does what the
installer's agent does to containerd at every start, as the installers document and their sources show
(k3s pkg/agent/config/config.go, pkg/agent/containerd/config.go and nvidia.go; the paths are the ones
plugins/module_utils/node_facts/installers.py cites):

  <name> --version      "<name> version v<version>" from /etc/gpunode-standin/<name>-version
  <name> server|agent   reads /etc/rancher/<name>/config.yaml and config.yaml.d/*.yaml|*.yml (alphanumeric
                        order, the last value of a key wins, lists are replaced: k3s-io/k3s#3205), renders
                        <data-dir>/agent/etc/containerd/config.toml from config.toml.tmpl when it exists
                        (`{{ template "base" . }}` is the built-in config; any other template action is an
                        error, as a broken template is for the real agent), else from the built-in config;
                        then execs containerd with -c that file and --address /run/k3s/containerd/containerd.sock.

The built-in config follows k3s's version-2 template in what matters here: the runc runtime with
SystemdCgroup, the runtimes found for nvidia-container-runtime in /usr/bin or /usr/local/nvidia/toolkit (on
versions where this stand-in claims detection, the ones gpu_node_facts does), and default_runtime_name
from the agent option default-runtime. restrict_oom_score_adj: the node containers are unprivileged.
It also records the kubelet settings it would pass (node-label, node-taint, kubelet-arg) in
<data-dir>/agent/standin-kubelet.json, for the tests, and exits as the real agent does when its kubelet refuses
them (feature gates named Unknown..., as the kubelet stand-in). Never shipped in a role.
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys

NAME = os.path.basename(sys.argv[0])
DATA_DIR = f"/var/lib/rancher/{NAME}"
BIN_DIR = f"{DATA_DIR}/bin" if NAME == "rke2" else f"{DATA_DIR}/data/current/bin"
ETC = f"{DATA_DIR}/agent/etc/containerd"
SOCKET = "/run/k3s/containerd/containerd.sock"
DETECTION_GATE = {26: 12, 27: 9, 28: 5}  # as gpu_node_facts claims it (the default-runtime releases)


def version() -> str:
    with open(f"/etc/gpunode-standin/{NAME}-version", encoding="utf-8") as handle:
        return handle.read().strip()


def detects_nvidia(text: str) -> bool:
    minor, patch = (int(part) for part in re.match(r"v?1\.(\d+)\.(\d+)", text).groups())
    return minor > max(DETECTION_GATE) or (minor in DETECTION_GATE and patch >= DETECTION_GATE[minor])


def scalar(text: str):
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


def read_agent_config() -> dict:
    """The flat key: value / key: [list] YAML the agent configs use (comments ignored)."""
    files = [f"/etc/rancher/{NAME}/config.yaml"]
    dropins = f"/etc/rancher/{NAME}/config.yaml.d"
    files += sorted(glob.glob(f"{dropins}/*.yaml") + glob.glob(f"{dropins}/*.yml"))
    config: dict = {}
    for path in files:
        if not os.path.isfile(path):
            continue
        key = None
        with open(path, encoding="utf-8") as handle:
            for raw in handle:
                line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
                if not line.strip():
                    continue
                item = re.match(r"^\s+-\s+(.*)$", line) or re.match(r"^-\s+(.*)$", line)
                if item and key is not None:
                    config[key].append(scalar(item.group(1)))
                    continue
                match = re.match(r"^([A-Za-z0-9_.+-]+):\s*(.*)$", line)
                if not match:
                    sys.exit(f"{NAME}: {path}: cannot parse line {raw!r}")
                key, value = match.group(1), match.group(2)
                if value.startswith("["):
                    config[key] = [scalar(part) for part in value.strip("[]").split(",") if part.strip()]
                    key = None
                elif value:
                    config[key] = scalar(value)
                    key = None
                else:
                    config[key] = []
    return config


def base_config(config: dict) -> str:
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    lines = [
        "version = 2",
        f'root = "{DATA_DIR}/agent/containerd"',
        'state = "/run/k3s/containerd"',
        "",
        "[grpc]",
        f'  address = "{SOCKET}"',
        "",
        '[plugins."io.containerd.internal.v1.opt"]',
        f'  path = "{DATA_DIR}/agent/containerd"',
        "",
        f"[{cri}]",
        '  stream_server_address = "127.0.0.1"',
        '  stream_server_port = "10010"',
        "  enable_selinux = false",
        "  restrict_oom_score_adj = true",
        '  sandbox_image = "rancher/mirrored-pause:3.6"',
        "",
        f"[{cri}.containerd]",
        '  snapshotter = "overlayfs"',
        "  disable_snapshot_annotations = true",
    ]
    if config.get("default-runtime"):
        lines.append(f'  default_runtime_name = "{config["default-runtime"]}"')
    lines += [
        "",
        f"[{cri}.containerd.runtimes.runc]",
        '  runtime_type = "io.containerd.runc.v2"',
        "",
        f"[{cri}.containerd.runtimes.runc.options]",
        "  SystemdCgroup = true",
    ]
    if detects_nvidia(version()):
        for directory in ("/usr/local/nvidia/toolkit", "/usr/bin"):
            binary = f"{directory}/nvidia-container-runtime"
            if os.path.isfile(binary):
                lines += [
                    "",
                    f'[{cri}.containerd.runtimes."nvidia"]',
                    '  runtime_type = "io.containerd.runc.v2"',
                    "",
                    f'[{cri}.containerd.runtimes."nvidia".options]',
                    f'  BinaryName = "{binary}"',
                    "  SystemdCgroup = true",
                ]
                break
    return "\n".join(lines) + "\n"


def render(config: dict) -> str:
    base = base_config(config)
    template_path = f"{ETC}/config.toml.tmpl"
    if not os.path.isfile(template_path):
        return base
    with open(template_path, encoding="utf-8") as handle:
        template = handle.read()
    rendered = re.sub(r"\{\{-?\s*template\s+\"base\"\s+\.\s*-?\}\}", lambda _m: base, template)
    leftover = re.search(r"\{\{.*?\}\}", rendered, re.S)
    if leftover:
        sys.exit(f"{NAME}: failed to parse {template_path}: template: unknown action {leftover.group(0)!r}")
    return rendered


def kubelet_refusal(config: dict) -> str:
    """The real agent runs the kubelet in its own process and exits when the kubelet refuses its flags; like the
    kubelet stand-in (molecule/kubelet/files/kubelet-standin) this one refuses feature gates named Unknown...
    ("unrecognized feature gate", k8s component-base featuregate)."""
    for arg in config.get("kubelet-arg", []):
        name, _, value = str(arg).lstrip("-").partition("=")
        if name == "feature-gates":
            for gate in value.split(","):
                if gate.split("=", 1)[0].strip().startswith("Unknown"):
                    return f"kubelet: unrecognized feature gate: {gate.split('=', 1)[0].strip()}"
    return ""


def run_agent() -> None:
    config = read_agent_config()
    refused = kubelet_refusal(config)
    if refused:
        sys.exit(f"{NAME}: {refused}")
    os.makedirs(ETC, exist_ok=True)
    text = render(config)
    with open(f"{ETC}/config.toml", "w", encoding="utf-8") as handle:
        handle.write(text)
    kubelet = {key: config.get(key, []) for key in ("node-label", "node-taint", "kubelet-arg")}
    with open(f"{DATA_DIR}/agent/standin-kubelet.json", "w", encoding="utf-8") as handle:
        json.dump(kubelet, handle)
    os.makedirs("/run/k3s/containerd", exist_ok=True)
    env = dict(os.environ, PATH=f"{BIN_DIR}:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}")
    argv = [f"{BIN_DIR}/containerd", "-c", f"{ETC}/config.toml", "--address", SOCKET, "--state", "/run/k3s/containerd"]
    argv += ["--root", f"{DATA_DIR}/agent/containerd"]
    os.execve(argv[0], argv, env)


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        print(f"{NAME} version {version()} (TEST STAND-IN)\ngo version go1.22.0 (TEST STAND-IN)")
    elif sys.argv[1:2] in (["server"], ["agent"]):
        run_agent()
    else:
        sys.exit(f"usage: {NAME} --version | server | agent (TEST STAND-IN)")


if __name__ == "__main__":
    main()
