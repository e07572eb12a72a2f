"""Assembling the report: stable order, counts by category, paging."""

from __future__ import annotations

from collections import Counter

from mcp_server.deliver.models import (
    ORDER,
    SEVERITY,
    FigureStatus,
    Found,
    InputProblem,
    NumberRecord,
    ReconcileReport,
    RenderedFile,
    Summary,
)

DEFAULT_LIMIT = 20
MAX_LIMIT = 1000


def sort_key(f: Found) -> tuple[str, int, int, int, str, str]:
    """Stable report order: file, line, column, then category."""
    return (f.file or "", f.line or 0, f.column or 0, ORDER[f.category], f.kind or "", f.claim_id or "")


def assemble(findings: list[Found], numbers: list[NumberRecord], problems: list[InputProblem],
             figures: list[FigureStatus], rendered: list[RenderedFile], *, documents: int, numbers_seen: int,
             mentions: int, claims: int, rows: int, evidence: str | None, view: str, offset: int, limit: int,
             uncounted_matches: int = 0) -> ReconcileReport:
    """The report: summary over everything, one page of the chosen list. Plain matches are
    listed only when they were passed in; otherwise `uncounted_matches` says how many."""
    findings = sorted(findings, key=sort_key)
    counts = Counter(f.category for f in findings)
    counts["match"] += uncounted_matches
    blocking = sum(n for c, n in counts.items() if SEVERITY[c] == "blocking")
    disclose = sum(n for c, n in counts.items() if SEVERITY[c] == "disclose")
    clean = blocking == 0 and not problems
    summary = Summary(clean=clean, counts={c: counts[c] for c in SEVERITY if counts[c]}, blocking=blocking,
                      disclose=disclose, documents=documents, numbers_seen=numbers_seen, mentions=mentions,
                      claims=claims, rows=rows, problems=len(problems))
    total = len(numbers) if view == "numbers" else len(findings)
    end = min(offset + max(1, min(limit, MAX_LIMIT)), total)
    nxt = end if end < total else None
    return ReconcileReport(
        clean=clean, summary=summary, problems=problems,
        findings=[f.model() for f in findings[offset:end]] if view != "numbers" else [],
        numbers=numbers[offset:end] if view == "numbers" else [],
        figures=figures, rendered=rendered, total=total, offset=offset, next_offset=nxt,
        truncated=nxt is not None, evidence=evidence,
    )
