"""Node-side code (plugins/modules/ and the plugins/module_utils files those modules import) runs
on the node's python3, and ansible-core 2.19 supports targets from Python 3.8 on (EL 9's
python3 is 3.9). The controller runs 3.11+, so nothing else would notice a 3.10-only
construct in them. Two checks:

- static, for Python 3.8: every node-side file parses with feature_version=(3, 8), and no
  expression that is evaluated at run time uses what 3.8 lacks (``X | Y`` on types,
  ``list[str]``/``collections.abc`` generics, ``zip(strict=...)``, ``str.removeprefix``);
- for real, on Python 3.9: the gpunode:debian11 node image imports every node-side file
  as AnsiballZ would and runs gpu_node_facts end to end
  (tests/fixtures/node_python/check_node_python.py).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import ansible
import pytest

ROOT = Path(__file__).resolve().parents[2]
MIN_TARGET = (3, 8)
PY39_IMAGE = "gpunode:debian11"


BUILTIN_GENERICS = {"list", "dict", "tuple", "set", "frozenset", "type"}  # subscriptable from 3.9
TYPE_NAMES = BUILTIN_GENERICS | {"str", "int", "float", "bool", "bytes", "object"}


PACKAGE = "ansible_collections.gpunode.provisioning.plugins.module_utils."


def node_side_files() -> list[Path]:
    """plugins/modules/*.py and, transitively, the collection's module_utils they import by package path."""
    files = sorted((ROOT / "plugins" / "modules").glob("*.py"))
    todo, seen = list(files), set(files)
    while todo:
        for node in ast.walk(ast.parse(todo.pop().read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE.rstrip(".")):
                parts = node.module[len(PACKAGE) :].split(".") if node.module.startswith(PACKAGE) else []
                base = ROOT / "plugins" / "module_utils" / Path(*parts) if parts else ROOT / "plugins" / "module_utils"
                # `from <package> import module` or `from <package>.<module> import name`
                candidates = [base.with_suffix(".py")] + [base / f"{a.name}.py" for a in node.names]
                for path in candidates:
                    if path.is_file() and path not in seen:
                        seen.add(path)
                        todo.append(path)
    return sorted(seen)


def _annotation_nodes(tree: ast.AST) -> set[int]:
    """ids of every node inside an annotation or an `if TYPE_CHECKING:` block (never evaluated at run time)."""
    skip: set[int] = set()

    def mark(node):
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.AnnAssign, ast.arg)):
            mark(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mark(node.returns)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                mark(child)
    return skip


def runtime_problems(source: str) -> list[str]:
    """Constructs newer than Python 3.8 in code that runs (annotations are strings: the files
    use `from __future__ import annotations`)."""
    tree = ast.parse(source)
    if "annotations" not in {a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}:
        return ["no `from __future__ import annotations`: annotations would be evaluated at import"]
    skip = _annotation_nodes(tree)
    abc_names = {
        a.asname or a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module == "collections.abc"
        for a in n.names
    }
    problems = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        where = f"line {getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            if node.value.id in BUILTIN_GENERICS:
                problems.append(f"{where}: {node.value.id}[...] needs Python 3.9")
            elif node.value.id in abc_names:
                problems.append(f"{where}: collections.abc.{node.value.id}[...] needs Python 3.9")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            sides = (node.left, node.right)
            if any(isinstance(s, ast.Name) and s.id in TYPE_NAMES for s in sides) or any(
                isinstance(s, ast.Constant) and s.value is None for s in sides
            ):
                problems.append(f"{where}: `X | Y` on types needs Python 3.10")
        elif isinstance(node, ast.Call):
            is_zip = isinstance(node.func, ast.Name) and node.func.id == "zip"
            if is_zip and any(k.arg == "strict" for k in node.keywords):
                problems.append(f"{where}: zip(strict=...) needs Python 3.10")
            if isinstance(node.func, ast.Attribute) and node.func.attr in {"removeprefix", "removesuffix"}:
                problems.append(f"{where}: str.{node.func.attr}() needs Python 3.9")
    return problems


def test_node_side_files_are_found():
    names = {str(p.relative_to(ROOT)) for p in node_side_files()}
    assert {"plugins/modules/gpu_node_facts.py", "plugins/module_utils/files/merge.py"} <= names
    assert "plugins/module_utils/files/edit.py" in names
    assert "controller_files.py" not in names, "controller-only module_utils must not count as node-side"


@pytest.mark.parametrize("path", node_side_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_node_side_file_runs_on_python_3_8(path):
    source = path.read_text()
    ast.parse(source, filename=str(path), feature_version=MIN_TARGET)
    assert runtime_problems(source) == [], f"{path.relative_to(ROOT)} would fail on Python 3.8"


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ("Alias = Callable[[list[str]], int | None]", "list[...] needs Python 3.9"),
        ("x = dict(zip(a, b, strict=True))", "zip(strict=...) needs Python 3.10"),
        ("T = str | None", "`X | Y` on types needs Python 3.10"),
        ("def f(s):\n    return s.removeprefix('v')", "str.removeprefix() needs Python 3.9"),
    ],
)
def test_runtime_check_catches_newer_constructs(snippet, expected):
    problems = runtime_problems("from __future__ import annotations\n" + snippet + "\n")
    assert any(expected in p for p in problems), problems
    ok = "from __future__ import annotations\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    T = str | None\n"
    assert runtime_problems(ok + "def f(a: list[str] | None) -> dict[str, int]:\n    x: int | None = 1\n") == []


def test_node_side_code_runs_on_python_3_9_in_a_node(tmp_path):
    """Real Python 3.9 (Debian 11's python3): import everything, run gpu_node_facts."""
    # the image, built here where it is missing or outdated (as the scenarios build theirs: scripts/lib.sh)
    image = PY39_IMAGE.removeprefix("gpunode:")
    ensure = f". scripts/lib.sh; ensure_images {image}"
    built = subprocess.run(["bash", "-c", ensure], cwd=ROOT, capture_output=True, text=True, check=False)
    assert built.returncode == 0, f"building node image {PY39_IMAGE} failed:\n{built.stdout}{built.stderr}"
    tree = tmp_path / "tree"
    shutil.copytree(Path(ansible.__file__).parent / "module_utils", tree / "ansible" / "module_utils")
    (tree / "ansible" / "__init__.py").write_text("")
    # as AnsiballZ ships them: the collection's module_utils under their package path, an __init__.py per level
    for path in node_side_files():
        rel = path.relative_to(ROOT)
        if rel.parts[:2] == ("plugins", "module_utils"):
            dest = tree / "ansible_collections" / "gpunode" / "provisioning" / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, dest)
    for folder in (tree / "ansible_collections").rglob("*"):
        if folder.is_dir() and not (folder / "__init__.py").exists():
            (folder / "__init__.py").write_text("")
    (tree / "ansible_collections" / "__init__.py").write_text("")
    result = subprocess.run(
        [
            "docker", "run", "--rm", "--network", "none",
            "-v", f"{tree}:/t:ro", "-v", f"{ROOT / 'plugins' / 'modules'}:/library:ro",
            "-v", f"{ROOT / 'tests' / 'fixtures' / 'node_python'}:/check:ro",
            "--pull", "never", PY39_IMAGE, "python3", "/check/check_node_python.py", "/t", "/library",
        ],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 0, f"node-side code fails on {PY39_IMAGE}'s python3:\n{out}"
    assert out.startswith("python 3.9."), out
    expected = {f"import plugins/modules/{p.name}" for p in (ROOT / "plugins" / "modules").glob("*.py")}
    expected |= {
        f"import {PACKAGE}{'.'.join(p.relative_to(ROOT / 'plugins' / 'module_utils').with_suffix('').parts)}"
        for p in node_side_files()
        if "module_utils" in p.parts
    }
    assert expected <= {line[5:] for line in out.splitlines() if line.startswith("ok   ")}, out
