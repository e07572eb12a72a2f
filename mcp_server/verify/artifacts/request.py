"""What a verify_artifacts call asks for and what it answers, in both of its modes: verifying a
box's results into a local copy, and accepting a bundle on a second machine (`accept_from`)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mcp_server.knowledge import reference_uri
from mcp_server.verify.artifacts.acceptance_record import AcceptanceSummary
from mcp_server.verify.artifacts.cells import CellSpec, CellsReport
from mcp_server.verify.artifacts.checks import FileVerdict
from mcp_server.verify.artifacts.roster import RosterFinding

MAX_LISTED = 200


class VerifyRequest(BaseModel):
    root: str
    roster: list[str] = Field(default_factory=list)
    run_id: str | None = None
    dest: str | None = None
    budget_s: float = Field(default=35.0, ge=2, le=55)
    allow_pickle: bool = False
    expect_keys: list[str] | None = None
    hand_made: list[str] = Field(default_factory=list, description="globs of files written by hand")
    cells: CellSpec | None = None
    pack: bool = False
    accept_from: str | None = Field(default=None, description="accept mode: the producer's host name")
    compare_with: int | None = Field(default=None, description="accept mode: an earlier acceptance's ledger id")

    def patterns(self) -> list[str]:
        """The roster as verified: the named files plus every expected cell's files."""
        return self.roster + (self.cells.patterns() if self.cells else [])


class VerifyResult(BaseModel):
    host: str
    root: str
    dest: str
    done: bool = Field(description="false: call again to continue (nothing is lost or re-sent)")
    phase: str
    passed: bool | None = Field(description="set when done: every roster file present, bytes and hash match, loads")
    manifest: str | None = Field(default=None, description="manifest path on the box")
    manifest_sha256: str | None = None
    verified_path: str | None = Field(default=None, description="local PULL_VERIFIED.json (ACCEPTED.json)")
    files_total: int = 0
    files_done: int = 0
    bytes_total: int = 0
    bytes_done: int = 0
    bytes_transferred: int = Field(default=0, description="bytes received during this call")
    remaining: list[str] = Field(default_factory=list, description="first files still to pull or check")
    findings: list[RosterFinding] = Field(default_factory=list)
    verdicts: list[FileVerdict] = Field(default_factory=list, description="structural check per file (first 200)")
    cells: CellsReport | None = None
    acceptance: AcceptanceSummary | None = None
    next_step: str
    route: str = reference_uri("run-remote/principles", "iron-law")
