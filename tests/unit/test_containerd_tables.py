"""plugins/module_utils/containerd/tables.py: the one node-side reading of containerd's config (issue 51), and the
config versions' one table (containerd/versions.py CRI_TABLES) that it and the controller's merge both follow.

The node's python3 may have no tomllib (< 3.11: Debian 11/12, Ubuntu 22.04, EL 9): every reader test runs with
tomllib and with the small reader, which must read what tomllib reads and refuse what it refuses.
"""

from __future__ import annotations

import datetime
import random
import subprocess
import tomllib

import pytest
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import config as ct
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import tables
from ansible_collections.gpunode.provisioning.plugins.module_utils.containerd import versions as containerd_versions
from ansible_collections.gpunode.provisioning.plugins.module_utils.gpu_validate import logic
from ansible_collections.gpunode.provisioning.plugins.module_utils.kubernetes import gpu_pods
from conftest import ROOT

FIXTURES = sorted((ROOT / "tests" / "fixtures").rglob("*.toml"))
NVIDIA = "/usr/bin/nvidia-container-runtime"


@pytest.fixture(params=["tomllib", "small reader"])
def reader(request, monkeypatch):
    """Each test twice: with tomllib (Python 3.11+) and with the small reader (the node's older python3)."""
    if request.param == "small reader":
        monkeypatch.setattr(tables, "tomllib", None)
    return request.param


def test_the_fixtures_are_there():
    assert len(FIXTURES) >= 12, FIXTURES


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_the_small_reader_reads_every_fixture_as_tomllib_does(path, monkeypatch):
    text = path.read_text()
    monkeypatch.setattr(tables, "tomllib", None)
    assert tables.toml_tables(text) == tomllib.loads(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # standard tables, nested, with quoted keys in both quotes (containerd 1.x and 2.x dumps)
        (
            'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "runc"\n'
            "[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = true\n",
            {
                "version": 2,
                "plugins": {
                    "io.containerd.grpc.v1.cri": {"containerd": {"default_runtime_name": "runc"}},
                    "io.containerd.cri.v1.runtime": {"enable_cdi": True},
                },
            },
        ),
        # dotted keys, in a table and at the top, with spaces around the dots
        (
            "a . b.c = 1\n[t]\nruntimes.gpu.options.BinaryName = 'x'\n",
            {"a": {"b": {"c": 1}}, "t": {"runtimes": {"gpu": {"options": {"BinaryName": "x"}}}}},
        ),
        # quoted keys: dots and escapes inside them are no separators
        ('"a.b" = 1\n\'c.d\' = 2\n"e\\u0041" = 3\n"" = 4\n', {"a.b": 1, "c.d": 2, "eA": 3, "": 4}),
        # inline tables, nested and with dotted keys, and an empty one
        (
            'r = { runtime_type = "io.containerd.runc.v2", options = { BinaryName = "x" }, a.b = 1 }\ne = {}\n',
            {"r": {"runtime_type": "io.containerd.runc.v2", "options": {"BinaryName": "x"}, "a": {"b": 1}}, "e": {}},
        ),
        # arrays of tables, with a sub-table of the last one
        (
            "[[mirrors]]\nhost = 'a'\n[[mirrors]]\nhost = 'b'\n[mirrors.tls]\nverify = false\n",
            {"mirrors": [{"host": "a"}, {"host": "b", "tls": {"verify": False}}]},
        ),
        # comments everywhere, arrays over lines with a trailing comma and a ] in a comment
        (
            "# head\n[t] # after a header\nk = [ # open\n  'a', # ]\n  \"b\",\n] # close\n",
            {"t": {"k": ["a", "b"]}},
        ),
        # multi-line strings: first newline dropped, line-ending backslash, literal ones untouched, quotes at the end
        (
            'a = """\nline\\\n    joined"""\nb = \'\'\'\nraw \\n\'\'\'\nc = """x""""\n',
            {"a": "linejoined", "b": "raw \\n", "c": 'x"'},
        ),
        # numbers, booleans, dates and times
        (
            "i = [+1_000, -0, 0x1F, 0o17, 0b101]\nf = [1.5, -2e-3, 6.0E2]\nb = [true, false]\n"
            "d = 1979-05-27\nt = 07:32:00.5\nz = 1979-05-27T07:32:00Z\n",
            {
                "i": [1000, 0, 31, 15, 5],
                "f": [1.5, -0.002, 600.0],
                "b": [True, False],
                "d": datetime.date(1979, 5, 27),
                "t": datetime.time(7, 32, 0, 500000),
                "z": datetime.datetime(1979, 5, 27, 7, 32, 0, tzinfo=datetime.UTC),
            },
        ),
        ("", {}),
        ("# only a comment\n\n", {}),
    ],
    ids=[
        "tables",
        "dotted keys",
        "quoted keys",
        "inline tables",
        "arrays of tables",
        "comments",
        "multi-line strings",
        "scalars",
        "empty",
        "comment only",
    ],
)
def test_the_reader_reads_toml(reader, text, expected):
    assert tables.toml_tables(text) == expected == tomllib.loads(text)


