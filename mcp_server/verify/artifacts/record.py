"""The verification record: exactly what verify_artifacts writes to `PULL_VERIFIED.json` and
to the ledger's `verification` event, and what the teardown gates read back.

Reading it back is strict: a wrong type, a missing field or an unknown field makes the event
NOT a verification (never a passing one), and the reason names the event and the field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp_server.ledger import Event
from mcp_server.verify.artifacts.checks import FileVerdict
from mcp_server.verify.artifacts.identity import HostIdentity, is_box
from mcp_server.verify.artifacts.roster import RosterFinding

VerifiedSchema = Literal["remote-gpu-trainer/PULL-VERIFIED/v4"]
VERIFIED_SCHEMA: VerifiedSchema = "remote-gpu-trainer/PULL-VERIFIED/v4"
MAX_ERRORS_SHOWN = 3


class VerifiedFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    bytes: int
    sha256: str
    check: FileVerdict | None = Field(description="the structural check of the local copy")


class VerificationRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    schema_: VerifiedSchema = Field(alias="schema", description="required: a record without it is not one of ours")
    host: str
    producer: HostIdentity = Field(description="the machine that holds the results, as it reported itself")
    verifier: HostIdentity = Field(description="the machine that pulled and checked them (this server's)")
    root: str = Field(description="the result root as the call named it")
    abs_root: str | None = Field(description="the root's physical path on the box (None: never listed)")
    run_id: str | None
    roster: list[str]
    dest: str = Field(description="the local copy")
    manifest: str | None = Field(description="the manifest's path on the box (older records: its name beside the "
                                             "data)")
    manifest_sha256: str | None
    listed_at: float | None = Field(description="the box's clock when the root was listed: later writes are news")
    newest_mtime: float | None
    verified_at_utc: str
    verifier_version: str
    server_version: str
    passed: bool = Field(description="every roster file present, bytes and hash match, every check passed")
    files: dict[str, VerifiedFile] = Field(description="by path relative to the root")
    bytes: int
    findings: list[RosterFinding]


@dataclass(frozen=True)
class RecordedVerification:
    """A verification event of the ledger, read back as a record."""

    event_id: int
    ts: float
    record: VerificationRecord


@dataclass
class Verifications:
    valid: list[RecordedVerification] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    @property
    def passing(self) -> list[RecordedVerification]:
        return [v for v in self.valid if v.record.passed]


def read_verifications(events: list[Event]) -> Verifications:
    """Parse each event strictly; an event that is not a VerificationRecord is listed with why."""
    out = Verifications()
    for ev in events:
        try:
            record = VerificationRecord.model_validate(ev.data, strict=True)
        except ValidationError as exc:
            out.unreadable.append(f"event #{ev.id}: {_problems(exc)}")
            continue
        out.valid.append(RecordedVerification(event_id=ev.id, ts=ev.ts, record=record))
    return out


def of_machine(events: list[Event], box: HostIdentity, name: str) -> Verifications:
    """The verifications of the machine that reports `box`, made through any inventory name: the
    record's producer (read on the box when it was verified) is matched, not the name it was
    called by (identity.is_box). An event whose producer is unreadable counts only for the name
    it was recorded under, where read_verifications names it as not a verification."""
    mine = []
    for ev in events:
        try:
            producer = HostIdentity.model_validate(ev.data.get("producer"), strict=True)
        except ValidationError:
            if ev.host == name:
                mine.append(ev)
            continue
        if is_box(producer, box, same_name=ev.host == name):
            mine.append(ev)
    return read_verifications(mine)


def _problems(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    shown = []
    for e in errors[:MAX_ERRORS_SHOWN]:
        where = ".".join(str(p) for p in e["loc"]) or "the record"
        got = "" if e["type"] == "missing" else f" (got {str(e['input'])[:40]!r})"
        shown.append(f"{where}: {e['msg']}{got}")
    more = f" (+{len(errors) - MAX_ERRORS_SHOWN} more)" if len(errors) > MAX_ERRORS_SHOWN else ""
    return "; ".join(shown) + more
