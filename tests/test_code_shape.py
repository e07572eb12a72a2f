"""The shape the architecture promises, checked on the source: small modules, short
functions, and shell only in `mcp_server/scripts/*.sh` files."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "mcp_server"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 50
MAX_SHELL_LINES_IN_PYTHON = 3
# Words that make a multi-line string shell rather than prose.
_SHELL = re.compile(r"\$\(|\$\{|; then\b|; do\b|^\s*(fi|done|esac)\b|2>/dev/null|\bexport \w+=|\bset -[eu]", re.M)


def sources() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def _docstring_ids(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def test_no_module_is_longer_than_the_limit() -> None:
    lengths = {p.relative_to(PKG).as_posix(): len(p.read_text().splitlines()) for p in sources()}
    assert {m: n for m, n in lengths.items() if n > MAX_MODULE_LINES} == {}


def test_no_function_is_longer_than_the_limit() -> None:
    long = []
    for p in sources():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{p.relative_to(PKG)}:{node.lineno} {node.name} ({n} lines)")
    assert long == []


def test_no_python_string_holds_more_than_three_lines_of_shell() -> None:
    found = []
    for p in sources():
        lines = p.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        docs = _docstring_ids(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant | ast.JoinedStr) or id(node) in docs:
                continue
            if isinstance(node, ast.Constant) and not isinstance(node.value, str):
                continue
            span = (node.end_lineno or node.lineno) - node.lineno + 1
            if span > MAX_SHELL_LINES_IN_PYTHON and _SHELL.search("\n".join(lines[node.lineno - 1:node.end_lineno])):
                found.append(f"{p.relative_to(PKG)}:{node.lineno} ({span} lines)")
    assert sorted(set(found)) == []


def script_names() -> list[str]:
    return sorted(p.stem for p in (PKG / "scripts").glob("*.sh"))


@pytest.mark.parametrize("name", script_names())
def test_every_script_is_used_by_the_code(name: str) -> None:
    users = [p for p in sources() if re.search(rf"[\"']{name}[\"']", p.read_text())]
    assert users, f"scripts/{name}.sh is not loaded anywhere"


@pytest.mark.parametrize("name", script_names())
def test_every_script_declares_its_shell(name: str) -> None:
    head = (PKG / "scripts" / f"{name}.sh").read_text().splitlines()[:3]
    assert any(line.startswith(("#!/", "# shellcheck shell=")) for line in head)
