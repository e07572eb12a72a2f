"""verify_artifacts: prove every byte before anyone tears down.

Phases, resumable across calls within a time budget (state in <dest>/.rgt-pull/):
  listing  -> roster matched against the box (missing / extra / symlinks are findings)
  hashing  -> size + SHA-256 on the box, detached, in parallel
  manifest -> PULL_MANIFEST.json beside the data (never overwritten: a new name instead)
  pulling  -> streamed, hashed while received, resumable, verified files never re-sent
  checking -> structural checks by type on the local copies
  verified -> PULL_VERIFIED.json written locally and recorded in the ledger
A finished verification followed by another call starts a new round (a new manifest)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from mcp_server import __version__
from mcp_server.errors import InputError
from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.knowledge import reference_uri
from mcp_server.ledger import Ledger
from mcp_server.verify.artifacts.checks import VERIFIER_VERSION, FileVerdict, check_file
from mcp_server.verify.artifacts.manifest import Manifest, ManifestFile, build_manifest, hasher_for, list_root, poll_hashing, sha256_hex, start_hashing, write_manifest
from mcp_server.verify.artifacts.pull import Progress, Puller, local_ok, state_dir, write_json_atomic
from mcp_server.verify.artifacts.roster import OWN_FILES, Finding, check_pattern, resolve

MARGIN_S = 3.0
MAX_LISTED = 200


class VerifyRequest(BaseModel):
    root: str
    roster: list[str]
    run_id: str | None = None
    dest: str | None = None
    budget_s: float = Field(default=35.0, ge=2, le=55)
    allow_pickle: bool = False


class VerifyResult(BaseModel):
    host: str
    root: str
    dest: str
    done: bool = Field(description="false: call again to continue (nothing is lost or re-sent)")
    phase: str
    passed: bool | None = Field(description="set when done: every roster file present, bytes and hash match, loads")
    manifest: str | None = Field(default=None, description="manifest path on the box")
    manifest_sha256: str | None = None
    verified_path: str | None = Field(default=None, description="local PULL_VERIFIED.json")
    files_total: int = 0
    files_done: int = 0
    bytes_total: int = 0
    bytes_done: int = 0
    bytes_transferred: int = Field(default=0, description="bytes received during this call")
    remaining: list[str] = Field(default_factory=list, description="first files still to pull or check")
    findings: list[Finding] = Field(default_factory=list)
    verdicts: list[FileVerdict] = Field(default_factory=list, description="structural check per file (first 200)")
    next_step: str
    route: str = reference_uri("run-remote/principles", "iron-law")


def default_dest(pulls: Path, host: str, run_id: str | None, root: str) -> Path:
    tail = run_id or re.sub(r"[^A-Za-z0-9._-]+", "_", root.strip("/~")) or "root"
    return pulls / re.sub(r"[^A-Za-z0-9._-]+", "_", host) / tail


def _load_state(dest: Path) -> dict[str, Any] | None:
    f = state_dir(dest) / "state.json"
    try:
        return json.loads(f.read_text()) if f.exists() else None
    except json.JSONDecodeError:
        return None


def _new_round(old: dict[str, Any] | None, req: VerifyRequest, host: str) -> dict[str, Any]:
    return {"round": (old or {}).get("round", 0) + 1, "phase": "listing", "host": host, "root": req.root,
            "roster": req.roster, "run_id": req.run_id, "files": (old or {}).get("files", {}), "checks": {},
            "findings": []}


async def verify_artifacts(host: Host, spec: HostSpec, req: VerifyRequest, *, pulls_dir: Path,
                           ledger: Ledger | None, progress: Progress | None = None) -> VerifyResult:
    for p in req.roster:
        check_pattern(p)
    if not req.roster:
        raise InputError("the roster is empty: name the files that must exist", expected="['best.pth', 'metrics.json']")
    deadline = time.monotonic() + req.budget_s - min(MARGIN_S, 0.25 * req.budget_s)
    dest = Path(req.dest).expanduser() if req.dest else default_dest(pulls_dir, spec.name, req.run_id, req.root)
    state = _load_state(dest)
    if state is None or state["phase"] == "verified" or state["root"] != req.root or state["roster"] != req.roster:
        state = _new_round(state, req, spec.name)
    steps = {"listing": _listing, "hashing": _hashing, "pulling": _pulling, "checking": _checking}
    transferred = 0
    while state["phase"] in steps and time.monotonic() < deadline:
        moved = await steps[state["phase"]](host, spec, req, state, dest, deadline, progress)
        transferred += moved
        write_json_atomic(state_dir(dest) / "state.json", state)
    if state["phase"] == "finalize":
        _finalize(spec, req, state, dest, ledger)
        write_json_atomic(state_dir(dest) / "state.json", state)
    return _result(spec, req, state, dest, transferred)


async def _listing(host: Host, spec: HostSpec, req: VerifyRequest, state: dict[str, Any], dest: Path,
                   deadline: float, progress: Progress | None) -> int:
    facts, entries = await list_root(host, req.root)
    res = resolve(req.roster, entries)
    state.update(abs_root=facts["abs"], listed_at=float(facts.get("now", 0) or 0), hasher=hasher_for(facts),
                 newest_mtime=max((e.mtime for e in entries if not OWN_FILES.search(e.path)), default=0.0),
                 listing={e.path: [e.size, e.mtime] for e in res.files},
                 findings=[f.model_dump() for f in res.findings])
    if not res.files:
        state["phase"] = "finalize"
        return 0
    state["job"] = await start_hashing(host, facts["abs"], res.files, facts)
    state["phase"] = "hashing"
    return 0


async def _hashing(host: Host, spec: HostSpec, req: VerifyRequest, state: dict[str, Any], dest: Path,
                   deadline: float, progress: Progress | None) -> int:
    pause = 0.05
    while True:
        finished, got, err = await poll_hashing(host, state["abs_root"], state["job"])
        if finished or time.monotonic() > deadline:
            break
        await asyncio.sleep(pause)
        pause = min(0.25, pause * 2)
    if not finished:
        return 0
    rows = []
    for path, (size, _mtime) in state["listing"].items():
        if path not in got:
            state["findings"].append(Finding(path=path, kind="load_error", message=f"could not be hashed on the box: {err[-200:]}").model_dump())
            continue
        n, digest = got[path]
        rows.append((path, size if n is None else n, digest))
        if n is not None and n != size:
            state["findings"].append(Finding(path=path, kind="changed", expected=f"{size} bytes", actual=f"{n} bytes",
                                             message="the file changed size while it was being hashed: it is still being written").model_dump())
    manifest = build_manifest(spec.name, req.root, req.roster, req.run_id, state["hasher"], sorted(rows))
    name = await write_manifest(host, state["abs_root"], state["job"], manifest)
    data = manifest.canonical()
    (dest).mkdir(parents=True, exist_ok=True)
    (dest / name).write_bytes(data)
    state.update(phase="pulling", manifest_name=name, manifest_sha256=sha256_hex(data),
                 manifest=json.loads(data))
    return 0


def _manifest_files(state: dict[str, Any]) -> list[ManifestFile]:
    return Manifest.model_validate(state["manifest"]).files


async def _pulling(host: Host, spec: HostSpec, req: VerifyRequest, state: dict[str, Any], dest: Path,
                   deadline: float, progress: Progress | None) -> int:
    puller = Puller(host, state["abs_root"], dest, state, deadline, progress)
    complete = await puller.run(_manifest_files(state))
    state["findings"] += [f.model_dump() for f in puller.findings]
    if complete:
        state["phase"] = "checking"
    return puller.transferred


async def _checking(host: Host, spec: HostSpec, req: VerifyRequest, state: dict[str, Any], dest: Path,
                    deadline: float, progress: Progress | None) -> int:
    for mf in _manifest_files(state):
        rec = state["files"].get(mf.path, {})
        if mf.path in state["checks"] or rec.get("status") != "done":
            continue
        if time.monotonic() > deadline:
            return 0
        verdict = await asyncio.to_thread(check_file, dest / mf.path, mf.path, req.allow_pickle)
        state["checks"][mf.path] = verdict.model_dump()
    state["phase"] = "finalize"
    return 0


def _local_set(dest: Path) -> set[str]:
    out = set()
    for p in dest.rglob("*"):
        rel = p.relative_to(dest).as_posix()
        if p.is_file() and not rel.startswith(".rgt-pull/") and not OWN_FILES.search(rel):
            out.add(rel)
    return out


def _finalize(spec: HostSpec, req: VerifyRequest, state: dict[str, Any], dest: Path, ledger: Ledger | None) -> None:
    files = _manifest_files(state) if "manifest" in state else []
    findings = [Finding.model_validate(f) for f in state["findings"]]
    for mf in files:
        if not local_ok(dest, mf, state["files"].get(mf.path)) and state["files"].get(mf.path, {}).get("status") == "done":
            findings.append(Finding(path=mf.path, kind="changed", message="the local copy changed after it was verified",
                                    expected=f"{mf.bytes} bytes"))
    local = _local_set(dest) if dest.exists() else set()
    for extra in sorted(local - {mf.path for mf in files}):
        findings.append(Finding(path=extra, kind="extra", blocking=False,
                                message="in the local destination but not in the manifest"))
    for path, v in state["checks"].items():
        if not v["ok"]:
            findings.append(Finding(path=path, kind=v.get("finding") or "load_error", message=v["detail"]))
    passed = bool(files) and not any(f.blocking for f in findings)
    state["findings"] = [f.model_dump() for f in findings]
    state["passed"] = passed
    state["phase"] = "verified"
    verified = {
        "schema": "remote-gpu-trainer/PULL-VERIFIED/v2", "host": spec.name, "root": req.root,
        "run_id": req.run_id, "manifest": state.get("manifest_name"), "manifest_sha256": state.get("manifest_sha256"),
        "verified_at_utc": datetime.now(UTC).isoformat(timespec="seconds"), "verifier_version": VERIFIER_VERSION,
        "server_version": __version__, "passed": passed,
        "files": {mf.path: {"bytes": mf.bytes, "sha256": mf.sha256, "check": state["checks"].get(mf.path)} for mf in files},
        "findings": state["findings"],
    }
    write_json_atomic(dest / "PULL_VERIFIED.json", verified)
    state["verified_path"] = str(dest / "PULL_VERIFIED.json")
    if ledger is not None:
        ledger.record("verification", host=spec.name, run_id=req.run_id,
                      summary=f"{'PASSED' if passed else 'FAILED'} {len(files)} files {req.root}",
                      data={"passed": passed, "root": req.root, "abs_root": state.get("abs_root"),
                            "roster": req.roster, "manifest": state.get("manifest_name"),
                            "manifest_sha256": state.get("manifest_sha256"), "files": [mf.path for mf in files],
                            "bytes": sum(mf.bytes for mf in files), "listed_at": state.get("listed_at"),
                            "newest_mtime": state.get("newest_mtime"), "dest": str(dest),
                            "findings": len([f for f in findings if f.blocking])})


def _result(spec: HostSpec, req: VerifyRequest, state: dict[str, Any], dest: Path, transferred: int) -> VerifyResult:
    files = _manifest_files(state) if "manifest" in state else []
    done_files = [mf for mf in files if state["files"].get(mf.path, {}).get("status") == "done"]
    verified = state["phase"] == "verified"
    findings = [Finding.model_validate(f) for f in state["findings"]]
    pending = [mf.path for mf in files if mf not in done_files or mf.path not in state["checks"]]
    return VerifyResult(
        host=spec.name, root=req.root, dest=str(dest), done=verified, phase=state["phase"],
        passed=state.get("passed") if verified else None,
        manifest=f"{state['abs_root']}/{state['manifest_name']}" if state.get("manifest_name") else None,
        manifest_sha256=state.get("manifest_sha256"), verified_path=state.get("verified_path"),
        files_total=len(files), files_done=len(done_files), bytes_total=sum(mf.bytes for mf in files),
        bytes_done=sum(mf.bytes for mf in done_files), bytes_transferred=transferred,
        remaining=pending[:MAX_LISTED // 4], findings=findings[:MAX_LISTED],
        verdicts=[FileVerdict.model_validate(v) for v in list(state["checks"].values())[:MAX_LISTED]],
        next_step=_next_step(verified, state, findings),
    )


def _next_step(verified: bool, state: dict[str, Any], findings: list[Finding]) -> str:
    if not verified:
        return f"call verify_artifacts again with the same arguments to continue (phase {state['phase']})"
    if state.get("passed"):
        return "verified: teardown may now be planned (teardown without a token shows the plan)"
    kinds = sorted({f.kind for f in findings if f.blocking})
    return (f"NOT verified ({', '.join(kinds)}): fix what the findings name (missing outputs, changed files, "
            "checkpoints that do not load), then call verify_artifacts again; do not tear down")
