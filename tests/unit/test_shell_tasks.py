"""Shell tasks of the roles fail when a command inside them fails, also inside `$( ... )`.

`set -e` does not reach into a command substitution: bash runs it in a subshell with errexit off, so in
`facts=$( a; b; c )` a failing `a` is ignored and the task goes on with half the facts. Every shell task in
roles/ that collects values with `$( ... )` therefore runs bash with `set -euo pipefail` and
`shopt -s inherit_errexit`. The doctor's containerd check, once such a script, now runs in the node-side
module gpu_validate_checks; the second test keeps what the script guaranteed: when `systemctl show
containerd` fails, the doctor says the check failed, instead of reporting a start time that is merely
"unknown".

Two more rules hold for every script of roles/ and playbooks/ (docs/architecture.md, "Rules that keep this shape"):
a task fed on `stdin:` reads all of it first, on every path (issue 52: Ansible's late write of stdin failed with
EPIPE); and no script pipes into a reader that stops early, polls in a shell loop, or waits without a bound.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from conftest import run_local_playbook

ROOT = Path(__file__).resolve().parents[2]
PREAMBLE = ["set -euo pipefail", "shopt -s inherit_errexit"]


def _shell_tasks():
    for path in sorted((ROOT / "roles").glob("*/tasks/*.yml")):
        for task in yaml.safe_load(path.read_text()) or []:
            for item in [task, *task.get("block", []), *task.get("rescue", []), *task.get("always", [])]:
                script = item.get("ansible.builtin.shell")
                if script is not None:
                    yield f"{path.relative_to(ROOT)}: {item.get('name')}", item, script


SHELL_TASKS = list(_shell_tasks())


def test_the_roles_have_shell_tasks_to_check():
    # runtime_config's health and preflight scripts (and more); the doctor has none since its checks are Python
    assert len(SHELL_TASKS) >= 3, [name for name, _, _ in SHELL_TASKS]


@pytest.mark.parametrize(("name", "task", "script"), SHELL_TASKS, ids=[name for name, _, _ in SHELL_TASKS])
def test_a_shell_task_that_collects_values_fails_on_a_failure_inside_them(name, task, script):
    executable = (task.get("args") or {}).get("executable")
    if isinstance(script, dict):
        executable = script.get("executable", executable)
        script = script.get("cmd", "")
    lines = [line.strip() for line in script.splitlines() if line.strip()]
    assert lines[:1] == PREAMBLE[:1], f"{name}: the script must start with `set -euo pipefail`"
    if "$(" in script:
        assert lines[:2] == PREAMBLE, f"{name}: collects values with $( ... ): add `shopt -s inherit_errexit`"
        assert executable == "/bin/bash", f"{name}: inherit_errexit needs bash"


FAKES = {
    "ctr": '#!/bin/sh\necho "io.containerd.grpc.v1   cri   linux/amd64   ok"\n',
    "containerd": "#!/bin/sh\nprintf 'version = 2\\n'\n",
    # the mutation: systemd cannot be asked for containerd's start time
    "systemctl": "#!/bin/sh\necho 'Failed to connect to bus: No such file or directory' >&2\nexit 1\n",
}

PLAY = """
- name: The doctor's containerd check when a command inside its $( ... ) fails
  hosts: localhost
  connection: local
  gather_facts: false
  environment:
    PATH: "{tmp}/bin:/usr/bin:/bin"
  tasks:
    - name: Give the node facts the role's gpu_node_facts dependency reads, and the runtime to check
      ansible.builtin.set_fact:
        __gpu_validate_runtimes: [containerd]
        __gpu_validate_node:
          runtimes:
            containerd: {{installed: true, running: true, binary: "{tmp}/bin/containerd"}}
    - name: Run containerd's checks
      ansible.builtin.include_role:
        name: gpu_validate
        tasks_from: checks.yml
      vars:
        __gpu_validate_families: [containerd]
        # the Debian platform data (gpu_node_facts' vars/Debian.yml), which the dependency loads in a run of the role
        __gpu_node_facts_validate_package_version_argv: [dpkg-query, --show, "--showformat=${{Version}}"]
        __gpu_node_facts_apparmor_os: true
        __gpu_node_facts_kubelet_env_file_default: /etc/default/kubelet
    - name: Write the result
      ansible.builtin.copy:
        content: "{{{{ gpu_validate_results | to_json }}}}"
        dest: "{tmp}/result.json"
        mode: "0644"
