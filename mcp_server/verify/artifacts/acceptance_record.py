"""The acceptance record: a second machine, never the producer, re-hashed a producer's bundle
against the producer's verified manifest. Written as ACCEPTED.json (when accepted) and as a
ledger `acceptance` event either way. Two acceptances compare by what they found, file by file,
ignoring who verified and where; a comparison of two acceptances made on one machine is refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp_server.errors import InputError
from mcp_server.ledger import Ledger
from mcp_server.verify.artifacts.checks import FileVerdict
from mcp_server.verify.artifacts.identity import HostIdentity, same_machine
from mcp_server.verify.artifacts.roster import RosterFinding

AcceptanceSchema = Literal["remote-gpu-trainer/ACCEPTANCE/v1"]
ACCEPTANCE_SCHEMA: AcceptanceSchema = "remote-gpu-trainer/ACCEPTANCE/v1"
MAX_DIFFERENCES = 200


class AcceptedFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    bytes: int
    sha256: str = Field(description="as hashed on the accepting machine")
    check: FileVerdict | None = None


class AcceptanceRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schema_: AcceptanceSchema = Field(alias="schema")
    host: str = Field(description="the accepting box as the call named it")
    root: str
    abs_root: str
    producer_host: str
    producer: HostIdentity
    verifier: HostIdentity = Field(description="the accepting machine")
    verification_event: int = Field(description="the producer's verification (ledger id) whose manifest was used")
    manifest_sha256: str | None
    accepted: bool
    files: dict[str, AcceptedFile] = Field(description="what the accepting machine found")
    findings: list[RosterFinding]
    boundary: str
    accepted_at_utc: str
    server_version: str


@dataclass(frozen=True)
class RecordedAcceptance:
    event_id: int
    record: AcceptanceRecord


class Comparison(BaseModel):
    match: bool
    files: int
    differences: list[str] = Field(default_factory=list)
    summary: str


class AcceptanceSummary(BaseModel):
    id: int | None = Field(description="this acceptance's ledger id (for compare_with)")
    accepted: bool | None
    producer: str
    verifier: str
    comparison: Comparison | None = None


def read_acceptance(ledger: Ledger, event_id: int) -> RecordedAcceptance:
    """The acceptance recorded as ledger event `event_id`, read strictly."""
    ev = ledger.event(event_id)
    if ev is None or ev.kind != "acceptance":
        raise InputError(f"ledger event #{event_id} is not an acceptance", observed=ev.kind if ev else "no such event",
                         next_step="pass the `acceptance.id` an earlier accept_from call returned")
    try:
        return RecordedAcceptance(event_id, AcceptanceRecord.model_validate(ev.data, strict=True))
    except ValidationError as exc:
        raise InputError(f"ledger event #{event_id} is not a readable acceptance record",
                         observed=str(exc.errors(include_url=False)[0]["msg"])) from exc


def independence_problem(verifier: HostIdentity, earlier: AcceptanceRecord) -> str | None:
    """Why an acceptance made on `verifier` cannot be compared with `earlier`, or None."""
    same = same_machine(verifier, earlier.verifier)
    if same:
        return (f"both acceptances were made on one machine ({same}): a comparison needs two independent "
                "verifiers; accept on another machine")
    same = same_machine(verifier, earlier.producer)
    if same:
        return f"this machine produced the bundle the earlier acceptance checked ({same})"
    return None


def compare_acceptances(a: RecordedAcceptance, b: RecordedAcceptance) -> Comparison:
    """Every file whose size or hash differs between two acceptances; refused when one machine made both."""
    problem = independence_problem(b.record.verifier, a.record) or independence_problem(a.record.verifier, b.record)
    if problem:
        raise InputError(f"comparison of acceptances #{a.event_id} and #{b.event_id} refused: {problem}")
    fa, fb = a.record.files, b.record.files
    diffs = []
    if a.record.accepted != b.record.accepted:
        diffs.append(f"acceptance #{a.event_id} {_verdict(a)}, #{b.event_id} {_verdict(b)}")
    for path in sorted(fa.keys() | fb.keys()):
        x, y = fa.get(path), fb.get(path)
        if x is None or y is None:
            diffs.append(f"{path}: only in acceptance #{(a if y is None else b).event_id}")
        elif x.bytes != y.bytes:
            diffs.append(f"{path}: {x.bytes} bytes in #{a.event_id}, {y.bytes} in #{b.event_id}")
        elif x.sha256 != y.sha256:
            diffs.append(f"{path}: sha256 {x.sha256[:12]} in #{a.event_id}, {y.sha256[:12]} in #{b.event_id}")
    n = len(fa.keys() | fb.keys())
    summary = (f"match: {n} files identical in acceptances #{a.event_id} and #{b.event_id}" if not diffs else
               f"{len(diffs)} difference(s) between acceptances #{a.event_id} and #{b.event_id}: "
               + "; ".join(diffs[:5]))
    return Comparison(match=not diffs, files=n, differences=diffs[:MAX_DIFFERENCES], summary=summary)


def _verdict(r: RecordedAcceptance) -> str:
    return "accepted" if r.record.accepted else "rejected"
