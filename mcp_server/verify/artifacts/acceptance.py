"""Independent acceptance (verify_artifacts with `accept_from`): a second machine re-hashes a
producer's bundle against the manifest of the producer's passing verification in the ledger.

Refused before anything runs when the accepting machine is the producer (by machine identity, not
by name: two names for one box are one machine). Hashing runs detached on the accepting box and
resumes across calls like a pull; when the accepting box is this machine the structural checks run
here too. The record goes to the ledger (`acceptance`) and, when accepted, to ACCEPTED.json."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp_server import __version__, scripts
from mcp_server.errors import InputError
from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.verify.artifacts.acceptance_record import (
    ACCEPTANCE_SCHEMA,
    AcceptanceRecord,
    AcceptanceSummary,
    AcceptedFile,
    Comparison,
    RecordedAcceptance,
    compare_acceptances,
    independence_problem,
    read_acceptance,
)
from mcp_server.verify.artifacts.checks import FileVerdict, check_file
from mcp_server.verify.artifacts.identity import HostIdentity, read_identity, same_machine
from mcp_server.verify.artifacts.manifest import list_root, poll_hashing, start_hashing
from mcp_server.verify.artifacts.record import RecordedVerification, read_verifications
from mcp_server.verify.artifacts.request import MAX_LISTED, VerifyRequest, VerifyResult
from mcp_server.verify.artifacts.roster import OWN_FILES, RemoteEntry, RosterFinding
from mcp_server.verify.artifacts.state import confined_dest, default_dest, dump_json, write_json_atomic

ACCEPTED_FILE = "ACCEPTED.json"
BOUNDARY = ("proves the bundle's bytes (size + sha256, hashed on the accepting machine) equal the producer's "
            "verified manifest{checks}; does not prove what the metrics mean or rerun inference")


class AcceptState(BaseModel):
    """An acceptance between calls, in <dest>/.rgt-accept/state.json."""

    model_config = ConfigDict(extra="forbid")

    phase: Literal["hashing", "checking", "finalize", "done"]
    root: str
    abs_root: str
    verification_event: int
    acceptor: HostIdentity
    local: bool
    job: str | None
    listed: dict[str, int] = Field(description="the manifest's files found in the bundle, with their listed sizes")
    observed: dict[str, AcceptedFile] = Field(default_factory=dict)
    checks: dict[str, FileVerdict] = Field(default_factory=dict)
    findings: list[RosterFinding] = Field(default_factory=list)
    compare_with: int | None = None
    comparison: Comparison | None = None
    event_id: int | None = None
    accepted: bool | None = None
    record_path: str | None = None


def producer_verification(ledger: Ledger, producer: str, run_id: str | None) -> RecordedVerification:
    """The producer's newest passing verification (of `run_id` when given): its manifest is what is accepted."""
    verifs = read_verifications(ledger.events("verification", host=producer, run_id=run_id, limit=200))
    if verifs.passing:
        return verifs.passing[0]
    seen = f"{len(verifs.valid)} verification(s), none passing" if verifs.valid else "no verification"
    raise InputError(f"nothing to accept from {producer}: the ledger holds {seen}" + (f" of run {run_id}" if run_id
                     else ""), host=producer,
                     next_step=f"verify the results first: verify_artifacts(host={producer!r}, ...), then accept")


async def accept(host: Host, spec: HostSpec, req: VerifyRequest, *, base: Path,
                 ledger: Ledger | None, roots: Sequence[Path] = ()) -> VerifyResult:
    """One call of an acceptance: start it, or continue it, and finish it within the budget."""
    if ledger is None or req.accept_from is None:
        raise InputError("accepting needs accept_from and the ledger (the producer's verification is read there)")
    if req.roster or req.cells:
        raise InputError("accept_from checks every file of the producer's verified manifest: omit roster and cells")
    deadline = time.monotonic() + req.budget_s - min(3.0, 0.25 * req.budget_s)
    producer = producer_verification(ledger, req.accept_from, req.run_id)
    earlier = read_acceptance(ledger, req.compare_with) if req.compare_with is not None else None
    local = host.kind == "local"
    fallback = Path(req.root).expanduser() if local else default_dest(base, spec.name, req.run_id, req.root)
    dest = confined_dest(req.dest, fallback, roots)
    state = _load(dest)
    if (state is None or state.phase == "done" or state.root != req.root
            or state.verification_event != producer.event_id or state.compare_with != req.compare_with):
        state = await _start(host, spec, req, producer, earlier, local)
    if state.phase == "hashing":
        await _hash(host, state, producer, deadline)
    if state.phase == "checking":
        await _check(state, req, deadline)
    if state.phase == "finalize":
        _finalize(spec, state, producer, earlier, dest, ledger)
    write_json_atomic(dest / ".rgt-accept" / "state.json", dump_json(state))
    return _result(spec, req, state, producer, dest)


