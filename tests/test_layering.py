"""Imports point one way: only server.py, __main__.py and tools/ import mcp; only
hosts/ssh.py and hosts/ssh_connect.py import asyncssh; domain packages never import the adapter layer; the on-box
scripts package is a leaf; no two modules import each other, directly or round a circle."""

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


def module_name(relative: str) -> str:
    """`hosts/pool.py` -> `hosts.pool`; a package's `__init__.py` is the package."""
    return relative.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The package modules one module imports anywhere: at the top, inside functions (the lazy
    ones) and under TYPE_CHECKING (a circle that only typing closes still ties two designs).
    `from a import b` imports module a.b when b is one, else a itself."""
    package = ["mcp_server", *path.relative_to(PKG).parent.parts]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {internal(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*package[: len(package) - node.level + 1], node.module or ""]) if node.level else ""
            mod = internal((base or node.module or "").strip("."))
            subs = {f"{mod}.{a.name}" if mod else internal(f"mcp_server.{a.name}") for a in node.names}
            found |= {s if s in known else mod for s in subs}
    return {m for m in found if m in known}


def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the package modules it imports."""
    paths = {module_name(p.relative_to(PKG).as_posix()): p for p in sorted(PKG.rglob("*.py"))}
    known = set(paths)
    return {name: imported_modules(p, known) - {name} for name, p in paths.items()}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan), each sorted: every module in
    a group reaches every other by imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def describe(group: list[str], graph: dict[str, set[str]]) -> str:
    inside = set(group)
    return "; ".join(f"{m} -> {', '.join(sorted(graph[m] & inside))}" for m in group)


def test_the_cycle_finder_names_each_circle_and_only_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"], ["d", "e"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_sees_imports_inside_functions() -> None:
    graph = import_graph()
    assert "run.jobs.engines.kube.audit" in graph["tools.audit"], "a lazy import in _audit_full"
    assert "hosts.kube_api" in graph["hosts.pool"], "a lazy and a TYPE_CHECKING import"


def test_no_modules_import_each_other_round_a_circle() -> None:
    graph = import_graph()
    assert [describe(group, graph) for group in import_cycles(graph)] == []


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
    adapter = ("hosts/ssh.py", "hosts/ssh_connect.py")
    bad = [m for m, imps in modules() if any(i.split(".")[0] == "asyncssh" for i in imps) and m not in adapter]
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
