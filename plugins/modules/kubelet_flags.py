#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

DOCUMENTATION = r"""
module: kubelet_flags
short_description: Merge kubelet command-line flags and node labels into KUBELET_EXTRA_ARGS
description:
  - Edits the C(KUBELET_EXTRA_ARGS=...) line of the kubelet's environment file (C(/etc/default/kubelet) on
    Debian and Ubuntu, C(/etc/sysconfig/kubelet) on RHEL and its rebuilds), which kubeadm's systemd drop-in
    appends to the kubelet's command line last, so these flags win over every other source.
  - Adds, replaces and removes single flags. Every other flag keeps its text and its place, and every other line
    of the file is kept byte for byte.
  - C(--node-labels) is handled as a map of labels, not as a string. The labels of every C(--node-labels)
    occurrence are read (a later one wins, as in the kubelet), O(node_labels) are set, O(node_labels_absent) are
    removed, and the result is written back as one C(--node-labels=key=value,...) in the place of the first
    occurrence. Labels that are not named keep their value and order.
  - Reads C(--flag=value), C(--flag value), C(-flag) and bare boolean C(--flag) forms. A token after a flag
    without C(=) is taken as that flag's value unless it starts with C(-). The module writes the flags it sets
    as C(--flag=value), which is unambiguous for boolean flags too.
  - Reads double-quoted, single-quoted and unquoted values, and a file that starts with a UTF-8 byte order mark
    (the mark is dropped when the file is written, since a shell that sources the file would take it as part of the
    first line). The value is split at whitespace, as systemd does for C($KUBELET_EXTRA_ARGS).
  - The line it edits is always written in single quotes, C(KUBELET_EXTRA_ARGS='--flag=value ...'). A shell
    that sources the file and systemd's C(EnvironmentFile=) both take single-quoted text verbatim, so both read
    exactly these flags; C($(...)), backticks, C($VAR), C(<) and C(;) in a value are never run or expanded.
    A flag (set by the task or already in the file) holding a single quote, a double quote, a backslash or a
    control character cannot be written that way (systemd removes quotes and backslashes when it splits the
    value on the command line, a shell does not) and is refused with its name; the file is left as it is.
  - When the file assigns the variable more than once, the last assignment (the one systemd uses) is edited and
    a warning names the others. A missing line is appended; a missing file is created when O(create=true).
  - Nothing is written when the flags and labels already have the wanted values. Otherwise the new file is
    written to a temporary file next to it, checked with O(validate), and moved into place atomically; a
    failure leaves the file byte for byte unchanged.
  - Runs on the managed node with the Python standard library only.
version_added: "0.1.0"
author: gpu-node-provisioning contributors (!UNKNOWN)
options:
  path:
    description:
      - Path of the environment file.
    type: path
    required: true
  variable:
    description:
      - Name of the variable that holds the flags.
    type: str
    default: KUBELET_EXTRA_ARGS
  flags:
    description:
      - Flags to set, name to value. Names may be written with or without the leading C(--).
      - A flag that is already there gets the new value in its place; a new flag is appended.
      - A value of V(null) writes a bare C(--flag). Booleans are written as V(true) and V(false).
      - Values must not contain whitespace, quotes, backslashes or control characters.
      - C(node-labels) cannot be set here; use O(node_labels).
    type: dict
    default: {}
  flags_absent:
    description:
      - Names of flags to remove, every occurrence, with their values. Names may start with C(--).
      - C(node-labels) cannot be removed here; use O(node_labels_absent).
    type: list
    elements: str
    default: []
  node_labels:
    description:
      - Labels to set in C(--node-labels), key to value. Labels already there and not named here are kept.
      - Keys are C([prefix/]name) and values at most 63 characters, as Kubernetes requires. Keys in the
        C(kubernetes.io) and C(k8s.io) namespaces that the kubelet refuses (for example
        C(node-role.kubernetes.io/gpu)) are rejected.
      - Booleans and numbers are written as strings (V(true), V(false), V(8)).
    type: dict
    default: {}
  node_labels_absent:
    description:
      - Label keys to remove from C(--node-labels). When no label is left the flag itself is removed.
    type: list
    elements: str
    default: []
  create:
    description:
      - Create the file (mode C(0644) unless O(mode) says otherwise) when it does not exist and something is to be
        set. With V(false) a missing file is an error when there is something to set.
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.files
  - gpunode.provisioning.gpunode_file_write
  - gpunode.provisioning.gpunode_file_write.module_lock
notes:
  - The kubelet reads the file only when it starts; notify a handler that restarts it when RV(changed) is true.
  - Command-line flags override the kubelet's configuration file and drop-ins. Remove flags whose setting moved
    to the configuration (for example C(--cgroup-driver)) with O(flags_absent).
  - Line continuations (a trailing backslash) and backslash escapes are not supported; the module fails with a
    message naming the line instead of guessing.
seealso:
  - name: kubelet command-line reference
    description: Every flag of the kubelet, with its default.
    link: https://kubernetes.io/docs/reference/command-line-tools-reference/kubelet/
  - name: Configuring each kubelet in your cluster using kubeadm
    description: Where kubeadm puts the kubelet's flags (KUBELET_KUBEADM_ARGS, KUBELET_EXTRA_ARGS).
    link: https://kubernetes.io/docs/setup/production-environment/tools/kubeadm/kubelet-integration/
"""

