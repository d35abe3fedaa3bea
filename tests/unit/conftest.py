"""Shared helpers for unit tests of modules and plugins.

This repository is the collection gpunode.provisioning: collections/ansible_collections/gpunode/provisioning links
back to the root. Tests import its code by package path, as Ansible does (sys.path below): modules through
`load_module(name)`, module_utils as ``ansible_collections.gpunode.provisioning.plugins.module_utils.<pkg>.<mod>``.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import os
import stat
import sys
from pathlib import Path

import pytest
from ansible.plugins.loader import init_plugin_loader

from tests import payload_cache, upstream
from tests.doctor_params import shared_doctor_params, shared_values
from tests.upstream import UPSTREAM_VARIABLE

ROOT = Path(__file__).resolve().parents[2]
COLLECTIONS = ROOT / "collections"
PACKAGE = "ansible_collections.gpunode.provisioning"
# Ansible's collection finder, as ansible-playbook starts it with ansible.cfg's collections_path: it imports the
# collection's packages (and Templar finds its filters by FQCN). This process only: the playbooks the tests start
# find the collection as a user's do (ansible.cfg), not through a variable this file would export.
init_plugin_loader([str(COLLECTIONS)])


def load_module(name: str, subdir: str = "plugins/modules"):
    """The collection's ``<subdir>/<name>.py`` (plugins/modules, plugins/filter, ...), imported by package path."""
    return importlib.import_module(f"{PACKAGE}.{subdir.replace('/', '.')}.{name}")


def gather_node_facts(*args, **kwargs) -> dict:
    """modules/gpu_node_facts.py's gather_gpu_node_facts with the toolkit config path its role passes (the value's
    one home, roles/gpu_node_facts/vars/main.yml)."""
    module = load_module("gpu_node_facts")
    return module.gather_gpu_node_facts(
        *args, toolkit_config=shared_values()["__gpu_node_facts_toolkit_config"], **kwargs
    )