"""


def test_a_failure_inside_the_doctors_command_substitution_fails_the_check(tmp_path):
    (tmp_path / "bin").mkdir()
    for name, text in FAKES.items():
        (tmp_path / "bin" / name).write_text(text)
        (tmp_path / "bin" / name).chmod(0o755)
    (tmp_path / "playbook.yml").write_text(PLAY.format(tmp=tmp_path))
    run = run_local_playbook(tmp_path / "playbook.yml")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    checks = {c["check"]: c for c in yaml.safe_load((tmp_path / "result.json").read_text())}
    cri = checks["containerd: CRI plugin"]
    # without inherit_errexit: "ok", and "running config" only warns that the start time is unknown
    assert cri["status"] == "fail", checks
    assert cri["detail"].startswith("the check failed: Failed to connect to bus"), cri


# ---- every command fed on stdin reads all of it, on every path (issue 52) ------------------------------------------
# Ansible writes a task's `stdin:` into the command's pipe after starting it; a script that has exited (or stopped
# reading) by then fails that write with EPIPE, "[Errno 32] Broken pipe", rc 32: a first install failed by chance.
# The one pattern (docs/architecture.md): the script's first command after its preamble reads all of stdin into a
# variable. The tasks are found by reading every task file of roles/ and playbooks/, so a new one is checked too.

TASK_FILES = sorted(
    [*ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("roles/*/handlers/*.yml"), *ROOT.glob("playbooks/**/*.yml")]
)
_COMMANDS = ("ansible.builtin.shell", "ansible.builtin.command", "ansible.legacy.shell", "ansible.legacy.command",
             "shell", "command")  # fmt: skip
STDIN_PREAMBLE = [*PREAMBLE, "input=$(cat; echo .)", "input=${input%.}"]


def _tasks(node):
    """Every task (and play) of a task file or playbook, blocks and handlers included."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
            yield from _tasks(node.get(key))


def _stdin_tasks(text: str, where: str):
    """(id, module, the module's value, its arguments) of each task of `text` fed on stdin."""
    for task in _tasks(yaml.safe_load(text)):
        module = next((key for key in task if key in _COMMANDS), None) or next(
            (key for key, value in task.items() if key != "args" and isinstance(value, dict) and "stdin" in value), None
        )
        value = task.get(module)
        args = {**(task.get("args") or {}), **(value if isinstance(value, dict) else {})}
        if "stdin" in args:
            yield f"{where}: {task.get('name')}", module, value, args


def _stdin_reads(text: str, where: str):
    """(id, module, the module's arguments, its arguments) of each read of a role_read task fed on stdin
    (plugins/action/role_read.py): a mapping with a command module and args, in a role's vars or a task file."""

    def walk(node, name):
        if isinstance(node, dict):
            args = node.get("args")
            if node.get("module") in _COMMANDS and isinstance(args, dict) and "stdin" in args:
                yield f"{where}: {name}", node["module"], args, args
            for key, value in node.items():
                yield from walk(value, key)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item, name)

    yield from walk(yaml.safe_load(text), "")


STDIN_TASKS = [found for path in TASK_FILES for found in _stdin_tasks(path.read_text(), str(path.relative_to(ROOT)))]
STDIN_TASKS += [
    found
    for path in sorted([*TASK_FILES, *ROOT.glob("roles/*/vars/*.yml")])
    for found in _stdin_reads(path.read_text(), str(path.relative_to(ROOT)))
]
OLD_APT_READ = ROOT / "tests" / "fixtures" / "stdin_tasks" / "packages_apt_before_issue_52.yml"