EXAMPLES = r"""
- name: Point the kubelet at its drop-in directory and label the node as a GPU node
  kubelet_flags:
    path: /etc/default/kubelet
    flags:
      config-dir: /etc/kubernetes/kubelet.conf.d
    node_labels:
      nvidia.com/gpu.present: "true"
      example.com/gpu-pool: a100
    backup: true
  notify: Restart kubelet

- name: Remove flags that moved to the KubeletConfiguration, and an old label
  kubelet_flags:
    path: /etc/sysconfig/kubelet
    flags_absent:
      - --cgroup-driver
      - --container-runtime-endpoint
    node_labels_absent:
      - example.com/legacy
"""

RETURN = r"""
extra_args:
  description: The variable's value after the change (what the file holds, or would hold in check mode).
  returned: success
  type: str
  sample: --config-dir=/etc/kubernetes/kubelet.conf.d --node-labels=nvidia.com/gpu.present=true
flags:
  description:
    - Every flag in the value after the change, name (without dashes) to value; V(null) for a bare flag.
    - For a flag given more than once, the last value. C(node-labels) is left out; see RV(node_labels).
  returned: success
  type: dict
  sample: {config-dir: /etc/kubernetes/kubelet.conf.d, v: "2"}
node_labels:
  description: The labels in C(--node-labels) after the change.
  returned: success
  type: dict
  sample: {nvidia.com/gpu.present: "true", example.com/gpu-pool: a100}
backup_file:
  description: Path of the backup copy of the previous file.
  returned: changed and O(backup) is true and the file existed
  type: str
  sample: /var/backups/gpu-node-provisioning/etc/default/kubelet.2025-01-31@12:00:00~
diff:
  description: The file's text before and after, in diff mode.
  returned: diff mode
  type: dict
  sample:
    before: "KUBELET_EXTRA_ARGS=\n"
    after: "KUBELET_EXTRA_ARGS=\"--config-dir=/etc/kubernetes/kubelet.conf.d\"\n"
    before_header: /etc/default/kubelet (before)
    after_header: /etc/default/kubelet (after)
changed:
  description: Whether the file (content or attributes) changed, or would change in check mode.
  returned: always
  type: bool
"""

import re
from typing import NamedTuple

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpunode.provisioning.plugins.module_utils.files.edit import (
    FileEditError,
    apply_edit,
    locked,
    read_text,
)
from ansible_collections.gpunode.provisioning.plugins.module_utils.kubernetes.names import (
    kubelet_label_error,
    label_value_error,
    qualified_name_error,
)

LABELS_FLAG = "node-labels"
_FLAG_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_VARIABLE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_UNSAFE_VALUE_RE = re.compile(r"[\s\"'\\\x00-\x1f\x7f\ufeff]")
# What no flag may hold once the line is rewritten: a single quote ends the quoting; a double quote or a
# backslash is unquoted by systemd when it splits $KUBELET_EXTRA_ARGS on the command line but kept by a shell;
# control characters and the byte order mark are not text either reader keeps.
_UNQUOTABLE_RE = re.compile(r"[\"'\\\x00-\x1f\x7f\ufeff]")
BOM = "\ufeff"


