"""Evidence rows written by the tool, never typed: from sealed capsules, one row under a named
claim (value, split, n, the variance over seeds computed, results_json, run ids, results_sha256,
aliases), proposed as a plan (the exact new EVIDENCE.json, its JSON diff, a token) and applied
only with that token, once, while neither EVIDENCE.json nor a capsule changed since.

A row's results_json is what reconcile_evidence holds its value against. One capsule: its
test's metrics.json. Several (seeds): their mean is in no capsule, so apply also writes a
seed-group results file beside EVIDENCE.json, `seed-groups/<claim>.<test>.<metric>.<digest>.json`
(listed shape: the mean, n and std over seeds, and each source metrics.json with its digest);
it is named by its content and never replaced, like a capsule."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import statistics
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from mcp_server.deliver.capsule import evidence_store
from mcp_server.deliver.capsule.layout import RECORD, Finding, capsule_dir, check_id, confined, file_sha256, metrics_rel
from mcp_server.deliver.capsule.seal import verify_capsule
from mcp_server.deliver.evidence.schema import check
from mcp_server.errors import ConflictError, GateRefused, InputError, NotFoundError
from mcp_server.ledger import Ledger
from mcp_server.verify.artifacts.state import write_json_atomic

ACTION = "evidence"
TOKEN_HOST = "local"  # the evidence layer lives on this machine
TOKEN_TTL_S = 30 * 60  # as teardown's: a plan is confirmed while it is fresh
GROUPS = "seed-groups"
GROUP_SCHEMA = "remote-gpu-trainer/seed-group/v1"
AUTHORITY = "a number's truth is the results file its row points at; documents follow EVIDENCE, never the reverse"
_DIGITS = 10  # a mean of 0.80, 0.82, 0.84 is 0.82, not 0.8200000000000001


class EvidencePlan(BaseModel):
    claim_id: str
    evidence_path: str
    row: dict[str, Any] = Field(description="the evidence row as it will be written")
    disclosure: str | None = Field(description="proposed with a single seed; kept if the claim has one already")
    document: dict[str, Any] = Field(description="the exact EVIDENCE.json apply writes")
    diff: list[dict[str, Any]] = Field(description="RFC 6902 operations from the current file (absent: from {})")
    current_sha256: str | None = Field(description="EVIDENCE.json's digest now (None: no file yet)")
    group_file: str | None = Field(description="the seed-group results file apply also writes (several capsules)")
    token: str
    plan_hash: str
    findings: list[Finding]
    next_step: str


class ApplyResult(BaseModel):
    evidence_path: str
    sha256: str
    written: list[str]
    next_step: str


def propose_evidence(project: Path, run_ids: list[str], *, claim_id: str, metric: str, test_id: str,
                     evidence_path: Path, statement: str | None, aliases: list[str], ledger: Ledger) -> EvidencePlan:
    """One row from the capsules' metrics for test_id, under claim_id, as a plan with a token."""
    project = confined(project, "read", "project", "nothing was planned")
    evidence = confined(evidence_path, "write", "evidence_path", "nothing was planned")
    check_id(claim_id, "claim id")
    if not run_ids or len(set(run_ids)) != len(run_ids):
        raise InputError("run_ids must name one or more distinct capsules", next_step="pass each run id once")
    sources = [_source(project, evidence.parent, rid, metric, test_id) for rid in run_ids]
    row, group = _row(sources, evidence.parent, claim_id, metric, test_id, aliases)
    disclosure = None if len(sources) > 1 else (
        f"single seed: {metric} on the {row['split']} split comes from one run ({run_ids[0]}); no variance across "
        "seeds")
    current, raw = _current(evidence)
    document = _merged(current, project.name, claim_id, statement, metric, row, disclosure)
    errors = check("evidence", document)
    if errors:
        raise InputError("the proposed EVIDENCE.json would not be valid against the shipped schema",
                         observed=f"{errors[0].json_path}: {errors[0].message}", expected=errors[0].expected,
                         next_step="fix EVIDENCE.json (or the claim id, aliases or statement), then propose again")
    content = {"evidence_path": str(evidence), "current_sha256": raw, "document": document, "group": group,
               "capsules": {s["run_id"]: s["capsule"] for s in sources}}
    digest = evidence_store.store(ledger, content)
    token = secrets.token_hex(16)
    ledger.issue_token(token, host=TOKEN_HOST, action=ACTION, plan_hash=digest)
    ledger.record("evidence_plan", host=TOKEN_HOST, summary=f"{claim_id}: {metric} over {len(sources)} capsule(s)",
                  data={"plan_hash": digest, "evidence_path": str(evidence), "run_ids": run_ids})
    return EvidencePlan(
        claim_id=claim_id, evidence_path=str(evidence), row=row,
        disclosure=_claim(document, claim_id).get("disclosure"), document=document,
        diff=evidence_store.json_diff(current if current is not None else {}, document), current_sha256=raw,
        group_file=group["path"] if group else None, token=token, plan_hash=digest, findings=[],
        next_step="show the user the diff; promoting a number to a claim is their call: apply with this token")


