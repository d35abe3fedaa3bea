"""A CRI client for the tests: the kubelet's path into a container runtime, without a kubelet.

Neither crictl nor the kubelet is packaged for the build machines, but the CRI API's proto is:
Debian forky/sid's ``golang-k8s-cri-api-dev`` ships ``k8s.io/cri-api/pkg/apis/runtime/v1/api.proto``.
At test time this module downloads that package with apt (a private apt state under the cache directory,
the host's own keyring) from the first suite of ARCHIVES that can serve it (testing drops and regains packages,
so it does not rely on one suite), says which one on stderr, extracts ``api.proto`` and generates the Python
stubs with grpcio-tools into the cache directory (``.cache/cri-api`` in the repository, git-ignored). No
generated code is committed.

    from tests.cri.client import CriClient, node_socket
    with CriClient(node_socket("rc-debian12")) as cri:
        cri.status()

``CRI_API_PROTO=/path/to/api.proto`` skips the download.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("CRI_API_CACHE", ROOT / ".cache" / "cri-api"))
PACKAGE = "golang-k8s-cri-api-dev"
# where golang-k8s-cri-api-dev with runtime/v1's api.proto can be had, most likely first; testing's Release file
# may be past its Valid-Until on the mirrors
ARCHIVES = (
    "deb [check-valid-until=no] http://deb.debian.org/debian forky main",
    "deb [check-valid-until=no] http://deb.debian.org/debian sid main",
    "deb http://deb.debian.org/debian trixie-backports main",
)
PROTO_IN_PACKAGE = "k8s.io/cri-api/pkg/apis/runtime/v1/api.proto"
CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
CRIO_SOCKET = "/run/crio/crio.sock"  # not /var/run: an absolute symlink, which /proc/<pid>/root cannot follow


def _apt(state: Path, *args: str, cwd: Path | None = None) -> None:
    options = [
        f"-oDir::Etc::SourceList={state / 'sources.list'}",
        "-oDir::Etc::SourceParts=/dev/null",
        f"-oDir::State::Lists={state / 'lists'}",
        f"-oDir::Cache={state / 'cache'}",
        "-oDebug::NoLocking=1",
        "-oAPT::Sandbox::User=root",
    ]
    subprocess.run(["apt-get", "-qq", *options, *args], check=True, cwd=cwd, capture_output=True, text=True)


def proto_file() -> Path:
    """The CRI API's api.proto: $CRI_API_PROTO, the cached copy, or freshly extracted from the Debian package."""
    if os.environ.get("CRI_API_PROTO"):
        return Path(os.environ["CRI_API_PROTO"])
    target = CACHE / "api.proto"
    if target.exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    tried = []
    for archive in ARCHIVES:
        with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
            state = Path(tmp)
            for sub in ("lists/partial", "cache/archives/partial", "x"):
                (state / sub).mkdir(parents=True)
            (state / "sources.list").write_text(archive + "\n")
            try:
                _apt(state, "update")
                _apt(state, "download", PACKAGE, cwd=state)
            except subprocess.CalledProcessError as exc:
                tried.append(f"{archive}: {(exc.stderr or exc.stdout or '').strip()[-300:]}")
                continue
            deb = next(state.glob(f"{PACKAGE}_*.deb"))
            subprocess.run(["dpkg-deb", "-x", str(deb), str(state / "x")], check=True)
            found = [p for p in (state / "x").rglob("api.proto") if str(p).endswith(PROTO_IN_PACKAGE)]
            if not found:
                tried.append(f"{archive}: {deb.name} has no {PROTO_IN_PACKAGE}")
                continue
            print(f"CRI API proto: {deb.name} from '{archive}'", file=sys.stderr)
            shutil.copyfile(found[0], state / "api.proto")
            os.replace(state / "api.proto", target)  # atomic: two scenarios may run this at the same time
            return target
    raise RuntimeError(
        f"no archive serves {PACKAGE} with {PROTO_IN_PACKAGE}; tried:\n"
        + "\n".join(tried)
        + "\nFix: point CRI_API_PROTO at a copy of the CRI API's api.proto (k8s.io/cri-api)."
    )


def stubs():
    """The generated modules (api_pb2, api_pb2_grpc), generated once per proto content into the cache."""
    proto = proto_file()
    digest = hashlib.sha256(proto.read_bytes()).hexdigest()[:16]
    out = CACHE / f"gen-{digest}"
    if not (out / "api_pb2_grpc.py").exists():
        tmp = Path(tempfile.mkdtemp(dir=CACHE))
        shutil.copyfile(proto, tmp / "api.proto")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                f"-I{tmp}",
                f"--python_out={tmp}",
                f"--grpc_python_out={tmp}",
                str(tmp / "api.proto"),
            ],
            check=True,
        )
        (tmp / "api.proto").unlink()
        try:
            tmp.rename(out)
        except OSError:  # another scenario generated them meanwhile
            shutil.rmtree(tmp)
    if str(out) not in sys.path:
        sys.path.insert(0, str(out))
    return importlib.import_module("api_pb2"), importlib.import_module("api_pb2_grpc")