class FlagsError(Exception):
    """A problem with the file or the task's arguments; the message is meant for the user."""


class Arg(NamedTuple):
    """One command-line argument as it appears in the value.

    ``name`` is the flag name without dashes (None for a token that is not a
    flag), ``value`` its value (None for a bare flag), ``text`` the original
    text: one token, or two joined by a space for the ``--flag value`` form.
    """

    name: str | None
    value: str | None
    text: str


class Assignment(NamedTuple):
    """Where and how the file assigns the variable.

    ``index`` is the line number (0-based, None when there is no assignment);
    the line reads ``head + quote + value + quote + tail``.
    """

    index: int | None
    head: str
    quote: str
    value: str
    tail: str


# --- parsing -----------------------------------------------------------------------------------------------


def normalize_flag_name(name: str) -> str:
    """``--config-dir`` / ``-config-dir`` / ``config-dir`` -> ``config-dir``."""
    return name.lstrip("-")


def parse_args(value: str) -> list[Arg]:
    """Split a flags value at whitespace into Args (see Arg); the inverse of render_args."""
    tokens = value.split()
    args: list[Arg] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        body = token.lstrip("-")
        if token.startswith("-") and body:
            name, has_value, flag_value = body.partition("=")
            if has_value:
                args.append(Arg(name, flag_value, token))
            elif index + 1 < len(tokens) and not tokens[index + 1].startswith("-"):
                args.append(Arg(name, tokens[index + 1], f"{token} {tokens[index + 1]}"))
                index += 1
            else:
                args.append(Arg(name, None, token))
        else:
            args.append(Arg(None, None, token))
        index += 1
    return args


def render_args(args: list[Arg]) -> str:
    return " ".join(arg.text for arg in args)


def parse_labels(value: str | None, path: str) -> dict:
    """Parse a ``--node-labels`` value (``k=v,k2=v2``) into a dict, in order."""
    labels: dict = {}
    if not value:
        return labels
    for item in value.split(","):
        if not item.strip():
            continue  # the kubelet skips empty items too
        key, has_value, label_value = item.partition("=")
        if not has_value or not key.strip():
            raise FlagsError(
                f"{path}: --node-labels holds {item!r}, which is not key=value (the whole value is {value!r}). "
                "Fix --node-labels in the file (labels are comma-separated key=value pairs), then run again."
            )
        labels[key.strip()] = label_value.strip()
    return labels


def render_labels(labels: dict) -> str:
    return ",".join(f"{key}={value}" for key, value in labels.items())


def _split_quoted(rest: str, path: str, lineno: int, variable: str) -> tuple[str, str, str]:
    """Split the text after ``VAR=`` into (quote, value, tail)."""
    where = f"{path} line {lineno}"
    if rest[:1] in ('"', "'"):
        quote = rest[0]
        end = rest.find(quote, 1)
        if end < 0:
            raise FlagsError(
                f"{where}: the {variable} value opens a {quote} quote that is not closed on the same line. "
                "Put the whole value on one line, then run again."
            )
        value, tail = rest[1:end], rest[end + 1 :]
        if quote == '"' and "\\" in value:
            raise FlagsError(
                f"{where}: the {variable} value contains a backslash; escapes are not supported. "
                "Remove the backslash (kubelet flags do not need one), then run again."
            )
        if tail.strip() and not tail.lstrip().startswith("#"):
            raise FlagsError(
                f"{where}: there is text after the closing quote of {variable} ({tail.strip()!r}). "
                f"Move it inside the quotes or onto its own line, then run again."
            )
        return quote, value, tail
    value = rest.rstrip()
    tail = rest[len(value) :]
    if value.endswith("\\"):
        raise FlagsError(
            f"{where}: the {variable} value continues on the next line (trailing backslash), which is not "
            "supported. Put the whole value on one line, then run again."
        )
    if any(char in value for char in "\"'\\"):
        raise FlagsError(
            f"{where}: the unquoted {variable} value contains quotes or backslashes. "
            f'Quote the whole value instead ({variable}="--flag=value ..."), then run again.'
        )
    return "", value, tail