def _script_of(module, value, args) -> tuple[str, str]:
    """The script and the shell that runs it; a command that is not a shell script fails the stdin rule."""
    argv = value.get("argv") if isinstance(value, dict) else None
    if module in _COMMANDS and isinstance(argv, list) and len(argv) >= 3 and argv[1] == "-c":
        return argv[2], argv[0]  # a read of role_read: the command module runs the shell with the script
    assert module == "ansible.builtin.shell", (
        f"{module} fed on stdin can exit before reading it: make it an ansible.builtin.shell script that reads all"
        " of stdin first (docs/architecture.md)"
    )
    return (value.get("cmd", "") if isinstance(value, dict) else value), args.get("executable", "/bin/sh")


def _stdin_rule_problems(module, value, args) -> list[str]:
    """What the pattern of docs/architecture.md misses in this task: its script's first commands."""
    try:
        script, executable = _script_of(module, value, args)
    except AssertionError as exc:
        return [str(exc)]
    commands = [re.sub(r"\s+#\s.*$", "", line).strip() for line in script.splitlines()]
    commands = [line for line in commands if line and not line.startswith("#")]
    problems = [] if executable == "/bin/bash" else [f"runs with {executable}: the pattern needs /bin/bash"]
    if commands[: len(STDIN_PREAMBLE)] != STDIN_PREAMBLE:
        problems.append("its first commands must read all of stdin: " + "; ".join(STDIN_PREAMBLE))
    return problems


def test_the_tasks_fed_on_stdin_are_found():
    # runtime_config crio.yml, nvidia_driver secure_boot.yml (two), nvidia_mig guard.yml; the toolkit's apt and CDI
    # reads (vars/main.yml: role_read's)
    assert len(STDIN_TASKS) >= 6, [name for name, *_ in STDIN_TASKS]
    reads = [name for name, *_ in STDIN_TASKS if name.startswith("roles/nvidia_container_toolkit/vars/main.yml")]
    assert reads == [
        "roles/nvidia_container_toolkit/vars/main.yml: __nvidia_container_toolkit_cdi_read",
        "roles/nvidia_container_toolkit/vars/main.yml: __nvidia_container_toolkit_apt_read",
    ]
    assert len(list(_stdin_tasks(OLD_APT_READ.read_text(), "old"))) == 1


@pytest.mark.parametrize(("name", "module", "value", "args"), STDIN_TASKS, ids=[found[0] for found in STDIN_TASKS])
def test_a_task_fed_on_stdin_reads_all_of_it_first(name, module, value, args):
    assert not _stdin_rule_problems(module, value, args), name


# The scripts run here for real, each on every kind of path, with a node in a temporary directory. They are
# rendered with every variable standing for a path of that node (so a new task needs no table here), and the
# role's switches all on or all off. Plain tools run for real; every other command (crio, dpkg-query, mokutil,
# systemctl, nvidia-ctk...) is a TEST STAND-IN, bash's command_not_found_handle: it answers nothing and reads
# nothing, or refuses. Each path runs twice kinds of ways (tests/stdin_feed.py): with all of stdin in the pipe
# beforehand, counting the bytes left unread; and with the write held back until the script exits or waits for it,
# repeated, which fails with EPIPE where the script exits first, as Ansible's late write does.
STDIN = b"".join(b"%05d a line of what the role feeds on stdin: a config file, a certificate\n" % n for n in range(320))
DELAYED_RUNS = 3
# what each path the script names is on the node; the stand-ins' exit status; the role's switches
NODE_PATHS = {
    "files absent": {"files": None},
    "files absent, switches off": {"files": None, "switches": False},
    "present and equal": {"files": "equal"},
    "present and different": {"files": "different"},
    "present as directories": {"files": "directory"},
    "present as commands": {"files": "command"},
    "refusal: every command fails": {"files": "equal", "rc": 1},
    "refusal: no temporary directory": {"files": None, "tmpdir": False},
}
_TOOLS = ["awk", "basename", "cat", "chmod", "chown", "cmp", "cp", "cut", "date", "diff", "dirname", "env", "false",
          "find", "gpg", "grep", "head", "ln", "ls", "mkdir", "mktemp", "mv", "readlink", "rm", "sed", "sha1sum",
          "sha256sum", "sleep", "sort", "stat", "tac", "tail", "tee", "touch", "tr", "true", "wc"]  # fmt: skip
