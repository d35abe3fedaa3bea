"""TEST HARNESS (molecule's nodes only; not the demo's node, the benchmark's or a user's): a compile cache for
the Python files of Ansible's module payloads.

Every task that runs a module sends its payload as a zip file, and Python imports from a zip without bytecode
(CPython 3.11's zipimport even compiles each file it imports twice): each task compiled ansible.module_utils.basic
and everything it imports again. Measured with the ping module in each node image (10 runs, user + system CPU):
0.19-0.24 s a run without this cache, 0.12-0.16 s with it (Python 3.9 to 3.14). The test command runs many
thousands of tasks on two cores, so this cache keeps the compiled code of each file, keyed by the Python
(cache_tag) and the file's bytes, in the node (/var/cache/gpunode-bytecode; a new node starts empty), and reuses
it: the code that runs is what this Python compiles from those bytes, under the payload's own file name
(tracebacks name the payload's files as before). Other zip files are left alone; any error falls back to compiling.

It replaces zipimport._compile_source(pathname, source), which zipimport calls for each source file it loads
(CPython 3.9 to 3.14: Lib/zipimport.py, _get_module_code). zz-gpunode-bytecode-cache.pth imports this module at
interpreter start; molecule/resources/tasks/node_container.yml mounts both into /usr/lib/python3/dist-packages;
tests/unit/test_bytecode_cache.py and molecule/harness check it.
"""

import os
import zipimport

_compile = getattr(zipimport, "_compile_source", None)
_DIR = os.environ.get("GPUNODE_BYTECODE_CACHE", "/var/cache/gpunode-bytecode")  # the variable: for its unit test


def _renamed(code, filename):
    """code with filename as co_filename, in it and in every code object it holds (its functions, classes)."""
    consts = tuple(_renamed(c, filename) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _compile_source(pathname, source):
    if "_payload.zip" not in pathname:  # Ansible's payloads: <tmp>/ansible_<module>_payload.zip
        return _compile(pathname, source)
    import hashlib
    import marshal
    import sys

    path = os.path.join(_DIR, f"{sys.implementation.cache_tag}-{hashlib.sha256(source).hexdigest()}")
    try:
        with open(path, "rb") as cached:
            return _renamed(marshal.loads(cached.read()), pathname)
    except Exception:  # not cached yet (or unreadable): compile
        pass
    code = _compile(pathname, source)
    try:
        os.makedirs(_DIR, exist_ok=True)
        partial = f"{path}.{os.getpid()}"
        with open(partial, "wb") as out:
            out.write(marshal.dumps(code))
        os.replace(partial, path)
    except OSError:
        pass
    return code


if _compile is not None:  # a Python whose zipimport differs keeps compiling as it does
    zipimport._compile_source = _compile_source