def _load(dest: Path) -> AcceptState | None:
    f = dest / ".rgt-accept" / "state.json"
    try:
        return AcceptState.model_validate_json(f.read_bytes())
    except (FileNotFoundError, ValidationError):
        return None


async def _start(host: Host, spec: HostSpec, req: VerifyRequest, producer: RecordedVerification,
                 earlier: RecordedAcceptance | None, local: bool) -> AcceptState:
    """Who is accepting (refused when it is the producer), what the bundle holds, and the hashing started."""
    acceptor, (facts, entries) = await asyncio.gather(read_identity(host), list_root(host, req.root))
    made_by = producer.record.producer
    same = same_machine(acceptor, made_by)
    if same:
        raise InputError("acceptance on the producer proves nothing: choose another machine", host=spec.name,
                         observed=f"{spec.name} is {acceptor.describe()}; {producer.record.host} produced the bundle "
                                  f"as {made_by.describe()}: {same}",
                         next_step="copy the bundle to a second machine and accept it there")
    problem = independence_problem(acceptor, earlier.record) if earlier else None
    if problem and earlier:
        raise InputError(f"cannot compare with acceptance #{earlier.event_id}: {problem}", host=spec.name)
    files, findings = _match(producer, entries)
    state = AcceptState(phase="hashing", root=req.root, abs_root=facts.abs_root, verification_event=producer.event_id,
                        acceptor=acceptor, local=local, job=None, listed={e.path: e.size for e in files},
                        findings=findings, compare_with=req.compare_with)
    if files:
        state.job = await start_hashing(host, facts, files)
    else:
        state.phase = "finalize"
    return state


def _match(producer: RecordedVerification, entries: list[RemoteEntry]) -> tuple[list[RemoteEntry], list[RosterFinding]]:
    """The manifest's files as the bundle holds them; missing ones, symlinks and extras are findings."""
    by_path = {e.path: e for e in entries if not OWN_FILES.search(e.path)}
    files, findings = [], []
    for path in sorted(producer.record.files):
        e = by_path.get(path)
        if e is None:
            findings.append(RosterFinding(path=path, kind="missing", message="in the producer's manifest, not in "
                                                                             "the bundle"))
        elif e.kind != "f":
            findings.append(RosterFinding(path=path, kind="symlink", actual=e.target,
                                          message="not a regular file in the bundle (refused)"))
        else:
            files.append(e)
    for path in sorted(by_path.keys() - producer.record.files.keys())[:MAX_LISTED]:
        findings.append(RosterFinding(path=path, kind="extra", blocking=False,
                                      message="in the bundle but not in the producer's manifest"))
    return files, findings


async def _hash(host: Host, state: AcceptState, producer: RecordedVerification, deadline: float) -> None:
    """Wait for the box's hashes (until the deadline), then hold each against the manifest."""
    if state.job is None:
        raise RuntimeError("acceptance in phase hashing has no hashing job")
    pause = 0.05
    while True:
        finished, got, err = await poll_hashing(host, state.abs_root, state.job)
        if finished or time.monotonic() > deadline:
            break
        await asyncio.sleep(pause)
        pause = min(0.25, pause * 2)
    if not finished:
        return
    for path in state.listed:
        if path not in got:
            state.findings.append(RosterFinding(path=path, kind="load_error",
                                                message=f"could not be hashed on the accepting box: {err[-200:]}"))
            continue
        n, digest = got[path]
        state.observed[path] = AcceptedFile(bytes=state.listed[path] if n is None else n, sha256=digest)
        _judge_bytes(state, path, producer)
    cleanup = await host.run(scripts.command("verify_hash_cleanup", f"{state.abs_root}/.rgt-hash-{state.job}"),
                             timeout=30)
    cleanup.check("removing the acceptance's hashing job directory")
    state.phase = "checking" if state.local else "finalize"


def _judge_bytes(state: AcceptState, path: str, producer: RecordedVerification) -> None:
    want, seen = producer.record.files[path], state.observed[path]
    if seen.sha256 == want.sha256 and seen.bytes == want.bytes:
        return
    kind = "size_mismatch" if seen.bytes != want.bytes else "hash_mismatch"
    state.findings.append(RosterFinding(
        path=path, kind=kind, expected=f"{want.bytes} bytes, sha256 {want.sha256}",
        actual=f"{seen.bytes} bytes, sha256 {seen.sha256}",
        message="the bundle's copy differs from the producer's verified manifest"))