MALFORMED = [
    ("[a\nb = 1\n", 1),  # an unclosed header
    ('a = "x" junk\n', 1),
    ("a = 'x\n", 1),
    ("x = 1\na = 1 2\n", 2),
    ("just text\n", 1),
    ("a = 1\na = 2\n", 2),  # a key twice
    ("[a]\nb = 1\n[a]\n", 3),  # a table twice
    ("a = {b = 1}\n[a]\n", 2),  # an inline table is complete
    ('a = """\nnever closed\n', None),
    ("a = [1, 2\nb = 3\n", None),
    ('a = "\\q"\n', 1),
    ("a = 01\n", 1),
    ('time="2025" level=info msg="config"\n[plugins.cri]\n', 1),
]


@pytest.mark.parametrize(("text", "line"), MALFORMED)
def test_text_that_is_not_toml_is_refused_naming_the_line(reader, text, line):
    with pytest.raises(tables.TomlError) as error:
        tables.toml_tables(text)
    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads(text)
    if line is not None and reader == "small reader":
        assert error.value.line == line and f"line {line}," in str(error.value), error.value
    assert tables.read_tables(text) == ({}, str(error.value))


def test_mangled_configs_never_crash_the_small_reader(monkeypatch):
    """Random edits of the fixtures: the small reader accepts exactly what tomllib accepts, reads it alike, and
    refuses the rest with TomlError (nothing else escapes)."""
    monkeypatch.setattr(tables, "tomllib", None)
    texts = [path.read_text() for path in FIXTURES]
    rng = random.Random(51)
    for _ in range(400):
        chars = list(rng.choice(texts))
        for _edit in range(rng.randint(1, 3)):
            where = rng.randrange(len(chars))
            chars[where : where + rng.randint(0, 1)] = rng.choice(['"', "'", "[", "]", "{", "=", ".", "#", "\n", ""])
        text = "".join(chars)
        try:
            expected = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            expected = None
        try:
            got = tables.toml_tables(text)
        except tables.TomlError:
            got = None
        assert got == expected, text


def test_lines_around_toml_are_left_out(reader):
    text = 'time="2025" level=warning msg="migrated"\nversion = 2\n[t]\nk = 1\nWARN something else\n'
    assert tables.toml_tables_around(text) == ({"version": 2, "t": {"k": 1}}, [1, 5])
    with pytest.raises(tables.TomlError):
        tables.toml_tables_around("a = [\n" * 30)


# --- containerd's CRI table ------------------------------------------------------------------------------------


def _file(version, table: str, default: str = "gpu", binary: str = NVIDIA) -> str:
    head = f"version = {version}\n" if version is not None else ""
    return (
        f"{head}[plugins.{table}]\n  enable_cdi = true\n[plugins.{table}.containerd]\n"
        f"  default_runtime_name = '{default}'\n[plugins.{table}.containerd.runtimes.{default}.options]\n"
        f"  BinaryName = '{binary}'\n"
    )


@pytest.mark.parametrize(
    ("version", "table"),
    [
        (None, "cri"),
        (2, "'io.containerd.grpc.v1.cri'"),
        (3, "'io.containerd.cri.v1.runtime'"),
        (4, "'io.containerd.cri.v1.runtime'"),
    ],
)
def test_each_version_is_read_from_its_cri_table(reader, version, table):
    config = tables.cri_config(tables.toml_tables(_file(version, table)))
    assert config["version"] == (version or 1)
    assert config["table"] == containerd_versions.CRI_TABLES[version or 1]
    assert (config["default"], sorted(config["runtimes"]), config["enable_cdi"]) == ("gpu", ["gpu"], True)


def test_nothing_is_read_without_a_cri_table():
    config = tables.cri_config(tables.toml_tables("version = 2\n[plugins.'io.containerd.internal.v1.opt']\n"))
    assert config == {"version": 2, "table": None, "runtimes": {}, "default": None, "enable_cdi": None}
    assert tables.cri_config({"version": True})["version"] == -1


# Files whose tables do not follow their version, as containerd 2.3.4 reads them (the oracle test below).
MISMATCHED = {
    "version 2, version 3's tables": _file(2, "'io.containerd.cri.v1.runtime'"),
    "no version, version 2's tables": _file(None, "'io.containerd.grpc.v1.cri'"),
    "version 3, version 2's tables": _file(3, "'io.containerd.grpc.v1.cri'"),
    "version 2, both tables": _file(2, "'io.containerd.grpc.v1.cri'", "old", "/usr/bin/runc")
    + _file(None, "'io.containerd.cri.v1.runtime'", "new", NVIDIA),
}


