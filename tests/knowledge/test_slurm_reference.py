"""The Slurm reference page: how users describe a stuck queue or a time-limit kill finds its
section in the top 3 of the search search_references runs, and its sections resolve."""

from __future__ import annotations

import pytest

from mcp_server.knowledge import resolve
from mcp_server.search import default_index

PAGE = "references://run-remote/slurm"


def top_uris(query: str, k: int = 3) -> list[str]:
    return [s.uri if s.level > 1 else f"{s.kind}://{s.path}" for s, _ in default_index().rank(query, k)]


@pytest.mark.parametrize(("query", "anchor"), [
    ("job stuck pending", "pending"),
    ("my job is stuck in the queue", "pending"),
    ("killed at time limit", "killed-at-time-limit"),
    ("job was killed by the time limit", "killed-at-time-limit"),
])
def test_a_slurm_symptom_finds_its_section_in_the_top_three(query: str, anchor: str) -> None:
    assert f"{PAGE}#{anchor}" in top_uris(query), top_uris(query, 5)


@pytest.mark.parametrize("anchor", ["states", "pending-reasons", "pending", "time-limit", "killed-at-time-limit",
                                    "arrays", "requeue", "gpus", "login-node", "accounting", "this-server"])
def test_every_section_of_the_slurm_page_resolves(anchor: str) -> None:
    page, section = resolve(f"{PAGE}#{anchor}")
    assert page.uri == PAGE and section is not None and section.anchor == anchor


def test_the_search_references_answer_groups_the_slurm_hits_under_the_page() -> None:
    pages = default_index().search("job stuck pending", limit=3)
    assert pages and pages[0].page == PAGE
    assert f"{PAGE}#pending" in [h.uri for h in pages[0].sections]