async def _check(state: AcceptState, req: VerifyRequest, deadline: float) -> None:
    """Structural checks on this machine, for files whose bytes matched."""
    bad = {f.path for f in state.findings if f.blocking}
    for path in state.observed:
        if path in state.checks or path in bad:
            continue
        if time.monotonic() > deadline:
            return
        state.checks[path] = await asyncio.to_thread(check_file, Path(state.abs_root) / path, path,
                                                     req.allow_pickle, expect_keys=req.expect_keys,
                                                     hand_made=req.hand_made)
    state.phase = "finalize"


def _finalize(spec: HostSpec, state: AcceptState, producer: RecordedVerification, earlier: RecordedAcceptance | None,
              dest: Path, ledger: Ledger) -> None:
    """Judge, record in the ledger, write ACCEPTED.json when accepted, compare when asked."""
    for path, check in state.checks.items():
        if not check.ok:
            state.findings.append(RosterFinding(path=path, kind=check.finding or "load_error", message=check.detail))
    state.accepted = bool(state.observed) and not any(f.blocking for f in state.findings)
    record = _record(spec, state, producer)
    data = record.model_dump(mode="json", by_alias=True)
    verdict = "ACCEPTED" if state.accepted else "REJECTED"
    state.event_id = ledger.record("acceptance", host=spec.name, run_id=producer.record.run_id, data=data,
                                   summary=f"{verdict} {len(state.observed)} files of {producer.record.host}")
    marker = dest / ACCEPTED_FILE
    if state.accepted:
        write_json_atomic(marker, dump_json(record))
        state.record_path = str(marker)
    elif marker.exists():
        marker.unlink()
        state.findings.append(RosterFinding(path=ACCEPTED_FILE, kind="changed", blocking=False,
                                            message="an earlier ACCEPTED.json here was removed: it no longer holds"))
    if earlier is not None:
        state.comparison = compare_acceptances(earlier, RecordedAcceptance(state.event_id, record))
    state.phase = "done"


def _record(spec: HostSpec, state: AcceptState, producer: RecordedVerification) -> AcceptanceRecord:
    files = {p: f.model_copy(update={"check": state.checks.get(p)}) for p, f in state.observed.items()}
    checks = ", and structural checks ran on it" if state.local else "; structural checks ran where it was verified"
    return AcceptanceRecord(
        schema_=ACCEPTANCE_SCHEMA, host=spec.name, root=state.root, abs_root=state.abs_root,
        producer_host=producer.record.host, producer=producer.record.producer, verifier=state.acceptor,
        verification_event=producer.event_id, manifest_sha256=producer.record.manifest_sha256,
        accepted=bool(state.accepted), files=files, findings=state.findings, boundary=BOUNDARY.format(checks=checks),
        accepted_at_utc=datetime.now(UTC).isoformat(timespec="seconds"), server_version=__version__)


def _result(spec: HostSpec, req: VerifyRequest, state: AcceptState, producer: RecordedVerification,
            dest: Path) -> VerifyResult:
    done = state.phase == "done"
    manifest = producer.record.files
    summary = AcceptanceSummary(id=state.event_id, accepted=state.accepted,
                                producer=f"{producer.record.host}: {producer.record.producer.describe()}",
                                verifier=f"{spec.name}: {state.acceptor.describe()}", comparison=state.comparison)
    return VerifyResult(
        host=spec.name, root=req.root, dest=str(dest), done=done, phase=f"accept:{state.phase}", passed=state.accepted,
        manifest=producer.record.manifest, manifest_sha256=producer.record.manifest_sha256,
        verified_path=state.record_path, files_total=len(manifest), files_done=len(state.observed),
        bytes_total=sum(f.bytes for f in manifest.values()), bytes_done=sum(f.bytes for f in state.observed.values()),
        remaining=[p for p in state.listed if p not in state.observed][:MAX_LISTED // 4],
        findings=state.findings[:MAX_LISTED], verdicts=list(state.checks.values())[:MAX_LISTED], acceptance=summary,
        next_step=_next_step(state, producer))


def _next_step(state: AcceptState, producer: RecordedVerification) -> str:
    if state.phase != "done":
        return f"call verify_artifacts again with the same arguments to continue (acceptance, phase {state.phase})"
    if state.accepted:
        return (f"accepted independently of {producer.record.host}; compare with another machine's acceptance by "
                f"passing compare_with={state.event_id} there")
    return "NOT accepted: the findings name each file that differs or fails; do not rely on this bundle"
