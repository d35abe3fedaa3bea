# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""The node-side reading of containerd's config (and of the other TOML configs the node reads: CRI-O's, NVIDIA's
toolkit's): the one model the facts, the GPU-pods guard and the doctor share (issue 51).

Standard library only, Python 3.8+ (the node's python3): ``toml_tables`` is tomllib where the python has it
(3.11+), else the small reader below, which reads TOML 1.0 as tomllib does: standard tables, arrays of tables,
dotted and quoted keys, inline tables, arrays over lines, the four kinds of strings, integers (decimal, hex, octal,
binary), floats, booleans, dates and times; comments. Text that is not TOML raises TomlError, saying the line and
what is wrong. The controller's merge edits with tomlkit (containerd/parse.py), which keeps comments and layout;
both take the CRI table of a config version from containerd/versions.py (CRI_TABLES).

What containerd reads in a parsed file (``cri_config``): the CRI plugin's table (containerd_versions.CRI_TABLES: of
the newest config version the file holds, as containerd 2.x migrates it), in it ``containerd.runtimes``,
``containerd.default_runtime_name`` and ``enable_cdi``.
"""

from __future__ import annotations

import datetime
import re

from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import versions as containerd_versions

try:
    from collections.abc import Mapping
except ImportError:  # pragma: no cover - Python 2 is no target
    Mapping = dict

try:
    import tomllib
except ImportError:  # Python < 3.11: the node's python3 on Debian 11/12, Ubuntu 22.04, EL 9
    tomllib = None


class TomlError(ValueError):
    """The text is not TOML; the message says where and why, ``line`` the line (1-based; None where unknown)."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        if line is None:
            found = re.search(r"\bline (\d+)", message)
            line = int(found.group(1)) if found else None
        self.line = line


# --- the small reader (Python < 3.11) ----------------------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_WS = " \t"
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}
_DATETIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"(?:[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))?)?"
)
_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?")
_DIGITS = r"\d(?:_?\d)*"
_FLOAT = re.compile(rf"[+-]?(?:0|[1-9](?:_?\d)*)(?:\.{_DIGITS}(?:[eE][+-]?{_DIGITS})?|[eE][+-]?{_DIGITS})")
_SPECIAL_FLOAT = re.compile(r"[+-]?(?:inf|nan)")
_INTEGER = re.compile(
    r"0x[0-9A-Fa-f](?:_?[0-9A-Fa-f])*|0o[0-7](?:_?[0-7])*|0b[01](?:_?[01])*|[+-]?(?:0|[1-9](?:_?\d)*)"
)
_VALUE_END = re.compile(r"[ \t]*(?:[,\]}#\r\n]|$)")


def _microseconds(fraction) -> int:
    return int((fraction or "0")[:6].ljust(6, "0"))


