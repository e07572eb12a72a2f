"""Ranked search over the knowledge base's sections (references and profiles).

Ranking is BM25 (the `bm25s` library) over section documents: the heading weighted, the stable
id as its own token, the page title and enclosing headings as context, then the text. Tokens
are English stems; identifiers are indexed whole and split (`hf_transfer` gives `hf_transfer`,
`hf`, `transfer`; `Xid 79` also gives `xid_79`); Chinese is indexed as character bigrams. How
users phrase a concept is data (references/_aliases.toml), applied to the query only. The index
is built once per process, from a cache on disk keyed by the knowledge files and this code."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from mcp_server import facts
from mcp_server.errors import ConfigError
from mcp_server.knowledge import KINDS, KnowledgeSection, all_sections, docs, knowledge_root
from mcp_server.search_models import MAX_LIMIT, KindFilter, PageHits, SectionHit
from mcp_server.settings import Settings

log = logging.getLogger(__name__)
# bm25s logs every index build at DEBUG through its own handler; keep stderr for our messages.
logging.getLogger("bm25s").setLevel(logging.WARNING)

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CHUNK = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+(?:[._/\-][^\W_{_CJK}]+)*")
_CJK_RUN = re.compile(rf"[{_CJK}]")
_SEP = re.compile(r"[._/\-]")
_GLUED = re.compile(r"^([a-z]{3,})(\d+)$")  # xid79 -> xid_79
_ID_TOKEN = re.compile(r"^[a-z]{1,5}[0-9]+[a-z]?$")
_STOP = frozenset(STOPWORDS_EN) - {"no", "not", "off", "down", "up", "out", "all"}
_ID_MARK = "sid"  # prefix of the token only the section carrying that stable id holds
_HEADING_WEIGHT = 3
EXPANSION_WEIGHT = 0.5  # alias terms count half as much as the user's own words
IDENTIFIER_WEIGHT = 2.0  # a whole identifier (hf_transfer, xid_79) is a sharper signal than its parts
_ALIAS_GAP = 2
# Page openings summarise and the index only points: a specific section should win a tie.
_PRIOR = {"opening": 0.8, "index": 0.5}
_EXCERPT_CHARS = 240


@functools.cache
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def _word(w: str) -> str | None:
    if w in _STOP:
        return None
    return _stemmer().stemWord(w) if w.isascii() and w.isalpha() else w


def tokenize(text: str) -> list[str]:
    """Index tokens: stemmed words without stop words, identifiers whole and split, word-number
    pairs joined (`xid_79`), Chinese as character bigrams."""
    out: list[str] = []
    chunks = _CHUNK.findall(text.lower())
    for i, chunk in enumerate(chunks):
        if _CJK_RUN.match(chunk):
            out += [chunk[j:j + 2] for j in range(max(1, len(chunk) - 1))]
            continue
        parts = _SEP.split(chunk)
        if len(parts) > 1:
            out.append("_".join(parts))
        out += [t for t in map(_word, parts) if t]
        glued = _GLUED.match(chunk)
        if glued:
            out.append(f"{glued.group(1)}_{glued.group(2)}")
        nxt = chunks[i + 1] if i + 1 < len(chunks) else ""
        if chunk.isalpha() and chunk.isascii() and chunk not in _STOP and len(chunk) > 1 and nxt.isdigit():
            out.append(f"{chunk}_{nxt}")
    return out


@dataclass(frozen=True)
class Concept:
    """One entry of the alias table: how users say it, and the words the pages use."""

    name: str
    terms: str
    aliases: tuple[str, ...]
    target: tuple[str, ...]

    def matches(self, query_low: str, query_tokens: Sequence[str]) -> bool:
        return any(_contains(query_low, query_tokens, a) for a in self.aliases)


@functools.lru_cache(maxsize=4096)
def _alias_tokens(alias: str) -> list[str]:
    return tokenize(alias)


def _contains(query_low: str, query_tokens: Sequence[str], alias: str) -> bool:
    """Chinese aliases as substrings; English ones as their tokens in order, allowing up to two
    extra words in between ("give the GPU box back" contains "give the box back")."""
    if _CJK_RUN.search(alias):
        return alias in query_low
    want = _alias_tokens(alias)
    for start, tok in enumerate(query_tokens):
        if not want or tok != want[0]:
            continue
        pos, found = start, 1
        for w in want[1:]:
            window = query_tokens[pos + 1: pos + 1 + _ALIAS_GAP + 1]
            if w not in window:
                break
            pos += 1 + list(window).index(w)
            found += 1
        if found == len(want):
            return True
    return False


def aliases_path() -> Path:
    return knowledge_root() / "references" / "_aliases.toml"


@functools.cache
def concepts() -> tuple[Concept, ...]:
    """The alias table, validated: a broken table is a clear error, not a silent no-op."""
    path = aliases_path()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        table = [Concept(name=c["name"], terms=c["terms"], aliases=tuple(c["aliases"]), target=tuple(c["target"]))
                 for c in raw["concept"]]
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise ConfigError("the search alias table cannot be read", path=str(path), observed=str(exc),
                          expected="[[concept]] entries with name, terms, aliases, target") from exc
    return tuple(table)


def expand(query: str) -> tuple[list[str], list[str]]:
    """(the query's own tokens plus stable-id marks, the page words its aliases add)."""
    own = tokenize(query)
    marks = [_ID_MARK + w for w in re.findall(r"[a-z0-9]+", query.lower()) if _ID_TOKEN.match(w)]
    low = query.lower()
    extra = [t for c in concepts() if c.matches(low, own) for t in tokenize(c.terms)]
    return own + marks, [t for t in dict.fromkeys(extra) if t not in own]


def _plain(text: str) -> str:
    text = re.sub(r"^\s*(?:[-+]|\d+\.)\s+", "", facts.strip_markers(text))
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[*`>#]|\|", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def excerpt(text: str, terms: set[str], limit: int = _EXCERPT_CHARS) -> str:
    """The line of `text` carrying the most query terms, cut around its first match. Whole
    identifiers are not counted on top of their parts, so one path does not outweigh two words."""
    terms = {t for t in terms if "_" not in t} or terms
    best, best_n = "", -1
    for raw in text.splitlines():
        line = _plain(raw)
        if not line or set(line) <= {"-", " ", ":"}:
            continue
        n = len(terms & set(tokenize(line)))
        if n > best_n:
            best, best_n = line, n
    if len(best) <= limit:
        return best
    words = best.split(" ")
    first = next((i for i, w in enumerate(words) if terms & set(tokenize(w))), 0)
    start = max(0, first - 6)
    cut = " ".join(words[start:])
    cut = cut if len(cut) <= limit else cut[: limit - 1].rsplit(" ", 1)[0] + "\u2026"
    return ("\u2026" if start else "") + cut


def document(s: KnowledgeSection, title: str) -> list[str]:
    """What one section is indexed as: heading (weighted) and stable id, context, text."""
    heading = tokenize(s.heading) * _HEADING_WEIGHT
    if s.stable_id:
        heading.append(_ID_MARK + s.stable_id.lower())
    context = tokenize(" ".join([title, *s.trail, s.path.replace("/", " ").replace("-", " ")]))
    return heading + context + tokenize(facts.strip_markers(s.own_text)) or [""]


def is_signature(s: KnowledgeSection) -> bool:
    """A catalog entry that starts from what a log or console shows."""
    return ("**Symptom:**" in s.own_text or s.path == "training/log-signatures"
            or (s.path == "run-remote/monitoring" and s.anchor == "failure-signatures"))


class SearchIndex:
    """BM25 over sections; built (or loaded from the cache) once, queried many times."""

    def __init__(self, sections: Sequence[KnowledgeSection], titles: dict[str, str],
                 retriever: bm25s.BM25 | None = None) -> None:
        self.sections = list(sections)
        self.titles = titles
        if retriever is None:
            retriever = bm25s.BM25()
            retriever.index([document(s, self._title(s)) for s in self.sections], show_progress=False)
        self.retriever = retriever
        profile = np.array([s.kind == "profiles" for s in self.sections])
        self.prior = np.array([_PRIOR["index"] if s.uri.startswith("references://index#")
                               else _PRIOR["opening"] if s.level == 1 else 1.0 for s in self.sections],
                              dtype=np.float32)
        self.masks: dict[str, np.ndarray] = {"any": np.ones(len(self.sections), dtype=bool), "profile": profile,
                                            "reference": ~profile,
                                            "signature": np.array([is_signature(s) for s in self.sections])}

    def _title(self, s: KnowledgeSection) -> str:
        return self.titles.get(f"{s.kind}://{s.path}", s.path)

    def _scores(self, tokens: list[str]) -> np.ndarray:
        ids = list(dict.fromkeys(self.retriever.get_tokens_ids(tokens)))
        if not ids:
            return np.zeros(len(self.sections), dtype=np.float32)
        return np.asarray(self.retriever.get_scores_from_ids(ids), dtype=np.float32)

    def rank(self, query: str, limit: int = 5, kind: KindFilter = "any") -> list[tuple[KnowledgeSection, float]]:
        """The `limit` best sections for a free-text query, best first (empty when nothing matches)."""
        own, extra = expand(query)
        idents = [t for t in own if "_" in t]
        words = [t for t in own if "_" not in t]
        scores = (self._scores(words) + IDENTIFIER_WEIGHT * self._scores(idents)
                  + EXPANSION_WEIGHT * self._scores(extra)) * self.prior
        scores = np.where(self.masks[kind], scores, 0.0)
        order = np.argsort(-scores, kind="stable")[: min(limit, MAX_LIMIT)]
        return [(self.sections[int(i)], float(scores[i])) for i in order if scores[i] > 0]

    def search(self, query: str, limit: int = 5, kind: KindFilter = "any") -> list[PageHits]:
        """The best sections grouped by page: pages in the order of their best section."""
        own, extra = expand(query)
        terms = set(own + extra)
        pages: dict[str, PageHits] = {}
        for s, score in self.rank(query, limit, kind):
            page = f"{s.kind}://{s.path}"
            if page not in pages:
                pages[page] = PageHits(page=page, title=self._title(s),
                                       kind="profile" if s.kind == "profiles" else "reference", sections=[])
            pages[page].sections.append(self._hit(s, score, terms))
        return list(pages.values())

    def _hit(self, s: KnowledgeSection, score: float, terms: set[str]) -> SectionHit:
        uri = s.uri if s.level > 1 else f"{s.kind}://{s.path}"
        verified, sources, unsourced = facts.section_dates(uri)
        return SectionHit(uri=uri, heading=s.heading, excerpt=excerpt(s.own_text or s.heading, terms),
                          score=round(score, 3), verified=verified, sources=sources[:3], unsourced=unsourced)


def substring_scan(sections: Sequence[KnowledgeSection], query: str, limit: int = 5) -> list[KnowledgeSection]:
    """Baseline for the benchmark: sections ranked by how many query words occur as substrings."""
    words = [w for w in query.lower().split() if w not in _STOP]
    counted = [(sum(w in s.own_text.lower() for w in words), n) for n, s in enumerate(sections)]
    counted.sort(key=lambda c: (-c[0], c[1]))
    return [sections[n] for c, n in counted[:limit] if c > 0]


def _inputs() -> tuple[list[KnowledgeSection], dict[str, str], str]:
    """The sections, the page titles, and the cache key: every page's text and this code."""
    sections = [s for s in all_sections() if s.own_text.strip() or s.level > 1]
    titles = {d.uri: d.title for kind in KINDS for d in docs(kind)}
    h = hashlib.sha256(f"bm25s {bm25s.__version__}\n".encode())
    for module in (__file__, facts.__file__):
        h.update(Path(module).read_bytes())
    for kind in KINDS:
        for d in docs(kind):
            h.update(f"\0{d.uri}\0".encode() + d.text.encode())
    return sections, titles, h.hexdigest()[:24]


def _load(path: Path, sections: Sequence[KnowledgeSection]) -> bm25s.BM25:
    uris = json.loads((path / "sections.json").read_text(encoding="utf-8"))
    if uris != [s.uri for s in sections]:
        raise ValueError("the cached index lists other sections")
    retriever = bm25s.BM25.load(str(path), mmap=False, show_progress=False)
    if retriever.scores["num_docs"] != len(sections):
        raise ValueError("the cached index holds another number of documents")
    return retriever


def _save(index: SearchIndex, root: Path, key: str) -> None:
    """Write the index next to its final place, then rename it in: readers never see half a cache."""
    tmp: Path | None = None
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
        index.retriever.save(str(tmp), show_progress=False)
        (tmp / "sections.json").write_text(json.dumps([s.uri for s in index.sections]), encoding="utf-8")
        os.replace(tmp, root / key)
    except OSError as exc:  # another process won the race, or the place is not writable
        log.info("search index not cached in %s: %s", root, exc)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    for old in root.iterdir():
        if old.name != key and not old.name.startswith(".tmp-"):
            shutil.rmtree(old, ignore_errors=True)


def load_index(cache_root: Path | None) -> SearchIndex:
    """The index from `cache_root` when a valid cache for the current knowledge exists; otherwise
    built, then cached. A corrupt or foreign cache is rebuilt; an unwritable one is skipped."""
    sections, titles, key = _inputs()
    if cache_root is not None and (cache_root / key).is_dir():
        try:
            return SearchIndex(sections, titles, _load(cache_root / key, sections))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("search index cache %s is unusable (%s); rebuilding it", cache_root / key, exc)
            shutil.rmtree(cache_root / key, ignore_errors=True)
    index = SearchIndex(sections, titles)
    if cache_root is not None:
        _save(index, cache_root, key)
    return index


@functools.cache
def default_index() -> SearchIndex:
    """The process-wide index, loaded from the cache under the state directory on first use."""
    return load_index(Settings.from_env().home / "cache" / "search-index")
