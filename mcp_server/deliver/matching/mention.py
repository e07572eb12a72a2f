"""The shared core of attribution: a `Mention` (a printed number given to a metric, with
the evidence rows it could be), the keyword and name indexes one reconcile run builds
over the evidence, and how the row names in scope narrow a keyword's rows."""

from __future__ import annotations

from dataclasses import dataclass, field

from mcp_server.deliver.documents.text import Document
from mcp_server.deliver.documents.tokens import VALUE, Token
from mcp_server.deliver.evidence.layer import Evidence, Row
from mcp_server.deliver.matching.index import (
    BUILTIN_METRICS,
    SPLIT_WORDS,
    KeywordEntry,
    KeywordIndex,
    NameEntry,
    NameIndex,
    PhraseHit,
    add_all,
    merge_keywords,
    merge_names,
    metric_phrases,
    qualifiers,
    variants,
)


@dataclass(slots=True)
class Mention:
    """A printed number attributed to a metric, with the rows it could be."""

    doc: Document
    line: int
    token: Token
    rows: tuple[int, ...]
    pseudo: tuple[int, ...] = ()
    part: str = VALUE
    percent_hint: bool = False
    miss: str | None = None  # why no candidate can be meant (the text names another row or split)
    in_table: bool = False
    annotations: list[Token] = field(default_factory=list)


# (evidence rows, results-only rows, why no row can be meant)
Restricted = tuple[tuple[int, ...], tuple[int, ...], str | None]
CellKeyword = tuple[PhraseHit[KeywordEntry] | None, tuple[int, ...], tuple[int, ...], str | None]


@dataclass
class Indexes:
    """The lookups one reconcile run shares across documents, with their caches."""

    keywords: KeywordIndex
    names: NameIndex
    rows: dict[int, Row]
    bound: dict[str, tuple[int, str]]  # render macro name -> (row id, part)
    # per (header, labels, caption) text: the cell's keyword and the rows it narrows to
    cells: dict[tuple[str, str, str], CellKeyword] = field(default_factory=dict)
    restricted: dict[tuple[int, ...], Restricted] = field(default_factory=dict)
    texts: dict[str, tuple[list[PhraseHit[KeywordEntry]], list[PhraseHit[NameEntry]]]] = field(default_factory=dict)
    quals: dict[int, int] = field(default_factory=dict)  # row id -> how many qualifier words it has


def build_indexes(ev: Evidence, bound: dict[str, tuple[int, str]]) -> Indexes:
    """Keyword and name indexes over evidence rows, results-only rows and known metrics."""
    kw = KeywordIndex()
    names = NameIndex()
    for row in ev.all_rows:
        exact, derived, delta = metric_phrases(row.metric)
        add_all(kw, exact, (row.id, 3, row.pseudo, delta))
        for alias in row.metric_aliases:
            add_all(kw, variants(alias), (row.id, 2, row.pseudo, delta))
        add_all(kw, derived, (row.id, 1, row.pseudo, delta))
        for alias in row.aliases:
            add_all(names, variants(alias), ("alias", row.id))
        add_all(names, qualifiers(row.metric), ("qualifier", row.id))
        if row.split in SPLIT_WORDS:
            add_all(names, SPLIT_WORDS[row.split], (f"split:{row.split}", row.id))
        if row.claim is not None:
            names.add(row.claim.id, ("claim", row.id))
    for word in BUILTIN_METRICS:
        kw.add(word, (-1, 0, False, False))
    for split, words in SPLIT_WORDS.items():
        add_all(names, words, (f"split:{split}", -1))
    kw.freeze(merge_keywords)
    names.freeze(merge_names)
    quals = {r.id: len(qualifiers(r.metric)) + (1 if r.split in SPLIT_WORDS else 0) for r in ev.all_rows}
    return Indexes(kw, names, {r.id: r for r in ev.all_rows}, bound, quals=quals)


def restrict(entry: KeywordEntry, names: list[NameEntry], idx: Indexes) -> Restricted:
    """Narrow a keyword's rows by the names in scope, kind by kind, never to nothing."""
    key = (id(entry), *(id(n) for n in names))
    got = idx.restricted.get(key)
    if got is None:
        got = idx.restricted[key] = narrow(entry, names, idx)
    return got


def narrow(entry: KeywordEntry, names: list[NameEntry], idx: Indexes) -> Restricted:
    """`restrict` without the cache (for entries made on the fly)."""
    cands = set(entry.rows) | set(entry.pseudo)
    miss: str | None = None
    splits = {n.split for n in names if n.split}
    if cands and splits and not any(idx.rows[r].split in splits for r in cands):
        miss = f"it is on the {'/'.join(sorted(splits))} split, and no row of this metric is"
    for kind in ("alias", "qualifier", "claim"):
        hit = set().union(*(getattr(n, kind) for n in names))
        if not hit:
            continue
        inter = cands & hit
        if inter:
            cands = inter
        elif kind == "alias" and cands:
            # A row name names its experiment: `Ours` on the PSNR row also means that
            # experiment's top-1 row.
            exps = {idx.rows[r].exp_id for r in hit} - {None}
            same = {r for r in cands if idx.rows[r].exp_id in exps}
            if same:
                cands = same
            else:
                miss = "the row it names has no evidence for this metric"
    if len(cands) > 1:
        # Prefer the rows whose every qualifier is printed: `PSNR` alone means the row with
        # no split before the one whose split word is missing.
        present: dict[int, int] = {}
        for n in names:
            for r in n.qualifier & cands:
                present[r] = present.get(r, 0) + 1
        full = {r for r in cands if present.get(r, 0) >= idx.quals.get(r, 0)}
        if full:
            # Among those, the most specific wins: `top1_acc (test)` is the test row, not
            # also the row without a split whose (zero) qualifiers are trivially all printed.
            most = max(idx.quals.get(r, 0) for r in full)
            cands = {r for r in full if idx.quals.get(r, 0) == most}
    ev = tuple(sorted(r for r in cands if not idx.rows[r].pseudo))
    ps = tuple(sorted(r for r in cands if idx.rows[r].pseudo))
    return ev, ps, miss
