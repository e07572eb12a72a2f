"""verify_artifacts: prove every byte before anyone tears down.

Phases, resumable across calls within a time budget (state in <dest>/.rgt-pull/):
  listing  -> roster matched against the box (missing / extra / symlinks are findings)
  hashing  -> size + SHA-256 on the box, detached, in parallel
  manifest -> <durable_root>/.rgt/manifests/<run id>.json on the box, one per run, replaced
              atomically by a new round (never written into the user's data or code dir)
  pulling  -> streamed, hashed while received, resumable, verified files never re-sent
  checking -> structural checks by type on the local copies
  verified -> PULL_VERIFIED.json written locally and recorded in the ledger
A finished verification followed by another call starts a new round (a new manifest). A run
that is still running is not verified at all: the call says so and writes nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

from mcp_server.errors import InputError
from mcp_server.globs import MatchBudget, off_loop
from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.run.jobs.live import live_state
from mcp_server.run.jobs.status import RunState
from mcp_server.verify.artifacts.acceptance import accept
from mcp_server.verify.artifacts.cells import CellsReport, find_cells, judge, with_metrics
from mcp_server.verify.artifacts.checks import check_file
from mcp_server.verify.artifacts.finalize import finalize
from mcp_server.verify.artifacts.identity import read_identity, this_machine
from mcp_server.verify.artifacts.manifest import (
    build_manifest,
    list_root,
    manifest_path,
    poll_hashing,
    sha256_hex,
    start_hashing,
    write_manifest,
)
from mcp_server.verify.artifacts.pull import Progress, Puller
from mcp_server.verify.artifacts.request import MAX_LISTED, VerifyRequest, VerifyResult
from mcp_server.verify.artifacts.roster import OWN_FILES, RosterFinding, check_pattern, resolve
from mcp_server.verify.artifacts.state import (
    ListedFile,
    Listing,
    PulledManifest,
    PullState,
    confined_dest,
    default_dest,
    load_state,
    save_state,
)
from mcp_server.verify.artifacts.tamper import local_changes

__all__ = ["VerifyRequest", "VerifyResult", "default_dest", "verify_artifacts"]
MARGIN_S = 3.0
LOCAL_MANIFEST = "PULL_MANIFEST.json"  # the destination's copy of the round's manifest


def _new_round(old: PullState | None, req: VerifyRequest, host: str) -> PullState:
    """A new round keeps what earlier rounds verified (never re-sent while it is untouched)."""
    return PullState(round=(old.round if old else 0) + 1, phase="listing", host=host, root=req.root,
                     roster=req.patterns(), run_id=req.run_id, files=old.files if old else {})


async def verify_artifacts(host: Host, spec: HostSpec, req: VerifyRequest, *, pulls_dir: Path,
                           ledger: Ledger | None, progress: Progress | None = None,
                           pull_roots: Sequence[Path] = ()) -> VerifyResult:
    """Verify the box's results into a local copy; with `accept_from`, accept a producer's bundle instead."""
    if req.accept_from is not None:
        return await accept(host, spec, req, base=pulls_dir.with_name("acceptances"), ledger=ledger,
                            roots=[pulls_dir.with_name("acceptances"), pulls_dir, *pull_roots])
    if req.compare_with is not None:
        raise InputError("compare_with compares acceptances: pass it with accept_from")
    for p in req.roster:
        check_pattern(p)
    if not req.patterns():
        raise InputError("the roster is empty: name the files that must exist (or the cells expected)",
                         expected="['best.pth', 'metrics.json']")
    deadline = time.monotonic() + req.budget_s - min(MARGIN_S, 0.25 * req.budget_s)
    dest = confined_dest(req.dest, default_dest(pulls_dir, spec.name, req.run_id, req.root),
                         [pulls_dir, *pull_roots])
    live = await live_state(host, spec, req.run_id) if req.run_id else None
    if live is not None:  # its outputs are still being written: verifying now proves nothing, and writes nothing
        return _still_running(spec, req, dest, live)
    state = load_state(dest)
    if state is None or state.phase == "verified" or state.root != req.root or state.roster != req.patterns():
        state = _new_round(state, req, spec.name)
    steps = {"listing": _listing, "hashing": _hashing, "pulling": _pulling, "checking": _checking}
    transferred = 0
    try:
        while state.phase in steps and time.monotonic() < deadline:
            phase = state.phase
            transferred += await steps[phase](host, spec, req, state, dest, deadline, progress)
            if phase == "listing":
                record_widening(ledger, spec, req, state)
            save_state(dest, state)
    finally:  # a lost connection keeps what was settled before it: those files are never sent again
        save_state(dest, state)
    if state.phase == "finalize":
        if state.producer is None or state.verifier is None:  # a round begun by an older version
            state.producer, state.verifier = await asyncio.gather(read_identity(host), this_machine())
        if req.cells is not None:
            state.findings += judge(req.cells, state.cells or [])[1]
        finalize(spec.name, req.run_id, state, dest, ledger)
        save_state(dest, state)
    return _result(spec, req, state, dest, transferred)


def record_widening(ledger: Ledger | None, spec: HostSpec, req: VerifyRequest, state: PullState) -> None:
    """A root read only because the inventory widened verify_artifacts' reach: said in the ledger."""
    listing = state.listing
    if ledger is None or listing is None or listing.widened_by is None:
        return
    ledger.record("verify_root_widened", host=spec.name, run_id=req.run_id,
                  summary=f"read {listing.abs_root} under the verify_roots entry {listing.widened_by}",
                  data={"root": req.root, "abs_root": listing.abs_root, "verify_roots_entry": listing.widened_by})


