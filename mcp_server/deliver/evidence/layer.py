"""EVIDENCE.json as claims and scalar rows, validated against the shipped schema.

A claim with a schema violation is skipped with one problem naming its JSON path; the other
claims are still reconciled. A row's authoritative value starts as the EVIDENCE copy and is
replaced by its results.json value once that is read (results.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp_server.deliver.documents.numbers import Parsed, decimals_of, fmt, parse_text
from mcp_server.deliver.evidence.schema import check
from mcp_server.deliver.evidence.sources import Problems


@dataclass
class Claim:
    """One claim of EVIDENCE.json with its scalar rows."""

    index: int
    id: str
    statement: str
    disclosure: str | None
    markers: list[str]
    paper_anchor: str | None
    repo_implementation: str | None
    verified: bool | None
    group: str
    figures: set[str]
    rows: list[Row] = field(default_factory=list)


@dataclass
class Row:
    """One scalar: an evidence row, or (pseudo) a results.json metric no claim names."""

    id: int
    claim: Claim | None
    json_path: str
    exp_id: str | None
    run: str | None
    metric: str
    split: str | None
    unit: str | None
    evidence_value: float
    evidence_decimals: int
    evidence_n: int | None
    evidence_variance: float | None
    evidence_seeds: int | None
    value: float
    value_text: str
    value_source: str = "evidence"
    n: int | None = None
    variance: float | None = None
    seeds: int | None = None
    aliases: list[str] = field(default_factory=list)
    metric_aliases: list[str] = field(default_factory=list)
    results_json: str | None = None
    results_sha256: str | None = None
    run_id_pin: str | None = None
    resolved_run_id: str | None = None
    figure: str | None = None
    pseudo: bool = False
    disclosures: list[str] = field(default_factory=list)

    @property
    def claim_id(self) -> str:
        return self.claim.id if self.claim else ""

    def disclose(self, text: str) -> None:
        """Add a caveat once (disclose once, never nag)."""
        if text not in self.disclosures:
            self.disclosures.append(text)


@dataclass
class Evidence:
    """The loaded EVIDENCE.json: claims, their rows, and results-only rows."""

    path: str
    root: str
    claims: list[Claim]
    rows: list[Row]
    pseudo: list[Row] = field(default_factory=list)

    @property
    def all_rows(self) -> list[Row]:
        return self.rows + self.pseudo


def build(data: Any, path: str, root: str, problems: Problems) -> Evidence | None:
    """Claims and scalar rows of a parsed EVIDENCE.json; None when nothing usable remains."""
    bad_claims: set[int] = set()
    fatal = False
    for err in check("evidence", data):
        idx = _claim_index(err.json_path)
        if idx is None:
            fatal = True
        else:
            bad_claims.add(idx)
        problems.add("evidence", path, "schema", f"{err.json_path}: {err.message}", json_path=err.json_path,
                     expected=err.expected, next_step="fix EVIDENCE.json; the other claims were still reconciled"
                     if idx is not None else "fix EVIDENCE.json")
    if fatal or not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        return None
    ev = Evidence(path, root, [], [])
    seen: set[str] = set()
    for i, raw in enumerate(data["claims"]):
        if i in bad_claims:
            continue
        if raw["id"] in seen:
            problems.add("evidence", path, "duplicate_claim",
                         f"claim id {raw['id']!r} appears twice; the second was skipped",
                         json_path=f"$.claims[{i}].id", expected="unique claim ids")
            continue
        seen.add(raw["id"])
        ev.claims.append(_claim(ev, i, raw, path, problems))
    if not ev.rows:
        problems.add("evidence", path, "no_scalar_rows", "no claim has a numeric evidence row: nothing to reconcile",
                     expected="claims[].evidence[] rows with a numeric value and a metric")
        return None
    return ev


def _claim_index(json_path: str) -> int | None:
    prefix = "$.claims["
    if not json_path.startswith(prefix):
        return None
    digits = json_path[len(prefix):].split("]", 1)[0]
    return int(digits) if digits.isdigit() else None


def _claim(ev: Evidence, i: int, raw: dict[str, Any], path: str, problems: Problems) -> Claim:
    claim = Claim(
        index=i, id=raw["id"], statement=raw.get("statement") or "", disclosure=raw.get("disclosure"),
        markers=list(raw.get("disclosure_markers") or []), paper_anchor=raw.get("paper_anchor"),
        repo_implementation=raw.get("repo_implementation"), verified=raw.get("verified"),
        group=raw.get("group") or raw["id"], figures=set(),
    )
    for j, r in enumerate(raw["evidence"]):
        row = _row(ev, claim, raw, r, f"$.claims[{i}].evidence[{j}]", path, problems)
        if row is not None:
            claim.rows.append(row)
            ev.rows.append(row)
            if row.figure:
                claim.figures.add(row.figure.rstrip("/"))
    return claim


def _row(ev: Evidence, claim: Claim, craw: dict[str, Any], r: dict[str, Any], jp: str, path: str,
         problems: Problems) -> Row | None:
    parsed = _scalar(r["value"])
    if parsed is None:
        problems.add("evidence", path, "not_scalar", f"{jp}.value is {r['value']!r}, not a number; the row was skipped",
                     json_path=jp + ".value", expected="a number, or a string holding one")
        return None
    var = r.get("variance") or {}
    unit = r.get("unit") or ("percent" if parsed.percent else None)
    row = Row(
        id=len(ev.rows), claim=claim, json_path=jp, exp_id=r.get("exp_id"), run=r.get("run"),
        metric=r.get("metric") or craw["metric"], split=r.get("split"), unit=unit,
        evidence_value=parsed.value, evidence_decimals=parsed.decimals, evidence_n=r.get("n"),
        evidence_variance=var.get("value"), evidence_seeds=var.get("seeds"),
        value=parsed.value, value_text=_text(r["value"]), n=r.get("n"), variance=var.get("value"),
        seeds=var.get("seeds"),
        aliases=[*(r.get("aliases") or []), *(craw.get("aliases") or [])] + ([r["exp_id"]] if r.get("exp_id") else []),
        metric_aliases=[*(r.get("metric_aliases") or []), *(craw.get("metric_aliases") or [])],
        results_json=r.get("results_json"), results_sha256=r.get("results_sha256"), run_id_pin=r.get("run_id"),
        figure=r.get("figure"),
    )
    return row


def _scalar(value: Any) -> Parsed | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Parsed(float(value), decimals_of(value), False)
    if isinstance(value, str):
        return parse_text(value)
    return None


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip().rstrip("%").strip()
    return fmt(value)


def derived_disclosures(row: Row) -> None:
    """The caveats every number of this kind carries, whatever the documents say."""
    if row.claim and row.claim.disclosure:
        row.disclose(row.claim.disclosure)
    if row.seeds == 1:
        row.disclose("single_seed: one seed, no variance across seeds")
    if row.variance is None:
        row.disclose("no_variance: no variance recorded for this number")
    if row.split == "val":
        row.disclose("val_split: reported on the validation split")