def _source(project: Path, base: Path, run_id: str, metric: str, test_id: str) -> dict[str, Any]:
    """One capsule's number for the test, after its files are re-hashed against run.json."""
    capsule = capsule_dir(project, run_id)
    if not (capsule / RECORD).is_file():
        raise NotFoundError(f"no sealed capsule runs/{run_id} in the project", path=str(capsule),
                            next_step="seal the run's verified pull first (capsule action seal)")
    _refuse_tampered(capsule, run_id)
    record = json.loads((capsule / RECORD).read_text(encoding="utf-8"))
    rel = metrics_rel(test_id)
    if test_id not in (record.get("tests") or []) or rel not in record.get("files", {}):
        raise InputError(f"capsule {run_id} declares no test {test_id} with a metrics.json",
                         expected=record.get("tests") or [], next_step="pass a test id the capsule's run.json lists")
    metrics = json.loads((capsule / rel).read_text(encoding="utf-8"))
    value, split, n = metrics.get(metric) if isinstance(metrics, dict) else None, metrics.get("split"), metrics.get("n")
    if not isinstance(value, int | float) or isinstance(value, bool) or split not in ("val", "test") \
            or not isinstance(n, int) or n < 1:
        raise InputError(f"{rel} of capsule {run_id} lacks a numeric metric of that name, split val/test or n",
                         expected='{"<metric>": number, "split": "val"|"test", "n": int}',
                         next_step="pass a metric the file holds; a capsule is never edited (seal a new run)")
    return {"run_id": run_id, "capsule": str(capsule), "value": float(value), "split": split, "n": n,
            "sha256": record["files"][rel]["sha256"], "results_json": os.path.relpath(capsule / rel, base)}


def _refuse_tampered(capsule: Path, run_id: str) -> None:
    bad = verify_capsule(capsule)
    if bad:
        raise GateRefused(f"capsule {run_id} changed after it was sealed ({bad[0].path}): its numbers are not "
                          "evidence", path=str(capsule), observed=bad[0].actual, expected=bad[0].expected,
                          next_step="a sealed capsule is never edited: seal the run's verified pull as a new run, "
                                    "or restore the file")