async def _listing(host: Host, spec: HostSpec, req: VerifyRequest, state: PullState, dest: Path, deadline: float,
                   progress: Progress | None) -> int:
    """List the root, learn who holds it and who checks it, and name local tamper: all at once."""
    (facts, entries), state.producer, state.verifier, tampered = await asyncio.gather(
        list_root(host, req.root, spec.result_roots), read_identity(host), this_machine(),
        asyncio.to_thread(local_changes, dest, state.files))
    # Off the event loop and under the call's deadline: a costly roster never stalls other calls.
    res, cells = await off_loop(
        lambda b: (resolve(state.roster, entries, b), find_cells(req.cells, entries, b) if req.cells else None),
        MatchBudget(deadline, req.budget_s))
    state.listing = Listing(
        abs_root=facts.abs_root, listed_at=facts.now, hasher=facts.hasher,
        widened_by=spec.widening(spec.result_roots, facts.under),
        newest_mtime=max((e.mtime for e in entries if not OWN_FILES.search(e.path)), default=0.0),
        files={e.path: ListedFile(size=e.size, mtime=e.mtime) for e in res.files})
    state.findings = tampered + res.findings
    if cells is not None:
        state.cells = cells
    if not res.files:
        state.phase = "finalize"
        return 0
    state.listing.job = await start_hashing(host, facts, res.files)
    state.phase = "hashing"
    return 0


async def _hashing(host: Host, spec: HostSpec, req: VerifyRequest, state: PullState, dest: Path, deadline: float,
                   progress: Progress | None) -> int:
    listing = state.listed()
    job = listing.job
    if job is None:
        raise RuntimeError("pull state in phase hashing has no hashing job")
    pause = 0.05
    while True:
        finished, got, err = await poll_hashing(host, listing.abs_root, job)
        if finished or time.monotonic() > deadline:
            break
        await asyncio.sleep(pause)
        pause = min(0.25, pause * 2)
    if not finished:
        return 0
    rows = _manifest_rows(state, listing, got, err)
    manifest = build_manifest(spec.name, req.root, req.roster, req.run_id, listing.hasher, sorted(rows))
    path = await write_manifest(host, listing.abs_root, job, manifest,
                                manifest_path(spec.durable_root, req.run_id, listing.abs_root))
    data = manifest.canonical()
    dest.mkdir(parents=True, exist_ok=True)
    (dest / LOCAL_MANIFEST).write_bytes(data)
    state.manifest = PulledManifest(name=LOCAL_MANIFEST, path=path, sha256=sha256_hex(data), content=manifest)
    state.phase = "pulling"
    return 0


