"""What reconcile_evidence returns: findings, per-number records, input problems, summary.

Categories are the contract with the reader. Their severity is fixed here, in one table:
`blocking` findings make the report not clean; `disclose` findings are reported and never
block (audit, then disclose); `ok` findings are matches, some with a note."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from mcp_server.knowledge import reference_uri

Category = Literal[
    "match", "rounded_match", "scaled_match",
    "stale", "unit_problem", "ambiguous", "evidence_out_of_date", "figure_stale",
    "disclosure_missing", "unbacked_number", "claim_missing", "claim_unmapped", "figure_disclosure", "legacy_layout",
]
Severity = Literal["ok", "blocking", "disclose"]

SEVERITY: dict[str, Severity] = {
    "match": "ok", "rounded_match": "ok", "scaled_match": "ok",
    "stale": "blocking", "unit_problem": "blocking", "ambiguous": "blocking",
    "evidence_out_of_date": "blocking", "figure_stale": "blocking",
    "disclosure_missing": "disclose", "unbacked_number": "disclose", "claim_missing": "disclose",
    "claim_unmapped": "disclose", "figure_disclosure": "disclose", "legacy_layout": "disclose",
}
ORDER = {c: i for i, c in enumerate(SEVERITY)}

VP16 = reference_uri("verifying/methodology", "vp16")
RESOURCE: dict[str, str] = {
    "match": VP16, "rounded_match": VP16, "scaled_match": VP16, "stale": VP16,
    "unit_problem": VP16, "ambiguous": VP16,
    "evidence_out_of_date": reference_uri("delivering/data-architecture", "append-only"),
    "figure_stale": reference_uri("delivering/figures", "stale"),
    "figure_disclosure": reference_uri("delivering/figures"),
    "disclosure_missing": reference_uri("delivering/delivery-gate"),
    "unbacked_number": reference_uri("delivering/delivery-gate"),
    "claim_missing": reference_uri("delivering/delivery-gate"),
    "claim_unmapped": reference_uri("delivering/delivery-gate"),
    "legacy_layout": reference_uri("delivering/data-architecture", "legacy"),
}
SCHEMA_RESOURCE = reference_uri("delivering/evidence-manifest-schema", "evidence-fields")
PRINCIPLES = reference_uri("delivering/principles")


class Candidate(BaseModel):
    """An evidence row a printed number could belong to."""

    claim_id: str
    exp_id: str | None = None
    metric: str
    split: str | None = None
    value: float


class ReconcileFinding(BaseModel):
    """One judged number, or one claim-, run- or figure-level problem."""

    category: Category
    severity: Severity
    kind: str | None = Field(default=None, description="finer cause, e.g. variance, run_modified, figure_orphan")
    file: str | None = Field(default=None, description="document (or figure/run file) the finding is about")
    line: int | None = Field(default=None, description="1-based")
    column: int | None = Field(default=None, description="1-based, in characters")
    text: str | None = Field(default=None, description="the number as printed")
    reported: float | None = Field(default=None, description="the printed number, parsed")
    evidence_value: float | None = Field(default=None, description="the authoritative value it was judged against")
    claim_id: str | None = None
    exp_id: str | None = None
    metric: str | None = None
    split: str | None = None
    source: Literal["generated", "typed"] | None = Field(
        default=None, description="generated from evidence (macro, @generated file) or typed by hand")
    candidates: list[Candidate] = Field(default_factory=list, description="rows it could belong to (ambiguous / stale)")
    context: str | None = Field(default=None, description="the line around it, trimmed")
    json_path: str | None = Field(default=None, description="place in EVIDENCE.json / results.json / sidecar")
    note: str | None = None
    resource: str = Field(description="reference to read about this category")


@dataclass(slots=True)
class Found:
    """A finding while the report is built (cheap: tens of thousands per large corpus);
    only the page that is returned becomes a validated `ReconcileFinding`."""

    category: str
    severity: str
    resource: str
    kind: str | None = None
    file: str | None = None
    line: int | None = None
    column: int | None = None
    text: str | None = None
    reported: float | None = None
    evidence_value: float | None = None
    claim_id: str | None = None
    exp_id: str | None = None
    metric: str | None = None
    split: str | None = None
    source: str | None = None
    candidates: list[Candidate] = field(default_factory=list)
    context: str | None = None
    json_path: str | None = None
    note: str | None = None

    def model(self) -> ReconcileFinding:
        return ReconcileFinding.model_validate({k: getattr(self, k) for k in self.__slots__})


def make(category: Category, **fields: Any) -> Found:
    """A finding with the severity and the resource its category fixes."""
    return Found(category, SEVERITY[category], RESOURCE[category], **fields)


class Occurrence(BaseModel):
    file: str
    line: int
    column: int
    text: str
    category: Category


class NumberRecord(BaseModel):
    """The delivery-gate record of one evidence row: where it appears and what travels with it."""

    claim_id: str
    exp_id: str | None = None
    metric: str
    split: str | None = None
    value: float = Field(description="authoritative value (results.json when it has one, else EVIDENCE)")
    value_source: Literal["results.json", "evidence"]
    evidence_value: float
    n: int | None = None
    variance: float | None = None
    seeds: int | None = None
    run: str | None = None
    resolved_run_id: str | None = None
    verified: bool | Literal["unknown"] = "unknown"
    regenerable: Literal["generated", "transcribed", "unknown"] = Field(
        description="generated: every copy comes from a macro or generated file; transcribed: some copy was typed")
    reconciled: Literal["clean", "drift", "absent"]
    occurrences: list[Occurrence] = Field(default_factory=list, description="first few places it is printed")
    occurrence_count: int = 0
    macro: str | None = Field(default=None, description="LaTeX macro `render` generates for this value")
    disclosures: list[str] = Field(default_factory=list,
                                   description="caveats that must travel with this number, each once")


InputKind = Literal["evidence", "results", "provenance", "document", "figure", "render", "runs"]


class InputProblem(BaseModel):
    """One input that could not be used; the rest of the report is still produced."""

    input: InputKind
    path: str | None = None
    code: str
    message: str
    json_path: str | None = Field(default=None, description="where in the JSON, e.g. $.claims[2].evidence[0].value")
    expected: str | None = None
    next_step: str | None = None
    resource: str | None = None


class FigureStatus(BaseModel):
    figure: str
    status: Literal["fresh", "stale", "unknown"]


class RenderedFile(BaseModel):
    name: str
    path: str | None = Field(default=None, description="where it was written on the host")
    sha256: str
    bytes: int
    content: str | None = Field(default=None, description="the text, when it was not written to a directory")


class Summary(BaseModel):
    clean: bool = Field(description="no blocking finding and no input problem")
    counts: dict[str, int] = Field(description="findings per category (matches included)")
    blocking: int
    disclose: int
    documents: int
    numbers_seen: int = Field(description="numeric tokens read in the documents")
    mentions: int = Field(description="numbers attributed to a metric and judged")
    claims: int
    rows: int
    problems: int


class ReconcileReport(BaseModel):
    """Summary, one page of findings (or number records) and the inputs that failed."""

    clean: bool
    summary: Summary
    problems: list[InputProblem] = Field(default_factory=list)
    findings: list[ReconcileFinding] = Field(default_factory=list)
    numbers: list[NumberRecord] = Field(default_factory=list)
    figures: list[FigureStatus] = Field(default_factory=list)
    rendered: list[RenderedFile] = Field(default_factory=list)
    total: int = Field(description="items in the paged list (findings or numbers) before paging")
    offset: int
    next_offset: int | None = Field(description="pass as offset for the next page; null on the last page")
    truncated: bool
    evidence: str | None = Field(default=None, description="the EVIDENCE.json read")
