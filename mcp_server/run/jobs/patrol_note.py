"""What an on-box patrol left in a run's dir (`patrol.json`, written atomically by the patrol):
its last status line and its escalations, read back for tail_logs and wait_for_run. The file is
box text: every string is cleaned, lists are bounded, and a damaged file reads as no note."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from pydantic import BaseModel, Field

from mcp_server import untrusted
from mcp_server.ledger import Ledger

MAX_ESCALATIONS = 10
MAX_TEXT = 600


class Escalation(BaseModel):
    key: str = Field(default="", description="the patrol's dedupe key")
    new: bool = Field(default=True, description="not shown to an agent by this server before (unacknowledged)")
    kind: str = Field(description="ended, stalled, disk, memory, nan, idle ...")
    level: str
    text: str = Field(description="the patrol's message; " + untrusted.NOTE)
    at: float | None = None
    notified: list[str] = Field(default_factory=list, description="each channel's outcome, e.g. 'slack: sent'")


class PatrolNote(BaseModel):
    last: str | None = Field(description="the patrol's latest status line; " + untrusted.NOTE)
    at: float | None = Field(description="when it was written (epoch seconds, the box's clock)")
    escalations: list[Escalation] = Field(description="the newest first, at most 10")


def _s(value: Any, limit: int = MAX_TEXT) -> str:
    return untrusted.clean(str(value))[:limit]


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _escalation(raw: Any) -> Escalation | None:
    if not isinstance(raw, dict):
        return None
    notified = raw["notified"] if isinstance(raw.get("notified"), list) else []
    outcomes = [f"{_s(o.get('channel', '?'), 40)}: {_s(o.get('status', '?'), 20)}" for o in notified[:8]
                if isinstance(o, dict)]
    return Escalation(key=_s(raw.get("key", ""), 200), kind=_s(raw.get("kind", "?"), 40),
                      level=_s(raw.get("level", "?"), 10),
                      text=_s(raw.get("text", "")), at=_num(raw.get("at")), notified=outcomes)


def read_note(b64: str) -> PatrolNote | None:
    """The note from the base64 of a `patrol.json` a script printed; None when there is none."""
    try:
        raw = json.loads(base64.b64decode(b64, validate=True)) if b64 else None
    except (ValueError, binascii.Error, RecursionError):
        return None
    if not isinstance(raw, dict):
        return None
    escalations = raw["escalations"] if isinstance(raw.get("escalations"), list) else []
    found = [e for e in (_escalation(x) for x in escalations[-MAX_ESCALATIONS:]) if e is not None]
    last = raw.get("last")
    return PatrolNote(last=_s(last) if isinstance(last, str) else None, at=_num(raw.get("at")),
                      escalations=list(reversed(found)))


def acknowledge(note: PatrolNote | None, ledger: Ledger, host: str, run_id: str | None) -> None:
    """Mark each escalation an agent has not been shown before as `new`, and remember it as shown
    (the ledger's `patrol_seen`): the next read of the run shows it as acknowledged."""
    if note is None or run_id is None or not note.escalations:
        return
    seen = {k for ev in ledger.events("patrol_seen", host=host, run_id=run_id, limit=200)
            for k in ev.data.get("keys") or [] if isinstance(k, str)}
    fresh = [e.key for e in note.escalations if e.key and e.key not in seen]
    for e in note.escalations:
        e.new = bool(e.key) and e.key not in seen
    if fresh:
        ledger.record("patrol_seen", host=host, run_id=run_id, summary=f"{len(fresh)} patrol escalation(s) shown",
                      data={"keys": fresh})
