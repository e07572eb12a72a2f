"""Inside DELIVER, imports point one way: documents/ knows nothing of the evidence or of
matching; evidence/ may read document text but never matching/ or render/; render/ builds
from the evidence and never from matching/."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

DELIVER = Path(__file__).resolve().parents[2] / "mcp_server" / "deliver"
FORBIDDEN = {
    "documents": ("evidence", "matching", "render"),
    "evidence": ("matching", "render"),
    "render": ("matching",),
}


def deliver_imports(path: Path) -> set[str]:
    """Sub-packages of mcp_server.deliver that one module imports (function-level imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["mcp_server", "deliver"] and len(parts) > 2:
                found.add(parts[2])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_deliver_sub_package_never_imports_the_layers_above_it(package: str) -> None:
    wrong = {p.name: sorted(deliver_imports(p) & set(FORBIDDEN[package]))
             for p in sorted((DELIVER / package).glob("*.py"))}
    assert {name: bad for name, bad in wrong.items() if bad} == {}


def test_the_import_reader_sees_a_wrong_way_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from mcp_server.deliver.matching.judge import Judge\n")
    assert deliver_imports(module) == {"matching"}