def find_assignment(lines: list[str], variable: str, path: str) -> tuple[Assignment | None, list[int]]:
    """Return the last assignment of ``variable`` and the line numbers (1-based) of earlier ones."""
    pattern = re.compile(rf"^(\s*(?:export\s+)?{re.escape(variable)}=)(.*)\Z")
    found: list[tuple[int, re.Match]] = []
    for index, line in enumerate(lines):
        match = pattern.match(line.rstrip("\r\n"))
        if match:
            found.append((index, match))
    if not found:
        return None, []
    index, match = found[-1]
    quote, value, tail = _split_quoted(match.group(2), path, index + 1, variable)
    return Assignment(index, match.group(1), quote, value, tail), [i + 1 for i, _match in found[:-1]]


# --- checking the task's arguments -------------------------------------------------------------------------


def _flag_value_text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    raise FlagsError(f"is a {type(value).__name__}; use a string, number, boolean or null")


def normalize_flags(flags: dict, flags_absent: list) -> tuple[dict, list]:
    """Check and normalise the flags options: names without dashes, values as strings (None = bare)."""
    wanted: dict = {}
    for raw_name, raw_value in flags.items():
        name = normalize_flag_name(str(raw_name))
        if not _FLAG_NAME_RE.match(name):
            raise FlagsError(f"flags: {raw_name!r} is not a flag name (letters, digits, '-', '_' and '.').")
        if name == LABELS_FLAG:
            raise FlagsError("flags: set labels with the node_labels option, not as a node-labels flag.")
        if name in wanted:
            raise FlagsError(f"flags: {name!r} is given twice (with and without dashes). Keep one.")
        try:
            value = _flag_value_text(raw_value)
        except FlagsError as exc:
            raise FlagsError(f"flags: the value of {name!r} {exc}.") from None
        if value is not None and _UNSAFE_VALUE_RE.search(value):
            raise FlagsError(
                f"flags: the value of {name!r} ({value!r}) contains whitespace, a quote or a backslash, which "
                "cannot be passed through KUBELET_EXTRA_ARGS. Use a value without them."
            )
        wanted[name] = value
    absent = []
    for raw_name in flags_absent:
        name = normalize_flag_name(raw_name)
        if not _FLAG_NAME_RE.match(name):
            raise FlagsError(f"flags_absent: {raw_name!r} is not a flag name (letters, digits, '-', '_' and '.').")
        if name == LABELS_FLAG:
            raise FlagsError("flags_absent: remove labels with the node_labels_absent option, not the whole flag.")
        if name in wanted:
            raise FlagsError(f"{name!r} is both in flags and in flags_absent. Keep it in one of them.")
        absent.append(name)
    return wanted, absent


def normalize_labels(node_labels: dict, node_labels_absent: list) -> tuple[dict, list]:
    """Check the label options against Kubernetes' and the kubelet's rules; values become strings."""
    wanted: dict = {}
    problems: list[str] = []
    for key, raw_value in node_labels.items():
        if isinstance(raw_value, bool):
            value = "true" if raw_value else "false"
        elif isinstance(raw_value, (int, float)):
            value = str(raw_value)
        else:
            value = raw_value
        problem = qualified_name_error(key) or kubelet_label_error(key) or label_value_error(value)
        if problem:
            problems.append(problem)
        else:
            wanted[key] = value
    for key in node_labels_absent:
        problem = qualified_name_error(key)
        if problem:
            problems.append(f"node_labels_absent: {problem}")
        elif key in wanted:
            problems.append(f"label {key!r} is both in node_labels and in node_labels_absent; keep it in one of them")
    if problems:
        raise FlagsError("node_labels: " + "; ".join(problems) + ".")
    return wanted, list(node_labels_absent)


# --- editing -------------------------------------------------------------------------------------------------


def _flag_arg(name: str, value: str | None) -> Arg:
    return Arg(name, value, f"--{name}" if value is None else f"--{name}={value}")


