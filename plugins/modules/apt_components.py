#!/usr/bin/python
# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Add archive components (contrib, non-free, ...) to existing APT source entries."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: apt_components
short_description: Make sure APT source entries of chosen archives carry the given components
description:
  - Edits an existing APT source file in place so that every entry for the given archive URIs and suites
    lists the given components (for example C(contrib), C(non-free) and C(non-free-firmware) for Debian).
  - Works on both formats APT reads, the one-line format (C(/etc/apt/sources.list), C(*.list)) and the
    deb822 format (C(*.sources)).
  - Only the component list of matching entries changes. Comments, blank lines, option lists, other entries
    and other stanzas are kept byte for byte; missing components are appended after the existing ones.
  - Entries are matched by type (C(deb) unless O(types) says otherwise), URI (shell-style patterns) and
    suite. Disabled deb822 stanzas (an C(Enabled) field of C(no)), commented-out lines and flat repositories
    (suites that end in C(/)) are never touched.
  - The file is parsed before anything is written; a file APT itself would reject is left unchanged and the
    task fails naming the line and the problem.
  - The module does not update the package index; run M(ansible.builtin.apt) with C(update_cache=true) when
    it reports a change.
version_added: "0.1.0"
author:
  - gpu-node-provisioning contributors (!UNKNOWN)
