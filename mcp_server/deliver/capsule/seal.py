"""Seal a verified pull into the canonical capsule `<project>/runs/<run-id>/`.

The verified files are hard-linked (or copied where a link cannot be made) into
`runs/.partial-<run-id>-<random>`, each re-hashed there and refused on any difference from
PULL_VERIFIED.json (never re-downloaded: the pull is re-verified instead); run.json and
provenance.json are written; the folder is checked and renamed into place in one step. An
existing run id is refused: a sealed capsule is never edited, and a re-run is a new run id."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import string
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp_server.deliver.capsule.layout import (
    PROVENANCE,
    RECORD,
    RECORD_SCHEMA,
    TESTS,
    Finding,
    capsule_dir,
    check_layout,
    confined,
    file_sha256,
    runs_dir,
)
from mcp_server.deliver.capsule.seal_provenance import launch_facts, provenance_document, run_provenance
from mcp_server.deliver.capsule.seal_roles import default_roles, given_roles
from mcp_server.errors import ConflictError, GateRefused, InputError, NotFoundError
from mcp_server.ledger import Ledger
from mcp_server.verify.artifacts.record import VerificationRecord

PLACEHOLDERS = frozenset({"checkpoint", "config", "out", "test"})
_READ_ONLY = 0o444


class Evaluate(BaseModel):
    """How the capsule's checkpoint is re-evaluated: an argv template and a tolerance per metric."""

    model_config = ConfigDict(extra="forbid")

    command: list[str] = Field(min_length=1, description="argv with {checkpoint} {config} {out} {test}")
    tolerance: dict[str, float] = Field(default_factory=dict, description="metric -> absolute tolerance")


class SealedFile(BaseModel):
    path: str = Field(description="capsule-relative")
    sha256: str
    bytes: int
    source: str = Field(description="its path in the pull")
    how: Literal["hardlink", "copy"]


class SealResult(BaseModel):
    run_id: str
    capsule: str
    files: list[SealedFile]
    tests: list[str]
    provenance_hash: str
    provenance_schema_valid: bool = Field(description="false: provenance.json does not match the shipped schema "
                                          "(invalid_provenance findings); unknown inputs are null, and valid")
    findings: list[Finding]
    next_step: str