def apply_labels(args: list[Arg], node_labels: dict, node_labels_absent: list, path: str) -> tuple[list[Arg], dict]:
    """Merge labels into the ``--node-labels`` occurrences of ``args``; return (new args, resulting labels)."""
    positions = [index for index, arg in enumerate(args) if arg.name == LABELS_FLAG]
    current: dict = {}
    for index in positions:
        current.update(parse_labels(args[index].value, path))
    labels = dict(current)
    for key in node_labels_absent:
        labels.pop(key, None)
    labels.update(node_labels)
    if labels == current:
        return list(args), current
    result = [arg for index, arg in enumerate(args) if index not in positions[1:]]
    new_arg = _flag_arg(LABELS_FLAG, render_labels(labels))
    if positions:
        first = positions[0]
        if labels:
            result[first] = new_arg
        else:
            del result[first]
    elif labels:
        result.append(new_arg)
    return result, labels


def apply_flags(args: list[Arg], flags: dict, flags_absent: list) -> list[Arg]:
    """Set ``flags`` (normalised) in place or appended, and drop every occurrence of ``flags_absent``."""
    result = [arg for arg in args if arg.name not in flags_absent]
    for name, value in flags.items():
        positions = [index for index, arg in enumerate(result) if arg.name == name]
        if positions and all(result[index].value == value for index in positions):
            continue
        new_arg = _flag_arg(name, value)
        if not positions:
            result.append(new_arg)
            continue
        result[positions[0]] = new_arg
        result = [arg for index, arg in enumerate(result) if index not in positions[1:]]
    return result


def effective_flags(args: list[Arg]) -> dict:
    return {arg.name: arg.value for arg in args if arg.name is not None and arg.name != LABELS_FLAG}


def compute(
    text: str | None,
    path: str,
    variable: str,
    flags: dict,
    flags_absent: list,
    node_labels: dict,
    node_labels_absent: list,
) -> dict:
    """Compute the new file content. Pure: no I/O.

    Returns a dict with ``after`` (new text, equal to ``text`` when nothing
    changes), ``changed``, ``extra_args``, ``flags``, ``node_labels`` and
    ``warnings``. ``text`` None means the file does not exist.
    """
    had_bom = (text or "").startswith(BOM)
    lines = (text or "")[len(BOM) if had_bom else 0 :].splitlines(keepends=True)
    assignment, earlier = find_assignment(lines, variable, path)
    warnings = []
    if earlier:
        lines_text = ", ".join(map(str, [*earlier, assignment.index + 1]))
        warnings.append(
            f"{path} assigns {variable} more than once (lines {lines_text}); systemd uses the last one "
            f"(line {assignment.index + 1}), so only that one is edited. Remove the earlier ones to avoid confusion."
        )
    old_value = assignment.value if assignment else ""
    args = parse_args(old_value)
    labels = None
    new_args = args
    if node_labels or node_labels_absent:
        new_args, labels = apply_labels(args, node_labels, node_labels_absent, path)
    new_args = apply_flags(new_args, flags, flags_absent)
    if labels is None:
        labels = {}
        try:
            for arg in new_args:
                if arg.name == LABELS_FLAG:
                    labels.update(parse_labels(arg.value, path))
        except FlagsError:
            labels = {}  # not ours to judge when no label is managed
    changed = [arg.text for arg in new_args] != [arg.text for arg in args]
    new_value = render_args(new_args) if changed else old_value
    result = dict(
        changed=changed,
        after=text or "",
        extra_args=new_value,
        flags=effective_flags(new_args),
        node_labels=labels,
        warnings=warnings,
    )
    if not changed:
        return result
    for arg in new_args:
        bad = _UNQUOTABLE_RE.search(arg.text)
        if bad:
            what = f"the flag --{arg.name}" if arg.name else f"the argument {arg.text!r}"
            raise FlagsError(
                f"{path}: {what} ({arg.text!r}) holds {bad.group()!r}, which cannot be quoted so that a shell that "
                f"sources the file and systemd's EnvironmentFile both read the same flags. {path} was left "
                "unchanged; remove that character from the flag (in the file or in the task), then run again."
            )
    if had_bom:
        warnings.append(
            f"{path} started with a UTF-8 byte order mark, which a shell that sources the file takes as part of the "
            "first line; it was removed."
        )
    if assignment is None:
        line = f"{variable}='{new_value}'\n"
        body = "".join(lines)
        if body and not body.endswith("\n"):
            body += "\n"
        result["after"] = body + line
        return result
    # Single quotes: a shell that sources the file and systemd's EnvironmentFile both take everything up to the
    # next single quote verbatim ($, `, <, ; included), so both read exactly these flags.
    old_line = lines[assignment.index]
    newline = old_line[len(old_line.rstrip("\r\n")) :]
    lines[assignment.index] = f"{assignment.head}'{new_value}'{assignment.tail}{newline}"
    result["after"] = "".join(lines)
    return result


