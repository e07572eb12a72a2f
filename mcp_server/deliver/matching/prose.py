"""Which evidence row a number in a line of prose speaks of.

The metric keyword (`PSNR`, `top-1 accuracy`) and the row names (aliases such as `Ours`,
experiment ids, dataset qualifiers, splits, claim ids) may stand on either side of it:
- after the keyword: `PSNR 31.42`, `PSNR of 31.4 for Ours`, `PSNR: Ours 31.42, Baseline
  29.95`. The keyword claims the next value (up to the sentence end, the next keyword or 80
  characters); later values need a row name of their own;
- before the keyword: `Ours reaches 31.4 PSNR`, `Ours 31.5 dB and Baseline 29.9 dB PSNR`. A
  value right before a keyword (at most a unit between) is that keyword's, unless it stands
  right after another keyword that has no value of its own (`PSNR 31.42 SSIM 0.91`). Values
  before it that each carry their own row name are the keyword's too;
- no keyword: `Ours reaches 31.4`, `31.4 dB for Ours`. A row name right before or right after
  a number anchors it when the number is near one of that row's values (see _NEAR).
A row name right next to a value (`Baseline at 29.95`, `31.42 (Ours)`, `29.9 for Baseline`)
names that value alone; without one, every row name in the clause narrows the candidates.
Annotations (± band, n=, seeds) ride on the value before them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mcp_server.deliver.documents.text import Document
from mcp_server.deliver.documents.tokens import VALUE, Token
from mcp_server.deliver.evidence.layer import Row
from mcp_server.deliver.matching.index import KeywordEntry, NameEntry, PhraseHit, lower_line
from mcp_server.deliver.matching.mention import Indexes, Mention, narrow, restrict

WINDOW = 80
# value -> keyword after it: `31.50 dB PSNR`, `76.1% top-1 accuracy`, `0.912 SSIM`
_UNIT_GAP = re.compile(r"\s*(?:dB|db|%|pp|points?|pts)?\s*(?:of\s+|in\s+)?")
# keyword -> value right after it: `PSNR 31.42`, `PSNR: 31.42`, `PSNR of 31.42`
_KEYWORD_GAP = re.compile(r"\s*(?:[:=]|is|was|of)?\s*", re.I)
# row name -> value right after it: `Ours 31.42`, `Baseline at 29.95`, `w/o aux: 30.81`
_LEAD_GAP = re.compile(
    r"\s*(?:[:=(]|at|of|gets?|got|reach(?:es|ed)?|achieves?|achieved|scores?|scored|is|was|hits?|yields?|"
    r"obtains?|attains?)?\s*", re.I)
# value -> row name right after it: `31.42 (Ours)`, `31.4 dB for Ours`, `29.9 for the baseline`
_TRAIL_GAP = re.compile(r"\s*(?:dB|db|%|pp|points?|pts)?\s*(?:[(\[]\s*|(?:for|by|from|of)\s+(?:the\s+)?)?", re.I)
_SENTENCE_END = re.compile(r"[.!?](?=\s+[A-Z(\[]|\s*$)")
_ABBREV = frozenset({
    "vs", "e.g", "i.e", "al", "cf", "sec", "fig", "figs", "tab", "eq", "eqs", "approx", "resp", "no", "ref", "refs",
})
# With no metric keyword, only a number within a quarter of one of the named row's values
# is taken as that row's: `Ours reaches 31.5` (PSNR 31.42) is checked, `Ours uses 4 stages` is not.
_NEAR = 0.25

Names = list[PhraseHit[NameEntry]]


@dataclass
class _Line:
    """One line of prose being attributed, with what is found on it."""

    doc: Document
    i: int
    line: str
    toks: list[Token]
    kws: list[PhraseHit[KeywordEntry]]
    names: Names
    idx: Indexes
    ends: list[int]
    leading: dict[int, PhraseHit[NameEntry]] = field(default_factory=dict)
    trailing: dict[int, PhraseHit[NameEntry]] = field(default_factory=dict)
    out: list[Mention] = field(default_factory=list)

    def own(self, t: Token) -> PhraseHit[NameEntry] | None:
        """The row name standing right next to a value, if any (the one before it first)."""
        return self.leading.get(id(t)) or self.trailing.get(id(t))


def prose_mentions(doc: Document, i: int, line: str, toks: list[Token], idx: Indexes) -> list[Mention]:
    """The mentions of one line of prose (its tokens are claimed as they are attributed)."""
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
    names = idx.names.find(low)
    if not kws and not any(h.payload.alias for h in names):
        return out
    ln = _Line(doc, i, line, toks, kws, names, idx, _sentence_ends(line), out=out)
    _labels(ln)
    behind = _behind(ln)
    for n, k in enumerate(kws):
        nxt = kws[n + 1] if n + 1 < len(kws) else None
        stop = min(k.end + WINDOW, nxt.start if nxt else len(line), next((e for e in ln.ends if e > k.end), len(line)))
        if nxt is not None and id(nxt) in behind:
            stop = min(stop, behind[id(nxt)].start)
        _forward(ln, k, stop, armed=id(k) not in behind)
    for n, k in enumerate(kws):
        _look_back(ln, k, kws[n - 1].end if n else 0)
    _by_name(ln)
    _attach_annotations(out, toks)
    return out


def _labels(ln: _Line) -> None:
    """Row names printed right before or right after a value."""
    for t in ln.toks:
        if t.role != VALUE:
            continue
        for h in ln.names:
            if not h.payload.alias:
                continue
            if h.end <= t.start and t.start - h.end <= 24 and _LEAD_GAP.fullmatch(ln.line, h.end, t.start):
                ln.leading[id(t)] = h
            elif t.end <= h.start <= t.end + 16 and _TRAIL_GAP.fullmatch(ln.line, t.end, h.start):
                ln.trailing.setdefault(id(t), h)


def _usable(t: Token, k: PhraseHit[KeywordEntry] | None) -> bool:
    return (not t.claimed and t.role == VALUE and not t.counted
            and not (t.deltaish and not (k is not None and k.payload.delta)))


def _behind(ln: _Line) -> dict[int, Token]:
    """keyword (by id) -> the value standing right before it that is its own (`0.76 top-1
    accuracy and 31.4 dB PSNR`): not one right after the previous keyword (`PSNR 31.42
    SSIM`), and not when this keyword has a value right after it (`PSNR for Ours 31.42 SSIM
    0.91`). Such a keyword has its value: later ones after it need a row name."""
    out: dict[int, Token] = {}
    for n, k in enumerate(ln.kws):
        floor = ln.kws[n - 1].end if n else 0
        near = [t for t in ln.toks if _usable(t, k) and floor <= t.start and t.end <= k.start]
        if not near or not _UNIT_GAP.fullmatch(ln.line, near[-1].end, k.start):
            continue
        if n and _KEYWORD_GAP.fullmatch(ln.line, floor, near[-1].start):
            continue
        after = next((t for t in ln.toks if t.role == VALUE and t.start >= k.end), None)
        if after is not None and _KEYWORD_GAP.fullmatch(ln.line, k.end, after.start):
            continue
        out[id(k)] = near[-1]
    return out


def _forward(ln: _Line, k: PhraseHit[KeywordEntry], stop: int, armed: bool) -> None:
    trailing = {id(h) for h in ln.trailing.values()}
    scope = _clause_start(ln.line, k.start, ln.ends)
    for t in ln.toks:
        if t.start < k.end or t.start >= stop or not _usable(t, k):
            continue
        inside = [h for h in ln.names if scope <= h.start and h.end <= t.start and id(h) not in trailing]
        arming = [h for h in inside if h.start >= k.end and h.payload.alias]
        own = ln.own(t)
        if not (armed or arming or own) or _elsewhere(ln, t, k, own):
            continue
        # Qualifiers may follow the value: `31.6 dB on the validation split`, `(test, n=100)`.
        after = [h for h in ln.names if t.end <= h.start < stop and not h.payload.alias and h is not own]
        ln.out.append(_mention(ln, t, k, _with_own(inside, own) + after))
        t.claimed = True
        armed = False
        label = ln.trailing.get(id(t))
        scope = label.end if label else t.end


def _with_own(names: Names, own: PhraseHit[NameEntry] | None) -> Names:
    """The names that narrow a value: its own row name replaces the others in the clause."""
    if own is None:
        return names
    return [h for h in names if not h.payload.alias] + [own]


def _look_back(ln: _Line, k: PhraseHit[KeywordEntry], floor: int) -> None:
    near = [t for t in ln.toks if _usable(t, k) and floor <= t.start and t.end <= k.start
            and _UNIT_GAP.fullmatch(ln.line, t.end, k.start)]
    if not near:
        return
    t = near[-1]
    scope = _clause_start(ln.line, t.start, ln.ends)
    ln.out.append(_mention(ln, t, k, _with_own([h for h in ln.names if scope <= h.start and h.end <= k.start],
                                               ln.own(t))))
    t.claimed = True
    # Earlier values of the sentence that carry their own row name: `Ours 31.5 dB and Baseline 29.9 dB PSNR`.
    start = max(floor, max((e for e in ln.ends if e <= t.start), default=0))
    for u in reversed(ln.toks):
        own = ln.own(u)
        if u.end > t.start or u.start < start or own is None or not _usable(u, k):
            continue
        m = _mention(ln, u, k, _with_own([h for h in ln.names if start <= h.start and h.end <= k.start], own))
        if m.miss is None and any(_near(u, ln.idx.rows[r]) for r in m.rows):
            ln.out.append(m)
            u.claimed = True


def _elsewhere(ln: _Line, t: Token, k: PhraseHit[KeywordEntry], own: PhraseHit[NameEntry] | None) -> bool:
    """The value's own row name has no row of this keyword's metric, but has a row whose
    value it is near (`SSIM 0.717; sweep best: 31.70`): its name anchors it, not the keyword."""
    if own is None or restrict(k.payload, [own.payload], ln.idx)[2] is None:
        return False
    return bool(_named_rows(ln, t, own))


def _named_rows(ln: _Line, t: Token, own: PhraseHit[NameEntry]) -> tuple[int, ...]:
    return tuple(sorted(r for r in own.payload.alias if not ln.idx.rows[r].pseudo and _near(t, ln.idx.rows[r])))


def _by_name(ln: _Line) -> None:
    """Numbers with no keyword that a row name right next to them anchors."""
    for t in ln.toks:
        own = ln.own(t)
        if own is None or not _usable(t, None):
            continue
        rows = _named_rows(ln, t, own)
        if not rows:
            continue
        scope = _clause_start(ln.line, t.start, ln.ends)
        end = next((e for e in ln.ends if e > t.end), len(ln.line))
        context = [h.payload for h in ln.names if scope <= h.start < end and not h.payload.alias]
        ev, pseudo, miss = narrow(KeywordEntry(rows=rows), [*context, own.payload], ln.idx)
        ln.out.append(Mention(ln.doc, ln.i, t, ev, pseudo, miss=miss))
        t.claimed = True


def _near(t: Token, row: Row) -> bool:
    """Close enough to the row's value to be a copy of it (as printed, or in percent).
    A bare integer stands for an integer value only: `Ours wins 30 of 40` is a count."""
    v = row.value
    if t.decimals <= 0 and not t.percent and not v.is_integer():
        return False
    if v == 0:
        return t.value == 0
    return any(abs(x - v) <= _NEAR * abs(v) for x in (t.value, t.value / 100, t.value * 100))


def _mention(ln: _Line, t: Token, k: PhraseHit[KeywordEntry], scoped: Names) -> Mention:
    rows, pseudo, miss = restrict(k.payload, [h.payload for h in scoped], ln.idx)
    return Mention(ln.doc, ln.i, t, rows, pseudo, miss=miss)


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
