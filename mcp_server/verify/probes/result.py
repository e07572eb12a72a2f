"""The one result model every probe returns, and the pieces it is built from."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, Field, JsonValue

from mcp_server.knowledge import reference_uri

Verdict = Literal[
    "bug", "effect", "noise", "instability", "stochastic", "underpowered", "confounded",
    "collapsed", "leak", "clean", "unverified", "not_applicable",
]

METHODOLOGY = "verifying/methodology"
COLLAPSE_PAGE = "verifying/representation-collapse"
SMOKE_PAGE = "verifying/smoke-hidden-failures"

# Lists echoed back in measurements are cut to this many entries (the count is kept).
MAX_LISTED = 25


def route(catalog: str) -> str:
    """The reference URI for a catalog id: VP1..VP16, SH1..SH6, or a collapse-ladder step."""
    cid = catalog.lower()
    if cid.startswith("sh"):
        return reference_uri(SMOKE_PAGE, cid)
    if cid.startswith("collapse"):
        return reference_uri(COLLAPSE_PAGE)
    if cid.startswith("stats"):
        return reference_uri(METHODOLOGY, "vp11")
    return reference_uri(METHODOLOGY, cid)


class NextProbe(BaseModel):
    """What to run after this probe, and why."""

    catalog: str = Field(description="catalog id, e.g. VP3")
    name: str
    run_probe: str | None = Field(default=None, description="the run_probe id that runs it, when there is one")
    why: str
    route: str = Field(description="reference page explaining it")


def next_probe(catalog: str, name: str, why: str, run_probe: str | None = None) -> NextProbe:
    return NextProbe(catalog=catalog, name=name, run_probe=run_probe, why=why, route=route(catalog))


class FileRead(BaseModel):
    """One input file this probe read, with the hash of the bytes it used."""

    host: str
    path: str
    bytes: int
    sha256: str


class ProbeResult(BaseModel):
    """A probe's finding: the verdict, the numbers behind it, and what must travel with the claim."""

    probe: str = Field(description="run_probe id, e.g. seed_variance")
    catalog: list[str] = Field(description="catalog ids this probe implements, e.g. ['VP4', 'VP11']")
    question: str
    inputs_digest: str = Field(description="sha256 over the canonical inputs and the bytes of every file read")
    inputs_read: list[FileRead] = Field(default_factory=list)
    measurements: dict[str, JsonValue] = Field(description="the numbers behind the verdict (keys per probe: docs)")
    verdict: Verdict
    reason: str = Field(description="which rule produced the verdict")
    disclosure: str = Field(description="the sentence that must travel with the number it qualifies")
    warnings: list[str] = Field(default_factory=list)
    next_probe: NextProbe | None = None
    route: str = Field(description="reference page for this probe")
    ledger_id: int | None = Field(default=None, description="the ledger event recording this result")


class ProbeFinding(BaseModel):
    """What a probe's pure evaluation returns; the dispatcher adds digest and provenance."""

    measurements: dict[str, JsonValue]
    verdict: Verdict
    reason: str
    disclosure: str
    warnings: list[str] = Field(default_factory=list)
    next_probe: NextProbe | None = None


def digest(inputs: dict[str, Any], files: list[FileRead]) -> str:
    """sha256 of the canonical JSON of the inputs plus the hashes of the files read."""
    h = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode())
    for f in sorted(files, key=lambda f: (f.host, f.path)):
        h.update(f"\n{f.host}:{f.path}:{f.sha256}".encode())
    return h.hexdigest()


def listed(items: list[Any], limit: int = MAX_LISTED) -> list[Any]:
    """A list cut for output; pair it with a count so nothing is silently dropped."""
    return items[:limit]


def fmt(value: float | None, sign: bool = False) -> str:
    """A number for a disclosure sentence: four significant digits, optionally signed."""
    if value is None:
        return "n/a"
    return f"{value:+.4g}" if sign else f"{value:.4g}"


def num(value: float | None, digits: int = 6) -> float | None:
    """A float cut to `digits` significant digits for output (None stays None)."""
    return None if value is None else float(f"{float(value):.{digits}g}")