def check_result(after: str, path: str, variable: str, flags: dict, flags_absent: list, labels: dict | None) -> None:
    """Read the new content back and make sure it says what was asked for (guards against rendering bugs)."""
    assignment, _indexes = find_assignment(after.splitlines(keepends=True), variable, path)
    args = parse_args(assignment.value if assignment else "")
    got = effective_flags(args)
    wrong = [name for name, value in flags.items() if name not in got or got[name] != value]
    wrong += [name for name in flags_absent if name in got]
    if labels is not None:
        current: dict = {}
        for arg in args:
            if arg.name == LABELS_FLAG:
                current.update(parse_labels(arg.value, path))
        if current != labels:
            wrong.append(LABELS_FLAG)
    if wrong:
        raise FlagsError(
            f"internal error: the new {path} would not read back as intended for {', '.join(wrong)}. "
            f"{path} was left unchanged; please report this with the file's content."
        )


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            variable=dict(type="str", default="KUBELET_EXTRA_ARGS"),
            flags=dict(type="dict", default={}),
            flags_absent=dict(type="list", elements="str", default=[]),
            node_labels=dict(type="dict", default={}),
            node_labels_absent=dict(type="list", elements="str", default=[]),
            create=dict(type="bool", default=True),
            backup=dict(type="bool", default=False),
            validate=dict(type="str"),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    params = module.params
    path = params["path"]
    variable = params["variable"]
    if not _VARIABLE_RE.match(variable):
        module.fail_json(msg=f"variable must be a shell variable name (letters, digits, '_'), got {variable!r}")
    if params["validate"] is not None and "%s" not in params["validate"]:
        module.fail_json(msg=f"validate must contain %s (the candidate file's path), got: {params['validate']}")

    try:
        with locked(path, module.check_mode) as path:
            _edit(module, path, variable)
    except FileEditError as exc:
        module.fail_json(msg=str(exc), **exc.details)


def _edit(module, path, variable):
    """Read, merge and write ``path`` (resolved, its lock held); exit the module."""
    params = module.params
    try:
        flags, flags_absent = normalize_flags(params["flags"], params["flags_absent"])
        labels, labels_absent = normalize_labels(params["node_labels"], params["node_labels_absent"])
        before = read_text(path, directory_fix="Set path to the kubelet's environment file.")
        computed = compute(before, path, variable, flags, flags_absent, labels, labels_absent)
        if computed["changed"]:
            managed_labels = computed["node_labels"] if (labels or labels_absent) else None
            check_result(computed["after"], path, variable, flags, flags_absent, managed_labels)
    except (FlagsError, FileEditError) as exc:
        module.fail_json(msg=str(exc))

    changed = computed["changed"]
    if changed and before is None and not params["create"]:
        module.fail_json(msg=f"{path} does not exist and create is false. Create the file, or set create: true.")
    for warning in computed["warnings"]:
        module.warn(warning)
    result = dict(
        changed=changed,
        extra_args=computed["extra_args"],
        flags=computed["flags"],
        node_labels=computed["node_labels"],
    )
    try:
        result.update(
            apply_edit(
                module,
                path,
                before,
                computed["after"],
                changed,
                validate=params["validate"],
                validate_fix="fix the flags or the validate command",
                backup=params["backup"],
            )
        )
    except FileEditError as exc:
        module.fail_json(msg=str(exc))

    module.exit_json(**result)


if __name__ == "__main__":
    main()