_STANDIN = """# TEST STAND-IN for every command of the node that is not a plain tool: it reads nothing
command_not_found_handle() {
  [ "$GPUNODE_STANDIN_RC" = 0 ] || echo "TEST STAND-IN $1: refused" >&2
  return "$GPUNODE_STANDIN_RC"
}
"""


def _render(script: str, root: Path, switches: bool) -> tuple[str, set[str]]:
    """The script with each variable a path under root (its name), and the names it used."""
    import jinja2
    from ansible.plugins.filter import core

    names: set[str] = set()

    class NodePath(jinja2.ChainableUndefined):
        def __str__(self):
            names.add(self._undefined_name)
            return f"{root}/{self._undefined_name}"

        __fspath__ = __str__

        def __iter__(self):
            return iter([str(self)])

        def __bool__(self):
            return switches

    env = jinja2.Environment(undefined=NodePath, keep_trailing_newline=True)
    env.filters.update(core.FilterModule().filters())
    env.filters["bool"] = lambda value: bool(value) if isinstance(value, jinja2.Undefined) else core.to_bool(value)
    return env.from_string(script).render(), names


def _fed_problems(script: str, executable: str, tmp_path: Path) -> list[str]:
    """Each path of NODE_PATHS on which the script leaves stdin unread or the late write fails with EPIPE."""
    import shutil

    from tests.stdin_feed import fed_run

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in _TOOLS:
        found = shutil.which(tool)
        if found and not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(found)
    (tmp_path / "standin.bash").write_text(_STANDIN)
    problems = []
    for number, (path_name, path) in enumerate(NODE_PATHS.items()):
        root = tmp_path / f"node{number}"
        root.mkdir()
        rendered, names = _render(script, root, path.get("switches", True))
        for name in names:
            node_path = root / name
            if path["files"] == "directory":
                node_path.mkdir(mode=0o755)
            elif path["files"] == "command":
                node_path.write_text('#!/bin/sh\nexit "$GPUNODE_STANDIN_RC"\n')
                node_path.chmod(0o755)
            elif path["files"]:
                node_path.write_bytes(STDIN if path["files"] == "equal" else b"#" + STDIN[1:])
                node_path.chmod(0o644)
        (root / ".tmp").mkdir()
        env = {
            "PATH": str(bin_dir),
            "HOME": str(root),
            "LC_ALL": "C",
            "TMPDIR": str(root / (".tmp" if path.get("tmpdir", True) else "missing")),
            "BASH_ENV": str(tmp_path / "standin.bash"),
            "GPUNODE_STANDIN_RC": str(path.get("rc", 0)),
        }
        argv = [executable, "-c", rendered]
        runs = [fed_run(argv, STDIN, env=env, cwd=root)]
        runs += [fed_run(argv, STDIN, env=env, cwd=root, delayed=True) for _ in range(DELAYED_RUNS)]
        if runs[0].unread:
            problems.append(
                f"{path_name}: exited (rc {runs[0].returncode}) with {runs[0].unread} of {len(STDIN)} bytes of stdin"
                f" unread; stderr: {runs[0].stderr.strip()[-300:]}"
            )
        broken = sum(run.epipe for run in runs[1:])
        if broken:
            problems.append(f"{path_name}: the late write of stdin failed with EPIPE in {broken} of {DELAYED_RUNS}")
    return problems


@pytest.mark.parametrize(("name", "module", "value", "args"), STDIN_TASKS, ids=[found[0] for found in STDIN_TASKS])
def test_a_script_fed_on_stdin_reads_all_of_it_on_every_path(name, module, value, args, tmp_path):
    script, executable = _script_of(module, value, args)
    assert not _fed_problems(script, executable, tmp_path)


