"""Every route the server's code hands out resolves to an existing page and section.

Scans every *.py under mcp_server/ for references:// and profiles:// URIs in string literals,
for reference_uri("<path>", "<anchor>") calls, and for any call whose literal arguments are a
reference page path (optionally followed by a literal anchor), so routes added by any tool are
checked without listing them here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from mcp_server import knowledge as k
from mcp_server.errors import NotFoundError
from mcp_server.server import build_server
from mcp_server.settings import Settings

PKG = Path(__file__).resolve().parents[2] / "mcp_server"
URI = re.compile(r"\b(?:references|profiles)://[a-z_][a-z0-9_/-]*[a-z0-9](?:#[a-z0-9][a-z0-9-]*)?")
ANCHOR = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def page_path(value: str) -> bool:
    folders = {d.path.split("/")[0] for d in k.docs("references") if "/" in d.path}
    return bool(re.fullmatch(r"[a-z0-9-]+/[a-z0-9-]+", value)) and value.split("/")[0] in folders


def strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def routes_in(path: Path) -> set[str]:
    """Routes a module names: URIs in any literal, and (page, anchor) literal pairs in calls."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = {m for s in strings(tree) for m in URI.findall(s)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            lits = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in node.args]
            for i, value in enumerate(lits):
                if value and page_path(value):
                    nxt = lits[i + 1] if i + 1 < len(lits) else None
                    found.add(k.reference_uri(value, nxt if nxt and ANCHOR.match(nxt) else None))
        elif (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
              and isinstance(node.value.value, str) and page_path(node.value.value)):
            found.add(k.reference_uri(node.value.value))
    return found


def all_routes() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in sorted(PKG.rglob("*.py")):
        for uri in routes_in(p):
            out.setdefault(uri, []).append(p.relative_to(PKG).as_posix())
    return out


def test_the_scanner_finds_the_routes_it_is_meant_to_find(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text(
        'PAGE = "verifying/methodology"\n'
        'def f():\n'
        '    """See references://run-remote/gotchas#u7 and profiles://<platform>."""\n'
        '    reference_uri("run-remote/audit-checks", "a11")\n'
        '    _s("x", "fam", "re", "meaning", "training/oom-memory", "m2")\n'
        '    return reference_uri(PAGE, cid)\n'
    )
    assert routes_in(sample) == {
        "references://run-remote/gotchas#u7", "references://run-remote/audit-checks#a11",
        "references://training/oom-memory#m2", "references://verifying/methodology",
    }


def test_the_code_hands_out_routes() -> None:
    routes = all_routes()
    assert any(u.startswith("references://run-remote/audit-checks") for u in routes)
    assert len(routes) >= 10


@pytest.mark.parametrize("uri", sorted(all_routes()))
def test_every_route_in_the_code_resolves(uri: str) -> None:
    try:
        k.resolve(uri)
    except NotFoundError as exc:
        pytest.fail(f"{uri} (in {', '.join(all_routes()[uri])}) does not resolve: {exc}")


@pytest.mark.parametrize("check_id", [f"A{i}" for i in range(1, 31)] + ["A7b"])
def test_every_audit_check_route_resolves(check_id: str) -> None:
    k.resolve(k.reference_uri("run-remote/audit-checks", check_id.lower()))


async def test_every_tool_description_links_the_references_it_relies_on() -> None:
    """The full descriptions (schemas://tools/<name>; tools/list publishes first paragraphs)."""
    tools = await build_server(Settings.from_env()).list_tools()
    unlinked = [t.name for t in tools if not URI.search(t.description or "")]
    assert unlinked == []
    for t in tools:
        for uri in URI.findall(t.description or ""):
            k.resolve(uri)


async def test_every_tool_is_named_by_a_reference_page(client) -> None:
    async with client.session() as c:
        names = [t.name for t in (await c.list_tools()).tools]
    corpus = "\n".join(d.text for kind in k.KINDS for d in k.docs(kind))
    assert [n for n in names if f"`{n}" not in corpus] == []