def _row(sources: list[dict[str, Any]], base: Path, claim_id: str, metric: str, test_id: str,
         aliases: list[str]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    if len({s["split"] for s in sources}) > 1 or len({s["n"] for s in sources}) > 1:
        raise InputError("the capsules measured the metric on different splits or sample counts: their mean is no "
                         "one number", next_step="group only seeds of one test (same split, same n)")
    first, values = sources[0], [s["value"] for s in sources]
    row: dict[str, Any] = {"metric": metric, "split": first["split"], "n": first["n"]}
    if aliases:
        row["aliases"] = list(aliases)
    if len(sources) == 1:
        row.update(value=first["value"], variance=None, results_json=first["results_json"],
                   results_sha256=first["sha256"], run=first["run_id"], run_id=first["run_id"])
        return row, None
    spread = {"type": "std", "value": round(statistics.stdev(values), _DIGITS), "seeds": len(values)}
    entry = {"metric": metric, "split": first["split"], "value": round(statistics.fmean(values), _DIGITS),
             "n": first["n"], "variance": spread}
    body = {"schema": GROUP_SCHEMA, "claim_id": claim_id, "test_id": test_id, "metrics": [entry],
            "sources": [{k: s[k] for k in ("run_id", "results_json", "sha256", "value")} for s in sources]}
    text = json.dumps(body, indent=2, sort_keys=True) + "\n"
    digest = file_digest(text)
    name = ".".join([claim_id, test_id, re.sub(r"[^A-Za-z0-9._-]+", "_", metric), digest[7:19], "json"])
    rel = f"{GROUPS}/{name}"
    row.update(value=entry["value"], variance=spread, results_json=rel, results_sha256=digest,
               run_ids=[s["run_id"] for s in sources])
    return row, {"path": str(base / rel), "text": text}


def file_digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _current(evidence: Path) -> tuple[dict[str, Any] | None, str | None]:
    if not evidence.exists():
        return None, None
    try:
        data = json.loads(evidence.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError("EVIDENCE.json exists but is not readable JSON: it was not touched", path=str(evidence),
                         next_step="fix its syntax first (reconcile_evidence names the problem)") from exc
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list):
        raise InputError("EVIDENCE.json exists but has no claims list: it was not touched", path=str(evidence),
                         expected='{"claims": [...]}', next_step="fix the file first")
    return data, file_sha256(evidence)


def _claim(document: dict[str, Any], claim_id: str) -> dict[str, Any]:
    return next(c for c in document["claims"] if isinstance(c, dict) and c.get("id") == claim_id)


def _merged(current: dict[str, Any] | None, project: str, claim_id: str, statement: str | None, metric: str,
            row: dict[str, Any], disclosure: str | None) -> dict[str, Any]:
    """The current document with the row under its claim (a row reading the same results file
    for the same metric and split is replaced; a new claim is appended)."""
    doc: dict[str, Any] = json.loads(json.dumps(current)) if current is not None else {
        "schema": "remote-gpu-trainer/EVIDENCE/v1", "project": project, "authoritative_source": AUTHORITY,
        "claims": []}
    claim = next((c for c in doc["claims"] if isinstance(c, dict) and c.get("id") == claim_id), None)
    if claim is None:
        claim = {"id": claim_id, "metric": metric, "evidence": [], "paper_anchor": None, "repo_implementation": None,
                 "disclosure": None}
        doc["claims"].append(claim)
    same = [i for i, r in enumerate(claim.get("evidence") or []) if isinstance(r, dict) and
            (r.get("results_json"), r.get("metric"), r.get("split")) == (row["results_json"], metric, row["split"])]
    rows = list(claim.get("evidence") or [])
    if same:
        rows[same[0]] = row
    else:
        rows.append(row)
    claim["evidence"] = rows
    if statement:
        claim["statement"] = statement
    if disclosure and not claim.get("disclosure"):
        claim["disclosure"] = disclosure
    return doc


def apply_evidence(token: str, *, ledger: Ledger, evidence_path: Path) -> ApplyResult:
    """Write the plan the token names, once, if EVIDENCE.json and its capsules are as planned."""
    rec = ledger.token(token)
    if rec is None or rec.action != ACTION:
        raise GateRefused("unknown token: it did not come from an evidence proposal",
                          next_step="propose the evidence (capsule action propose) and apply with its token")
    if rec.consumed is not None:
        raise GateRefused("the token was already used: a plan is applied once (replay refused)",
                          next_step="propose again if another change is really needed")
    if time.time() - rec.created > TOKEN_TTL_S:
        raise GateRefused("the token expired (30 min)", next_step="propose again")
    plan = evidence_store.load(ledger, rec.plan_hash)
    evidence = confined(evidence_path, "write", "evidence_path", "nothing was written")
    if str(evidence) != plan["evidence_path"]:
        raise GateRefused("the token belongs to a plan for another EVIDENCE.json", path=str(evidence),
                          expected=plan["evidence_path"], next_step="apply to the file the plan named, or propose "
                                                                    "for this one")
    now = file_sha256(evidence) if evidence.exists() else None
    if now != plan["current_sha256"]:
        raise GateRefused("EVIDENCE.json changed since the plan: nothing was written", path=str(evidence),
                          observed=now or "absent", expected=plan["current_sha256"] or "absent",
                          next_step="propose again: the new plan's diff starts from the file as it is now")
    for run_id, capsule in sorted(plan["capsules"].items()):
        _refuse_tampered(Path(capsule), run_id)
    if not ledger.consume_token(token):
        raise GateRefused("the token was already used: a plan is applied once (replay refused)")
    written = _write_group(plan["group"]) + [str(evidence)]
    write_json_atomic(evidence, json.dumps(plan["document"], indent=2) + "\n")
    digest = file_sha256(evidence)
    ledger.record("evidence_apply", host=TOKEN_HOST, summary=f"wrote {evidence}",
                  data={"plan_hash": rec.plan_hash, "sha256": digest, "written": written})
    return ApplyResult(evidence_path=str(evidence), sha256=digest, written=written,
                       next_step="run reconcile_evidence on the documents that cite these numbers")


def _write_group(group: dict[str, Any] | None) -> list[str]:
    """The seed-group file, named by its content: written once, never replaced."""
    if group is None:
        return []
    path = Path(group["path"])
    if path.exists():
        if path.read_text(encoding="utf-8") != group["text"]:
            raise ConflictError("a seed-group results file of that name holds other content: it was not replaced",
                                path=str(path), next_step="restore it or move it aside, then propose again")
        return []
    write_json_atomic(path, group["text"])
    return [str(path)]