@pytest.mark.parametrize("name", sorted(MISMATCHED))
def test_a_file_is_read_from_its_newest_cri_table_as_containerd_2_3_reads_it(name, upstream_dir, tmp_path):
    """containerd 2.3.4's own reading (`config dump`) is the oracle: it migrates a file's older CRI table to the newer
    name unless the newer one is there."""
    binary = upstream_dir / "containerd" / "bin" / "containerd"
    if not binary.is_file():
        pytest.fail(f"{binary} is missing: see {upstream_dir}/containerd/BUILD.md", pytrace=False)
    path = tmp_path / "config.toml"
    path.write_text(MISMATCHED[name])
    dump = subprocess.run(
        [str(binary), "--config", str(path), "config", "dump"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    ours, theirs = tables.cri_config(tomllib.loads(MISMATCHED[name])), tables.cri_config(tomllib.loads(dump))
    assert ours["default"] == theirs["default"]
    binaries = {n: e.get("options", {}).get("BinaryName") for n, e in theirs["runtimes"].items()}
    assert {n: e["options"]["BinaryName"] for n, e in ours["runtimes"].items()}.items() <= binaries.items()
    assert "old" not in theirs["runtimes"] and "old" not in ours["runtimes"]


# --- one table: a new config version is one entry in CRI_TABLES ----------------------------------------------

FIVE = ("plugins", "io.containerd.cri.v9.runtime")  # a made-up version 5 with a new CRI table name
V5 = "version = 5\n[plugins.'io.containerd.cri.v9.runtime'.containerd]\n  default_runtime_name = 'runc'\n"


def test_without_its_table_version_5_is_refused_by_the_merge_and_unread_by_the_node():
    with pytest.raises(ct.ContainerdConfigError, match="add the version's table to CRI_TABLES"):
        ct.plan_inplace(V5, "/etc/containerd/config.toml", ct.Request(runtime={"name": "nvidia", "path": NVIDIA}))
    assert tables.cri_config(tomllib.loads(V5))["table"] is None


def test_a_new_config_version_is_one_table_entry_for_the_merge_the_facts_the_guard_and_the_doctor(monkeypatch):
    monkeypatch.setitem(containerd_versions.CRI_TABLES, 5, FIVE)
    monkeypatch.setitem(containerd_versions.CONFIG_VERSION_NOTES, 5, "containerd 9")
    # the merge writes the runtime into version 5's table and names the version among the supported ones
    outcome = ct.plan_inplace(V5, "/etc/containerd/config.toml", ct.Request(runtime={"name": "nvidia", "path": NVIDIA}))
    written = tomllib.loads(outcome.after)
    assert written["plugins"]["io.containerd.cri.v9.runtime"]["containerd"]["runtimes"]["nvidia"]["options"] == {
        "BinaryName": NVIDIA
    }
    assert outcome.runtime_table == ct.dotted_key((*FIVE, "containerd", "runtimes", "nvidia"))
    assert containerd_versions.supported_text().endswith("and 5 (containerd 9)")
    # the node reads it there: the facts (and through them the GPU-pods guard) and the doctor
    dump = outcome.after.replace("'runc'", "'nvidia'")
    state = gpu_pods.containerd_runtime_state([dump], "9.0.0")
    assert (state["default"], state["default_binary"], state["default_nvidia"]) == ("nvidia", NVIDIA, True)
    assert gpu_pods.refusal_for_run(
        {
            "device_plugin": {"running": True, "present": True, "pids": [1], "strategies": ["envvar"]},
            "runtime_defaults": {"containerd": {**state, "cdi": False, "cdi_supported": True}},
            "toolkit_config": gpu_pods.toolkit_config_facts("/", None),
        },
        "gpu1",
        ["containerd"],
        False,
        True,
        {},
    ).startswith("Refusing to change gpu1")
    doctor = logic.runtime_config(dump)
    assert (doctor["default"], doctor["default_entry"]["binary"]) == ("nvidia", NVIDIA)


# --- containerd's own version ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "version", "numbers"),
    [
        (
            "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3",
            ("1.6.20", "1.6.20~ds1"),
            (1, 6, 20),
        ),
        ("containerd github.com/containerd/containerd/v2 v2.3.4 db88095\n", ("2.3.4", "2.3.4"), (2, 3, 4)),
        ("2.0", ("2.0", "2.0"), (2, 0, 0)),  # containerd_config's option containerd_version
        ("v2.1.4", ("2.1.4", "2.1.4"), (2, 1, 4)),
        ("containerd: command not found", (None, None), None),
        ("", (None, None), None),
        (None, (None, None), None),
    ],
)
def test_containerd_version_has_one_reading_in_two_shapes(text, version, numbers):
    assert containerd_versions.parse_containerd_version(text) == version
    assert containerd_versions.containerd_version_tuple(text) == numbers