def log_streams(text: str) -> dict[str, list[str]]:
    """A CRI container log (``<time> <stream> <tag> <text>`` per entry, the format the kubelet reads) split by
    stream: {"stdout": [lines], "stderr": [lines]}. The runtime writes the two streams as they come, so their
    entries interleave in any order: read each stream on its own, never the file's line order across streams.
    Tag ``P`` marks a partial entry that the next entry of the same stream continues; ``F`` ends a line."""
    streams: dict[str, list[str]] = {"stdout": [], "stderr": []}
    partial: dict[str, str] = {}
    for entry in text.splitlines():
        fields = entry.split(" ", 3)
        if len(fields) < 3 or fields[1] not in streams:
            raise ValueError(f"not a CRI log entry: {entry!r}")
        stream, tag, line = fields[1], fields[2], fields[3] if len(fields) == 4 else ""
        if tag.split(":")[0] == "P":
            partial[stream] = partial.get(stream, "") + line
            continue
        streams[stream].append(partial.pop(stream, "") + line)
    for stream, line in partial.items():  # a last partial entry without its end
        streams[stream].append(line)
    return streams


def node_socket(container: str, path: str = CONTAINERD_SOCKET) -> str:
    """gRPC address of a unix socket inside a node container, reached through /proc/<pid>/root (needs root)."""
    pid = subprocess.run(
        ["docker", "inspect", "--format", "{{.State.Pid}}", container], check=True, capture_output=True, text=True
    ).stdout.strip()
    return f"unix:///proc/{pid}/root{path}"


def crio_client(container: str, cgroup_manager: str, **kwargs) -> CriClient:
    """A CRI client for CRI-O in a node container, as that node's kubelet: a cgroupfs parent where CRI-O runs
    cgroupfs (it refuses a slice there), a slice with systemd, and a PID namespace per container (the kubelet's
    default; CRI-O then starts no pause container, whose oom_score_adj of -998 a node container cannot set).
    ``cgroup_manager``: [crio.runtime] cgroup_manager of the running CRI-O (`crio status config`)."""
    parent = "/gpunode_test" if cgroup_manager == "cgroupfs" else "gpunode_test.slice"
    return CriClient(node_socket(container, CRIO_SOCKET), cgroup_parent=parent, pid_per_container=True, **kwargs)


def _proto_value(message, value: str):
    """KeyValue.value is a string in older CRI protos and bytes in newer ones (k8s.io/cri-api >= 1.34)."""
    field = message.DESCRIPTOR.fields_by_name["value"]
    return value.encode() if field.type == field.TYPE_BYTES else value


