"""Which evidence row each printed number speaks of.

Prose: a metric keyword opens a context (to the sentence end, the next metric keyword or
80 characters, whichever is first). The keyword, and every row name inside its context,
claims the next reported value after it; later values need a name of their own. A keyword
with nothing after it claims the nearest value just before it (`31.50 dB PSNR`). Row
names in scope (aliases such as `Ours`, experiment ids, dataset qualifiers, splits, claim
ids) narrow the candidate rows. Annotations (± band, n=, seeds) ride on the value before
them. Tables: a cell's metric is in its column header, its row label or the caption.
A number that nothing claims is not judged: no cross-row and no duplicate findings."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mcp_server.deliver.documents.macros import MacroDef, uses
from mcp_server.deliver.documents.tables import Cell, Tables
from mcp_server.deliver.documents.text import Document
from mcp_server.deliver.documents.tokens import IGNORE, VALUE, Token, tokenize
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
    lower_line,
    merge_keywords,
    merge_names,
    metric_phrases,
    qualifiers,
    variants,
)

WINDOW = 80
# A value claimed from before its keyword stands right before it, a unit at most between:
# `31.50 dB PSNR`, `76.1% top-1 accuracy`, `0.912 SSIM`.
_UNIT_GAP = re.compile(r"\s*(?:dB|db|%|pp|points?|pts)?\s*(?:of\s+|in\s+)?")
_SENTENCE_END = re.compile(r"[.!?](?=\s+[A-Z(\[]|\s*$)")
_ABBREV = frozenset({
    "vs", "e.g", "i.e", "al", "cf", "sec", "fig", "figs", "tab", "eq", "eqs", "approx", "resp", "no", "ref", "refs",
})
_LABEL_GAP = re.compile(r"\s*(?:dB|db|%)?\s*[(\[]?\s*")


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
    keyword_start: int = -1
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


def doc_mentions(doc: Document, tables: Tables, macros: dict[str, MacroDef], idx: Indexes,
                 defs: list[MacroDef]) -> tuple[list[Mention], int]:
    """All mentions of one document and how many numeric tokens it holds."""
    out: list[Mention] = []
    seen = 0
    for d in defs:
        bound = idx.bound.get(d.name)
        head = next((t for t in d.tokens if t.role == VALUE), None)
        if bound and head is not None:
            out.append(Mention(doc, d.line, head, (bound[0],), part=bound[1]))
    for i, line in enumerate(doc.norm):
        if i in tables.lines or not line or not (_has_digit(line) or "\\" in line):
            continue
        heading = line.lstrip().startswith("#")
        toks = tokenize(line, heading=heading)
        if macros and "\\" in line:
            toks = sorted(toks + uses(line, macros), key=lambda t: t.start)
        seen += sum(1 for t in toks if t.role != IGNORE)
        if toks:
            out += _prose(doc, i, line, toks, idx)
    for cell in tables.cells:
        seen += sum(1 for t in cell.tokens if t.role != IGNORE)
    out += _cells(doc, tables.cells, idx)
    return out, seen


_DIGIT = re.compile(r"[0-9]")


def _has_digit(line: str) -> bool:
    return _DIGIT.search(line) is not None


def _prose(doc: Document, i: int, line: str, toks: list[Token], idx: Indexes) -> list[Mention]:
    for t in toks:
        t.line = i
    out: list[Mention] = []
    for t in toks:
        if t.macro and t.macro in idx.bound and t.role == VALUE:
            row_id, part = idx.bound[t.macro]
            t.claimed = True
            out.append(Mention(doc, i, t, (row_id,), part=part))
    low = lower_line(line)
    kws = idx.keywords.find(low)
    if not kws:
        return out
    names = idx.names.find(low)
    labels = _trailing_labels(line, toks, names)
    ends = _sentence_ends(line)
    for n, k in enumerate(kws):
        stop = min(k.end + WINDOW, kws[n + 1].start if n + 1 < len(kws) else len(line),
                   next((e for e in ends if e > k.end), len(line)))
        _forward(doc, i, line, k, stop, toks, names, labels, idx, out, ends)
    for n, k in enumerate(kws):
        if not any(m.keyword_start == k.start for m in out):
            _look_back(doc, i, line, k, kws[n - 1].end if n else 0, toks, names, idx, out, ends)
    _attach_annotations(out, toks)
    return out


def _trailing_labels(line: str, toks: list[Token],
                     names: list[PhraseHit[NameEntry]]) -> dict[int, PhraseHit[NameEntry]]:
    """Names printed right after a value (`31.42 (Ours)`) label that value, not the next."""
    out: dict[int, PhraseHit[NameEntry]] = {}
    for t in toks:
        if t.role != VALUE:
            continue
        for h in names:
            if h.payload.alias and t.end <= h.start <= t.end + 6 and _LABEL_GAP.fullmatch(line[t.end:h.start]):
                out[id(t)] = h
                break
    return out


def _sentence_ends(line: str) -> list[int]:
    """Where sentences end (not after `vs.`, `e.g.`, `Sec.` or a digit)."""
    out = []
    for m in _SENTENCE_END.finditer(line):
        before = line[max(0, m.start() - 12):m.start()]
        word = before.rsplit(None, 1)[-1].lstrip("([").lower() if before.strip() else ""
        if word in _ABBREV or word[-1:].isdigit():
            continue
        out.append(m.end())
    return out


def _clause_start(line: str, pos: int, ends: list[int]) -> int:
    cut = max(line.rfind(",", 0, pos), line.rfind(";", 0, pos))
    return max(cut + 1, max((e for e in ends if e <= pos), default=0))


def _forward(doc: Document, i: int, line: str, k: PhraseHit[KeywordEntry], stop: int, toks: list[Token],
             names: list[PhraseHit[NameEntry]], labels: dict[int, PhraseHit[NameEntry]], idx: Indexes,
             out: list[Mention], ends: list[int]) -> None:
    label_ids = {id(h) for h in labels.values()}
    scope = _clause_start(line, k.start, ends)
    armed = True
    for t in toks:
        if t.start < k.end or t.start >= stop:
            continue
        if t.claimed or t.role != VALUE or t.counted or (t.deltaish and not k.payload.delta):
            continue
        inside = [h for h in names if scope <= h.start and h.end <= t.start and id(h) not in label_ids]
        arming = [h for h in inside if h.start >= k.end and h.payload.alias]
        label = labels.get(id(t))
        if not (armed or arming or label):
            continue
        # Qualifiers may follow the value: `31.6 dB on the validation split`, `(test, n=100)`.
        after = [h for h in names if t.end <= h.start < stop and not h.payload.alias and h is not label]
        scoped = inside + ([label] if label else []) + after
        m = _mention(doc, i, t, k, scoped, idx)
        if armed and not arming:
            m.keyword_start = k.start  # claimed by the keyword itself, not by a name after it
        out.append(m)
        t.claimed = True
        armed = False
        scope = (label.end if label else t.end)


def _look_back(doc: Document, i: int, line: str, k: PhraseHit[KeywordEntry], floor: int, toks: list[Token],
               names: list[PhraseHit[NameEntry]], idx: Indexes, out: list[Mention], ends: list[int]) -> None:
    near = [t for t in toks if t.role == VALUE and not t.claimed and floor <= t.start and t.end <= k.start
            and _UNIT_GAP.fullmatch(line, t.end, k.start) and not (t.deltaish and not k.payload.delta)]
    if not near:
        return
    t = near[-1]
    scope = _clause_start(line, t.start, ends)
    scoped = [h for h in names if scope <= h.start and h.end <= k.start]
    out.append(_mention(doc, i, t, k, scoped, idx))
    t.claimed = True


def _mention(doc: Document, i: int, t: Token, k: PhraseHit[KeywordEntry], scoped: list[PhraseHit[NameEntry]],
             idx: Indexes, percent_hint: bool = False, in_table: bool = False) -> Mention:
    rows, pseudo, miss = restrict(k.payload, [h.payload for h in scoped], idx)
    return Mention(doc, i, t, rows, pseudo, percent_hint=percent_hint, miss=miss, in_table=in_table)


def restrict(entry: KeywordEntry, names: list[NameEntry], idx: Indexes) -> Restricted:
    """Narrow a keyword's rows by the names in scope, kind by kind, never to nothing."""
    key = (id(entry), *(id(n) for n in names))
    got = idx.restricted.get(key)
    if got is None:
        got = idx.restricted[key] = _restrict(entry, names, idx)
    return got


