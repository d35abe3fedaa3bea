"""The compiled-template cache (plugins/plugin_utils/template_cache.py, issue 47): a template renders the same from
the cache as compiled afresh, an entry is used only where its filters and tests resolve as when it was compiled, and
anything unexpected leaves Jinja's own compile to run."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible._internal._templating import _jinja_bits
from ansible._internal._templating._jinja_bits import AnsibleEnvironment
from ansible.errors import AnsibleError
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible_collections.gpunode.provisioning.plugins.plugin_utils import template_cache

ROOT = Path(__file__).resolve().parents[2]

# Templates of the kinds the roles' variables are: filters with and without the context, tests, a collection's
# filter, conditionals, loops, whitespace control, a template that embeds another, a trailing newline.
TEMPLATES = [
    "{{ items | map('upper') | list }}",
    "{{ items | select('match', '^a') | list | length > 0 }}",
    "{{ {'a': 1} | combine(extra, recursive=true) }}",
    "{{ name is regex('[a-z]+', match_type='fullmatch') }}",
    "{{ nested | to_json }}",
    "{{ ('x' ~ name) if name is defined else 'none' }}",
    "{% for item in items %}{{ item }},{% endfor %}",
    "{%- if items | length > 1 -%}\n  many\n{%- else -%}\n  one\n{%- endif %}\n",
    "{{ lookup('ansible.builtin.vars', 'name') }}",
    "{{ '2.10' is version('2.9', '>') }}",
    "{{ items | gpunode.provisioning.package_candidates('apt') }}",
    "prefix {{ name }} and {{ 'embedded {{ name }}' }}",
]
VARIABLES = {"items": ["apple", "banana"], "extra": {"b": [1, 2]}, "name": "node", "nested": {"k": ["v"]}}


def render(template: str):
    templar = Templar(
        loader=DataLoader(),
        variables={k: trust_as_template(v) if isinstance(v, str) else v for k, v in VARIABLES.items()},
    )
    try:
        return ("ok", templar.template(trust_as_template(template)))
    except AnsibleError as ex:
        chain, seen = [], ex
        while seen is not None:  # what Ansible shows: the error, its causes and the exceptions it happened during
            chain.append((type(seen).__name__, str(seen)))
            seen = seen.__cause__ or seen.__context__
        return ("error", chain)


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The cache installed on a directory of its own; Jinja's compile put back after the test."""
    original = AnsibleEnvironment.compile
    monkeypatch.setenv(template_cache.ENV, str(tmp_path / "cache"))
    assert template_cache.install() is True
    yield tmp_path / "cache"
    AnsibleEnvironment.compile = original


def entries(directory: Path) -> list[Path]:
    return sorted(directory.iterdir())


def cache_of() -> template_cache.Cache:
    return getattr(AnsibleEnvironment.compile, template_cache.MARK)


def test_a_template_renders_the_same_compiled_afresh_from_memory_and_from_disk(installed):
    wrapped = AnsibleEnvironment.compile
    AnsibleEnvironment.compile = wrapped.__wrapped__
    try:
        expected = [render(template) for template in TEMPLATES]
    finally:
        AnsibleEnvironment.compile = wrapped
    assert entries(installed) == []
    stored = []
    store = template_cache.Cache.store
    template_cache.Cache.store = lambda self, key, *args, **kwargs: (
        stored.append(key) or store(self, key, *args, **kwargs)
    )
    try:
        assert [render(template) for template in TEMPLATES] == expected  # compiled, kept
        assert len(entries(installed)) >= len(TEMPLATES) and len(stored) >= len(TEMPLATES)
        stored.clear()
        assert [render(template) for template in TEMPLATES] == expected  # from memory
        cache_of().memory.clear()  # a new worker or a new run: from the files
        assert [render(template) for template in TEMPLATES] == expected
        assert stored == []  # nothing compiled again
    finally:
        template_cache.Cache.store = store
    assert all(kind == "ok" for kind, *_rest in expected), expected


def test_an_entry_is_used_only_where_its_filters_resolve_as_when_it_was_compiled(installed):
    env = AnsibleEnvironment()
    source = "{{ items | map('upper') | list }}"
    key = template_cache.key_of(env, source, None, None, False)
    kept = compile("'kept'", "<test>", "eval")
    cache = template_cache.Cache(installed)
    original = AnsibleEnvironment.compile.__wrapped__
    found = template_cache.plugin_lookups(env, env.parse(source))
    assert ("map" in [name for _is_filter, name, _passed in found]) and found
    cache.store(key, found, kept)
    assert template_cache.compile_cached(cache, original, env, source) is kept
    # the same entry where the filter map was found passing another argument first: compiled again, and kept anew
    assert (True, "map", "context") in found
    changed = tuple((is_filter, name, "environment" if name == "map" else passed) for is_filter, name, passed in found)
    cache.store(key, changed, kept)
    cache.memory.clear()
    code = template_cache.compile_cached(cache, original, env, source)
    assert code is not kept and code.co_filename == "<template>"
    assert cache.load(key)[0] == found


def test_a_filter_that_is_gone_compiles_again_and_fails_as_without_the_cache(installed):
    env = AnsibleEnvironment()
    source = "{{ items | gpunode_no_such_filter }}"
    cache = template_cache.Cache(installed)
    key = template_cache.key_of(env, source, None, None, False)
    cache.store(key, ((True, "gpunode_no_such_filter", None),), compile("'kept'", "<test>", "eval"))
    with pytest.raises(Exception, match="gpunode_no_such_filter") as cached:
        template_cache.compile_cached(cache, AnsibleEnvironment.compile.__wrapped__, env, source)
    with pytest.raises(Exception, match="gpunode_no_such_filter") as fresh:
        AnsibleEnvironment.compile.__wrapped__(env, source)
    # raised as Jinja raises it: no exception of the cache's own behind it
    assert (type(cached.value), str(cached.value)) == (type(fresh.value), str(fresh.value))
    assert cached.value.__context__ is None and cached.value.__cause__ is fresh.value.__cause__ is None