class CriClient:
    """The few CRI RuntimeService calls the tests need (what a kubelet does to start a pod)."""

    def __init__(
        self,
        address: str,
        timeout: float = 60,
        cgroup_parent: str = "gpunode_test.slice",
        pid_per_container: bool = False,
    ):
        """``cgroup_parent``: the pods' parent cgroup, as the kubelet gives it: a systemd slice (cgroupDriver
        systemd; containerd takes it with cgroupfs too), or a cgroupfs path where the runtime uses cgroupfs
        (CRI-O refuses a slice there). ``pid_per_container``: each container its own PID namespace, as the
        kubelet asks unless a pod shares its process namespace; CRI-O then runs no infra (pause) container,
        whose oom_score_adj of -998 a node container cannot set."""
        import grpc

        self.pb, pb_grpc = stubs()
        self.grpc = grpc
        self.timeout = timeout
        self.cgroup_parent = cgroup_parent
        self.pid = {"pid": self.pb.CONTAINER} if pid_per_container else {}
        self.channel = grpc.insecure_channel(address)
        self.runtime = pb_grpc.RuntimeServiceStub(self.channel)
        self.images = pb_grpc.ImageServiceStub(self.channel)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.channel.close()

    def status(self):
        return self.runtime.Status(self.pb.StatusRequest(verbose=False), timeout=self.timeout).status

    def runtime_ready(self) -> bool:
        return any(c.type == "RuntimeReady" and c.status for c in self.status().conditions)

    def sandbox_config(self, name: str):
        pb = self.pb
        return pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=f"{name}-{time.time_ns()}", namespace="gpunode-test"),
            log_directory=f"/var/log/pods/gpunode-test_{name}",
            linux=pb.LinuxPodSandboxConfig(
                # a systemd slice, as a kubelet with cgroupDriver=systemd gives (works with cgroupfs too)
                cgroup_parent=self.cgroup_parent,
                security_context=pb.LinuxSandboxSecurityContext(
                    namespace_options=pb.NamespaceOption(network=pb.NODE, **self.pid),
                ),
            ),
        )

    def run_pod_sandbox(self, name: str, handler: str) -> tuple[str, object]:
        config = self.sandbox_config(name)
        response = self.runtime.RunPodSandbox(
            self.pb.RunPodSandboxRequest(config=config, runtime_handler=handler), timeout=self.timeout
        )
        return response.pod_sandbox_id, config

    def sandbox_runtime_handler(self, sandbox_id: str) -> str:
        status = self.runtime.PodSandboxStatus(self.pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id))
        return status.status.runtime_handler

    def start_container(self, sandbox_id: str, sandbox_config, image: str, command: list[str]) -> str:
        pb = self.pb
        config = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name="main"),
            image=pb.ImageSpec(image=image),
            command=command,
            log_path="main.log",
        )
        if self.pid:
            namespaces = pb.NamespaceOption(network=pb.NODE, **self.pid)
            config.linux.security_context.namespace_options.CopyFrom(namespaces)
        created = self.runtime.CreateContainer(
            pb.CreateContainerRequest(pod_sandbox_id=sandbox_id, config=config, sandbox_config=sandbox_config),
            timeout=self.timeout,
        )
        self.runtime.StartContainer(pb.StartContainerRequest(container_id=created.container_id), timeout=self.timeout)
        return created.container_id

    def container_state(self, container_id: str) -> str:
        status = self.runtime.ContainerStatus(self.pb.ContainerStatusRequest(container_id=container_id))
        return self.pb.ContainerState.Name(status.status.state)

    def try_pod(self, name: str, handler: str, image: str, command: list[str]) -> tuple[str | None, str | None]:
        """Start a pod (sandbox + one container) as a kubelet would, then remove it.

        Returns (sandbox id, None) when its container ran, or (sandbox id or None, error text) when a call
        failed: the sandbox id is then taken from containerd's message ('failed to start sandbox "<id>"')."""
        sandbox = None
        try:
            sandbox, config = self.run_pod_sandbox(name, handler)
            container = self.start_container(sandbox, config, image, command)
            state = self.container_state(container)
            return sandbox, (None if state == "CONTAINER_RUNNING" else f"container state {state}")
        except self.grpc.RpcError as exc:
            found = re.search(r'sandbox "([0-9a-f]{64})"', exc.details() or "")
            return sandbox or (found.group(1) if found else None), exc.details()
        finally:
            if sandbox is not None:
                self.remove_pod(sandbox)

    def remove_pod(self, sandbox_id: str) -> None:
        self.runtime.StopPodSandbox(self.pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=self.timeout)
        self.runtime.RemovePodSandbox(self.pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=self.timeout)

    def run_to_completion(
        self,
        name: str,
        image: str,
        command: list[str],
        *,
        host_ids: tuple[int, int] | None = None,
        devices: tuple[str, ...] = (),
        add_capabilities: tuple[str, ...] = (),
        wait: float = 60,
    ) -> tuple[int, str]:
        """Run a pod of one container to its end, as a kubelet does, and remove it.

        ``host_ids=(first host ID, count)``: the pod gets its own user namespace mapping container IDs
        0..count-1 to those host IDs (what the kubelet asks for a pod with hostUsers: false; the pod then
        needs its own network namespace, so the node needs a CNI network). Without it the pod runs in the
        node's user namespace (hostUsers: true). Returns (exit code, path of the container's log on the node).
        """
        pb = self.pb
        namespaces = pb.NamespaceOption(network=pb.NODE, **self.pid)
        if host_ids is not None:
            ids = [pb.IDMapping(host_id=host_ids[0], container_id=0, length=host_ids[1])]
            namespaces = pb.NamespaceOption(
                network=pb.POD, userns_options=pb.UserNamespace(mode=pb.POD, uids=ids, gids=ids)
            )
        uid = f"{name}-{time.time_ns()}"
        sandbox_config = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace="gpunode-test"),
            log_directory=f"/var/log/pods/gpunode-test_{name}_{uid}",
            linux=pb.LinuxPodSandboxConfig(
                cgroup_parent=self.cgroup_parent,
                security_context=pb.LinuxSandboxSecurityContext(namespace_options=namespaces),
            ),
        )
        sandbox = self.runtime.RunPodSandbox(
            pb.RunPodSandboxRequest(config=sandbox_config, runtime_handler=""), timeout=self.timeout
        ).pod_sandbox_id
        try:
            config = pb.ContainerConfig(
                metadata=pb.ContainerMetadata(name="main"),
                image=pb.ImageSpec(image=image),
                command=command,
                log_path="main.log",
                devices=[pb.Device(container_path=d, host_path=d, permissions="rwm") for d in devices],
                linux=pb.LinuxContainerConfig(
                    security_context=pb.LinuxContainerSecurityContext(
                        capabilities=pb.Capability(add_capabilities=list(add_capabilities)),
                        namespace_options=namespaces,
                    )
                ),
            )
            container = self.runtime.CreateContainer(
                pb.CreateContainerRequest(pod_sandbox_id=sandbox, config=config, sandbox_config=sandbox_config),
                timeout=self.timeout,
            ).container_id
            self.runtime.StartContainer(pb.StartContainerRequest(container_id=container), timeout=self.timeout)
            deadline = time.monotonic() + wait
            while True:
                status = self.runtime.ContainerStatus(pb.ContainerStatusRequest(container_id=container)).status
                if status.state == pb.CONTAINER_EXITED:
                    return status.exit_code, status.log_path
                if time.monotonic() > deadline:
                    raise TimeoutError(f"container {container} of pod {name} still {status.state} after {wait} s")
                time.sleep(0.5)
        finally:
            self.remove_pod(sandbox)

    def run_probe(
        self,
        name: str,
        handler: str,
        image: str,
        command: list[str],
        *,
        pod_annotations: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        mounts: tuple[tuple[str, str], ...] = (),
        envs: dict[str, str] | None = None,
        add_capabilities: tuple[str, ...] = (),
        wait: float = 60,
    ) -> tuple[int | None, str]:
        """Run a pod of one container through runtime handler ``handler`` as a kubelet would, and remove it.

        ``pod_annotations`` go on the pod sandbox (what a pod's metadata.annotations become), ``annotations`` on
        the container (a kubelet puts there only what device plugins return), ``mounts`` are (host path,
        container path) binds (an emptyDir or hostPath volume). Returns (exit code, path of the container's log on
        the node) when the container ran to its end, or (None, the runtime's error) when the sandbox or the
        container failed."""
        pb = self.pb
        namespaces = pb.NamespaceOption(network=pb.NODE, **self.pid)
        uid = f"{name}-{time.time_ns()}"
        log_dir = f"/var/log/pods/gpunode-test_{name}_{uid}"
        sandbox_config = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace="gpunode-test"),
            log_directory=log_dir,
            annotations=pod_annotations or {},
            linux=pb.LinuxPodSandboxConfig(
                cgroup_parent=self.cgroup_parent,
                security_context=pb.LinuxSandboxSecurityContext(namespace_options=namespaces),
            ),
        )
        sandbox = None
        try:
            sandbox = self.runtime.RunPodSandbox(
                pb.RunPodSandboxRequest(config=sandbox_config, runtime_handler=handler), timeout=self.timeout
            ).pod_sandbox_id
            config = pb.ContainerConfig(
                metadata=pb.ContainerMetadata(name="main"),
                image=pb.ImageSpec(image=image),
                command=command,
                log_path="main.log",
                annotations=annotations or {},
                envs=[pb.KeyValue(key=k, value=_proto_value(pb.KeyValue, v)) for k, v in (envs or {}).items()],
                mounts=[pb.Mount(host_path=h, container_path=c) for h, c in mounts],
                linux=pb.LinuxContainerConfig(
                    security_context=pb.LinuxContainerSecurityContext(
                        capabilities=pb.Capability(add_capabilities=list(add_capabilities)),
                        namespace_options=namespaces,
                    )
                ),
            )
            container = self.runtime.CreateContainer(
                pb.CreateContainerRequest(pod_sandbox_id=sandbox, config=config, sandbox_config=sandbox_config),
                timeout=self.timeout,
            ).container_id
            self.runtime.StartContainer(pb.StartContainerRequest(container_id=container), timeout=self.timeout)
            deadline = time.monotonic() + wait
            while True:
                status = self.runtime.ContainerStatus(pb.ContainerStatusRequest(container_id=container)).status
                if status.state == pb.CONTAINER_EXITED:
                    return status.exit_code, status.log_path
                if time.monotonic() > deadline:
                    raise TimeoutError(f"container {container} of pod {name} still {status.state} after {wait} s")
                time.sleep(0.5)
        except self.grpc.RpcError as exc:
            return None, exc.details() or str(exc)
        finally:
            if sandbox is not None:
                self.remove_pod(sandbox)