def _restrict(entry: KeywordEntry, names: list[NameEntry], idx: Indexes) -> Restricted:
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


def _attach_annotations(out: list[Mention], toks: list[Token]) -> None:
    values = sorted((m for m in out if m.part == VALUE), key=lambda m: m.token.start)
    if not values:
        return
    for t in toks:
        if t.role not in ("variance", "n", "seeds") or t.claimed:
            continue
        before = [m for m in values if (m.token.end <= t.start and t.start - m.token.end <= WINDOW)
                  or (t.macro is not None and m.token.macro == t.macro and m.token.start == t.start)]
        if before:
            before[-1].annotations.append(t)
            t.claimed = True


def _cells(doc: Document, cells: list[Cell], idx: Indexes) -> list[Mention]:
    out: list[Mention] = []
    by_row: dict[tuple[int, int], list[Mention]] = {}
    hinted: list[Cell] = []
    for cell in cells:
        if cell.role_hint:
            hinted.append(cell)
            continue
        m = _cell_mention(doc, cell, idx)
        if m is not None:
            out.append(m)
            by_row.setdefault(cell.row_key, []).append(m)
    for cell in hinted:
        owners = by_row.get(cell.row_key, [])
        first = next((t for t in cell.tokens if t.role != IGNORE), None)
        if len(owners) == 1 and first is not None:
            first.role = cell.role_hint or first.role
            owners[0].annotations.append(first)
    return out


