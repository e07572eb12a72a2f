"""Which evidence row each printed number speaks of, per document: prose lines go to
prose.py (metric keywords and row names on either side of a number); table cells take
their metric from the column header, the row label or the caption, and their row from
the names there. A number that nothing claims is not judged: no cross-row and no
duplicate findings."""

from __future__ import annotations

import re

from mcp_server.deliver.documents.macros import MacroDef, uses
from mcp_server.deliver.documents.tables import Cell, Tables
from mcp_server.deliver.documents.text import Document
from mcp_server.deliver.documents.tokens import IGNORE, VALUE, tokenize
from mcp_server.deliver.matching.index import KeywordEntry, NameEntry, PhraseHit, lower_line
from mcp_server.deliver.matching.mention import Indexes, Mention, build_indexes, restrict
from mcp_server.deliver.matching.prose import prose_mentions

__all__ = ["Indexes", "Mention", "build_indexes", "doc_mentions"]


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
            out += prose_mentions(doc, i, line, toks, idx)
    for cell in tables.cells:
        seen += sum(1 for t in cell.tokens if t.role != IGNORE)
    out += _cells(doc, tables.cells, idx)
    return out, seen


_DIGIT = re.compile(r"[0-9]")


def _has_digit(line: str) -> bool:
    return _DIGIT.search(line) is not None


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