def test_the_apt_read_before_issue_52_is_caught_both_ways(tmp_path):
    # the mutation: packages_apt.yml as it was, which read stdin only through `cmp -s -`, and only where both files
    # were in place
    ((_, module, value, args),) = _stdin_tasks(OLD_APT_READ.read_text(), "old")
    assert _stdin_rule_problems(module, value, args) == [
        "its first commands must read all of stdin: " + "; ".join(STDIN_PREAMBLE)
    ]
    problems = _fed_problems(*_script_of(module, value, args), tmp_path)
    # a first install: neither file there, nothing read; a drifted source: cmp stops at the first difference
    first_install = f"files absent: exited (rc 0) with {len(STDIN)} of {len(STDIN)} bytes of stdin unread"
    assert any(problem.startswith(first_install) for problem in problems), problems
    assert f"files absent: the late write of stdin failed with EPIPE in {DELAYED_RUNS} of {DELAYED_RUNS}" in problems
    assert any(problem.startswith("present and different: exited (rc 0) with") for problem in problems), problems
    assert not any(problem.startswith("present and equal") for problem in problems), problems


# ---- no timing-dependent pipe or wait (issue 52, item 3) ------------------------------------------------------------
# A reader that stops early (`| head`, `| grep -q`, `| sed 1q`, `| cmp -s -`, an awk that exits before END) kills a
# writer that still has output with SIGPIPE, and pipefail fails the script: at random, more often under load and
# with long output. A wait is bounded by explicit retries and delay, or a timeout. The scripts are found by reading
# the files: the scripts of tasks, the scripts in role vars (a YAML string with a `set -e` line), and script
# templates and files (a first line `#!`), in roles/ and playbooks/.


def _strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)
    elif isinstance(node, dict):
        for item in node.values():
            yield from _strings(item)


def _scripts():
    data = [*TASK_FILES, *ROOT.glob("roles/*/vars/*.yml"), *ROOT.glob("roles/*/defaults/*.yml")]
    for path in sorted(data):
        for text in _strings(yaml.safe_load(path.read_text())):
            if "\n" in text and re.search(r"^\s*set -[a-z]*e", text, re.MULTILINE):
                yield str(path.relative_to(ROOT)), text
    for path in sorted([*ROOT.glob("roles/*/templates/**/*"), *ROOT.glob("roles/*/files/**/*")]):
        if path.is_file() and path.read_bytes().startswith(b"#!"):
            yield str(path.relative_to(ROOT)), path.read_text()


SCRIPTS = list(_scripts())
_JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_EARLY_READER = re.compile(
    r"(?<!\|)\|(?!\|)\s*(?:head\b|read\b"
    r"|grep\b[^|;&\n]*?(?:\s-[A-Za-z]*[qlLm]|\s--(?:quiet|silent|max-count|files-with))"
    r"|sed\b[^|&\n]*?[\s'\";{}\d/$][qQ]\d*(?=[\s'\";}]|$)|cmp\b[^|;&\n]*\s-(?=\s|$))",
    re.MULTILINE,
)
_POLLING_LOOP = re.compile(r"^\s*(?:until\b|while\s+(?:true|:)\s*(?:;|$))", re.MULTILINE)


def _without_end_blocks(program: str) -> str:
    """An awk program without its END { ... } blocks (an exit there comes after all input was read)."""
    while (match := re.search(r"\bEND\s*\{", program)) is not None:
        depth, end = 0, match.end() - 1
        for end in range(match.end() - 1, len(program)):
            depth += {"{": 1, "}": -1}.get(program[end], 0)
            if depth == 0:
                break
        program = program[: match.start()] + program[end + 1 :]
    return program


def _timing_problems(script: str) -> list[str]:
    text = "\n".join(line for line in _JINJA.sub("X", script).splitlines() if not line.lstrip().startswith("#"))
    problems = [f"`{match.group(0).strip()}`: a reader that stops early" for match in _EARLY_READER.finditer(text)]
    for match in re.finditer(r"(?<!\|)\|(?!\|)\s*awk\b[^'\n]*'([^']*)'", text):
        if re.search(r"\bexit\b", _without_end_blocks(match.group(1))):
            problems.append("`| awk ... exit`: a reader that stops early")
    problems += [f"`{match.group(0).strip()}`: a polling loop in shell" for match in _POLLING_LOOP.finditer(text)]
    return problems


_WAIT_MODULES = ("ansible.builtin.wait_for", "ansible.builtin.wait_for_connection", "wait_for", "wait_for_connection")