def render_role_value(expression: str, variables: dict):
    """`expression` rendered by Ansible's Templar as a role's task would see it: every string in `variables` (nested
    too) is a trusted template (the project's filters load as ansible.cfg says)."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    def trusted(value):
        if isinstance(value, str):
            return trust_as_template(value)
        if isinstance(value, dict):
            return {key: trusted(item) for key, item in value.items()}
        if isinstance(value, list):
            return [trusted(item) for item in value]
        return value

    templar = Templar(loader=DataLoader(), variables={key: trusted(value) for key, value in variables.items()})
    return templar.template(trust_as_template(expression))


# The roles on site.yml's no-op path whose platform data gpu_node_facts' vars/<platform>.yml holds (loaded once per play
# by that dependency, issue 47), and the prefix of their names there (gpu_node_facts' own: the other names);
# nvidia_driver and nvidia_mig keep theirs in their own vars/.
PLATFORM_DATA_IN_GPU_NODE_FACTS = {
    "nvidia_container_toolkit": "__gpu_node_facts_toolkit_",
    "security_profiles": "__gpu_node_facts_security_",
    "kubelet": "__gpu_node_facts_kubelet_getsubids_",
    "gpu_validate": "__gpu_node_facts_validate_",
}


def platform_names(role: str, data: dict) -> dict:
    """The entries of one of gpu_node_facts' platform files that are ``role``'s platform data."""
    prefixes = tuple(PLATFORM_DATA_IN_GPU_NODE_FACTS.values())
    if role == "gpu_node_facts":
        return {key: value for key, value in data.items() if not key.startswith(prefixes)}
    return {key: value for key, value in data.items() if key.startswith(PLATFORM_DATA_IN_GPU_NODE_FACTS[role])}


def platform_file(role: str, distribution: str, version: str, family: str) -> Path:
    """The vars file that holds a role's platform data on a node with these facts: the first of gpu_node_facts'
    __gpu_node_facts_platform_files found in the vars/ of the role whose tasks/set_vars.yml loads it (gpu_node_facts
    for the roles of PLATFORM_DATA_IN_GPU_NODE_FACTS)."""
    import yaml

    if role in PLATFORM_DATA_IN_GPU_NODE_FACTS:
        role = "gpu_node_facts"

    facts = {
        "distribution": distribution,
        "distribution_version": version,
        "distribution_major_version": version.split(".")[0],
        "os_family": family,
    }
    shared = yaml.safe_load((ROOT / "roles" / "gpu_node_facts" / "vars" / "main.yml").read_text())
    variables = {**shared, "ansible_facts": facts, "role_path": str(ROOT / "roles" / role)}
    names = render_role_value("{{ __gpu_node_facts_platform_files.files }}", variables)
    (directory,) = render_role_value("{{ __gpu_node_facts_platform_files.paths }}", variables)
    return next(Path(directory) / name for name in names if (Path(directory) / name).is_file())


def documented_options(module) -> dict:
    """A module's options as ansible-doc shows them: its own, over those of the project's doc fragment."""
    import yaml

    doc = yaml.safe_load(module.DOCUMENTATION)
    options = {}
    if "gpunode.provisioning.gpunode_file_write" in doc.get("extends_documentation_fragment", []):
        fragment = load_module("gpunode_file_write", subdir="plugins/doc_fragments").ModuleDocFragment
        options.update(yaml.safe_load(fragment.DOCUMENTATION)["options"])
    options.update(doc["options"])
    return options


class ModuleExit(Exception):
    """Raised in place of AnsibleModule.exit_json; .result holds what it returned."""

    def __init__(self, result: dict, failed: bool):
        super().__init__(json.dumps(result, default=str))
        self.result = result
        self.failed = failed


def run_module(module, args: dict, check_mode: bool = False, diff: bool = False) -> ModuleExit:
    """Run `module.main()` with `args`; returns the ModuleExit (failed or not)."""
    from unittest import mock

    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args

    full = dict(args)
    full["_ansible_check_mode"] = check_mode
    full["_ansible_diff"] = diff
    full.setdefault("_ansible_remote_tmp", "/tmp")
    full.setdefault("_ansible_keep_remote_files", False)

    def _exit(self, **kwargs):
        raise ModuleExit(kwargs, failed=False)

    def _fail(self, msg, **kwargs):
        kwargs["msg"] = msg
        kwargs["failed"] = True
        raise ModuleExit(kwargs, failed=True)

    with (
        patch_module_args(full),
        mock.patch.object(basic.AnsibleModule, "exit_json", _exit),
        mock.patch.object(basic.AnsibleModule, "fail_json", _fail),
    ):
        try:
            module.main()
        except ModuleExit as exc:
            return exc
    raise AssertionError("module returned without calling exit_json or fail_json")


@pytest.fixture
def module_runner():
    return run_module


def upstream_path(environ=os.environ) -> Path:
    """The directory of upstream builds the tests take as inputs (containerd, CRI-O, NVIDIA's toolkit, each with its
    BUILD.md): $GPUNODE_UPSTREAM_DIR, else <project>/../shared/upstream. Missing: the test fails, naming the
    variable (never a skip)."""
    path = upstream.upstream_dir(environ)
    if not path.is_dir():
        pytest.fail(
            f"the upstream builds are not at {path}: set {UPSTREAM_VARIABLE} to the directory that holds containerd/,"
            " cri-o/ and nvidia-container-toolkit/ (built from source, see their BUILD.md)",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def upstream_dir() -> Path:
    """upstream_path() for the tests that run upstream's builds (e.g. containerd 2.3.4 as the oracle)."""
    return upstream_path()


