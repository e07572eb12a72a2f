"""Resources: every page of references/ and profiles/ (registered by iterating the folders),
plus section-level reads through two templates, so a client can load one entry
(`references://run-remote/gotchas#u7`) instead of a whole page. The index page ends with the
current staleness report (references://index#staleness), computed when it is read."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.server.mcpserver.resources import FunctionResource

from mcp_server import facts
from mcp_server.errors import NotFoundError
from mcp_server.knowledge import KINDS, Kind, KnowledgePage, doc, docs

MIME = "text/markdown"
INDEX_URI = "references://index"
STALENESS_ANCHOR = "staleness"  # the index's last section; the report is appended under it


def staleness_report(today: dt.date | None = None) -> str:
    return facts.report(facts.all_facts(), today or dt.date.today())


def _index_text(d: KnowledgePage) -> str:
    """The index with the due counts; the full list is one section read away (it is long)."""
    counts = facts.summary(facts.all_facts(), dt.date.today())
    return f"{d.text.rstrip()}\n\n{counts}\nThe list, fact by fact: {INDEX_URI}#{STALENESS_ANCHOR}\n"


def _reader(d: KnowledgePage) -> Callable[[], str]:
    if d.uri == INDEX_URI:
        return lambda: _index_text(d)
    return lambda: d.text


def describe(d: KnowledgePage) -> str:
    """A page's resource description: what it is for and how to load one of its sections."""
    entries = [s for s in d.sections if s.level > 1]
    example = next((s for s in entries if s.stable_id), entries[0] if entries else None)
    how = f" {len(entries)} sections; load one with {example.uri}." if example else ""
    return d.description + how


def section_text(kind: Kind, path: str, anchor: str) -> str:
    """One section's markdown with a breadcrumb line naming its page."""
    try:
        page = doc(kind, path)
        sec = page.section(anchor)
    except NotFoundError as exc:
        raise ResourceNotFoundError(str(exc)) from exc
    crumb = " > ".join((page.title, *sec.trail[1:])) if sec.trail else page.title
    text = sec.text
    if page.uri == INDEX_URI and anchor == STALENESS_ANCHOR:
        text = text.rstrip("\n") + "\n\n" + staleness_report()
    return f"<!-- {sec.uri} | {crumb} -->\n{text}"


def register(server: MCPServer) -> None:
    for kind in KINDS:
        for d in docs(kind):
            server.add_resource(FunctionResource.from_function(
                fn=_reader(d), uri=d.uri, name=d.uri, title=d.title,
                description=describe(d), mime_type=MIME,
            ))

    @server.resource("references://{+path}#{anchor}", name="reference-section", title="One section of a reference page",
                     description="One entry of a reference page by its anchor: a stable id lowercased (#u7, #a11, #m3, "
                                 "#vp4) or a heading slug (#iron-law). search_references returns these URIs.",
                     mime_type=MIME)
    def reference_section(path: str, anchor: str) -> str:
        return section_text("references", path, anchor)

    @server.resource("profiles://{platform}#{anchor}", name="profile-section",
                     title="One section of a platform profile",
                     description="One section or trap of a platform profile: #storage-model, #teardown-billing, "
                                 "a trap id such as #rp4 or #ad1.",
                     mime_type=MIME)
    def profile_section(platform: str, anchor: str) -> str:
        return section_text("profiles", platform, anchor)
