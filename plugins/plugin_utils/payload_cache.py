# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Module payloads kept from one run to the next on the controller (issue 47).

Before a module runs on a node, ansible-core builds its AnsiballZ payload: it parses the module and every
``module_utils`` file it imports, finds their imports (``recursive_finder`` in ansible/executor/module_common.py)
and zips them. It keeps the payload for the rest of the run only, in the run's own temporary directory
(``<DEFAULT_LOCAL_TMP>/ansiballz_cache/<module FQN>-<compression>-<extensions>``, a pickled ``_CachedModule``), so
every run builds each module again: 0.1 to 0.2 controller CPU seconds a module on the build machines, a quarter of a
one-node no-op re-run of site.yml (four modules, bench/README.md).

This keeps a copy. After a module of this project's actions is built, ``store`` copies the run's payload file to
the cache directory with the SHA-256 of every source file it was built from (the payload's own ``source_mapping``:
the module and each module_utils file, by their controller paths). Before one is built, ``restore`` puts the copy
back where ansible-core looks for the run's payload, but only when every one of those files still has the bytes it
had, the copy has the bytes it was stored with, and ansible-core's version, Python's and the module's path are the
ones it was built with; anything else, or any error, leaves ansible-core to build it as before. Only payloads built
from ansible-core's own module_utils and the module's own collection are kept (their imports cannot resolve
elsewhere), and none where a debugger or coverage extension is in the payload.

Where: ``$GPUNODE_MODULE_CACHE``, else ``<ANSIBLE_HOME>/gpunode/payloads`` (~/.ansible/gpunode/payloads);
``GPUNODE_MODULE_CACHE=off`` turns it off. The directory is made with mode 0700 and used only while it belongs to
this user and nobody else may write to it (the files are pickles). A run in a fresh container (an AWX or AAP
execution environment) starts without the copies, as ansible-core does.

The layout followed is ansible-core 2.19's (``SERIES``): under another series nothing is restored or stored.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import pickle
import stat
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import NamedTuple

import ansible
from ansible import constants as C
from ansible.executor import module_common
from ansible.plugins.action import ActionBase as _ActionBase
from ansible.release import __version__ as ANSIBLE_CORE_VERSION
from ansible.utils.display import Display

display = Display()

# The environment variable that names the cache directory, or turns the cache off.
ENV = "GPUNODE_MODULE_CACHE"
OFF = ("off", "0", "false", "no")

# The ansible-core series whose per-run payload files this follows (executor/module_common.py, _find_module_utils).
SERIES = ("2.19.",)

_ANSIBLE_DIR = os.path.realpath(os.path.dirname(ansible.__file__))


class Slot(NamedTuple):
    """A module whose payload the run has not built yet: where ansible-core keeps it for the run, and our copy."""

    fqn: str
    module_path: str
    run_file: str
    entry: Path


def controller_cache_dir(env: str, name: str) -> Path | None:
    """A controller cache's directory: the one the environment variable ``env`` names, None where it says off, else
    ``<ANSIBLE_HOME>/gpunode/<name>``."""
    value = os.environ.get(env, "").strip()
    if value.lower() in OFF:
        return None
    if value:
        return Path(value).expanduser()
    return Path(getattr(C, "ANSIBLE_HOME", "~/.ansible")).expanduser() / "gpunode" / name


def cache_dir() -> Path | None:
    """The cache directory, or None where it is turned off."""
    return controller_cache_dir(ENV, "payloads")


def private_dir(path: Path, create: bool) -> bool:
    """Whether ``path`` is a directory of this user that nobody else may write to (made, mode 0700, if asked)."""
    if create:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        st = path.lstat()
    except FileNotFoundError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def sha256_file(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def collection_root(module_path: str) -> str | None:
    """The real path of ``.../ansible_collections/<namespace>/<name>`` of a collection's module, None for others."""
    parts = Path(module_path).parts
    if "ansible_collections" not in parts:
        return None
    i = len(parts) - 1 - parts[::-1].index("ansible_collections")
    return os.path.realpath(Path(*parts[: i + 3])) if len(parts) > i + 3 else None


def sources_of(names, fqn: str, module_path: str) -> dict[str, str | None] | None:
    """The controller file each payload member comes from (None: a namespace package's empty __init__.py, which
    ansible-core makes up); None where a member comes from anywhere but ansible-core or the module's collection."""
    root = collection_root(module_path)
    own = fqn.split(".")[:3]  # ansible_collections, namespace, name
    if root is None or own[0] != "ansible_collections":
        return None
    sources: dict[str, str | None] = {}
    for name in names:
        parts = name.split("/")
        if parts[0] == "ansible" and len(parts) > 1:
            sources[name] = os.path.join(_ANSIBLE_DIR, *parts[1:])
        elif parts[0] != "ansible_collections":
            return None
        elif len(parts) <= 3 and parts[-1] == "__init__.py":
            sources[name] = None
        elif parts[1:3] == own[1:3]:
            sources[name] = os.path.join(root, *parts[3:])
        else:
            return None
    return sources


def digests_of(sources: dict[str, str | None]) -> dict[str, str | None]:
    """SHA-256 of each member's controller file ("absent" where there is none), None for the made-up ones."""
    return {name: None if path is None else (sha256_file(path) or "absent") for name, path in sources.items()}


def zip_names(payload: bytes) -> list[str]:
    """The members of a run's payload file (a pickled _CachedModule, whose zip_data is the zip in base64)."""
    cached = pickle.loads(payload)  # ansible-core's own file, written by this run
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(cached.zip_data))) as zf:
        return zf.namelist()