def _unbounded_waits(text: str) -> list[str]:
    found = []
    for task in _tasks(yaml.safe_load(text)):
        if "until" in task and not {"retries", "delay"} <= task.keys():
            found.append(f"{task.get('name')}: `until` without explicit retries and delay")
        for module in _WAIT_MODULES:
            if module in task and "timeout" not in (task[module] or {}):
                found.append(f"{task.get('name')}: {module} without an explicit timeout")
    return found


def test_the_scripts_are_found():
    wheres = {where for where, _ in SCRIPTS}
    # a task's script, a script in role vars, a script template
    assert {"roles/nvidia_container_toolkit/vars/main.yml", "roles/fuse/vars/main.yml"} <= wheres, wheres
    assert any(where.endswith("gpu-node-provisioning-hooks.sh.j2") for where in wheres), wheres


@pytest.mark.parametrize(("where", "script"), SCRIPTS, ids=[f"{w}:{s.strip()[:40]}" for w, s in SCRIPTS])
def test_a_script_has_no_reader_that_stops_early_and_no_polling_loop(where, script):
    assert not _timing_problems(script), (
        f'{where}: read the output into a variable and test that (<<<"$out"); wait with until/retries/delay'
    )


@pytest.mark.parametrize("path", TASK_FILES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_wait_is_bounded(path):
    assert not _unbounded_waits(path.read_text())


@pytest.mark.parametrize(
    "script",
    [
        "set -euo pipefail\ncrio config | grep -q '^default_runtime'\n",
        "set -euo pipefail\nctr plugins ls | grep -qx cri\n",
        "set -euo pipefail\nfirst=$(dpkg-query -W | head -n1)\n",
        "set -euo pipefail\ndocker info | sed -n '/Runtimes/{p;q}'\n",
        "set -euo pipefail\nsystemctl cat kubelet | cmp -s - {{ file | quote }}\n",
        "set -euo pipefail\nctr plugins ls | awk '$2 == \"cri\" { found = 1; exit }'\n",
        "set -euo pipefail\nuntil ctr version; do sleep 1; done\n",
        "set -euo pipefail\nwhile true; do ctr version && break; done\n",
    ],
    ids=["grep -q", "grep -qx", "head", "sed q", "cmp -", "awk exit", "until loop", "while true"],
)
def test_each_timing_dependent_pattern_is_caught(script):
    assert _timing_problems(script)


@pytest.mark.parametrize(
    "script",
    [
        'set -euo pipefail\nplugins=$(ctr plugins ls)\ngrep -qx cri <<<"$plugins"\n',
        "set -euo pipefail\nawk '{ n++ } END { exit (n == 0) }' <<<\"$x\"\n",
        "set -euo pipefail\nctr plugins ls | awk '$2 == \"cri\" {n++} END {exit n == 0}'\n",
        "set -euo pipefail\nsed 's/^.*=//; s/q/Q/' <<<\"$x\"\nopenssl x509 -noout | sed 's/^.*=//' | tr A-F a-f\n",
        "set -euo pipefail\ndpkg-query -W | awk '{print $1}' || true\n# | grep -q in a comment\n",
        'set -euo pipefail\nwhile read -r unit; do echo "$unit"; done <file\n{{ x | head }}\n',
    ],
    ids=[
        "here-string",
        "awk exit in END",
        "awk exit in END piped",
        "sed without q",
        "plain filters and a comment",
        "while read and Jinja",
    ],
)
def test_reading_everything_is_not_caught(script):
    assert not _timing_problems(script)


def test_an_unbounded_wait_is_caught():
    tasks = """
- name: Wait for docker
  ansible.builtin.command: docker info
  register: info
  until: info.rc == 0
- name: Wait for the port
  ansible.builtin.wait_for:
    port: 10248
- name: Wait for the kubelet, bounded
  ansible.builtin.command: systemctl is-active kubelet
  register: active
  until: active.rc == 0
  retries: 10
  delay: 3
"""
    assert _unbounded_waits(tasks) == [
        "Wait for docker: `until` without explicit retries and delay",
        "Wait for the port: ansible.builtin.wait_for without an explicit timeout",
    ]
