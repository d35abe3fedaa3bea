# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""A shell command run as root on the node by an action plugin: its stdout and stderr apart whatever the connection.

``ActionBase._low_level_execute_command(cmd, sudoable=True)`` without ``in_data`` runs the command in a terminal on
the connections users run fleets with, and a terminal has one output stream:

- ansible-core's ``ssh`` connection passes ``-tt`` when ``sudoable`` and no ``in_data`` (its ``use_tty`` option,
  on by default; ansible/plugins/connection/ssh.py, ``_exec_command``, ansible-core 2.19);
- mitogen (the project's ``gpunode_mitogen`` strategy) emulates that: ``emulate_tty = (not in_data and sudoable)``
  (ansible_mitogen/connection.py, mitogen 0.3.54), whereupon ansible_mitogen/target.py ``exec_args`` sends stderr to
  stdout and ends every line with CRLF.

So a warning the command writes to stderr lands in the stdout a plugin parses (a TOML document, a version line).
``run`` keeps them apart on the node: the command writes each stream to a file of its own (``mktemp``, readable by
root only, removed at exit and on a hangup), and the wrapper prints both base64-encoded between markers of this
call, then the exit code. Base64 goes through a terminal unharmed (the CR it adds is whitespace, which the decoder
drops), and the markers skip whatever the connection adds around the output. The node needs ``/bin/sh``,
``mktemp`` and ``base64`` (coreutils, on every distribution the project supports; busybox has both too).

Controller plugins import it as ``ansible_collections.gpunode.provisioning.plugins.plugin_utils.node_command``.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
import shlex

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text


def wrap(command: str, marker: str) -> str:
    """The shell command that runs ``command`` (a shell command line) and prints its streams framed by ``marker``."""
    # the files are removed at exit, a hangup of the connection's terminal included (dash runs no EXIT trap on a
    # signal it does not trap); mktemp makes them readable by root only, whatever the command's umask
    script = (
        "o= e=; trap 'rm -f ${o:+\"$o\"} ${e:+\"$e\"}' EXIT; trap 'exit 129' HUP; trap 'exit 130' INT; "
        "trap 'exit 143' TERM; o=$(mktemp) && e=$(mktemp) || exit 125; "
        f'/bin/sh -c {shlex.quote(command)} >"$o" 2>"$e" </dev/null; rc=$?; '
        f"printf '\\n%s\\n' '{marker}-out'; base64 <\"$o\"; "
        f"printf '\\n%s\\n' '{marker}-err'; base64 <\"$e\"; "
        f"printf '\\n%s %s\\n' '{marker}-rc' \"$rc\"; exit 0"
    )
    return f"/bin/sh -c {shlex.quote(script)}"


def decode(command: str, marker: str, result: dict) -> dict:
    """``{"rc", "stdout", "stderr"}`` of ``command`` from what the connection returned for ``wrap(command, marker)``;
    AnsibleActionFail naming the command and what the node printed when the wrapper's record is not there."""
    printed = to_text(result.get("stdout", ""), errors="surrogate_or_replace")
    found = re.search(
        rf"^{re.escape(marker)}-out\r?\n(.*?)^{re.escape(marker)}-err\r?\n(.*?)^{re.escape(marker)}-rc (\d+)\r?$",
        printed,
        re.S | re.M,
    )
    if found is None:
        said = (printed + "\n" + to_text(result.get("stderr", ""), errors="surrogate_or_replace")).strip()
        raise AnsibleActionFail(
            f"could not read the output of `{command}` on the node: the command that runs it as root (/bin/sh with "
            f"mktemp and base64, from coreutils) printed no result (rc={result.get('rc')}): {said[-500:]!r}. "
            "Install coreutils on the node (or fix the become method's login), then run again. Nothing was changed."
        )
    try:
        out, err = (base64.b64decode(re.sub(r"\s+", "", chunk), validate=True) for chunk in found.group(1, 2))
        streams = [to_text(part, errors="surrogate_or_replace") for part in (out, err)]
    except (binascii.Error, ValueError) as exc:
        raise AnsibleActionFail(
            f"could not read the output of `{command}` on the node: its base64 record is damaged ({exc}). "
            "Nothing was changed."
        ) from exc
    rc = int(found.group(3))
    if rc != 0 and not streams[1].strip():
        # the shell's own complaint (a redirection that failed: /tmp full) went to the wrapper's stderr, not the file
        streams[1] = (
            printed[: found.start()] + to_text(result.get("stderr", ""), errors="surrogate_or_replace")
        ).strip()
    return {"rc": rc, "stdout": streams[0], "stderr": streams[1]}


def run(action, command: str) -> dict:
    """Run ``command`` (a shell command line) as root on the node of ``action`` (an ActionBase):
    ``{"rc", "stdout", "stderr"}``, the two streams apart whatever the connection."""
    marker = f"GPUNODE-{secrets.token_hex(8)}"
    result = action._low_level_execute_command(wrap(command, marker), sudoable=True)
    return decode(command, marker, result)
