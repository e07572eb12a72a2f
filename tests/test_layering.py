"""Imports point one way: only server.py, __main__.py and tools/ import mcp; only
hosts/ssh.py imports asyncssh; domain packages never import the adapter layer; the on-box
scripts package is a leaf."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "mcp_server"
DOMAIN = ("run/", "verify/", "deliver/", "hosts/", "platforms/")
ADAPTER = ("tools", "server", "__main__")


def imports(path: Path) -> set[str]:
    """Absolute names of what a module imports: `from a.b import c` gives `a.b` and `a.b.c`
    (c may be a module); relative imports are resolved against the module's package."""
    package = ["mcp_server", *path.relative_to(PKG).parent.parts]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*package[: len(package) - node.level + 1], node.module or ""]) if node.level else ""
            mod = (base or node.module or "").strip(".")
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}
    return found


def internal(name: str) -> str | None:
    """`mcp_server.hosts.ssh` -> `hosts.ssh`; None for anything outside the package."""
    head, _, rest = name.partition(".")
    return rest if head == "mcp_server" and rest else None


def modules() -> list[tuple[str, set[str]]]:
    return [(p.relative_to(PKG).as_posix(), imports(p)) for p in sorted(PKG.rglob("*.py"))]


def test_import_names_are_resolved_to_package_paths() -> None:
    assert internal("mcp_server.tools._common") == "tools._common"
    assert internal("mcp") is None and internal("mcp_server") is None
    found = imports(PKG / "tools" / "audit.py")
    assert "mcp_server.tools._common" in found and "mcp_server.errors.InputError" in found


def test_only_the_adapter_layer_imports_mcp() -> None:
    allowed = ("server.py", "__main__.py", "tools/")
    bad = [m for m, imps in modules() if any(i == "mcp" or i.startswith("mcp.") for i in imps)
           and not m.startswith(allowed)]
    assert bad == []


def test_only_the_ssh_host_imports_asyncssh() -> None:
    bad = [m for m, imps in modules() if any(i.split(".")[0] == "asyncssh" for i in imps) and m != "hosts/ssh.py"]
    assert bad == []


def test_domain_packages_do_not_import_the_adapter_layer_or_the_server() -> None:
    bad = [(m, i) for m, imps in modules() if m.startswith(DOMAIN)
           for i in imps if (name := internal(i)) and name.split(".")[0] in ADAPTER]
    assert bad == []


def test_hosts_knows_nothing_of_runs_or_manifests() -> None:
    bad = [(m, i) for m, imps in modules() if m.startswith("hosts/")
           for i in imps if (name := internal(i)) and name.split(".")[0] in ("run", "verify", "deliver", "platforms")]
    assert bad == []


def test_the_scripts_package_is_a_leaf_over_hosts_commands_and_the_standard_library() -> None:
    def allowed(name: str) -> bool:
        inside = internal(name)
        if inside is not None:
            return inside == "hosts.commands" or inside.startswith("hosts.commands.")
        top = name.split(".")[0]
        return top == "__future__" or top in sys.stdlib_module_names

    bad = [(m, i) for m, imps in modules() if m.startswith("scripts/") for i in imps
           if i != "mcp_server" and not allowed(i)]
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
