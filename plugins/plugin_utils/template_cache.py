# Copyright: gpu-node-provisioning contributors
# Apache License 2.0 (see LICENSE)
"""Compiled Jinja templates kept from one task to the next and from one run to the next on the controller (issue 47).

ansible-core 2.19 compiles every template string it renders (``TemplateEngine._compile_template`` calls Jinja's
``Environment.from_string``, which parses the template, generates Python and compiles it) and keeps nothing: every
task runs in a worker process of its own, so each task compiles again every role variable it renders, and a role's
variables are templates built on templates. On a no-op re-run of site.yml that was about 750 compilations of 360
templates, a fifth of the run's controller CPU (bench/README.md).

``install`` wraps ``AnsibleEnvironment.compile`` (ansible/_internal/_templating/_jinja_bits.py; Jinja's
``Environment.compile``) so that a template's code object is kept, keyed by everything its compilation reads:

- the template's text, the name and file name it is compiled under, ``defer_init``;
- the environment's syntax and whitespace settings (delimiters, line prefixes, trim/lstrip blocks, newlines), its
  extensions in order, ``optimized``, ``is_async``, ``autoescape``, its ``finalize`` (which function, what it is
  passed first), its class, and Ansible's compile context (``escape_backslashes``) and
  embedded-template setting (``ALLOW_EMBEDDED_TEMPLATES``: ``AnsibleCodeGenerator.visit_Const`` reads it);
- ansible-core's, Jinja's and Python's versions (the bytecode's format).

Jinja's code generator also looks up each filter and test the template uses (``CodeGenerator._filter_test_common``:
whether it exists, and whether it is passed the context, the eval context or the environment). That depends on the
plugins a run finds, not on the template, so each entry records what the lookups found, and an entry is used only
where the same lookups in this process find the same: a filter that moved to a collection whose version passes the
context, or one that is gone, compiles the template again (a gone one then fails as it always did). Ansible turns
Jinja's optimizer off (``AnsibleEnvironment.optimized = False``): no filter runs at compile time, so a filter's
code can change without changing the compiled template.

Kept in memory for the process and its forked workers, and on disk: ``$GPUNODE_TEMPLATE_CACHE``, else
``<ANSIBLE_HOME>/gpunode/templates`` (~/.ansible/gpunode/templates); ``GPUNODE_TEMPLATE_CACHE=off`` turns it off. The
directory is made with mode 0700 and used only while it belongs to this user and nobody else may write to it (its
files are code that the controller runs), as the payload cache's (plugins/plugin_utils/payload_cache.py). A template
from a vault-encrypted file is kept in memory only (its compiled code holds its text). Each file is
written atomically; a file that cannot be read, or read back, is compiled again. A template that does not compile is
not kept: the original compilation runs and raises its error. Anything unexpected leaves the original compilation to
run, as without the cache. Only under ansible-core 2.19 (``SERIES``), the version whose internals it wraps; templates
given as parsed node trees (Jinja's ``compile_expression``) are compiled as before.

Installed by the callback plugins/callback/plugin_warmup.py, which ansible.cfg enables: in the controller's main
process, before the workers fork.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
import types
from pathlib import Path

import ansible
import jinja2
from ansible.utils.display import Display
from ansible_collections.gpunode.provisioning.plugins.plugin_utils.payload_cache import (
    controller_cache_dir,
    private_dir,
    write_atomic,
)

display = Display()

# The environment variable that names the cache directory, or turns the cache off.
ENV = "GPUNODE_TEMPLATE_CACHE"
# The ansible-core series whose templating internals this wraps.
SERIES = ("2.19.",)
# The entries' format: a change makes every older entry a miss.
FORMAT = 1
# The attribute that marks the wrapped compile (install is idempotent).
MARK = "_gpunode_template_cache"
# The entries kept at most: a directory that holds more (templates of many older versions of the roles) is emptied when
# the cache is installed, and fills again with what the runs compile (a no-op re-run of site.yml: about 360).
MAX_ENTRIES = 20000


def cache_dir() -> Path | None:
    """The cache directory, or None where it is turned off."""
    return controller_cache_dir(ENV, "templates")


def _versions() -> tuple:
    return (FORMAT, ansible.__version__, jinja2.__version__, sys.implementation.cache_tag, sys.version_info[:3])


def _qualified(func) -> str | None:
    return None if func is None else f"{getattr(func, '__module__', '')}.{getattr(func, '__qualname__', repr(func))}"


def environment_settings(env) -> tuple:
    """What of the environment a template's compilation reads, besides its filters and tests."""
    from ansible._internal._templating import _jinja_bits
    from jinja2.utils import _PassArg

    context = _jinja_bits._TemplateCompileContext.current(optional=True)
    return (
        f"{type(env).__module__}.{type(env).__qualname__}",
        env.block_start_string,
        env.block_end_string,
        env.variable_start_string,
        env.variable_end_string,
        env.comment_start_string,
        env.comment_end_string,
        env.line_statement_prefix,
        env.line_comment_prefix,
        env.trim_blocks,
        env.lstrip_blocks,
        env.newline_sequence,
        env.keep_trailing_newline,
        env.optimized,
        env.is_async,
        repr(env.autoescape),
        _qualified(env.finalize),
        getattr(_PassArg.from_obj(env.finalize), "name", None) if env.finalize else None,
        tuple(env.extensions),
        getattr(context, "escape_backslashes", None),
        bool(_jinja_bits._TemplateConfig.allow_embedded_templates),
    )


