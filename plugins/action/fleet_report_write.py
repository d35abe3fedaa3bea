# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The doctor's fleet report written on the controller as one critical section (roles/gpu_validate, fleet_report.yml).

The fleet report is a read-merge-write: the role's variable ``__gpu_validate_fleet`` reads the report's JSON (the rows
of the nodes another run wrote: AWX job slicing, plugins/filter/fleet_report.py, gpu_fleet_with_others), merges this
play's rows in, and ``__gpu_validate_fleet_files`` renders the JSON and the HTML page from it. Two runs that write one
report at once (two slices of one AWX job on one controller) would each read the report without the other's rows,
and the last write would win. This action makes the read, the merge and both writes one critical section:

- it takes an exclusive ``flock`` on ``lock`` (``<report>.lock``, beside the report; created where missing, never
  removed: removing it while a run holds it would let a third run in). The kernel releases the lock when the process
  that holds it ends, however it ends: no run ever finds a stale lock. Where another run holds it, the action says
  so (``WAITING``) and waits, at most ``timeout`` seconds, then fails naming the lock and the fix;
- holding it, it renders the variable named by ``files`` (a list of ``{path, content}``): that render is the read and
  the merge (the filters of plugins/filter/fleet_report.py and the role's template stay their one home);
- it writes each file whose text differs, atomically (a temporary file in the same directory, renamed over it):
  a reader never sees half a report. A symlink is followed.

In check mode nothing is locked or written; the result says whether a file would change. The role's task keeps
``changed_when: false``: the report is a report of the run, not a change of the fleet.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager, suppress

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible_collections.gpunode.provisioning.plugins.filter.fleet_report import gpu_fleet_files_pending
from ansible_collections.gpunode.provisioning.plugins.modules.fleet_report_write import ARGUMENT_SPEC

display = Display()

# How long a run waits for another run that writes the same report, in seconds (a write takes well under one).
LOCK_TIMEOUT = ARGUMENT_SPEC["timeout"]["default"]
# How often a waiting run tries the lock again, in seconds.
LOCK_POLL = 0.05
# What a run prints once when it finds the lock held (the unit test waits for this line).
WAITING = "fleet_report_write: waiting for the lock {lock}: another run is writing the fleet report"


@contextmanager
def report_lock(lock: str, timeout: float = LOCK_TIMEOUT, on_wait: Callable[[], None] | None = None):
    """Hold an exclusive flock on ``lock`` (created where missing) for the block; ``on_wait`` is called once when
    another process holds it. Raises AnsibleActionFail, naming the lock and the fix, after ``timeout`` seconds."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise AnsibleActionFail(
            f"cannot open the lock file {lock} of the fleet report: {exc.strerror or exc}. Make its directory "
            "writable for the user that runs the playbook, or point gpu_validate_fleet_report elsewhere."
        ) from exc
    try:
        deadline = None
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is None:
                    deadline = time.monotonic() + timeout
                    if on_wait is not None:
                        on_wait()
                if time.monotonic() >= deadline:
                    raise AnsibleActionFail(
                        f"another run has held the lock {lock} of the fleet report for {timeout} s (it writes the "
                        f"same report). `fuser -v {lock}` names the process that holds it: wait for it to end, or end "
                        "it, then run again. The lock goes with that process; do not remove the file."
                    ) from None
                time.sleep(LOCK_POLL)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def write_atomically(path: str, text: str, mode: int = 0o644) -> None:
    """Write ``text`` (UTF-8, as is) to ``path`` through a temporary file in its directory renamed over it; a symlink
    is followed. On any failure the temporary file is removed and ``path`` is as it was."""
    real = os.path.realpath(path)
    fd, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", suffix=".tmp", dir=os.path.dirname(real))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, real)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def files_problem(files) -> str | None:
    """What is wrong with the rendered ``files`` (a list of {path, content} with absolute paths), None if nothing."""
    if isinstance(files, (str, bytes, Mapping)) or not isinstance(files, Sequence):
        return f"the files must be a list of {{path, content}}, got {type(files).__name__}"
    for item in files:
        if not isinstance(item, Mapping) or not isinstance(item.get("path"), str) or "content" not in item:
            return f"each file must be a mapping with path and content, got {item!r}"
        if not os.path.isabs(item["path"]):
            return f"the path {item['path']} is not absolute"
    return None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def render(self, name: str, task_vars: dict) -> list:
        """The variable ``name`` rendered now (under the lock: its reads of the report happen here)."""
        files = self._templar.copy_with_new_env(available_variables=task_vars).template(task_vars[name])
        problem = files_problem(files)
        if problem:
            raise AnsibleActionFail(f"fleet_report_write: {name}: {problem}")
        return [{"path": str(item["path"]), "content": str(item["content"])} for item in files]

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        lock, name = args["lock"], args["files"]
        if name not in task_vars:
            raise AnsibleActionFail(f"fleet_report_write: files names {name!r}, which is not a defined variable")
        try:
            mode = int(args["mode"], 8)
        except ValueError:
            raise AnsibleActionFail(f"fleet_report_write: mode {args['mode']!r} is not an octal mode") from None
        result.update(lock=lock, changed=False)
        if self._task.check_mode:
            files = self.render(name, task_vars)
            result["written"] = [item["path"] for item in files if gpu_fleet_files_pending([item])]
            result["changed"] = bool(result["written"])
            return result
        if not os.path.isabs(lock):
            raise AnsibleActionFail(f"fleet_report_write: the lock {lock} is not an absolute path")
        try:
            os.makedirs(os.path.dirname(lock), mode=0o755, exist_ok=True)
        except OSError as exc:
            raise AnsibleActionFail(
                f"cannot create the directory of the fleet report's lock {lock}: {exc.strerror or exc}. Make it "
                "writable for the user that runs the playbook, or point gpu_validate_fleet_report elsewhere."
            ) from exc
        with report_lock(lock, args["timeout"], on_wait=lambda: display.display(WAITING.format(lock=lock))):
            files = self.render(name, task_vars)
            written = []
            for item in files:
                if gpu_fleet_files_pending([item]):
                    try:
                        os.makedirs(os.path.dirname(item["path"]), mode=0o755, exist_ok=True)
                        write_atomically(item["path"], item["content"], mode)
                    except OSError as exc:
                        raise AnsibleActionFail(
                            f"cannot write the fleet report {item['path']}: {exc.strerror or exc}. It is as it was; "
                            "make its directory writable for the user that runs the playbook, then run again."
                        ) from exc
                    written.append(item["path"])
        result.update(written=written, changed=bool(written))
        return result
