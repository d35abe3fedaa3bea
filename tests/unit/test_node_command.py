"""plugins/plugin_utils/node_command.py: a root command's stdout and stderr stay apart whatever the connection.

ansible-core's ssh connection (`-tt`) and mitogen (`emulate_tty`) run an action's `sudoable` command without stdin
in a terminal, whose single stream carries stderr inside stdout and CRLF line ends. The wrapper is run here for real
three ways: with two pipes (the local and docker connections), through mitogen's own `exec_args` with
`emulate_tty=True`, and in a real pseudo-terminal (what sshd gives `ssh -tt`). Then the whole containerd_config
action runs under the gpunode_mitogen strategy against containerd 2.3.4 that writes a warning to stderr, as the
arm64 node's did ("not valid TOML (line 1, column 28)" before this wrapper).
"""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import time
from pathlib import Path
from unittest import mock

import pytest
import tomlkit
import yaml
from conftest import load_module, run_local_playbook
from test_containerd_v4 import containerd  # noqa: F401 (the fixture: containerd 2.3.4 from the upstream directory)

node_command = load_module("node_command", "plugins/plugin_utils")

# a command like containerd's: a document on stdout, a logrus warning on stderr, exit code 3; blank lines, a
# trailing space and no final newline survive byte for byte
STDOUT = 'version = 3\n\n[plugins."io.containerd.cri.v1.images"]\n  snapshotter = "overlayfs" \nend'
STDERR = 'time="2026-12-01T09:00:00Z" level=warning msg="failed to load plugin" error="no such file"\n'
COMMAND = f"printf '%s' {node_command.shlex.quote(STDOUT)}; printf '%s' {node_command.shlex.quote(STDERR)} >&2; exit 3"
MARKER = "GPUNODE-0123456789abcdef"


def _script(wrapped: str) -> str:
    """The script of ``/bin/sh -c <script>``."""
    return node_command.shlex.split(wrapped)[2]


