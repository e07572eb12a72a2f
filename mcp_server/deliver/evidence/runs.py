"""Run directories against their provenance.json: was the run changed after it was
recorded? Config, sealed artifacts and the provenance hash are re-checked by digest (never
by mtime: a git checkout resets those). Pruning derived outputs (qualitative/ images,
non-best checkpoints) is allowed; changing anything is not. Conditions worth disclosing
(dirty tree, no tracker, a moved env lock, a split audit finding) go onto the numbers."""

from __future__ import annotations

import hashlib
import json
import posixpath
from typing import Any

from mcp_server.deliver.evidence.layer import Evidence
from mcp_server.deliver.evidence.results import RunDir
from mcp_server.deliver.evidence.schema import check
from mcp_server.deliver.evidence.sources import Problems, join_path, read_json
from mcp_server.deliver.models import Found, make
from mcp_server.errors import RgtError
from mcp_server.hosts.base import Host
from mcp_server.hosts.files import digests

SCHEME = "canonical-json-sha256/v1"
_PRUNABLE = ("qualitative/", "checkpoints/")
_UNCERTIFIED = ("run_modified: the run directory changed after it was recorded; the conditions of this number are "
                "uncertified")


async def check_runs(host: Host, ev: Evidence, runs: dict[str, RunDir], problems: Problems) -> list[Found]:
    """Findings for every run directory reached; disclosures attached to its rows."""
    provs: dict[str, dict[str, Any]] = {}
    findings: list[Found] = []
    for path, rd in sorted(runs.items()):
        loaded = await read_json(host, posixpath.join(path, "provenance.json"), "provenance", problems, missing_ok=True)
        if loaded is None:
            if not any(p.path == posixpath.join(path, "provenance.json") for p in problems.items):
                findings += await _run_record(host, ev, rd, problems)
            continue
        errs = check("provenance", loaded[0])
        for e in errs[:5]:
            problems.add("provenance", posixpath.join(path, "provenance.json"), "schema", f"{e.json_path}: {e.message}",
                         json_path=e.json_path, expected=e.expected)
        if not errs:
            provs[path] = loaded[0]
    wanted = sorted({p for path, prov in provs.items() for p in _digest_paths(ev, runs[path], prov)})
    try:
        sums = await digests(host, wanted) if wanted else {}
    except RgtError as exc:
        problems.from_error("runs", ev.root, exc, next_step="pass check_runs=false to skip the digest checks")
        return findings
    for path, prov in provs.items():
        findings += _check_one(ev, runs[path], prov, sums)
    for path, prov in provs.items():
        await _split_audit(host, ev, runs[path], prov, problems)
    return findings


async def _run_record(host: Host, ev: Evidence, rd: RunDir, problems: Problems) -> list[Found]:
    """A run without provenance.json: a canonical capsule records itself in run.json, whose
    run id must still be its folder's name; with neither, the conditions are unrecorded."""
    record = posixpath.join(rd.path, "run.json")
    loaded = await read_json(host, record, "runs", problems, missing_ok=True)
    if loaded is None:
        if not any(p.path == record for p in problems.items):
            _disclose(rd, "no_provenance: the run has no provenance.json or run.json; its conditions are unrecorded")
        return []
    said = loaded[0].get("run_id") if isinstance(loaded[0], dict) else None
    if rd.run_id and isinstance(said, str) and said != rd.run_id:
        return [make("evidence_out_of_date", kind="provenance_location_mismatch", **_where(ev, rd),
                     note=f"run.json says run {said}, the folder is {rd.run_id}: a sealed run was copied or renamed")]
    return []


def _disclose(rd: RunDir, text: str) -> None:
    for row in rd.rows:
        row.disclose(text)


def _digest_paths(ev: Evidence, rd: RunDir, prov: dict[str, Any]) -> list[str]:
    hi = prov["hash_inputs"]
    out = [_config_path(rd, hi["config"]["path"]), join_path(ev.root, hi["env_lock"]["path"])]
    out += [posixpath.join(rd.path, rel) for rel in (prov.get("artifacts") or {})]
    return out


def _config_path(rd: RunDir, recorded: str) -> str:
    """The recorded config path is project-relative; a run dir reached through `selected`
    may have been recorded under its concrete name, which is the same file."""
    if recorded.startswith("/"):
        return recorded
    return posixpath.join(rd.path, posixpath.basename(recorded))


def _where(ev: Evidence, rd: RunDir) -> dict[str, Any]:
    rel = posixpath.relpath(rd.path, ev.root) if rd.path.startswith(ev.root + "/") else rd.path
    first = rd.rows[0] if rd.rows else None
    return {"file": rel, "exp_id": first.exp_id if first else None, "claim_id": first.claim_id if first else None}


