"""The delivery gate's claim-level view: does each claim appear somewhere, does its caveat
travel with its number, is it mapped to a paper anchor and code, and the per-number record
(value, where it is printed, generated or transcribed, reconciled, disclosures).

All of this is disclosure: reported once, never blocking."""

from __future__ import annotations

import re
from collections import defaultdict

from mcp_server.deliver.documents.tables import Tables
from mcp_server.deliver.documents.text import Document
from mcp_server.deliver.evidence.layer import Claim, Evidence
from mcp_server.deliver.matching.judge import OK, Attribution, Judged
from mcp_server.deliver.matching.mention import Mention
from mcp_server.deliver.models import Found, NumberRecord, Occurrence, make

_MAX_OCCURRENCES = 5
_SINGLE_SEED = ("single seed", "single-seed", "one seed", "seeds=1", "seed=1", "1 seed", "n_seeds=1")
_VAL = ("val", "validation")


def markers(claim: Claim) -> list[str]:
    """Phrases that show the claim's caveat is printed near its number."""
    if claim.markers:
        return [m.lower() for m in claim.markers]
    out = [claim.id.lower(), (claim.disclosure or "").strip().lower()]
    if any(r.seeds == 1 for r in claim.rows):
        out += _SINGLE_SEED
    if any(r.split == "val" for r in claim.rows):
        out += _VAL
    return [m for m in out if m]


def _has_marker(block: str, words: list[str]) -> bool:
    for w in words:
        if w[:1].isalnum() and w[-1:].isalnum():
            if re.search(r"(?<![A-Za-z0-9])" + re.escape(w) + r"(?![A-Za-z0-9])", block):
                return True
        elif w in block:
            return True
    return False


class Blocks:
    """The block a line belongs to, for the disclosure check: a table plus the 3 lines
    after it, a LaTeX table/figure environment with its caption, else the paragraph."""

    def __init__(self, doc: Document, tables: Tables) -> None:
        self.doc = doc
        self.tables = tables
        self._cache: dict[int, tuple[int, int]] = {}

    def span(self, line: int) -> tuple[int, int]:
        if line in self._cache:
            return self._cache[line]
        lines = self.doc.lines
        found = self._table(line) or self._env(line) or self._paragraph(line)
        if self.doc.kind == "csv":
            found = (0, len(lines) - 1)
        self._cache[line] = found
        return found

    def text(self, line: int) -> str:
        a, b = self.span(line)
        return "\n".join(self.doc.lines[a:b + 1]).lower()

    def _table(self, line: int) -> tuple[int, int] | None:
        for a, b in self.tables.spans:
            if a <= line <= b:
                return a, min(len(self.doc.lines) - 1, b + 3)
        return None

    def _env(self, line: int) -> tuple[int, int] | None:
        if self.doc.kind != "tex":
            return None
        lines = self.doc.lines
        start = next((i for i in range(line, -1, -1) if re.search(r"\\begin\{(?:table|figure)", lines[i])), None)
        if start is None:
            return None
        end = next((i for i in range(start, len(lines)) if re.search(r"\\end\{(?:table|figure)", lines[i])), None)
        return (start, end) if end is not None and end >= line else None

    def _paragraph(self, line: int) -> tuple[int, int]:
        lines = self.doc.lines
        a = line
        while a > 0 and lines[a - 1].strip():
            a -= 1
        b = line
        while b + 1 < len(lines) and lines[b + 1].strip():
            b += 1
        return a, b


def disclosure_findings(attributed: list[Attribution], blocks: dict[str, Blocks]) -> list[Found]:
    """One disclosure_missing per (document, block, claim) whose caveat is not in the block."""
    out: list[Found] = []
    seen: set[tuple[str, tuple[int, int], str]] = set()
    for m, row, _ in attributed:
        claim = row.claim
        if claim is None or not claim.disclosure:
            continue
        b = blocks[m.doc.path]
        key = (m.doc.path, b.span(m.line), claim.id)
        if key in seen:
            continue
        seen.add(key)
        if not _has_marker(b.text(m.line), markers(claim)):
            out.append(make("disclosure_missing", file=m.doc.path, line=m.token.line + 1, column=m.token.start + 1,
                            text=m.token.text.strip(), claim_id=claim.id, exp_id=row.exp_id, metric=row.metric,
                            note=f"print the caveat with this number: {claim.disclosure}"))
    return out


def claim_findings(ev: Evidence, attributed: list[Attribution], scanned: bool) -> list[Found]:
    """claim_missing (in no document) and claim_unmapped (no paper anchor or code location)."""
    out: list[Found] = []
    present = {row.claim_id for _, row, _ in attributed}
    for claim in ev.claims:
        if not claim.rows:
            continue
        if scanned and claim.id not in present:
            out.append(make("claim_missing", claim_id=claim.id, file=_rel(ev),
                            note="no document prints any of this claim's numbers"))
        anchors = (("paper_anchor", claim.paper_anchor), ("repo_implementation", claim.repo_implementation))
        lacking = [name for name, value in anchors if not value]
        if lacking:
            out.append(make("claim_unmapped", claim_id=claim.id, file=_rel(ev), kind=lacking[0],
                            json_path=f"$.claims[{claim.index}]", note="no " + " and no ".join(lacking)))
    return out


def records(ev: Evidence, attributed: list[Attribution], macro_names: dict[int, str]) -> list[NumberRecord]:
    """The per-number status record of every evidence row."""
    by_row: dict[int, list[tuple[Mention, Judged]]] = defaultdict(list)
    for m, row, cat in attributed:
        by_row[row.id].append((m, cat))
    out = []
    for row in ev.rows:
        seen = sorted(by_row.get(row.id, []), key=lambda x: (x[0].doc.path, x[0].token.line, x[0].token.start))
        occ = [Occurrence(file=m.doc.path, line=m.token.line + 1, column=m.token.start + 1, text=m.token.text.strip(),
                          category=c) for m, c in seen[:_MAX_OCCURRENCES]]
        generated = [bool(m.token.macro or m.doc.generated) for m, _ in seen]
        disclosures = list(row.disclosures)
        typed = sorted({m.doc.path for (m, _), g in zip(seen, generated, strict=True) if not g})
        if typed:
            disclosures.append("transcribed: typed by hand in " + ", ".join(typed[:3])
                               + ("..." if len(typed) > 3 else "") + "; it will go stale silently (use render)")
        out.append(NumberRecord(
            claim_id=row.claim_id, exp_id=row.exp_id, metric=row.metric, split=row.split, value=row.value,
            value_source=row.value_source, evidence_value=row.evidence_value,
            n=row.n, variance=row.variance, seeds=row.seeds, run=row.run, resolved_run_id=row.resolved_run_id,
            verified=row.claim.verified if row.claim and row.claim.verified is not None else "unknown",
            regenerable="unknown" if not seen else ("generated" if all(generated) else "transcribed"),
            reconciled="absent" if not seen else ("clean" if all(c in OK for _, c in seen) else "drift"),
            occurrences=occ, occurrence_count=len(seen), macro=macro_names.get(row.id),
            disclosures=disclosures,
        ))
    return out


def _rel(ev: Evidence) -> str:
    return ev.path.rsplit("/", 1)[-1]