def key_of(env, source: str, name, filename, defer_init: bool) -> str:
    """The entry's name: a digest of the template's text and everything its compilation reads but the plugins."""
    head = repr((_versions(), environment_settings(env), name, filename, bool(defer_init))).encode()
    return hashlib.sha256(head + b"\0" + source.encode("utf-8", "surrogatepass")).hexdigest()


def plugin_found(env, is_filter: bool, name: str) -> str | None:
    """What Jinja's code generator finds for one filter or test (``_filter_test_common``): the argument it is passed
    first, None for none, "missing" where there is no such plugin."""
    from jinja2.utils import _PassArg

    func = (env.filters if is_filter else env.tests).get(name)
    return "missing" if func is None else getattr(_PassArg.from_obj(func), "name", None)


def plugin_lookups(env, tree) -> tuple:
    """What the code generator finds for each filter and test of the parsed template: (is_filter, name, found)."""
    from jinja2 import nodes

    found = []
    for node in tree.find_all((nodes.Filter, nodes.Test)):
        is_filter = isinstance(node, nodes.Filter)
        entry = (is_filter, node.name, plugin_found(env, is_filter, node.name))
        if entry not in found:
            found.append(entry)
    return tuple(found)


def lookups_hold(env, lookups) -> bool:
    """Whether this process finds what the entry's compilation found for its filters and tests."""
    return all(plugin_found(env, is_filter, name) == passed for is_filter, name, passed in lookups)


class Cache:
    """The entries of one directory (None: memory only), in memory for this process and the workers it forks."""

    def __init__(self, directory: Path | None):
        self.directory = directory
        self.memory: dict[str, tuple] = {}

    def load(self, key: str):
        entry = self.memory.get(key)
        if entry is None and self.directory is not None:
            try:
                data = (self.directory / key).read_bytes()
                entry = marshal.loads(data)
            except (OSError, ValueError, EOFError, TypeError):
                return None
            if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], types.CodeType)):
                return None
            self.memory[key] = entry
        return entry

    def store(self, key: str, lookups: tuple, code, disk: bool = True) -> None:
        entry = (lookups, code)
        self.memory[key] = entry
        if self.directory is not None and disk:
            try:
                write_atomic(self.directory / key, marshal.dumps(entry))
            except (OSError, ValueError) as ex:
                display.vvvv(f"template cache: {key} not stored: {ex}")


def compile_cached(cache: Cache, original, env, source, name=None, filename=None, raw=False, defer_init=False):
    """Jinja's compile of ``source`` by ``env``, from the cache where it holds it."""
    if raw or not isinstance(source, str) or env._debuggable_template_source:
        return original(env, source, name, filename, raw, defer_init)
    key = code = tree = None
    try:
        key = key_of(env, source, name, filename, defer_init)
        entry = cache.load(key)
        if entry is not None and lookups_hold(env, entry[0]):
            return entry[1]
        tree = env._parse(source, name, filename)
        code = original(env, tree, name, filename, raw, defer_init)
    except Exception:  # the cache never decides a run: Jinja's own compile below, its error raised as it raises it
        code = None
    if code is None:
        return original(env, source, name, filename, raw, defer_init)
    try:
        from ansible._internal._datatag._tags import SourceWasEncrypted, VaultedValue

        # the text of a template from a vault-encrypted file stays in memory, as Ansible keeps it
        secret = SourceWasEncrypted.is_tagged_on(source) or VaultedValue.is_tagged_on(source)
        cache.store(key, plugin_lookups(env, tree), code, disk=not secret)
    except Exception as ex:  # as above
        display.vvvv(f"template cache: {key} not kept: {ex}")
    return code


def prune(directory: Path, most: int | None = None) -> int:
    """Empties ``directory`` where it holds more than ``most`` entries (MAX_ENTRIES); the number removed."""
    most = MAX_ENTRIES if most is None else most
    try:
        with os.scandir(directory) as found:
            names = [entry.name for entry in found if entry.is_file(follow_symlinks=False)]
    except OSError:
        return 0
    if len(names) <= most:
        return 0
    removed = 0
    for name in names:
        try:
            (directory / name).unlink()
            removed += 1
        except OSError:
            pass
    display.vvvv(f"template cache: {directory} held {len(names)} entries (more than {most}): emptied")
    return removed


def install() -> bool:
    """Wrap AnsibleEnvironment.compile with the cache; False where ansible-core is not of SERIES, the cache is off,
    or its directory is not private. Idempotent."""
    if not ansible.__version__.startswith(SERIES):
        return False
    directory = cache_dir()
    if directory is None:
        return False
    try:
        if not private_dir(directory, create=True):
            display.vvvv(f"template cache: {directory} is not a private directory of this user: not used")
            return False
        from ansible._internal._templating._jinja_bits import AnsibleEnvironment
    except (OSError, ImportError) as ex:
        display.vvvv(f"template cache: not used: {ex}")
        return False
    if getattr(AnsibleEnvironment.compile, MARK, None) is not None:
        return True
    prune(directory)
    original = AnsibleEnvironment.compile
    cache = Cache(directory)

    def compile(self, source, name=None, filename=None, raw=False, defer_init=False):
        return compile_cached(cache, original, self, source, name, filename, raw, defer_init)

    setattr(compile, MARK, cache)
    compile.__wrapped__ = original
    AnsibleEnvironment.compile = compile
    return True