class _Reader:
    """One pass over the text, tables made as their headers and keys come (see toml_tables)."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self.root: dict = {}
        self.headed: set = set()  # ids of tables a [header] defined
        self.frozen: set = set()  # ids of inline tables and arrays given as values: nothing may add to them
        self.dotted: set = set()  # ids of tables a dotted key made: no [header] may define them again

    # where and why
    def fail(self, why: str, pos: int | None = None):
        pos = self.pos if pos is None else pos
        line = self.text.count("\n", 0, pos) + 1
        column = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        raise TomlError(f"{why} (line {line}, column {column})", line)

    def peek(self, size: int = 1) -> str:
        return self.text[self.pos : self.pos + size]

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _WS:
            self.pos += 1

    def skip_comment(self) -> None:
        if self.peek() == "#":
            end = self.text.find("\n", self.pos)
            self.pos = len(self.text) if end < 0 else end

    def skip_blank(self) -> None:
        """Whitespace, newlines and comments (between array items)."""
        while True:
            self.skip_ws()
            self.skip_comment()
            if self.peek() == "\n":
                self.pos += 1
            elif self.peek(2) == "\r\n":
                self.pos += 2
            else:
                return

    def end_of_line(self) -> None:
        self.skip_ws()
        self.skip_comment()
        if self.pos >= len(self.text):
            return
        if self.peek() == "\n":
            self.pos += 1
        elif self.peek(2) == "\r\n":
            self.pos += 2
        else:
            self.fail(f"text after the value: {self.text[self.pos : self.pos + 20]!r}")

    # the document
    def read(self) -> dict:
        table = self.root
        while True:
            self.skip_blank()
            if self.pos >= len(self.text):
                return self.root
            if self.peek(2) == "[[":
                table = self.array_table()
            elif self.peek() == "[":
                table = self.table()
            else:
                self.key_value(table)
            self.end_of_line()

    def key(self) -> tuple:
        parts = []
        while True:
            self.skip_ws()
            start = self.pos
            char = self.peek()
            if char == '"':
                if self.peek(3) == '"""':
                    self.fail("a key cannot be a multi-line string")
                parts.append(self.basic_string())
            elif char == "'":
                if self.peek(3) == "'''":
                    self.fail("a key cannot be a multi-line string")
                parts.append(self.literal_string())
            else:
                match = _BARE_KEY.match(self.text, self.pos)
                if not match:
                    self.fail("a key is missing or has a character a bare key cannot have", start)
                parts.append(match.group(0))
                self.pos = match.end()
            self.skip_ws()
            if self.peek() != ".":
                return tuple(parts)
            self.pos += 1

    def descend(self, table: dict, part: str, header: bool) -> dict:
        """The table ``part`` of ``table`` (made when missing; the last of an array of tables)."""
        child = table.get(part)
        if child is None:
            child = table[part] = {}
            if not header:
                self.dotted.add(id(child))
        elif isinstance(child, list) and not header:
            self.fail(f"key {part!r} is an array: a dotted key cannot add to it")
        elif isinstance(child, list) and id(child) not in self.frozen and child and isinstance(child[-1], dict):
            child = child[-1]
        elif not isinstance(child, dict) or id(child) in self.frozen:
            self.fail(f"key {part!r} already holds a value: it cannot be a table")
        elif not header and id(child) in self.headed:
            self.fail(f"table {part!r} was defined by a header: a dotted key cannot add to it")
        return child

    def table(self) -> dict:
        self.pos += 1
        path = self.key()
        if self.peek() != "]":
            self.fail("a table header must end with ]")
        self.pos += 1
        table = self.root
        for part in path[:-1]:
            table = self.descend(table, part, True)
        last = path[-1]
        child = table.get(last)
        if child is None:
            child = table[last] = {}
        elif not isinstance(child, dict) or id(child) in self.frozen:
            self.fail(f"table [{'.'.join(path)}] redefines a value")
        elif id(child) in self.headed or id(child) in self.dotted:
            self.fail(f"table [{'.'.join(path)}] is defined twice")
        self.headed.add(id(child))
        return child

    def array_table(self) -> dict:
        self.pos += 2
        path = self.key()
        if self.peek(2) != "]]":
            self.fail("an array of tables' header must end with ]]")
        self.pos += 2
        table = self.root
        for part in path[:-1]:
            table = self.descend(table, part, True)
        items = table.setdefault(path[-1], [])
        if not isinstance(items, list) or id(items) in self.frozen:
            self.fail(f"[[{'.'.join(path)}]] adds to a value that is no array of tables")
        child: dict = {}
        items.append(child)
        self.headed.add(id(child))
        return child

    def key_value(self, table: dict) -> None:
        start = self.pos
        path = self.key()
        if self.peek() != "=":
            self.fail("expected `key = value`", start)
        self.pos += 1
        self.skip_ws()
        value = self.value()
        for part in path[:-1]:
            table = self.descend(table, part, False)
        if path[-1] in table:
            self.fail(f"key {'.'.join(path)!r} is set twice", start)
        table[path[-1]] = value

    # values
    def value(self):
        char = self.peek()
        if self.peek(3) == '"""':
            return self.multiline_string('"""')
        if self.peek(3) == "'''":
            return self.multiline_string("'''")
        if char == '"':
            return self.basic_string()
        if char == "'":
            return self.literal_string()
        if char == "[":
            return self.array()
        if char == "{":
            return self.inline_table()
        for word, value in (("true", True), ("false", False)):
            if self.text.startswith(word, self.pos) and _VALUE_END.match(self.text, self.pos + len(word)):
                self.pos += len(word)
                return value
        return self.number_or_date()

    def basic_string(self) -> str:
        self.pos += 1
        out = []
        while True:
            if self.pos >= len(self.text) or self.peek() in "\r\n":
                self.fail("unterminated string")
            char = self.peek()
            if char == '"':
                self.pos += 1
                return "".join(out)
            if char == "\\":
                out.append(self.escape())
            else:
                out.append(char)
                self.pos += 1

    def escape(self) -> str:
        code = self.text[self.pos + 1 : self.pos + 2]
        if code in _ESCAPES:
            self.pos += 2
            return _ESCAPES[code]
        if code in ("u", "U"):
            size = 4 if code == "u" else 8
            digits = self.text[self.pos + 2 : self.pos + 2 + size]
            if len(digits) != size or not re.fullmatch(r"[0-9A-Fa-f]+", digits):
                self.fail(f"\\{code} needs {size} hex digits")
            number = int(digits, 16)
            if number > 0x10FFFF or 0xD800 <= number <= 0xDFFF:
                self.fail(f"\\{code}{digits} is no Unicode scalar value")
            self.pos += 2 + size
            return chr(number)
        self.fail(f"unknown escape \\{code}")
        return ""

    def literal_string(self) -> str:
        end = self.pos + 1
        while end < len(self.text) and self.text[end] not in "'\n":
            end += 1
        if end >= len(self.text) or self.text[end] != "'":
            self.fail("unterminated string")
        value = self.text[self.pos + 1 : end]
        self.pos = end + 1
        return value

    def multiline_string(self, fence: str) -> str:
        self.pos += 3
        if self.peek() == "\n":
            self.pos += 1
        elif self.peek(2) == "\r\n":
            self.pos += 2
        out = []
        while True:
            if self.pos >= len(self.text):
                self.fail("unterminated multi-line string")
            if self.text.startswith(fence, self.pos):
                extra = 0  # one or two quotes right before the closing fence belong to the string
                while extra < 2 and self.text.startswith(fence[0], self.pos + 3 + extra):
                    extra += 1
                out.append(fence[0] * extra)
                self.pos += 3 + extra
                return "".join(out).replace("\r\n", "\n")
            char = self.peek()
            if char == "\\" and fence == '"""':
                rest = re.match(r"\\[ \t]*\r?\n", self.text[self.pos :])
                if rest:  # a line-ending backslash: the newline and the whitespace after it go
                    self.pos += rest.end()
                    while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
                        self.pos += 1
                else:
                    out.append(self.escape())
            else:
                out.append(char)
                self.pos += 1

    def array(self) -> list:
        self.pos += 1
        items: list = []
        while True:
            self.skip_blank()
            if self.peek() == "]":
                self.pos += 1
                break
            items.append(self.value())
            self.skip_blank()
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != "]":
                self.fail("an array's items are separated by commas and it ends with ]")
        self.frozen.add(id(items))
        return items

    def inline_table(self) -> dict:
        self.pos += 1
        table: dict = {}
        self.skip_ws()
        if self.peek() == "}":
            self.pos += 1
        else:
            while True:
                self.key_value(table)
                self.skip_ws()
                if self.peek() == "}":
                    self.pos += 1
                    break
                if self.peek() != ",":
                    self.fail("an inline table's keys are separated by commas, on one line, and it ends with }")
                self.pos += 1
        self.freeze(table)
        return table

    def freeze(self, value) -> None:
        if isinstance(value, (dict, list)):
            self.frozen.add(id(value))
            for item in value.values() if isinstance(value, dict) else value:
                self.freeze(item)

    def number_or_date(self):
        start = self.pos
        for pattern, make in (
            (_DATETIME, self.datetime),
            (_TIME, self.time),
            (_FLOAT, lambda m: float(m.group(0).replace("_", ""))),
            (_SPECIAL_FLOAT, lambda m: float(m.group(0))),
            (_INTEGER, self.integer),
        ):
            match = pattern.match(self.text, start)
            if match and _VALUE_END.match(self.text, match.end()):
                self.pos = match.end()
                return make(match)
        self.fail(f"a value is missing or not understood: {self.text[start : start + 20]!r}")
        return None

    def integer(self, match):
        text = match.group(0).replace("_", "")
        base = {"0x": 16, "0o": 8, "0b": 2}.get(text[:2])
        return int(text[2:], base) if base else int(text)

    def datetime(self, match):
        year, month, day = (int(match.group(i)) for i in (1, 2, 3))
        try:
            if match.group(4) is None:
                return datetime.date(year, month, day)
            zone = None
            if match.group(8):
                zone = datetime.timezone.utc
            elif match.group(9):
                offset = datetime.timedelta(hours=int(match.group(10)), minutes=int(match.group(11)))
                zone = datetime.timezone(-offset if match.group(9) == "-" else offset)
            hour, minute, second = (int(match.group(i)) for i in (4, 5, 6))
            return datetime.datetime(year, month, day, hour, minute, second, _microseconds(match.group(7)), zone)
        except ValueError as exc:
            self.fail(f"not a date: {exc}")
        return None

    def time(self, match):
        try:
            hour, minute, second = (int(match.group(i)) for i in (1, 2, 3))
            return datetime.time(hour, minute, second, _microseconds(match.group(4)))
        except ValueError as exc:
            self.fail(f"not a time: {exc}")
        return None