def slot_for(action: _ActionBase, module_name: str, task_vars: dict) -> Slot | None:
    """The module's Slot where the cache applies and ansible-core has not built its payload in this run yet."""
    if not ANSIBLE_CORE_VERSION.startswith(SERIES):
        return None
    directory = cache_dir()
    if directory is None:
        return None
    prefs = tuple(action._connection.module_implementation_preferences)
    if ".ps1" in prefs:
        return None
    module_path = None
    for mod_type in prefs:
        found = action._shared_loader_obj.module_loader.find_plugin_with_context(
            module_name, mod_type, collection_list=action._task.collections
        )
        module_path = found.plugin_resolved_path
        if module_path:
            break
    if not module_path or not module_path.endswith(".py"):
        return None
    try:
        fqn = module_common._get_ansible_module_fqn(module_path)
    except ValueError:
        return None
    from ansible._internal._ansiballz import _builder

    if _builder.ExtensionManager.create(task_vars=task_vars).extension_names:
        return None
    compression = C.config.get_config_value("DEFAULT_MODULE_COMPRESSION", variables=task_vars)
    # the name _find_module_utils gives the run's payload file
    run_file = os.path.join(C.DEFAULT_LOCAL_TMP, "ansiballz_cache", "-".join((fqn, compression, "none")))
    if os.path.exists(run_file):
        return None
    key = json.dumps([ANSIBLE_CORE_VERSION, list(sys.version_info[:2]), fqn, compression, module_path])
    return Slot(fqn, module_path, run_file, directory / hashlib.sha256(key.encode()).hexdigest()[:40])


def _read_entry(entry: Path, slot: Slot) -> bytes | None:
    """Our copy's payload file, where it is still what ansible-core would build; else None."""
    try:
        meta = json.loads(entry.with_suffix(".json").read_text())
        payload = entry.with_suffix(".payload").read_bytes()
    except (OSError, ValueError):
        return None
    if meta.get("ansible_core") != ANSIBLE_CORE_VERSION or meta.get("fqn") != slot.fqn:
        return None
    if hashlib.sha256(payload).hexdigest() != meta.get("payload_sha256"):
        return None
    recorded = meta.get("sources")
    if not isinstance(recorded, dict) or not recorded:
        return None
    sources = sources_of(recorded, slot.fqn, slot.module_path)
    if sources is None or digests_of(sources) != recorded:
        return None
    return payload


def write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def restore(slot: Slot) -> bool:
    """Put our copy where ansible-core looks for the run's payload; whether it did."""
    if not private_dir(slot.entry.parent, create=False):
        return False
    payload = _read_entry(slot.entry, slot)
    if payload is None:
        return False
    run_dir = Path(slot.run_file).parent
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(Path(slot.run_file), payload)
    display.vvvv(f"payload cache: {slot.fqn} restored from {slot.entry}.payload")
    return True


def store(slot: Slot) -> bool:
    """Keep the payload ansible-core has just built for the run, with the hashes of its sources; whether it did."""
    try:
        payload = Path(slot.run_file).read_bytes()
    except OSError:
        return False
    sources = sources_of(zip_names(payload), slot.fqn, slot.module_path)
    if sources is None or not private_dir(slot.entry.parent, create=True):
        return False
    digests = digests_of(sources)
    meta = {
        "ansible_core": ANSIBLE_CORE_VERSION,
        "fqn": slot.fqn,
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
        "sources": digests,
    }
    write_atomic(slot.entry.with_suffix(".payload"), payload)
    write_atomic(slot.entry.with_suffix(".json"), json.dumps(meta, indent=1, sort_keys=True).encode())
    display.vvvv(f"payload cache: {slot.fqn} stored in {slot.entry}.payload")
    return True


class ActionBase(_ActionBase):
    """ansible-core's ActionBase whose module payloads come from the cache where they can (the project's actions)."""

    def _configure_module(self, module_name, module_args, task_vars):
        try:
            slot = slot_for(self, module_name, task_vars)
            if slot is not None and restore(slot):
                slot = None
        except Exception as ex:
            display.vvvv(f"payload cache: not used for {module_name}: {ex}")
            slot = None
        built = super()._configure_module(module_name, module_args, task_vars)
        if slot is not None:
            try:
                store(slot)
            except Exception as ex:
                display.vvvv(f"payload cache: {module_name} not stored: {ex}")
        return built