def _cell_mention(doc: Document, cell: Cell, idx: Indexes) -> Mention | None:
    head = next((t for t in cell.tokens if t.role == VALUE), None)
    if head is None:
        return None
    if head.macro and head.macro in idx.bound:
        row_id, part = idx.bound[head.macro]
        return Mention(doc, head.line, head, (row_id,), part=part, in_table=True)
    key = (cell.header, cell.labels, cell.scope)
    cached = idx.cells.get(key)
    if cached is None:
        k = _cell_keyword(cell, idx)
        if k is None:
            cached = idx.cells[key] = (None, (), (), None)
        else:
            names = [h.payload for text in key[:2] for h in _found(idx, text)[1]]
            names += [h.payload.context or h.payload for h in _found(idx, key[2])[1]]
            cached = idx.cells[key] = (k, *restrict(k.payload, names, idx))
    k, rows, pseudo, miss = cached
    if k is None or (head.deltaish and not k.payload.delta):
        return None
    m = Mention(doc, head.line, head, rows, pseudo, percent_hint=cell.percent, miss=miss, in_table=True)
    m.annotations = [t for t in cell.tokens if t.role in ("variance", "n", "seeds")]
    return m


def _found(idx: Indexes, text: str) -> tuple[list[PhraseHit[KeywordEntry]], list[PhraseHit[NameEntry]]]:
    """Keyword and name hits of a header, label or caption text (these repeat a lot)."""
    got = idx.texts.get(text)
    if got is None:
        low = lower_line(text)
        got = idx.texts[text] = (idx.keywords.find(low), idx.names.find(low))
    return got


def _cell_keyword(cell: Cell, idx: Indexes) -> PhraseHit[KeywordEntry] | None:
    """The one metric a cell speaks of: from its header, else its row labels, else the caption."""
    for text in (cell.header, cell.labels, cell.scope):
        hits = _found(idx, text)[0]
        groups = {(h.payload.rows, h.payload.pseudo): h for h in hits}
        if len(groups) == 1:
            return hits[0]
        if len(groups) > 1:
            return None
    return None