def toml_tables(text) -> dict:
    """The parsed TOML ``text`` (nested dicts and lists, as tomllib returns it); raises TomlError naming the line."""
    text = str(text or "")
    if tomllib is not None:
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise TomlError(str(exc)) from None
    return _Reader(text).read()


def read_tables(text) -> tuple:
    """(parsed text, '') or ({}, why it is not TOML): for readers that go on without the file."""
    try:
        return toml_tables(text), ""
    except TomlError as exc:
        return {}, str(exc)


def toml_tables_around(text, most: int = 20) -> tuple:
    """(parsed text, [numbers of the lines left out]) of a TOML text with other lines around or among it (log lines
    around a configuration dump): each line the reader refuses is left out, at most ``most`` of them; raises
    TomlError when that is not enough."""
    lines = str(text or "").splitlines(True)
    numbers = list(range(1, len(lines) + 1))
    dropped = []
    while True:
        try:
            return toml_tables("".join(lines)), dropped
        except TomlError as exc:
            if exc.line is None or not 1 <= exc.line <= len(lines) or len(dropped) >= most:
                raise
            dropped.append(numbers.pop(exc.line - 1))
            del lines[exc.line - 1]


def get_path(tree, path, default=None):
    """The value at key ``path`` of a parsed text; ``default`` where a part is missing or no table."""
    node = tree
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


