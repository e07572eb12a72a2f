"""search_references tool adapter: ranked sections of the knowledge base for a symptom."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server import MCPServer
from pydantic import BaseModel, Field

from mcp_server.knowledge import KINDS
from mcp_server.search import MAX_LIMIT, SearchHit, default_index
from mcp_server.tools._common import READ_ONLY_LOCAL

SEARCHED = {"any": KINDS, "references": ("references",), "profiles": ("profiles",)}


class SearchReferencesResult(BaseModel):
    query: str
    hits: list[SearchHit] = Field(description="best first; read a hit's uri to load just that section")
    hint: str | None = Field(default=None, description="what to try when nothing matched")


def register(server: MCPServer) -> None:
    index = default_index()  # built once at start-up, not on the first query

    @server.tool(annotations=READ_ONLY_LOCAL)
    def search_references(
        query: Annotated[str, Field(description="the symptom or question in your words, e.g. 'loss NaN after warmup "
                                                "bf16', 'stopped pod still charging', '/dev/shm bus error', or an id "
                                                "like U7",
                                    min_length=2, max_length=400)],
        limit: Annotated[int, Field(description="how many sections to return", ge=1, le=MAX_LIMIT)] = 5,
        kind: Annotated[Literal["any", "references", "profiles"],
                        Field(description="search reference pages, platform profiles, or both")] = "any",
    ) -> SearchReferencesResult:
        """Find the knowledge-base sections that explain a symptom: ranked entries with an excerpt and the URI that loads just that entry.

        Searches every reference page (run, verify, deliver, training debug catalog) and every
        platform profile, section by section (BM25). Each hit's uri is a resource such as
        references://training/precision-stability#p8 or profiles://runpod#rp4; read it instead of
        the whole page. Start at references://index for the map of the knowledge base.
        """  # noqa: E501 -- the first line is the tool's description for the model: one line, unchanged
        hits = index.search(query, limit=limit, kinds=SEARCHED[kind])
        hint = None if hits else ("no section matched: use the words a log or console shows (an error line, a "
                                  "command, a platform verb) or browse references://index")
        return SearchReferencesResult(query=query, hits=hits, hint=hint)
