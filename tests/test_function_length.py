"""Functions a newcomer can read: none over 80 lines outside benchmarks (def line to last line,
docstring included). Checked over the source, so a long function fails here, not in review."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("workbench", "sim", "realrun", "studies", "tests")
LIMIT = 80


def long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > LIMIT:
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    return out


def test_no_function_is_over_80_lines() -> None:
    found = [
        f for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py")) for f in long_functions(p)
    ]
    assert not found, f"functions over {LIMIT} lines:\n" + "\n".join(found)


def test_the_count_includes_the_def_line_and_the_docstring(tmp_path: Path) -> None:
    body = "\n".join(f"    x{k} = {k}" for k in range(LIMIT - 2))
    (tmp_path / "at.py").write_text(f'def f():\n    """doc"""\n{body}\n')
    (tmp_path / "over.py").write_text(f'def g():\n    """doc"""\n{body}\n    return 0\n')
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert long_functions(tmp_path / "at.py") == []
        assert long_functions(tmp_path / "over.py") == ["over.py:1 g (81 lines)"]
    finally:
        ROOT = saved