def _check_one(ev: Evidence, rd: RunDir, prov: dict[str, Any], sums: dict[str, str | None]) -> list[Found]:
    out: list[Found] = []
    where = _where(ev, rd)
    hi = prov["hash_inputs"]
    if rd.run_id and (prov["run_id"] != rd.run_id or (rd.exp_dir and prov["exp_id"] != posixpath.basename(rd.exp_dir))):
        out.append(make("evidence_out_of_date", kind="provenance_location_mismatch", **where,
                        note=f"provenance says {prov['exp_id']}/{prov['run_id']}, the directory is "
                             f"{posixpath.basename(rd.exp_dir or '')}/{rd.run_id}: a run was copied or renamed"))
    config = _config_path(rd, hi["config"]["path"])
    got = sums.get(config)
    if got != hi["config"]["sha256"]:
        out.append(_modified(where, posixpath.basename(config), hi["config"]["sha256"], got))
    for rel, digest in sorted((prov.get("artifacts") or {}).items()):
        got = sums.get(posixpath.join(rd.path, rel))
        best = rel == "checkpoints/best" or rel.startswith("checkpoints/best/")
        if got is None and rel.startswith(_PRUNABLE) and not best:
            continue
        if got != digest:
            out.append(_modified(where, rel, digest, got))
    if prov.get("hash_scheme") == SCHEME:
        again = provenance_hash(hi)
        if again != prov["provenance_hash"]:
            out.append(make("evidence_out_of_date", kind="provenance_hash_mismatch", **where,
                            note=f"recomputed {again}, recorded {prov['provenance_hash']}: hash_inputs were edited"))
    if out:
        _disclose(rd, _UNCERTIFIED)
    _conditions(ev, rd, prov, sums)
    return out


def _modified(where: dict[str, Any], rel: str, expected: str, got: str | None) -> Found:
    seen = got or "missing"
    return make("evidence_out_of_date", kind="run_modified", **where,
                note=f"{rel}: recorded {expected}, now {seen}")


def _conditions(ev: Evidence, rd: RunDir, prov: dict[str, Any], sums: dict[str, str | None]) -> None:
    hi = prov["hash_inputs"]
    if hi["code_git_sha"]["dirty"]:
        _disclose(rd, f"dirty_tree: run {prov['run_id']} was made from a dirty code tree")
    if not prov.get("tracker"):
        _disclose(rd, "tracker_missing: no tracker back-link; history beyond this run cannot be recovered")
    lock = join_path(ev.root, hi["env_lock"]["path"])
    if sums.get(lock) is not None and sums.get(lock) != hi["env_lock"]["sha256"]:
        _disclose(rd, "env_lock_changed: the environment lockfile changed since this run")
    if prov.get("hash_scheme") != SCHEME:
        _disclose(rd, "hash_unverifiable: provenance_hash has no declared scheme and was not recomputed")


def provenance_hash(hash_inputs: dict[str, Any]) -> str:
    """canonical-json-sha256/v1: hash content, not location (paths contain the run id)."""
    projection = {
        "config": hash_inputs["config"]["sha256"],
        "code": {"commit": hash_inputs["code_git_sha"]["commit"], "dirty": hash_inputs["code_git_sha"]["dirty"]},
        "data": {"dataset": hash_inputs["data_hash"]["dataset"], "sha256": hash_inputs["data_hash"]["sha256"]},
        "seed": hash_inputs["seed"],
        "env_lock": hash_inputs["env_lock"]["sha256"],
        "hardware": hash_inputs["hardware"],
    }
    text = json.dumps(projection, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


async def _split_audit(host: Host, ev: Evidence, rd: RunDir, prov: dict[str, Any], problems: Problems) -> None:
    rel = prov["hash_inputs"]["data_hash"].get("split_manifest")
    if rel:
        path = join_path(ev.root, rel)
    elif rd.exp_dir:
        path = posixpath.join(rd.exp_dir, "splits", "split_manifest.json")
    else:
        return
    loaded = await read_json(host, path, "runs", problems, missing_ok=True)
    audit = loaded[0].get("audit") if loaded and isinstance(loaded[0], dict) else None
    if not isinstance(audit, dict):
        return
    if audit.get("intersection_empty") is False:
        _disclose(rd, "split_audit_finding: train/val/test ids overlap")
    if audit.get("disjoint_val") is False:
        _disclose(rd, "split_audit_finding: no disjoint validation split")
    if audit.get("test_used_for_selection") is True:
        _disclose(rd, "split_audit_finding: the test split was used for selection")
    for text in audit.get("findings") or []:
        _disclose(rd, f"split_audit_finding: {text}")
