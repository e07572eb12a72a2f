"""The alias table (references/_aliases.toml): it parses, every alias alone finds its concept's
target in the top 3, and aliases change only the query, never the pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_server import search
from mcp_server.errors import ConfigError
from mcp_server.knowledge import resolve
from mcp_server.search import Concept, concepts, default_index, expand, tokenize

ALIASES = [(c, a) for c in concepts() for a in c.aliases]


def test_the_table_covers_the_phrasings_users_of_the_chinese_platforms_type() -> None:
    every = {a for c in concepts() for a in c.aliases}
    assert {"释放", "关机", "显存", "镜像", "数据盘"} <= every
    assert len(every) == len([a for c in concepts() for a in c.aliases]), "an alias belongs to one concept"
    assert len(concepts()) >= 30


@pytest.mark.parametrize("concept", concepts(), ids=lambda c: c.name)
def test_every_target_resolves(concept: Concept) -> None:
    assert concept.terms.strip() and concept.aliases and concept.target
    for uri in concept.target:
        resolve(uri)


@pytest.mark.parametrize(("concept", "alias"), ALIASES, ids=[f"{c.name}:{a}" for c, a in ALIASES])
def test_an_alias_alone_finds_its_target_in_the_top_three(concept: Concept, alias: str) -> None:
    got = [s.uri if s.level > 1 else f"{s.kind}://{s.path}" for s, _ in default_index().rank(alias, 3)]
    assert any(u in concept.target or u.split("#")[0] in concept.target for u in got), got


def test_an_alias_adds_page_words_to_the_query_and_leaves_the_users_words_first() -> None:
    own, extra = expand("how do I release the GPU")
    assert own == tokenize("how do I release the GPU")
    assert {"teardown", "termin"} <= set(extra) and not set(extra) & set(own)


def test_english_aliases_match_inflected_and_spread_out_phrasings() -> None:
    teardown = next(c for c in concepts() if c.name == "teardown")
    for query in ("releasing the GPU now", "please give the rented box back", "Release The GPU"):
        assert teardown.matches(query.lower(), tokenize(query)), query
    assert not teardown.matches("gpu release notes", tokenize("gpu release notes"))


def test_chinese_aliases_match_inside_a_sentence() -> None:
    own, extra = expand("我想释放这台机器")
    assert set(tokenize("teardown release")) <= set(extra)


def test_a_query_without_an_alias_is_not_expanded() -> None:
    assert expand("PytorchStreamReader failed reading zip archive")[1] == []


def test_aliases_never_change_the_indexed_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    sections = default_index().sections
    with_table = [search.document(s, "t") for s in sections]
    monkeypatch.setattr(search, "concepts", lambda: ())
    assert [search.document(s, "t") for s in sections] == with_table
    assert expand("release the gpu")[1] == []


def test_a_broken_table_is_a_clear_configuration_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "_aliases.toml"
    bad.write_text("[[concept]]\nname = 'x'\n", encoding="utf-8")
    monkeypatch.setattr(search, "aliases_path", lambda: bad)
    search.concepts.cache_clear()
    try:
        with pytest.raises(ConfigError) as err:
            search.concepts()
        assert "_aliases.toml" in str(err.value) and "aliases" in str(err.value)
    finally:
        search.concepts.cache_clear()