def test_the_key_follows_what_the_compilation_reads(installed):
    env = AnsibleEnvironment()
    source = "{{ name }}"
    key = template_cache.key_of(env, source, None, None, False)
    assert template_cache.key_of(AnsibleEnvironment(), source, None, None, False) == key
    assert template_cache.key_of(env, source + " ", None, None, False) != key
    assert template_cache.key_of(env, source, "name", None, False) != key
    assert template_cache.key_of(env, source, None, None, True) != key
    with _jinja_bits._TemplateCompileContext(escape_backslashes=False):
        unescaped = template_cache.key_of(env, source, None, None, False)
    with _jinja_bits._TemplateCompileContext(escape_backslashes=True):
        assert template_cache.key_of(env, source, None, None, False) not in (key, unescaped)
    other = AnsibleEnvironment()
    other.trim_blocks = False
    assert template_cache.key_of(other, source, None, None, False) != key
    other = AnsibleEnvironment()
    other.variable_start_string = "[["
    assert template_cache.key_of(other, source, None, None, False) != key


def test_a_template_from_a_vault_encrypted_file_is_kept_in_memory_only(installed):
    from ansible._internal._datatag._tags import SourceWasEncrypted

    env = AnsibleEnvironment()
    source = SourceWasEncrypted().tag("secret {{ name }}")
    cache = template_cache.Cache(installed)
    code = template_cache.compile_cached(cache, AnsibleEnvironment.compile.__wrapped__, env, source)
    assert entries(installed) == [] and template_cache.key_of(env, source, None, None, False) in cache.memory
    assert template_cache.compile_cached(cache, AnsibleEnvironment.compile.__wrapped__, env, source) is code


def test_a_broken_entry_is_compiled_again_and_replaced(installed):
    assert render(TEMPLATES[0])[0] == "ok"
    (entry,) = entries(installed)
    entry.write_bytes(b"not marshal data")
    cache_of().memory.clear()
    assert render(TEMPLATES[0]) == ("ok", ["APPLE", "BANANA"])
    assert entry.read_bytes() != b"not marshal data"


@pytest.mark.parametrize("broken", ["{{ name | }}", "{{ name | gpunode_no_such_filter }}"])
def test_a_template_that_does_not_compile_fails_as_without_the_cache_and_is_not_kept(installed, broken):
    failure = render(broken)
    wrapped = AnsibleEnvironment.compile
    AnsibleEnvironment.compile = wrapped.__wrapped__
    try:
        assert render(broken) == failure and failure[0] == "error"
    finally:
        AnsibleEnvironment.compile = wrapped
    assert entries(installed) == []


def test_a_directory_with_more_entries_than_it_keeps_is_emptied(tmp_path):
    for number in range(5):
        (tmp_path / f"entry-{number}").write_bytes(b"x")
    assert template_cache.prune(tmp_path, most=5) == 0 and len(entries(tmp_path)) == 5
    (tmp_path / "entry-5").write_bytes(b"x")
    assert template_cache.prune(tmp_path, most=5) == 6 and entries(tmp_path) == []


def test_off_another_series_or_a_directory_others_may_write_to_installs_nothing(tmp_path, monkeypatch):
    original = AnsibleEnvironment.compile
    try:
        monkeypatch.setenv(template_cache.ENV, "off")
        assert template_cache.install() is False
        shared = tmp_path / "shared"
        shared.mkdir()
        shared.chmod(0o777)
        monkeypatch.setenv(template_cache.ENV, str(shared))
        assert template_cache.install() is False
        monkeypatch.setenv(template_cache.ENV, str(tmp_path / "mine"))
        monkeypatch.setattr(template_cache, "SERIES", ("9.9.",))
        assert template_cache.install() is False
        assert AnsibleEnvironment.compile is original
        monkeypatch.setattr(template_cache, "SERIES", ("2.19.",))
        assert template_cache.install() is True and template_cache.install() is True
        assert AnsibleEnvironment.compile.__wrapped__ is original  # wrapped once
        assert stat.S_IMODE((tmp_path / "mine").stat().st_mode) == 0o700
    finally:
        AnsibleEnvironment.compile = original


def test_ansible_playbook_keeps_the_templates_of_a_run_for_the_next_one(tmp_path):
    """The project's ansible.cfg enables the callback that installs it: a run writes entries, the next one reads
    them and prints the same."""
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {"base": ["a", "b"], "derived": "{{ base | map('upper') | list }}"},
            "tasks": [{"ansible.builtin.debug": {"msg": "{{ derived | join('-') }} {{ 'x' is match('x') }}"}}],
        }
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    cache = tmp_path / "cache"
    env = {**os.environ, template_cache.ENV: str(cache), "ANSIBLE_LOCALHOST_WARNING": "false"}
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", str(tmp_path / "play.yml")]
    first = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "A-B True" in first.stdout
    written = {path.name: path.stat().st_mtime_ns for path in cache.iterdir()}
    assert written
    gone = sorted(written)[0]
    (cache / gone).unlink()
    second = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert second.returncode == 0 and "A-B True" in second.stdout
    # the cache was live: the entry taken away was compiled and written again, the others were read, not rewritten
    again = {path.name: path.stat().st_mtime_ns for path in cache.iterdir()}
    assert set(again) == set(written) and again[gone] != written[gone]
    assert {name: time for name, time in again.items() if name != gone} == {
        name: time for name, time in written.items() if name != gone
    }
