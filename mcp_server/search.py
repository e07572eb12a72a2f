"""In-memory ranked search over the knowledge base's sections (references and profiles).

Ranking is BM25 (the `bm25s` library, Lucene variant) over English-stemmed tokens; this
module only decides what a section's text is (heading weighted, stable id kept whole)
and which few symptom words users write differently from the pages ("charging" for
"billing"). The index is built once from `knowledge.all_sections()` and kept in memory."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable, Sequence

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN
from pydantic import BaseModel, Field

from mcp_server.knowledge import KINDS, KnowledgeSection, all_sections, docs

log = logging.getLogger(__name__)
# bm25s logs every index build at DEBUG through its own handler; keep stderr for our messages.
logging.getLogger("bm25s").setLevel(logging.WARNING)

_TOKEN = re.compile(r"[^\W_]+")
_STOP = frozenset(STOPWORDS_EN) - {"no", "not", "off", "down", "up", "out"}
_HEADING_WEIGHT = 3
_ID_TOKEN = re.compile(r"^[a-z]+[0-9]+[a-z]?$")
_ID_MARK = "sid"  # prefix of the token only the section carrying that stable id holds
_EXCERPT_CHARS = 240
MAX_LIMIT = 20

# How users phrase a symptom -> the words the pages use. Query side only.
SYNONYMS: dict[str, str] = {
    "charging": "billing bills meter", "charge": "billing bills", "charged": "billing bills",
    "charges": "billing bills", "cost": "billing", "costs": "billing", "paying": "billing",
    "expensive": "billing cost", "money": "billing",
    "frozen": "hang stall freeze", "freezes": "hang freeze", "stuck": "hang stall",
    "hangs": "hang freeze", "hanging": "hang freeze",
    "disappeared": "vanished lost", "died": "vanished lost killed", "dies": "killed lost",
    "gone": "vanished lost missing", "wiped": "lost deleted wipe",
    "slower": "throttle", "slowdown": "throttle", "starved": "starvation dataloader",
    "space": "disk space", "full": "full space",
    "oom": "oom memory", "memory": "memory oom",
    "nan": "nan non-finite", "inf": "inf non-finite",
    "resume": "resume restart", "resumed": "resume", "restarts": "resume restart",
    "password": "key credential secret", "token": "key secret credential",
    "mirror": "mirror hf-mirror", "proxy": "proxy no_proxy",
    "scp": "scp rsync transfer", "upload": "transfer push", "download": "download transfer",
}


class SearchHit(BaseModel):
    """One ranked section."""

    kind: str = Field(description="references or profiles")
    path: str = Field(description="page path inside its folder, e.g. run-remote/gotchas")
    page_title: str
    heading: str
    anchor: str | None = Field(description="section anchor; None for a page's opening text")
    excerpt: str = Field(description="the passage that matched best, markdown stripped")
    uri: str = Field(description="resource URI that loads exactly this section")
    score: float


@functools.cache
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens without stop words; alphabetic words stemmed, ids (u7, bf16) kept."""
    words = [w for w in _TOKEN.findall(text.lower()) if w not in _STOP]
    stem = _stemmer().stemWord
    return [stem(w) if w.isascii() and w.isalpha() else w for w in words]


def expand(query: str) -> list[str]:
    """Query tokens, the page words for symptom words users write differently, and id marks
    (a query naming `DP15` should land on the DP15 entry, not on a page that mentions it)."""
    words = _TOKEN.findall(query.lower())
    extra = [SYNONYMS[w] for w in words if w in SYNONYMS]
    marks = [_ID_MARK + w for w in words if _ID_TOKEN.match(w)]
    return tokenize(" ".join([query, *extra])) + marks


def _plain(text: str) -> str:
    text = re.sub(r"^\s*(?:[-+]|\d+\.)\s+", "", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[*`>#]|\|", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def excerpt(text: str, terms: set[str], limit: int = _EXCERPT_CHARS) -> str:
    """The line of `text` carrying the most query terms, cut around its first match."""
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


class SearchIndex:
    """BM25 over sections; built once, queried many times."""

    def __init__(self, sections: Sequence[KnowledgeSection], page_titles: dict[str, str]) -> None:
        self.sections = [s for s in sections if s.own_text.strip() or s.level > 1]
        self.page_titles = page_titles
        corpus = [self._document(s) for s in self.sections]
        self.retriever = bm25s.BM25()
        self.retriever.index(corpus, show_progress=False)
        log.debug("search index: %d sections, %d terms", len(self.sections), len(self.retriever.vocab_dict))

    def _document(self, s: KnowledgeSection) -> list[str]:
        title = self.page_titles.get(f"{s.kind}://{s.path}", s.path)
        heading = tokenize(s.heading) * _HEADING_WEIGHT
        if s.stable_id:
            heading.append(_ID_MARK + s.stable_id.lower())
        context = tokenize(" ".join([title, *s.trail, s.path.replace("/", " ").replace("-", " ")]))
        return heading + context + tokenize(s.own_text) or [""]

    def search(self, query: str, limit: int = 5, kinds: Iterable[str] = KINDS) -> list[SearchHit]:
        """The `limit` best sections for a free-text query, best first (empty when nothing matches)."""
        terms = expand(query)
        ids = self.retriever.get_tokens_ids(terms)
        if not ids:
            return []
        scores = self.retriever.get_scores_from_ids(ids)
        wanted = set(kinds)
        order = np.argsort(-scores, kind="stable")
        hits: list[SearchHit] = []
        for i in order:
            if scores[i] <= 0 or len(hits) >= min(limit, MAX_LIMIT):
                break
            s = self.sections[int(i)]
            if s.kind in wanted:
                hits.append(self._hit(s, float(scores[i]), set(terms)))
        return hits

    def _hit(self, s: KnowledgeSection, score: float, terms: set[str]) -> SearchHit:
        page = f"{s.kind}://{s.path}"
        top = s.level == 1
        return SearchHit(kind=s.kind, path=s.path, page_title=self.page_titles.get(page, s.path), heading=s.heading,
                   anchor=None if top else s.anchor, excerpt=excerpt(s.own_text or s.heading, terms),
                   uri=page if top else s.uri, score=round(score, 3))


def substring_scan(sections: Sequence[KnowledgeSection], query: str, limit: int = 5) -> list[KnowledgeSection]:
    """Baseline for the benchmark: sections ranked by how many query words occur as substrings."""
    words = [w for w in query.lower().split() if w not in _STOP]
    counted = [(sum(w in s.own_text.lower() for w in words), n) for n, s in enumerate(sections)]
    counted.sort(key=lambda c: (-c[0], c[1]))
    return [sections[n] for c, n in counted[:limit] if c > 0]


def build_index() -> SearchIndex:
    """A fresh index over every reference and profile section."""
    titles = {d.uri: d.title for kind in KINDS for d in docs(kind)}
    return SearchIndex(all_sections(), titles)


@functools.cache
def default_index() -> SearchIndex:
    """The process-wide index, built on first use (the server builds it at start-up)."""
    return build_index()
