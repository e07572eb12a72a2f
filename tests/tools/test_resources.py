"""Resources end to end through a real MCP client: every page listed and readable, sections
readable through the templates, unknown sections refused with the anchors that exist."""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from mcp_server import knowledge as k


async def test_every_page_of_both_folders_is_listed_with_title_and_description(client) -> None:
    async with client.session() as c:
        listed = {str(r.uri): r for r in (await c.list_resources()).resources}
    expected = {d.uri: d for kind in k.KINDS for d in k.docs(kind)}
    assert set(expected) <= set(listed)
    for uri, d in expected.items():
        r = listed[uri]
        assert r.title == d.title and r.mime_type == "text/markdown"
        assert r.description and r.description.startswith(d.description[:30])
    assert "references://run-remote/gotchas#u1" in listed["references://run-remote/gotchas"].description


async def test_reading_a_page_returns_its_markdown(client) -> None:
    async with client.session() as c:
        got = await c.read_resource("profiles://autodl")
    text = got.contents[0].text
    assert text.startswith("+++") and "关机" in text
    assert got.contents[0].mime_type == "text/markdown"


async def test_section_templates_are_listed(client) -> None:
    async with client.session() as c:
        templates = {t.uri_template for t in (await c.list_resource_templates()).resource_templates}
    assert {"references://{+path}#{anchor}", "profiles://{platform}#{anchor}"} <= templates


@pytest.mark.parametrize(("uri", "must"), [
    ("references://run-remote/gotchas#u7", "No space left"),
    ("references://run-remote/audit-checks#a7b", "ecc.errors.uncorrected"),
    ("references://run-remote/lifecycle-checklist#phase-0", "audit_box"),
    ("references://training/precision-stability#p8", "log_softmax"),
    ("references://verifying/methodology#vp6", "VP6j"),
    ("profiles://runpod#rp4", "$0.20"),
    ("profiles://generic-ssh#slurm", "SLURM5"),
])
async def test_one_section_is_readable_on_its_own(client, uri: str, must: str) -> None:
    async with client.session() as c:
        got = await c.read_resource(uri)
    text = got.contents[0].text
    assert must in text
    assert uri in text.splitlines()[0], "the breadcrumb names where the section lives"
    page = k.resolve(uri)[0]
    assert len(text) < len(page.text)


async def test_a_gotcha_section_holds_one_entry_not_the_page(client) -> None:
    async with client.session() as c:
        text = (await c.read_resource("references://run-remote/gotchas#u7")).contents[0].text
    assert "U7" in text and "U8" not in text


async def test_an_unknown_section_is_refused_with_the_anchors_that_exist(client) -> None:
    async with client.session() as c:
        with pytest.raises(MCPError) as err:
            await c.read_resource("references://run-remote/gotchas#u99")
    assert "#u99" in str(err.value) and "u44" in str(err.value)


async def test_an_unknown_page_or_a_traversal_is_not_found(client) -> None:
    async with client.session() as c:
        for uri in ("references://nope#a1", "references://run-remote/../../etc/passwd#x", "profiles://nope"):
            with pytest.raises(MCPError):
                await c.read_resource(uri)


async def test_the_index_page_counts_the_facts_due_and_points_at_the_list(client) -> None:
    async with client.session() as c:
        text = (await c.read_resource("references://index")).contents[0].text
    assert "references://run-remote/windows-client" in text
    assert "dated facts are due a re-check" in text and "- runpod:" in text
    assert "references://index#staleness" in text
    from mcp_server import facts

    due = next(f.section_uri for f in facts.all_facts() if f.source is None and "#" in f.section_uri)
    assert due not in text, "the page stays a map; the list is one section read away"


async def test_the_staleness_section_lists_every_due_fact_by_platform(client) -> None:
    async with client.session() as c:
        text = (await c.read_resource("references://index#staleness")).contents[0].text
    assert text.splitlines()[0].startswith("<!-- references://index#staleness")
    for platform in ("autodl", "runpod", "vastai", "lambda", "paperspace", "china", "generic-ssh"):
        assert f"### {platform} (" in text
    from mcp_server import facts

    unsourced = {f.section_uri for f in facts.all_facts() if f.source is None}
    assert unsourced and all(uri in text for uri in unsourced) and "unsourced" in text
    assert "does not say that any fact" in text


async def test_a_page_with_fact_markers_is_served_with_them(client) -> None:
    async with client.session() as c:
        text = (await c.read_resource("references://run-local/multi-gpu#mg3")).contents[0].text
    assert "<!-- src: https://docs.nvidia.com/cuda/" in text and "verified: 2026-12-03" in text
