"""What search_references returns and accepts, apart from the ranking engine: the tool's schema
needs these at start, the engine (bm25s, numpy) only when a search runs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

KindFilter = Literal["any", "reference", "profile", "signature"]
MAX_LIMIT = 20


# One section that answers (its uri ends in #anchor; a page's opening text has none), with the
# dates of the facts it states. No docstring: it would be sent in every tools/list.
class SectionHit(BaseModel):
    uri: str = Field(description="loads just this section")
    heading: str
    excerpt: str
    score: float
    verified: str | None = Field(default=None, description="oldest date its facts were checked")
    sources: list[str] = Field(default_factory=list)
    unsourced: bool = Field(default=False, description="a fact here has no source: re-check it")


# The answering sections of one page, best first.
class PageHits(BaseModel):
    page: str
    title: str
    kind: Literal["reference", "profile"]
    sections: list[SectionHit]