def _pipes(script: str) -> dict:
    done = subprocess.run(["/bin/sh", "-c", script], capture_output=True, check=False)
    return {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


def _mitogen(script: str) -> dict:
    """mitogen's own code path for a sudoable command without stdin (ansible_mitogen.target.exec_args)."""
    from ansible_mitogen import target

    rc, stdout, stderr = target.exec_args(["/bin/sh", "-c", script], emulate_tty=True)
    return {"rc": rc, "stdout": stdout, "stderr": stderr}


def _terminal(script: str) -> dict:
    """The command on a real pseudo-terminal, stdin, stdout and stderr alike, as sshd runs it for `ssh -tt`."""
    main, secondary = pty.openpty()
    process = subprocess.Popen(["/bin/sh", "-c", script], stdin=secondary, stdout=secondary, stderr=secondary)
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the terminal's last writer is gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main)
    return {"rc": process.wait(), "stdout": b"".join(chunks), "stderr": b""}


CONNECTIONS = {"two pipes": _pipes, "mitogen's emulate_tty": _mitogen, "a pseudo-terminal (ssh -tt)": _terminal}


@pytest.mark.parametrize("connection", CONNECTIONS)
def test_the_streams_and_the_exit_code_come_back_apart_and_exact(connection):
    # a login banner before the wrapper's record, as a connection may add
    merged = CONNECTIONS[connection](f"echo 'Last login: today'; {_script(node_command.wrap(COMMAND, MARKER))}")
    if connection != "two pipes":
        # the oracle that the connection merges and translates (without it this test proves nothing)
        assert b"\r\n" in merged["stdout"] and merged["stderr"] == b""
        unwrapped = CONNECTIONS[connection](COMMAND)
        assert STDERR.strip().encode() in unwrapped["stdout"], unwrapped
    assert node_command.decode(COMMAND, MARKER, merged) == {"rc": 3, "stdout": STDOUT, "stderr": STDERR}


def test_wrap_is_one_shell_command_line():
    wrapped = node_command.wrap(COMMAND, MARKER)
    assert wrapped.startswith("/bin/sh -c '")
    assert node_command.decode(COMMAND, MARKER, _pipes(_script(wrapped)))["rc"] == 3


@pytest.mark.parametrize(
    ("printed", "said"),
    [
        ("sudo: a password is required\r\n", "sudo: a password is required"),  # the wrapper never ran
        ("sh: 1: base64: not found\r\nGPUNODE-0123456789abcdef-out\r\n", "base64: not found"),  # cut short
        (
            f"{MARKER}-out\nnot base64!\n{MARKER}-err\n\n{MARKER}-rc 0\n",
            "base64 record is damaged",
        ),
    ],
)
def test_a_missing_or_damaged_record_fails_naming_the_command_and_what_the_node_printed(printed, said):
    with pytest.raises(node_command.AnsibleActionFail) as failure:
        node_command.decode("containerd config default", MARKER, {"rc": 1, "stdout": printed, "stderr": ""})
    message = failure.value.message
    assert "`containerd config default`" in message and "Nothing was changed" in message
    assert said in message, message


def test_another_calls_marker_is_not_taken_for_this_ones():
    other = _pipes(_script(node_command.wrap(COMMAND, "GPUNODE-ffffffffffffffff")))
    with pytest.raises(node_command.AnsibleActionFail):
        node_command.decode(COMMAND, MARKER, other)


def test_run_asks_for_root_and_reads_past_the_become_plugins_lines():
    """run() is what the action calls: the wrapper as a sudoable command (become applies, as to every node command
    the action ran before), its record read past what become and the login print."""
    calls = []

    def low_level(cmd, sudoable=False, **kwargs):
        calls.append((cmd, sudoable, kwargs))
        done = _pipes(f"echo BECOME-SUCCESS-abcdefgh; {_script(cmd)}")
        return {**done, "stdout": done["stdout"].replace(b"\n", b"\r\n")}

    action = mock.Mock(_low_level_execute_command=low_level)
    assert node_command.run(action, COMMAND) == {"rc": 3, "stdout": STDOUT, "stderr": STDERR}
    assert [(sudoable, kwargs) for _cmd, sudoable, kwargs in calls] == [(True, {})]
    assert f"/bin/sh -c {node_command.shlex.quote(COMMAND)} >" in _script(calls[0][0])  # the command, wrapped


def test_the_files_are_gone_after_a_run_and_after_a_hangup(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    subprocess.run(["/bin/sh", "-c", _script(node_command.wrap(COMMAND, MARKER))], env=env, capture_output=True)
    assert list(tmp_path.iterdir()) == []
    # the connection's terminal hangs up while the command runs: dash runs no EXIT trap on an untrapped signal
    # A terminal's session starts with SIGHUP at its default; a test command started under nohup (or from a job that
    # ignores SIGHUP) hands SIG_IGN down, and a shell cannot trap a signal ignored on entry (POSIX, trap): the
    # wrapper would then run its command to the end and exit 0, whatever it does (the failures of 2026-12-02's runs)
    # (env --default-signal, coreutils >= 8.31: no preexec_fn in a threaded pytest worker)
    process = subprocess.Popen(
        ["env", "--default-signal=HUP", "/bin/sh", "-c", _script(node_command.wrap("sleep 30", MARKER))],
        env=env,
        start_new_session=True,
    )
    # the command runs: its `sleep` is in the group (a hangup sent before the wrapper forked it would not reach it,
    # and the wrapper would wait the 30 s for it before its trap runs; CI's busy machine once took that long)
    deadline = time.monotonic() + 120
    while not _sleep_in_group(process.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _sleep_in_group(process.pid), "the wrapper never started its command"
    assert len(list(tmp_path.iterdir())) == 2  # the two files exist while it runs (the oracle)
    os.killpg(process.pid, signal.SIGHUP)  # a hangup reaches the terminal's whole process group
    assert process.wait(timeout=120) == 129
    assert list(tmp_path.iterdir()) == []


def _sleep_in_group(pgid: int) -> bool:
    """Whether a `sleep` runs in the process group."""
    for proc in Path("/proc").iterdir():
        try:
            ours = proc.name.isdigit() and os.getpgid(int(proc.name)) == pgid
            if ours and (proc / "cmdline").read_bytes().split(b"\0")[0].endswith(b"sleep"):
                return True
        except OSError:  # the process ended meanwhile
            continue
    return False


def test_the_shells_own_complaint_is_the_stderr_when_the_command_wrote_none():
    complaint = "sh: 1: cannot create /tmp/tmp.x: No space left on device"
    printed = f"{complaint}\n{MARKER}-out\n\n{MARKER}-err\n\n{MARKER}-rc 2\n"
    read = node_command.decode("containerd config default", MARKER, {"rc": 0, "stdout": printed, "stderr": ""})
    assert read == {"rc": 2, "stdout": "", "stderr": complaint}


# --------------------------------------------------------------------------- the action under gpunode_mitogen

WARNING = 'time="2026-12-01T09:00:00Z" level=warning msg="TEST STAND-IN: containerd warns on stderr"'


def test_containerd_config_under_mitogen_with_containerd_warning_on_stderr(containerd, tmp_path, monkeypatch):  # noqa: F811
    """containerd_config's node commands (`--version`, `config default`, the `config dump`s) run through mitogen's
    emulated terminal: the config is written and read back as TOML, and a second run changes nothing."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    standin = bindir / "containerd"  # TEST STAND-IN: the real containerd 2.3.4 behind a warning on stderr
    standin.write_text(f"#!/bin/sh\necho '{WARNING}' >&2\nexec {containerd} \"$@\"\n")
    standin.chmod(0o755)
    config = tmp_path / "etc" / "containerd" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(subprocess.run([str(containerd), "config", "default"], capture_output=True, text=True).stdout)
    play = {
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "environment": {"PATH": f"{bindir}:{os.environ['PATH']}"},
        "tasks": [
            {
                "name": f"Configure containerd ({n})",
                "gpunode.provisioning.containerd_config": {
                    "path": str(config),
                    "runtime": {"name": "nvidia", "path": "/usr/bin/nvidia-container-runtime"},
                    "enable_cdi": True,
                },
                "register": f"run{n}",
            }
            for n in (1, 2)
        ]
        + [{"name": "Report", "ansible.builtin.debug": {"msg": "CHANGED={{ run1.changed }},{{ run2.changed }}"}}],
    }
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([play]))
    monkeypatch.setenv("ANSIBLE_STRATEGY", "gpunode_mitogen")
    monkeypatch.setenv("ANSIBLE_DEPRECATION_WARNINGS", "False")
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    result = run_local_playbook(playbook)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "CHANGED=True,False" in result.stdout, result.stdout
    assert "mitogen is not usable" not in result.stdout + result.stderr
    written = tomlkit.parse(config.read_text())
    runtimes = written["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]
    assert runtimes["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