@pytest.fixture(scope="module", autouse=True)
def module_payloads_compiled_once(tmp_path_factory):
    """The playbooks these tests run against this machine (ansible-playbook, ansible-doc and the modules they start)
    get the TEST HARNESS compile cache of molecule's nodes through tests/unit/bytecode_site/sitecustomize.py, one
    cache for the session: each task's module compiled Ansible's module_utils again otherwise; and the TEST HARNESS
    payload cache (tests/payload_cache.py): each run built each module's payload again otherwise."""
    site = [ROOT / "tests" / "unit" / "bytecode_site", ROOT / "molecule" / "resources" / "bytecode_cache"]
    env = payload_cache.environment(dict(os.environ), [*site, payload_cache.SITE])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", env["PYTHONPATH"])
        patch.setenv(payload_cache.VARIABLE, env[payload_cache.VARIABLE])
        patch.setenv("GPUNODE_BYTECODE_CACHE", str(tmp_path_factory.getbasetemp() / "bytecode-cache"))
        # the compiled-template cache (plugins/plugin_utils/template_cache.py) of the session, not the user's
        patch.setenv("GPUNODE_TEMPLATE_CACHE", str(tmp_path_factory.getbasetemp() / "template-cache"))
        yield


@pytest.fixture(autouse=True)
def backup_root(tmp_path_factory, monkeypatch):
    """Every test's backups and lock files go to a fresh tree of its own, never the host's /var/backups."""
    from ansible_collections.gpunode.provisioning.plugins.module_utils.files import edit as file_edit

    root = tmp_path_factory.mktemp("backups")
    monkeypatch.setattr(file_edit, "BACKUP_ROOT", str(root), raising=False)
    return root


def local_playbook_command(playbook, *extra: str) -> list[str]:
    """The command line of ansible-playbook PLAYBOOK against localhost with this venv's python (run it in ROOT)."""
    return [
        str(Path(sys.executable).parent / "ansible-playbook"),
        "-i",
        "localhost,",
        "-e",
        json.dumps({"ansible_python_interpreter": sys.executable}),
        *extra,
        str(playbook),
    ]


def run_local_playbook(playbook, *extra: str):
    """ansible-playbook PLAYBOOK against localhost with this venv's python (controller-side tests);
    the CompletedProcess, whatever its exit code."""
    import subprocess

    return subprocess.run(
        local_playbook_command(playbook, *extra), cwd=ROOT, capture_output=True, text=True, check=False
    )


def doctor_params(checks) -> dict:
    """gpu_validate_checks' parameters as the role passes them: the module's defaults and the shared values."""
    return {**{key: spec.get("default") for key, spec in checks.ARGUMENT_SPEC.items()}, **shared_doctor_params()}


def role_defaults(role: str) -> dict:
    """A role's defaults/main.yml with the shared values it takes from gpu_node_facts filled in, as Ansible does."""
    import yaml

    text = (ROOT / "roles" / role / "defaults" / "main.yml").read_text()
    for name, value in shared_values().items():
        if isinstance(value, str):
            text = text.replace('"{{ ' + name + ' }}"', json.dumps(value))
    return yaml.safe_load(text)


# ---- the doctor (gpu_validate_checks and its families in plugins/module_utils/gpu_validate/*.py) ---------------

PARAMS = doctor_params(load_module("gpu_validate_checks"))

GPU_NODE = {
    "has_gpu": True,
    "gpu_count": 2,
    "nouveau_loaded": False,
    "driver": {"loaded": True, "version": "580.95.05", "modules": ["nvidia", "nvidia_uvm", "nvidia_peermem"]},
    "nvidia_smi": "/usr/bin/nvidia-smi",
    "kubelet": {"installed": True, "running": True, "version": "1.31.2"},
    "apparmor_enabled": True,
    "apparmor": {"kernel_enabled": True, "securityfs": True},
}
NO_GPU = {**GPU_NODE, "has_gpu": False, "gpu_count": 0, "driver": {"loaded": False, "version": "", "modules": []}}
MISSING = (2, "", "[Errno 2] No such file or directory: 'x'")