# --- containerd's config -------------------------------------------------------------------------------------


def config_version(tree) -> int:
    """The config version containerd reads a parsed file as: its ``version``, 1 without one (containerd's 0);
    -1 when it is no integer (containerd cannot read the file)."""
    version = containerd_versions.file_version(tree)
    return 1 if version == 0 else version


def cri_tables() -> list:
    """The CRI tables (key paths) containerd may read its runtimes from, newest config version first (CRI_TABLES)."""
    found = []
    for version in sorted(containerd_versions.CRI_TABLES, reverse=True):
        if containerd_versions.CRI_TABLES[version] not in found:
            found.append(containerd_versions.CRI_TABLES[version])
    return found


def cri_config(tree) -> dict:
    """What containerd's CRI plugin reads in one parsed config file or ``config dump``: the CRI table of the newest
    config version that the file holds (cri_tables; a dump holds its own version's), whole.

    containerd 2.x migrates each file to its own config version before it reads it, and the CRI tables of an older
    version move to the newer name unless the newer table is there (checked with containerd 2.3.4: a version 2
    file with io.containerd.cri.v1.runtime tables, or with those and io.containerd.grpc.v1.cri ones, is read from
    io.containerd.cri.v1.runtime; a file without a version key with io.containerd.grpc.v1.cri tables from those).
    Where containerd reads less, this reads more, as the regexes before it did, erring towards seeing NVIDIA's
    runtime where it may not run: containerd 1.x knows no io.containerd.cri.v1.runtime, and 2.3 ignores a version 4
    file's io.containerd.grpc.v1.cri tables and a version 2 or later file's plugins.cri.

    {"version": the file's config version (config_version), "table": the key path read (None: the text holds no
    CRI table), "runtimes": {name: table}, "default": default_runtime_name (None: unset), "enable_cdi": True, False
    or None (unset)}."""
    table = next((t for t in cri_tables() if isinstance(get_path(tree, t), Mapping)), None)
    cri = get_path(tree, table) if table else {}
    runtimes = get_path(cri, ("containerd", "runtimes"))
    default = get_path(cri, ("containerd", "default_runtime_name"))
    cdi = cri.get("enable_cdi")
    return {
        "version": config_version(tree),
        "table": table,
        "runtimes": {str(k): v for k, v in runtimes.items() if isinstance(v, Mapping)}
        if isinstance(runtimes, Mapping)
        else {},
        "default": default if isinstance(default, str) and default else None,
        "enable_cdi": cdi if isinstance(cdi, bool) else None,
    }


def cri_runtimes(tree) -> tuple:
    """(runtimes, default_runtime_name) of a parsed containerd config (cri_config); ({}, None) without a CRI table."""
    config = cri_config(tree)
    return config["runtimes"], config["default"]


# --- CRI-O's config ----------------------------------------------------------------------------------------------

CRIO_RUNTIME_TABLE = ("crio", "runtime")


def crio_config(tree) -> dict:
    """What CRI-O reads in one parsed crio.conf (or drop-in): {"runtimes": {name: [crio.runtime.runtimes.<name>]},
    "default": [crio.runtime] default_runtime (None: unset)}."""
    table = get_path(tree, CRIO_RUNTIME_TABLE)
    table = table if isinstance(table, Mapping) else {}
    runtimes = table.get("runtimes")
    default = table.get("default_runtime")
    return {
        "runtimes": {str(k): v for k, v in runtimes.items() if isinstance(v, Mapping)}
        if isinstance(runtimes, Mapping)
        else {},
        "default": default if isinstance(default, str) and default else None,
    }
