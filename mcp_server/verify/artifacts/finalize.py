"""The last phase of verify_artifacts: judge the round, then write the one VerificationRecord
to PULL_VERIFIED.json and to the ledger."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from mcp_server import __version__
from mcp_server.ledger import Ledger
from mcp_server.verify.artifacts.checks import VERIFIER_VERSION
from mcp_server.verify.artifacts.pull import local_ok
from mcp_server.verify.artifacts.record import VERIFIED_SCHEMA, VerificationRecord, VerifiedFile
from mcp_server.verify.artifacts.roster import OWN_FILES, RosterFinding
from mcp_server.verify.artifacts.state import PullState, dump_json, write_json_atomic


def finalize(host_name: str, run_id: str | None, state: PullState, dest: Path, ledger: Ledger | None) -> None:
    """Judge the round, write PULL_VERIFIED.json, record it in the ledger; the state becomes verified."""
    state.findings = _final_findings(state, dest)
    files = state.manifest_files()
    state.passed = bool(files) and not any(f.blocking for f in state.findings)
    state.phase = "verified"
    record = _record(host_name, run_id, state, dest)
    verified_path = dest / "PULL_VERIFIED.json"
    write_json_atomic(verified_path, dump_json(record))
    state.verified_path = str(verified_path)
    if ledger is not None:
        ledger.record("verification", host=host_name, run_id=run_id,
                      summary=f"{'PASSED' if record.passed else 'FAILED'} {len(files)} files {state.root}",
                      data=record.model_dump(mode="json", by_alias=True))


def _final_findings(state: PullState, dest: Path) -> list[RosterFinding]:
    files = state.manifest_files()
    findings = list(state.findings)
    for mf in files:
        if state.is_done(mf.path) and not local_ok(dest, mf, state.files.get(mf.path)):
            findings.append(RosterFinding(path=mf.path, kind="changed", expected=f"{mf.bytes} bytes",
                                          message="the local copy changed after it was verified"))
    local = _local_set(dest) if dest.exists() else set()
    for extra in sorted(local - {mf.path for mf in files}):
        findings.append(RosterFinding(path=extra, kind="extra", blocking=False,
                                      message="in the local destination but not in the manifest"))
    for path, verdict in state.checks.items():
        if not verdict.ok:
            findings.append(RosterFinding(path=path, kind=verdict.finding or "load_error", message=verdict.detail))
    return findings


def _local_set(dest: Path) -> set[str]:
    out = set()
    for p in dest.rglob("*"):
        rel = p.relative_to(dest).as_posix()
        if p.is_file() and not rel.startswith(".rgt-pull/") and not OWN_FILES.search(rel):
            out.add(rel)
    return out


def _record(host_name: str, run_id: str | None, state: PullState, dest: Path) -> VerificationRecord:
    files = state.manifest_files()
    listing, manifest = state.listing, state.manifest
    if state.producer is None or state.verifier is None:
        raise RuntimeError("a verification is judged only once both machines are known")
    return VerificationRecord(
        schema_=VERIFIED_SCHEMA, host=host_name, producer=state.producer, verifier=state.verifier,
        root=state.root, run_id=run_id,
        abs_root=listing.abs_root if listing else None,
        roster=state.roster, dest=str(dest), manifest=(manifest.path or manifest.name) if manifest else None,
        manifest_sha256=manifest.sha256 if manifest else None,
        listed_at=listing.listed_at if listing else None, newest_mtime=listing.newest_mtime if listing else None,
        verified_at_utc=datetime.now(UTC).isoformat(timespec="seconds"), verifier_version=VERIFIER_VERSION,
        server_version=__version__, passed=bool(state.passed),
        files={mf.path: VerifiedFile(bytes=mf.bytes, sha256=mf.sha256, check=state.checks.get(mf.path))
               for mf in files},
        bytes=sum(mf.bytes for mf in files), findings=state.findings,
    )