def params(**overrides) -> dict:
    return {**PARAMS, **overrides}


def node(**overrides) -> dict:
    return {**GPU_NODE, **overrides}


def row(check, status, detail, fix=""):
    return {"check": check, "status": status, "detail": detail, "fix": fix}


def _tool(version):
    return {"installed": version is not None, "version": version, "running": version is not None}


def stack_facts(kernel="6.1.0", containerd="1.6.20", runc="1.1.5", kubelet=None, apparmor=False, fuse=True):
    """The gpu_node facts of a node's kernel and container stack, as the confinement rows read them
    (default: today's Debian 12 node with docker, containerd 1.6 and runc 1.1, no kubelet, no AppArmor)."""
    return {
        "kernel": {"release": f"{kernel}-28-amd64", "version": kernel, "max_user_namespaces": 63413, "seccomp": True},
        "runtimes": {"docker": _tool("20.10.24"), "containerd": _tool(containerd), "crio": _tool(None)},
        "oci_runtimes": {"runc": _tool(runc), "crun": _tool(None)},
        "kubelet": _tool(kubelet),
        "apparmor_enabled": apparmor,
        "fuse": {"device": fuse},
    }


class FakeNode:
    """The node the doctor's checks read (gpu_validate_host.Node) as a fake: commands answer from a table (a missing
    one as a missing binary), files from a dict; records what ran."""

    def __init__(self, commands=None, files=None, devices=(), mtimes=None, which=()):
        self.commands = {tuple(k): v for k, v in (commands or {}).items()}
        self.mtimes = dict(mtimes or {})
        self.found = set(which)
        self.files = dict(files or {})
        # device nodes: a set of paths, or {path: (major, minor)} where the numbers matter
        self.devices = dict(devices) if isinstance(devices, dict) else {path: (0, 0) for path in devices}
        self.ran = []

    def run(self, argv, timeout=None):
        self.ran.append(list(argv))
        return self.commands.get(tuple(argv), MISSING)

    def which(self, name, opt_dirs):
        return f"/usr/bin/{name}" if name in self.found else None

    def lstat(self, path):
        if path in self.devices:
            rdev = os.makedev(*self.devices[path])
            return os.stat_result((stat.S_IFCHR | 0o666, 0, 0, 0, 0, 0, 0, 0, 0, 0), {"st_rdev": rdev})
        if path in self.files:
            return os.stat_result((stat.S_IFREG | 0o644, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        return None

    def read(self, path):
        return self.files.get(path)

    def mtime(self, path):
        return self.mtimes.get(path)

    def glob(self, pattern):
        return sorted(p for p in {**self.mtimes, **self.files} if fnmatch.fnmatch(p, pattern))

    def boot_time(self):
        return 1_700_000_000.0


def fake_node_files(module_args: dict, files: dict, directories) -> dict:
    """What modules/node_files.py returns for ``module_args`` on a fake node of ``files`` ({path: text or bytes})
    and ``directories``: for the action plugins' tests, whose fake nodes answer module runs themselves."""
    import base64

    found = []
    for entry in module_args["files"]:
        path = entry["path"]
        exists = path in files or path in directories
        one = {"path": path, "stat": {"exists": exists, "isdir": path in directories} if exists else {"exists": False}}
        if entry.get("content"):
            if path in files:
                data = files[path] if isinstance(files[path], bytes) else files[path].encode()
                one.update({"content": base64.b64encode(data).decode(), "encoding": "base64", "source": path})
            else:
                reason = "source is a directory and must be a file" if exists else "file not found"
                one.update({"failed": True, "msg": f"{reason}: {path}"})
        found.append(one)
    return {"changed": False, "files": found}


def local_play(path, **play) -> Path:
    """Write a one-play playbook against localhost (local connection, no facts) with ``play``'s keys to ``path``."""
    import yaml

    path.write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False, **play}]))
    return path
