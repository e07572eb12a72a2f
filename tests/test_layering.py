"""Imports point one way: only server.py, __main__.py and tools/ import mcp; only
hosts/ssh.py imports asyncssh; domain packages never import the adapter layer."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "mcp_server"


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            found.add("." * node.level + mod)
    return found


def modules() -> list[tuple[str, set[str]]]:
    return [(p.relative_to(PKG).as_posix(), imports(p)) for p in sorted(PKG.rglob("*.py"))]


def test_only_the_adapter_layer_imports_mcp() -> None:
    allowed = ("server.py", "__main__.py", "tools/")
    bad = [m for m, imps in modules() if any(i == "mcp" or i.startswith("mcp.") for i in imps)
           and not m.startswith(allowed)]
    assert bad == []


def test_only_the_ssh_host_imports_asyncssh() -> None:
    bad = [m for m, imps in modules() if any(i.split(".")[0] == "asyncssh" for i in imps) and m != "hosts/ssh.py"]
    assert bad == []


def test_domain_packages_do_not_import_tools() -> None:
    bad = [m for m, imps in modules() if m.startswith(("run/", "verify/", "deliver/", "hosts/", "platforms/"))
           and any("tools" in i.split(".") for i in imps)]
    assert bad == []


def test_hosts_knows_nothing_of_runs_or_manifests() -> None:
    bad = [m for m, imps in modules() if m.startswith("hosts/")
           and any(i.lstrip(".").split(".")[0] in ("run", "verify", "deliver", "platforms") for i in imps)]
    assert bad == []


def test_no_shell_true_and_no_print_in_server_code() -> None:
    """stdout carries the protocol on stdio: only the console entry may print."""
    for p in PKG.rglob("*.py"):
        tree = ast.parse(p.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "shell":
                raise AssertionError(f"shell= keyword in {p}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
                    and p.name != "__main__.py"):
                raise AssertionError(f"print() in {p}:{node.lineno}")