def _manifest_rows(state: PullState, listing: Listing, got: dict[str, tuple[int | None, str]],
                   err: str) -> list[tuple[str, int, str]]:
    """(path, bytes, sha256) per listed file the box hashed; findings for the rest."""
    rows = []
    for path, listed in listing.files.items():
        if path not in got:
            state.findings.append(RosterFinding(path=path, kind="load_error",
                                                message=f"could not be hashed on the box: {err[-200:]}"))
            continue
        n, digest = got[path]
        rows.append((path, listed.size if n is None else n, digest))
        if n is not None and n != listed.size:
            state.findings.append(RosterFinding(
                path=path, kind="changed", expected=f"{listed.size} bytes", actual=f"{n} bytes",
                message="the file changed size while it was being hashed: it is still being written"))
    return rows


async def _pulling(host: Host, spec: HostSpec, req: VerifyRequest, state: PullState, dest: Path, deadline: float,
                   progress: Progress | None) -> int:
    puller = Puller(host, state.listed().abs_root, dest, state, deadline, progress)
    complete = await puller.run(state.manifest_files(), packed=req.pack)
    state.findings += puller.findings
    if complete:
        state.phase = "checking"
    return puller.transferred


async def _checking(host: Host, spec: HostSpec, req: VerifyRequest, state: PullState, dest: Path, deadline: float,
                    progress: Progress | None) -> int:
    for mf in state.manifest_files():
        if mf.path in state.checks or not state.is_done(mf.path):
            continue
        if time.monotonic() > deadline:
            return 0
        state.checks[mf.path] = await asyncio.to_thread(check_file, dest / mf.path, mf.path, req.allow_pickle,
                                                        expect_keys=req.expect_keys, hand_made=req.hand_made)
    state.phase = "finalize"
    return 0


def _result(spec: HostSpec, req: VerifyRequest, state: PullState, dest: Path, transferred: int) -> VerifyResult:
    files = state.manifest_files()
    done_files = [mf for mf in files if state.is_done(mf.path)]
    done_paths = {mf.path for mf in done_files}
    verified = state.phase == "verified"
    pending = [mf.path for mf in files if mf.path not in done_paths or mf.path not in state.checks]
    manifest = state.manifest
    return VerifyResult(
        host=spec.name, root=req.root, dest=str(dest), done=verified, phase=state.phase,
        passed=state.passed if verified else None,
        manifest=(manifest.path or f"{state.listed().abs_root}/{manifest.name}") if manifest else None,
        manifest_sha256=manifest.sha256 if manifest else None, verified_path=state.verified_path,
        files_total=len(files), files_done=len(done_files), bytes_total=sum(mf.bytes for mf in files),
        bytes_done=sum(mf.bytes for mf in done_files), bytes_transferred=transferred,
        remaining=pending[:MAX_LISTED // 4], findings=state.findings[:MAX_LISTED],
        verdicts=list(state.checks.values())[:MAX_LISTED], cells=_cells(req, state),
        next_step=_next_step(verified, state),
    )


def _still_running(spec: HostSpec, req: VerifyRequest, dest: Path, live: RunState) -> VerifyResult:
    return VerifyResult(
        host=spec.name, root=req.root, dest=str(dest), done=False, phase="run_live", passed=None,
        next_step=(f"still running: run {req.run_id} is {live.status}, so its outputs may still change. Verify "
                   "after it ends (wait_for_run blocks until it does; cancel_run stops it). Nothing was written."))


def _cells(req: VerifyRequest, state: PullState) -> CellsReport | None:
    if req.cells is None or state.cells is None:
        return None
    report, _ = judge(req.cells, state.cells)
    return with_metrics(report, state.cells, state.checks)


def _next_step(verified: bool, state: PullState) -> str:
    if not verified:
        return f"call verify_artifacts again with the same arguments to continue (phase {state.phase})"
    if state.passed:
        return "verified: teardown may now be planned (plan_teardown shows the plan)"
    kinds = sorted({f.kind for f in state.findings if f.blocking})
    return (f"NOT verified ({', '.join(kinds)}): fix what the findings name (missing outputs, changed files, "
            "checkpoints that do not load), then call verify_artifacts again; do not tear down")
