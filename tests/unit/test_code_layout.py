"""Issue 40: the house stays easy to find one's way in. Python files split by subject, vars files that hold
data, one platform mechanism, short task names."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MAX_PYTHON_LINES = 700


def test_no_python_file_in_library_or_plugins_is_over_700_lines():
    long = {
        str(path.relative_to(ROOT)): n
        for path in sorted([*ROOT.glob("library/*.py"), *ROOT.glob("plugins/*/*.py")])
        if (n := len(path.read_text().splitlines())) > MAX_PYTHON_LINES
    }
    assert not long, f"split these files by subject (at most {MAX_PYTHON_LINES} lines each): {long}"