options:
  path:
    description:
      - The APT source file to edit. It must exist.
    type: path
    required: true
  components:
    description:
      - The components every matching entry must list, in the order they are appended when missing.
    type: list
    elements: str
    required: true
  suites:
    description:
      - Suites (distribution codenames such as C(bookworm) or C(trixie-security)) whose entries are edited.
      - A deb822 stanza is edited when any of its suites is in this list.
    type: list
    elements: str
    required: true
  uris:
    description:
      - Archive URIs whose entries are edited, as shell-style patterns (C(*), C(?), C([...])).
      - Matching ignores letter case and a trailing slash, so V(http://deb.debian.org/debian) also matches
        C(http://deb.debian.org/debian/).
      - A deb822 stanza is edited when any of its URIs matches.
    type: list
    elements: str
    required: true
  types:
    description:
      - Entry types to edit. A deb822 stanza is edited when any of its types is in this list.
    type: list
    elements: str
    choices: [deb, deb-src]
    default: [deb]
  format:
    description:
      - Format of the file. V(auto) picks V(deb822) for names ending in C(.sources) and V(one-line) otherwise.
    type: str
    choices: [auto, deb822, one-line]
    default: auto
extends_documentation_fragment:
  - ansible.builtin.files
  - ansible.builtin.action_common_attributes
  - gpunode.provisioning.gpunode_file_write
  - gpunode.provisioning.gpunode_file_write.module_lock
attributes:
  platform:
    support: full
    platforms: debian
notes:
  - Only the standard library is used on the managed node.
seealso:
  - module: ansible.builtin.apt_repository
  - module: ansible.builtin.deb822_repository
"""

EXAMPLES = r"""
- name: Include contrib, non-free and non-free-firmware in Debian's deb822 sources
  apt_components:
    path: /etc/apt/sources.list.d/debian.sources
    components: [contrib, non-free, non-free-firmware]
    suites: [trixie, trixie-updates, trixie-security]
    uris:
      - "*://deb.debian.org/debian"
      - "*://deb.debian.org/debian-security"
      - "*://security.debian.org/debian-security"
    backup: true
  register: debian_components

- name: Refresh the package index when the components changed
  ansible.builtin.apt:
    update_cache: true
  when: debian_components is changed

- name: Same for a one-line sources.list, also for deb-src lines
  apt_components:
    path: /etc/apt/sources.list
    components: [contrib, non-free, non-free-firmware]
    suites: [bookworm, bookworm-updates, bookworm-security]
    uris: ["*://deb.debian.org/debian*", "*://security.debian.org/*"]
    types: [deb, deb-src]
"""

RETURN = r"""
format:
  description: The format the file was read as.
  returned: always
  type: str
  sample: deb822
matched:
  description: Number of entries (lines or stanzas) that match O(types), O(uris) and O(suites), changed or not.
  returned: always
  type: int
  sample: 2
entries:
  description: The matching entries that lacked components, with the 1-based line that was edited.
  returned: always
  type: list
  elements: dict
  sample: [{"line": 4, "added": ["contrib", "non-free"]}]
backup_file:
  description: Name of the backup copy of the original file.
  returned: when O(backup=true) and the file changed
  type: str
  sample: /var/backups/gpu-node-provisioning/etc/apt/sources.list.2025-01-01@10:00:00~
"""

import fnmatch
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.gpunode.provisioning.plugins.module_utils.files.edit import FileEditError, apply_edit, locked

DEB822_SUFFIX = ".sources"


class SourcesError(ValueError):
    """A problem in an APT source file; `line` is 1-based (0 when not tied to a line)."""

    def __init__(self, problem: str, line: int = 0, fix: str = ""):
        self.problem = problem
        self.line = line
        self.fix = fix
        where = f"line {line}: " if line else ""
        super().__init__(f"{where}{problem}" + (f"; {fix}" if fix else ""))


def detect_format(path: str, requested: str = "auto") -> str:
    """'deb822' or 'one-line' for `path`, honouring an explicit request."""
    if requested != "auto":
        return requested
    return "deb822" if path.endswith(DEB822_SUFFIX) else "one-line"


def uri_matches(uri: str, patterns: list[str]) -> bool:
    """True when `uri` matches one of the shell-style `patterns` (case and trailing slash ignored)."""
    candidate = uri.strip().rstrip("/").lower()
    return any(fnmatch.fnmatchcase(candidate, pattern.strip().rstrip("/").lower()) for pattern in patterns)


def _split_eol(line: str) -> tuple[str, str]:
    """Split a line (as kept by splitlines(keepends=True)) into its text and its line ending."""
    stripped = line.rstrip("\r\n")
    return stripped, line[len(stripped) :]


def _append_words(text: str, words: list[str]) -> str:
    """Append `words` after the last non-blank character of `text`, keeping trailing whitespace."""
    content = text.rstrip()
    return content + " " + " ".join(words) + text[len(content) :]


def _missing(present: list[str], wanted: list[str]) -> list[str]:
    seen = set(present)
    result = []
    for word in wanted:
        if word not in seen:
            result.append(word)
            seen.add(word)
    return result


def _comment_start(text: str) -> int:
    """Index where an end-of-line comment starts ('#' at the start or after whitespace), or len(text)."""
    for index, char in enumerate(text):
        if char == "#" and (index == 0 or text[index - 1] in " \t"):
            return index
    return len(text)


def parse_one_line_entry(code: str, lineno: int) -> dict:
    """Parse the code part of a one-line entry: {'type', 'options', 'uri', 'suite', 'components'}."""
    stripped = code.strip()
    parts = stripped.split(None, 1)
    entry_type = parts[0]
    if entry_type not in ("deb", "deb-src"):
        raise SourcesError(
            f"expected a 'deb' or 'deb-src' entry, found {entry_type!r}",
            lineno,
            "comment the line out with '#' or fix its type",
        )
    rest = parts[1].lstrip() if len(parts) > 1 else ""
    options = ""
    if rest.startswith("["):
        close = rest.find("]")
        if close < 0:
            raise SourcesError("the option list opened with '[' is never closed with ']'", lineno, "add the ']'")
        options = rest[1:close].strip()
        rest = rest[close + 1 :]
    words = rest.split()
    if len(words) < 2:
        raise SourcesError(
            f"a '{entry_type}' entry needs at least a URI and a suite",
            lineno,
            "write it as 'deb [options] URI SUITE [COMPONENT...]'",
        )
    return {
        "type": entry_type,
        "options": options,
        "uri": words[0],
        "suite": words[1],
        "components": words[2:],
    }


def edit_one_line(
    text: str, components: list[str], suites: list[str], uris: list[str], types: list[str] | None = None
) -> tuple[str, list[dict], int]:
    """Return (new_text, edits, matched) for a one-line format file."""
    types = types or ["deb"]
    lines = text.splitlines(keepends=True)
    edits: list[dict] = []
    matched = 0
    for index, line in enumerate(lines):
        lineno = index + 1
        body, eol = _split_eol(line)
        if not body.strip() or body.lstrip().startswith("#"):
            continue
        cut = _comment_start(body)
        code, comment = body[:cut], body[cut:]
        entry = parse_one_line_entry(code, lineno)
        if entry["type"] not in types or entry["suite"].endswith("/"):
            continue
        if entry["suite"] not in suites or not uri_matches(entry["uri"], uris):
            continue
        matched += 1
        missing = _missing(entry["components"], components)
        if missing:
            lines[index] = _append_words(code, missing) + comment + eol
            edits.append({"line": lineno, "added": missing})
    return "".join(lines), edits, matched


def parse_deb822(text: str) -> list[dict]:
    """Split deb822 text into stanzas: {'start': lineno, 'fields': {lower_name: field}}.

    A field is {'name', 'first': index, 'last': index, 'value': str}, with 0-based line indexes of its
    first and last (continuation) line. Comment lines ('#' in column one) are skipped.
    """
    stanzas: list[dict] = []
    current: dict | None = None
    last_field: dict | None = None
    for index, line in enumerate(text.splitlines()):
        lineno = index + 1
        if not line.strip():
            current, last_field = None, None
            continue
        if line.startswith("#"):
            continue
        if line[0] in " \t":
            if last_field is None:
                raise SourcesError(
                    "continuation line (it starts with whitespace) does not follow a field",
                    lineno,
                    "remove the leading whitespace or join it to the field above",
                )
            last_field["last"] = index
            last_field["value"] += " " + line.strip()
            continue
        name, colon, value = line.partition(":")
        name = name.strip()
        if not colon or not name or any(ch.isspace() for ch in name):
            raise SourcesError(
                f"{line.strip()!r} is not a 'Field: value' line",
                lineno,
                "deb822 stanzas hold only 'Field: value' lines, comments start with '#'",
            )
        if current is None:
            current = {"start": lineno, "fields": {}}
            stanzas.append(current)
        key = name.lower()
        if key in current["fields"]:
            raise SourcesError(
                f"field {name!r} appears twice in the stanza that starts on line {current['start']}",
                lineno,
                "merge the two values into one field",
            )
        last_field = {"name": name, "first": index, "last": index, "value": value.strip()}
        current["fields"][key] = last_field
    return stanzas


def _stanza_matches(stanza: dict, suites: list[str], uris: list[str], types: list[str]) -> bool:
    fields = stanza["fields"]
    start = stanza["start"]
    for required in ("types", "uris", "suites"):
        if required not in fields:
            raise SourcesError(
                f"the stanza that starts on line {start} has no {required.capitalize()!r} field",
                start,
                "every deb822 stanza needs Types, URIs and Suites",
            )
    if fields.get("enabled", {"value": "yes"})["value"].strip().lower() in ("no", "false"):
        return False
    if not set(fields["types"]["value"].split()) & set(types):
        return False
    stanza_suites = [suite for suite in fields["suites"]["value"].split() if not suite.endswith("/")]
    if not set(stanza_suites) & set(suites):
        return False
    return any(uri_matches(uri, uris) for uri in fields["uris"]["value"].split())


def edit_deb822(
    text: str, components: list[str], suites: list[str], uris: list[str], types: list[str] | None = None
) -> tuple[str, list[dict], int]:
    """Return (new_text, edits, matched) for a deb822 (.sources) file."""
    types = types or ["deb"]
    lines = text.splitlines(keepends=True)
    edits: list[dict] = []
    matched = 0
    for stanza in parse_deb822(text):
        if not _stanza_matches(stanza, suites, uris, types):
            continue
        matched += 1
        field = stanza["fields"].get("components")
        if field is None:
            raise SourcesError(
                f"the stanza that starts on line {stanza['start']} has no 'Components' field",
                stanza["start"],
                "add 'Components: main' (only suites ending in '/' may omit it)",
            )
        missing = _missing(field["value"].split(), components)
        if missing:
            body, eol = _split_eol(lines[field["last"]])
            lines[field["last"]] = _append_words(body, missing) + eol
            edits.append({"line": field["last"] + 1, "added": missing})
    return "".join(lines), edits, matched


def edit_sources(
    text: str,
    fmt: str,
    components: list[str],
    suites: list[str],
    uris: list[str],
    types: list[str] | None = None,
) -> tuple[str, list[dict], int]:
    """Dispatch to the editor for `fmt` ('deb822' or 'one-line')."""
    editor = edit_deb822 if fmt == "deb822" else edit_one_line
    return editor(text, components, suites, uris, types)


def _validator(module: AnsibleModule, path: str, validate: str):
    """The validate check of this module: ``validate % candidate`` through run_command, stdout/stderr on failure."""

    def check(candidate: str) -> None:
        if "%s" not in validate:
            raise FileEditError(f"validate must contain %s for the candidate file, got {validate!r}")
        rc, out, err = module.run_command(validate % candidate)
        if rc != 0:
            raise FileEditError(
                f"{path} was left unchanged: the candidate failed validation ({validate!r} exited {rc})",
                stdout=out,
                stderr=err,
            )

    return check


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "components": {"type": "list", "elements": "str", "required": True},
            "suites": {"type": "list", "elements": "str", "required": True},
            "uris": {"type": "list", "elements": "str", "required": True},
            "types": {"type": "list", "elements": "str", "choices": ["deb", "deb-src"], "default": ["deb"]},
            "format": {"type": "str", "choices": ["auto", "deb822", "one-line"], "default": "auto"},
            "backup": {"type": "bool", "default": False},
            "validate": {"type": "str"},
        },
        add_file_common_args=True,
        supports_check_mode=True,
    )
    path = module.params["path"]
    fmt = detect_format(path, module.params["format"])
    for option in ("components", "suites", "uris"):
        if not module.params[option]:
            module.fail_json(msg=f"{option} must name at least one entry")
    if not os.path.isfile(path):
        module.fail_json(msg=f"{path} does not exist or is not a regular file: point path at an existing APT source")
    try:
        with locked(path, module.check_mode) as path:
            _edit(module, path, fmt)
    except FileEditError as exc:
        module.fail_json(msg=str(exc), **exc.details)


def _edit(module: AnsibleModule, path: str, fmt: str) -> None:
    """Read, edit and write ``path`` (resolved, its lock held); exit the module."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
        before = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        module.fail_json(msg=f"{path} is not UTF-8 text ({exc}); APT source files must be UTF-8")
    except OSError as exc:
        module.fail_json(msg=f"cannot read {path}: {to_native(exc)}")

    try:
        after, edits, matched = edit_sources(
            before,
            fmt,
            module.params["components"],
            module.params["suites"],
            module.params["uris"],
            module.params["types"],
        )
    except SourcesError as exc:
        module.fail_json(msg=f"{path} was left unchanged: {exc}", line=exc.line)

    changed = after != before
    result = {"changed": changed, "format": fmt, "matched": matched, "entries": edits}
    validate = module.params["validate"]
    try:
        result.update(
            apply_edit(
                module,
                path,
                before,
                after,
                changed,
                diff_headers=(path, path),
                validate=_validator(module, path, validate) if validate else None,
                backup=module.params["backup"],
                backup_first=True,
                unsafe_writes=module.params["unsafe_writes"],
            )
        )
    except FileEditError as exc:
        module.fail_json(msg=str(exc), **exc.details)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
