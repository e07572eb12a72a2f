"""Judgements: a printed number against the row(s) it speaks of.

precision mode (default):
- match: equal (`31.420` is 31.42);
- rounded_match: the value rounded at the printed precision gives the printed number
  (31.4 for 31.42; not 31.5, not 31.423, never a bare integer);
- scaled_match: a percent printed for a fraction (76.12% for 0.7612), with a note;
  a declared `unit` makes that scale known, and then it is a plain (rounded) match;
- unit_problem: the number is 100x (or 1/100 of) the value with nothing saying so
  (76.12 with no % sign for 0.7612): the scale cannot be decided;
- stale: anything else. Annotations (± band, n, seeds) are judged the same way.
strict mode: the original reconciler's exact comparison (isclose, rel 1e-9), % ignored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from mcp_server.deliver.documents.numbers import fmt, rounds_to, same, strict_equal
from mcp_server.deliver.documents.tokens import VALUE, Token
from mcp_server.deliver.evidence.layer import Row
from mcp_server.deliver.matching.mention import Mention
from mcp_server.deliver.models import Candidate, Found, make

Judged = Literal["match", "rounded_match", "scaled_match", "unit_problem", "stale"]
RANK: dict[Judged, int] = {"match": 0, "rounded_match": 1, "scaled_match": 2, "unit_problem": 3, "stale": 4}
OK = ("match", "rounded_match", "scaled_match")


@dataclass(frozen=True, slots=True)
class Judgement:
    category: Judged
    note: str | None = None


# A mention given to a row, with the category it was judged as.
Attribution = tuple[Mention, Row, Judged]


def _cmp(r: float, k: int, v: float) -> Literal["match", "rounded_match"] | None:
    if same(r, v):
        return "match"
    return "rounded_match" if rounds_to(r, k, v) else None


def judge_value(r: float, k: int, percent: bool, row_value: float, unit: str | None, strict: bool) -> Judgement:
    """Judge one printed number (value `r`, `k` printed decimals, % sign?) against a value."""
    if strict:
        return Judgement("match" if strict_equal(r, row_value) else "stale")
    literal = _cmp(r, k, row_value)
    if unit == "raw":
        return Judgement(literal or "stale")
    if unit == "fraction":
        if percent:
            got = _cmp(r / 100, k + 2, row_value)
            return Judgement(got, "percent of a fraction (unit: fraction)") if got else Judgement("stale")
        if literal:
            return Judgement(literal)
        if _cmp(r / 100, k + 2, row_value):
            return Judgement("scaled_match", "printed as percent points without a % sign (unit: fraction)")
        return Judgement("stale")
    if literal:
        return Judgement(literal)
    if unit == "percent":
        if not percent and _cmp(r * 100, k - 2, row_value):
            return Judgement("scaled_match", "printed as a fraction of a percent value (unit: percent)")
        return Judgement("stale")
    scaled = _cmp(r / 100, k + 2, row_value) if percent else None
    if scaled:
        how = "rounded at printed precision, " if scaled == "rounded_match" else ""
        return Judgement("scaled_match", f"{_show(r, k)}% read as {_show(r / 100, k + 2)} ({how}percent of a "
                                       "fraction); declare unit: fraction on the row to make the scale explicit")
    if not percent and _cmp(r / 100, k + 2, row_value):
        return Judgement("unit_problem", f"{fmt(r)} is 100x the value with no % sign; the scale cannot be decided "
                                       "(print %, or declare unit on the row)")
    if _cmp(r * 100, k - 2, row_value):
        return Judgement("unit_problem", f"{fmt(r)} is 1/100 of the value; the scale cannot be decided "
                                       "(declare unit on the row)")
    return Judgement("stale")


def _show(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}" if 0 <= decimals <= 12 else fmt(value)


def judge_annotation(t: Token, part: str, row: Row, strict: bool) -> Judgement | None:
    """± band against the variance, n= against n, K seeds against seeds; None if unrecorded."""
    truth = {"variance": row.variance, "n": row.n, "seeds": row.seeds}[part]
    if truth is None:
        return None
    if part != "variance":
        return Judgement("match" if t.value == truth else "stale")
    if strict:
        return Judgement("match" if strict_equal(t.value, truth) else "stale")
    return Judgement(_cmp(t.value, t.decimals, truth) or "stale")


class Judge:
    """Turns mentions into findings; remembers which rows each mention was given to."""

    def __init__(self, rows: dict[int, Row], strict: bool) -> None:
        self.rows = rows
        self.strict = strict
        self.attributed: list[Attribution] = []
        # Plain matches are the bulk of a clean corpus; they are counted now and only
        # turned into findings if the caller asks to see them.
        self.matched: list[tuple[Mention, Token, str, Row]] = []

    def match_findings(self) -> list[Found]:
        """The plain `match` findings, built on demand."""
        out = []
        for m, t, part, row in self.matched:
            truth = row.value if part == VALUE else {"variance": row.variance, "n": row.n, "seeds": row.seeds}[part]
            out.append(make("match", **self._where(m, t), **_row_fields(row), kind=None if part == VALUE else part,
                            reported=t.value, evidence_value=truth))
        return out

    def mention(self, m: Mention) -> list[Found]:
        if m.part != VALUE:
            row = self.rows[m.rows[0]]
            got = judge_annotation(m.token, m.part, row, self.strict)
            if got is not None and got.category == "match":
                self.attributed.append((m, row, "match"))
                self.matched.append((m, m.token, m.part, row))
                return []
            return [self._annotation(m, m.token, m.part, row, got)] if got else []
        cands = [self.rows[r] for r in m.rows]
        pct = m.token.percent or m.percent_hint
        best: tuple[int, int, Judgement, Row] | None = None
        for i, row in enumerate(cands):
            v = judge_value(m.token.value, m.token.decimals, pct, row.value, row.unit, self.strict)
            if best is None or RANK[v.category] < best[0]:
                best = (RANK[v.category], i, v, row)
                if best[0] == 0:
                    break
        if best is not None and best[2].category in OK:
            return self._attributed(m, best[3], best[2], cands)
        backed = self._pseudo_match(m, pct)
        if backed is not None or m.miss or not cands:
            if not m.doc.result_lines[m.line] and not m.in_table:
                return []
            return [self._unbacked(m, backed)]
        if len(cands) == 1 and best is not None:
            return self._attributed(m, cands[0], best[2], cands)
        near = min(cands, key=lambda r: abs(r.value - m.token.value) / max(abs(r.value), 1e-12))
        metric = cands[0].metric if len({c.metric for c in cands}) == 1 else None
        return [make("ambiguous", **self._where(m), metric=metric, reported=m.token.value, candidates=_cands(cands),
                     note=f"matches none of {len(cands)} rows it could belong to (closest: {near.claim_id} "
                          f"{near.exp_id or ''} {fmt(near.value)}); name the row (an alias such as Ours) next to it")]

    def _attributed(self, m: Mention, row: Row, v: Judgement, cands: list[Row]) -> list[Found]:
        self.attributed.append((m, row, v.category))
        out: list[Found] = []
        if v.category == "match":
            self.matched.append((m, m.token, VALUE, row))
        else:
            out.append(make(v.category, **self._where(m), **_row_fields(row), reported=m.token.value,
                            evidence_value=row.value, note=v.note,
                            candidates=_cands(cands) if v.category not in OK and len(cands) > 1 else []))
        for t in m.annotations:
            got = judge_annotation(t, t.role, row, self.strict)
            if got is not None and got.category == "match":
                self.matched.append((m, t, t.role, row))
            elif got is not None:
                out.append(self._annotation(m, t, t.role, row, got))
            elif m.doc.result_lines[m.line] or m.in_table:
                out.append(make("unbacked_number", **self._where(m, t), **_row_fields(row), kind=t.role,
                                reported=t.value, note=f"{t.role} printed, but the evidence row records none"))
        return out

    def _annotation(self, m: Mention, t: Token, part: str, row: Row, v: Judgement) -> Found:
        truth = {"variance": row.variance, "n": row.n, "seeds": row.seeds}[part]
        if m.part != VALUE:
            self.attributed.append((m, row, v.category))
        return make(v.category, **self._where(m, t), **_row_fields(row), kind=part,
                    reported=t.value, evidence_value=truth)

    def _pseudo_match(self, m: Mention, pct: bool) -> Row | None:
        for r in m.pseudo:
            row = self.rows[r]
            if judge_value(m.token.value, m.token.decimals, pct, row.value, None, self.strict).category in OK:
                return row
        return None

    def _unbacked(self, m: Mention, backed: Row | None) -> Found:
        if backed is not None:
            note = f"equals {backed.metric} of {backed.exp_id} in its results.json, but no claim backs it"
            return make("unbacked_number", **self._where(m), metric=backed.metric, exp_id=backed.exp_id,
                        reported=m.token.value, evidence_value=backed.value, note=note)
        if m.pseudo:
            row = self.rows[m.pseudo[0]]
            note = (f"looks like {row.metric} of {row.exp_id}; results.json has {fmt(row.value)} and no claim backs it")
            return make("unbacked_number", **self._where(m), metric=row.metric, exp_id=row.exp_id,
                        reported=m.token.value, evidence_value=row.value, note=note)
        why = f": {m.miss}" if m.miss else ""
        return make("unbacked_number", **self._where(m), reported=m.token.value,
                    note=f"a metric-looking number no claim in EVIDENCE.json backs{why}")

    def _where(self, m: Mention, t: Token | None = None) -> dict[str, Any]:
        t = t or m.token
        line = m.doc.lines[t.line] if 0 <= t.line < len(m.doc.lines) else ""
        printed = line[t.start:t.end].strip() or t.text.strip()
        return {"file": m.doc.path, "line": t.line + 1, "column": t.start + 1, "text": printed,
                "context": _context(line, t.start), "source": "generated" if (t.macro or m.doc.generated) else "typed"}


def _row_fields(row: Row) -> dict[str, Any]:
    return {"claim_id": row.claim_id, "exp_id": row.exp_id, "metric": row.metric, "split": row.split}


def _cands(rows: list[Row]) -> list[Candidate]:
    return [Candidate(claim_id=r.claim_id, exp_id=r.exp_id, metric=r.metric, split=r.split, value=r.value)
            for r in rows]


def _context(line: str, col: int, width: int = 120) -> str:
    text = line.strip()
    if len(text) <= width:
        return text
    lead = len(line) - len(line.lstrip())
    start = max(0, min(col - lead - width // 2, len(text) - width))
    return text[start:start + width]