def seal_capsule(project: Path, pull_verified: Path, *, roles: dict[str, str] | None, evaluate: dict[str, Any] | None,
                 ledger: Ledger | None, link: bool = True) -> SealResult:
    """Write `<project>/runs/<run-id>/` from the files a passing PULL_VERIFIED.json vouches for."""
    record_path = confined(pull_verified, "read", "path", "nothing was sealed")  # the capsule tool's argument
    project = confined(project, "write", "project", "nothing was sealed")
    record = _read_record(record_path)
    run_id = record.run_id or ""
    if not record.run_id:
        raise InputError("the verified pull has no run id, and a capsule is named by one",
                         next_step="verify the run with run_id (verify_artifacts run_id=...), then seal that pull")
    target = capsule_dir(project, run_id)
    _refuse_existing(target, run_id)
    spec = _evaluate(evaluate)
    pull_root = record_path.parent
    mapping, findings = (given_roles(roles, record.files), []) if roles is not None else default_roles(record.files)
    runs_dir(project).mkdir(parents=True, exist_ok=True)
    partial = runs_dir(project) / f".partial-{run_id}-{secrets.token_hex(4)}"
    partial.mkdir()
    try:
        sealed = [_stage(pull_root, partial, target_path, source, record, link)
                  for target_path, source in sorted(mapping.items())]
        result = _finish(project, partial, target, run_id, record, record_path, sealed, spec, ledger, findings)
        _refuse_tampered(partial)
        _refuse_existing(target, run_id)
        os.rename(partial, target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if ledger is not None:
        ledger.record("capsule_sealed", host=record.host, run_id=run_id, summary=f"sealed {target}",
                      data={"capsule": str(target), "pull_verified": str(record_path),
                            "provenance_hash": result.provenance_hash, "files": len(sealed)})
    return result


def _read_record(path: Path) -> VerificationRecord:
    try:
        record = VerificationRecord.model_validate_json(path.read_bytes())
    except FileNotFoundError as exc:
        raise NotFoundError("no PULL_VERIFIED.json at that path", path=str(path),
                            next_step="pass the verified_path verify_artifacts returned") from exc
    except (OSError, ValidationError) as exc:
        raise InputError("the file is not a PULL_VERIFIED.json this server wrote (unreadable or a wrong shape)",
                         path=str(path), next_step="pass the verified_path verify_artifacts returned") from exc
    if not record.passed:
        raise GateRefused("the pull did not pass verification: only verified bytes are sealed", path=str(path),
                          next_step="fix its findings and run verify_artifacts again, then seal the new record")
    return record


def _refuse_existing(target: Path, run_id: str) -> None:
    if target.exists() or target.is_symlink():
        raise ConflictError(f"the capsule runs/{run_id} exists: a sealed capsule is never edited or replaced",
                            path=str(target), next_step="a re-run mints a new run id: launch the job again, verify "
                                                        "that run and seal its pull; to keep this one, do nothing")


def _evaluate(evaluate: dict[str, Any] | None) -> Evaluate | None:
    if evaluate is None:
        return None
    try:
        spec = Evaluate.model_validate(evaluate)
    except ValidationError as exc:
        raise InputError("evaluate is not {command: [argv...], tolerance: {metric: number}}",
                         observed="; ".join(".".join(map(str, e["loc"])) + ": " + e["msg"] for e in exc.errors()[:3]),
                         next_step="fix evaluate, or omit it") from exc
    named = {f for word in spec.command for _, f, _, _ in string.Formatter().parse(word) if f is not None}
    if named - PLACEHOLDERS or any(v < 0 for v in spec.tolerance.values()):
        raise InputError("evaluate uses a placeholder this server does not fill, or a negative tolerance",
                         expected="placeholders {checkpoint} {config} {out} {test}; tolerances >= 0",
                         next_step="fix evaluate, or omit it")
    return spec


def _stage(pull_root: Path, partial: Path, rel: str, source: str, record: VerificationRecord,
           link: bool) -> SealedFile:
    """One verified file into the partial capsule, re-hashed where it now lies."""
    src, dst = pull_root / source, partial / rel
    dst.parent.mkdir(parents=True, exist_ok=True)
    if not src.is_file() or src.is_symlink():
        raise NotFoundError("a verified file is missing from the pull (or is no longer a regular file)",
                            path=str(src), next_step="run verify_artifacts again for this run: it re-sends only "
                                                     "what is missing, then seal its new record")
    how: Literal["hardlink", "copy"] = "copy"
    if link:
        with contextlib.suppress(OSError):  # another filesystem, or links not allowed: a copy is as good
            os.link(src, dst)
            how = "hardlink"
    if how == "copy":
        shutil.copyfile(src, dst)
    digest, expected = file_sha256(dst), _prefixed(record.files[source].sha256)
    if digest != expected:
        raise GateRefused("a pulled file changed after it was verified: nothing was sealed", path=str(src),
                          observed=digest, expected=expected,
                          next_step="run verify_artifacts again (it re-checks the local copy and re-sends what "
                                    "changed), then seal the new record")
    os.chmod(dst, _READ_ONLY)
    return SealedFile(path=rel, sha256=digest, bytes=dst.stat().st_size, source=source, how=how)


def _prefixed(digest: str) -> str:
    return digest if digest.startswith("sha256:") else "sha256:" + digest


def _finish(project: Path, partial: Path, target: Path, run_id: str, record: VerificationRecord, record_path: Path,
            sealed: list[SealedFile], spec: Evaluate | None, ledger: Ledger | None,
            findings: list[Finding]) -> SealResult:
    """run.json and provenance.json into the partial capsule, and the result with every finding."""
    sums = {f.path: f.sha256 for f in sealed}
    tests = sorted({f.path.split("/")[1] for f in sealed if f.path.startswith(TESTS + "/") and f.path.count("/") >= 2})
    config = partial / "config.yaml" if "config.yaml" in sums else None
    prov = run_provenance(record, launch_facts(ledger, record), sums, config)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    run_json = {
        "schema": RECORD_SCHEMA, "run_id": run_id, "sealed_at": now,
        "source": {"host": record.host, "box_run_id": record.run_id, "pull_verified": str(record_path),
                   "pull_verified_sha256": file_sha256(record_path)},
        "provenance": prov,
        "files": {f.path: {"sha256": f.sha256, "bytes": f.bytes, "from": f.source} for f in sealed},
        "tests": tests,
        "evaluate": spec.model_dump() if spec else None,
    }
    _write_sealed(partial / RECORD, run_json)
    doc, unknown = provenance_document(project.name, run_id, now, prov, {**sums, RECORD: file_sha256(partial / RECORD)})
    _write_sealed(partial / PROVENANCE, doc)
    unknown += [Finding(kind="unknown_provenance", path=f"run.json provenance.{k}",
                        message=f"the run does not carry its {k.replace('_', ' ')}; run.json says null")
                for k, v in prov.items() if v is None]
    layout = check_layout(partial)
    every = [*layout, *findings, *_one_unknown(unknown)]
    return SealResult(run_id=run_id, capsule=str(target), files=sealed, tests=tests,
                      provenance_hash=doc["provenance_hash"],
                      provenance_schema_valid=not any(f.kind == "invalid_provenance" for f in unknown),
                      findings=every, next_step=_next(run_id, layout))


def _one_unknown(findings: list[Finding]) -> list[Finding]:
    """The inputs the run does not carry as one finding naming each (a result an agent reads whole),
    the other provenance findings as they are."""
    unknown = [f.path or "" for f in findings if f.kind == "unknown_provenance"]
    rest = [f for f in findings if f.kind != "unknown_provenance"]
    if not unknown:
        return rest
    return [Finding(kind="unknown_provenance", path="; ".join(unknown),
                    message=f"the run does not carry {len(unknown)} input(s): null in run.json and provenance.json "
                            "(\"unknown\" where its schema takes text), never a guess"), *rest]


def _write_sealed(path: Path, data: dict[str, Any]) -> None:
    """Inside the partial capsule, which only the rename publishes: written once, then read-only."""
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.chmod(path, _READ_ONLY)


def _next(run_id: str, layout: list[Finding]) -> str:
    if layout:
        return (f"sealed runs/{run_id} with {len(layout)} layout finding(s): a capsule is never edited, so fix the "
                "run's outputs and seal a new run; or propose evidence from it as it is")
    return f"sealed runs/{run_id}: propose an evidence row from it (capsule action propose)"


def verify_capsule(capsule: Path) -> list[Finding]:
    """Every file of run.json (and provenance.json's artifacts, which cover run.json) re-hashed;
    a difference is a `tampered` finding with both digests, a missing file `missing_file`."""
    try:
        files = json.loads((capsule / RECORD).read_text(encoding="utf-8"))["files"]
        artifacts = json.loads((capsule / PROVENANCE).read_text(encoding="utf-8")).get("artifacts") or {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return [Finding(kind="no_record", path=RECORD, message="run.json or provenance.json is missing or unreadable: "
                        "the capsule cannot be checked", expected="a capsule sealed by this server")]
    wanted = {rel: entry.get("sha256") for rel, entry in files.items() if isinstance(entry, dict)}
    wanted.update({rel: d for rel, d in artifacts.items() if isinstance(d, str)})
    out = []
    for rel, digest in sorted(wanted.items()):
        path = capsule / rel
        if not _inside(capsule, path) or not path.is_file():
            out.append(Finding(kind="missing_file", path=rel, message="a sealed file is missing", expected=digest))
            continue
        now = file_sha256(path)
        if now != digest:
            out.append(Finding(kind="tampered", path=rel, message="a sealed file changed after sealing",
                               expected=digest, actual=now))
    return out


def _inside(capsule: Path, path: Path) -> bool:
    """A path run.json names must not lead out of the capsule (a hand-edited record could)."""
    return path.resolve().is_relative_to(capsule.resolve())


def _refuse_tampered(capsule: Path) -> None:
    bad = [f for f in verify_capsule(capsule) if f.kind in ("tampered", "missing_file", "no_record")]
    if bad:
        raise GateRefused(f"the capsule changed while it was being sealed ({bad[0].path}): nothing was sealed",
                          path=str(capsule), observed=bad[0].actual, expected=bad[0].expected,
                          next_step="make sure nothing else writes into the project's runs/ folder, then seal again")
