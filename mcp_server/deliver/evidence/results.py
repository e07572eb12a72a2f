"""The results a row points at are authoritative: read each results.json (through
`selected`), check the EVIDENCE copy against it, and take its value, n and variance.

Also here: the pointer checks (`selected` must resolve under `runs/`, a recorded run id
or results digest must still hold) and the results-only metrics no claim names (they
let a number beside `SSIM` be reported as unbacked instead of misjudged)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from mcp_server.deliver.documents.numbers import decimals_of, fmt, rounds_to, same
from mcp_server.deliver.evidence.layer import Evidence, Row
from mcp_server.deliver.evidence.schema import check
from mcp_server.deliver.evidence.sources import Problems, join_path, read_json, sha256_bytes
from mcp_server.deliver.models import Found, make
from mcp_server.hosts.base import Host
from mcp_server.hosts.files import realpaths


@dataclass
class Entry:
    metric: str
    split: str | None
    value: float
    n: int | None
    variance: float | None
    seeds: int | None


@dataclass
class RunDir:
    """One run directory the evidence reaches, with the rows that read from it."""

    path: str
    exp_dir: str | None
    run_id: str | None
    via_selected: bool
    rows: list[Row] = field(default_factory=list)
    results_digest: str | None = None


@dataclass
class Attached:
    findings: list[Found] = field(default_factory=list)
    runs: dict[str, RunDir] = field(default_factory=dict)


def entries(data: Any) -> dict[tuple[str, str | None], Entry]:
    """results.json in either shape as (metric lower-cased, split) -> Entry."""
    out: dict[tuple[str, str | None], Entry] = {}
    if isinstance(data.get("metrics"), list):
        for e in data["metrics"]:
            out[(e["metric"].lower(), e.get("split"))] = _entry(e["metric"], e.get("split"), e)
        return out
    for metric, splits in data.items():
        if metric in ("exp_id", "run_id") or not isinstance(splits, dict):
            continue
        for split, e in splits.items():
            out[(metric.lower(), split)] = _entry(metric, split, e)
    return out


def _entry(metric: str, split: str | None, e: dict[str, Any]) -> Entry:
    var = e.get("variance") or {}
    return Entry(metric, split, float(e["value"]), e.get("n"), var.get("value"), var.get("seeds"))


def lookup(table: dict[tuple[str, str | None], Entry], metric: str, split: str | None) -> Entry | None:
    """The entry for (metric, split); without a split, the only one, else the test one."""
    key = metric.lower()
    if split is not None:
        return table.get((key, split))
    found = sorted((k[1] or "", e) for k, e in table.items() if k[0] == key)
    if len(found) == 1:
        return found[0][1]
    return next((e for s, e in found if s == "test"), None)


async def attach(host: Host, ev: Evidence, problems: Problems) -> Attached:
    """Read every results.json the rows name and make its values authoritative."""
    out = Attached()
    rows = [r for r in ev.rows if r.results_json]
    files = {r.id: join_path(ev.root, r.results_json or "") for r in rows}
    probe = {posixpath.dirname(f) for f in files.values()}
    probe |= {e for e in (_exp_dir(f) for f in files.values()) if e is not None}
    real = await realpaths(host, sorted(probe)) if probe else {}
    cache: dict[str, tuple[Any, bytes] | None] = {}
    for row in rows:
        path = files[row.id]
        run_dir = real.get(posixpath.dirname(path), posixpath.dirname(path))
        rd = _run_dir(out, run_dir, path, real, ev.root)
        rd.rows.append(row)
        row.resolved_run_id = rd.run_id
        target = posixpath.join(run_dir, posixpath.basename(path))
        if target not in cache:
            cache[target] = await _read_results(host, target, row, problems)
        loaded = cache[target]
        if loaded is None:
            _missing(row, target, problems, cache)
            continue
        data, raw = loaded
        rd.results_digest = sha256_bytes(raw)
        _pins(out, ev, row, rd)
        _apply(out, ev, row, entries(data), target)
    _pseudo_rows(ev, out, cache)
    return out


def _exp_dir(results_path: str) -> str | None:
    parts = results_path.split("/")
    return "/".join(parts[: parts.index("selected")]) if "selected" in parts else None


def _run_dir(out: Attached, run_dir: str, path: str, real: dict[str, str], root: str) -> RunDir:
    rd = out.runs.get(run_dir)
    if rd is None:
        parent = posixpath.dirname(run_dir)
        exp = _exp_dir(path)
        under_runs = parent.endswith("/runs")
        exp_dir = posixpath.dirname(parent) if under_runs else (real.get(exp, exp) if exp else None)
        rd = RunDir(run_dir, exp_dir, posixpath.basename(run_dir) if under_runs else None, exp is not None)
        out.runs[run_dir] = rd
        if exp is not None and parent != real.get(exp, exp) + "/runs":
            shown = posixpath.relpath(exp, root) if exp.startswith(root + "/") else exp
            rd.run_id = None
            out.findings.append(make(
                "evidence_out_of_date", kind="selected_outside_runs", file=posixpath.join(shown, "selected"),
                note=f"`selected` resolves to {run_dir}, not to a run under {real.get(exp, exp)}/runs/: the pointer "
                     "no longer names an append-only run", exp_id=posixpath.basename(exp)))
    return rd


async def _read_results(host: Host, target: str, row: Row, problems: Problems) -> tuple[Any, bytes] | None:
    concrete = row.run not in (None, "selected")
    loaded = await read_json(host, target, "results", problems, missing_ok=concrete)
    if loaded is None:
        return None
    errs = check("results", loaded[0])
    if errs:
        for e in errs[:5]:
            problems.add("results", target, "schema", f"{e.json_path}: {e.message}", json_path=e.json_path,
                         expected=e.expected, next_step="fix results.json; rows reading it are judged against EVIDENCE")
        return None
    return loaded


def _missing(row: Row, target: str, problems: Problems, cache: dict[str, Any]) -> None:
    if row.run not in (None, "selected") and not any(p.path == target for p in problems.items):
        row.disclose(f"run_offloaded: run {row.run} is not on disk (light tier); the EVIDENCE copy was used")
    else:
        row.disclose("evidence_source_missing: results.json could not be read; the EVIDENCE copy was used")


def _pins(out: Attached, ev: Evidence, row: Row, rd: RunDir) -> None:
    where = _row_place(ev, row)
    if row.run_id_pin and rd.run_id and row.run_id_pin != rd.run_id:
        out.findings.append(make("evidence_out_of_date", kind="selected_repointed", **where,
                                 note=f"recorded run {row.run_id_pin}, `selected` now points at {rd.run_id}"))
    if row.results_sha256 and rd.results_digest and row.results_sha256 != rd.results_digest:
        out.findings.append(make("evidence_out_of_date", kind="run_modified", **where,
                                 note=f"results.json digest {rd.results_digest} differs from the recorded "
                                      f"{row.results_sha256}: the run was changed after it was recorded"))


def _apply(out: Attached, ev: Evidence, row: Row, table: dict[tuple[str, str | None], Entry], target: str) -> None:
    entry = lookup(table, row.metric, row.split)
    where = _row_place(ev, row)
    if entry is None:
        out.findings.append(make("evidence_out_of_date", kind="metric_missing_from_results", **where,
                                 note=f"{_rel(ev, target)} has no entry for ({row.metric}, {row.split}); "
                                      "documents were judged against the EVIDENCE copy"))
        return
    value = entry.value
    if (row.unit == "percent" and not _copy_ok(row.evidence_value, row.evidence_decimals, value)
            and _copy_ok(row.evidence_value / 100, row.evidence_decimals + 2, value)):
        value = value * 100
    for part, copy, truth, ok in _parts(row, entry, value):
        if not ok:
            out.findings.append(make("evidence_out_of_date", kind="evidence_value_mismatch", **where,
                                     reported=copy, evidence_value=truth,
                                     note=f"EVIDENCE {part} {fmt(copy)} != {fmt(truth)} in {_rel(ev, target)} "
                                          "(the results are authoritative)"))
    row.value, row.value_text, row.value_source = value, fmt(value), "results.json"
    row.n = entry.n if entry.n is not None else row.n
    row.variance = entry.variance if entry.variance is not None else row.variance
    row.seeds = entry.seeds if entry.seeds is not None else row.seeds


def _row_place(ev: Evidence, row: Row) -> dict[str, Any]:
    """Where a row-level finding points: the row and its place in EVIDENCE.json."""
    return {"claim_id": row.claim_id, "exp_id": row.exp_id, "metric": row.metric, "split": row.split,
            "file": _rel(ev, ev.path), "json_path": row.json_path}


def _copy_ok(copy: float, decimals: int, truth: float) -> bool:
    return same(copy, truth) or rounds_to(copy, decimals, truth)


def _parts(row: Row, e: Entry, value: float) -> list[tuple[str, float, float, bool]]:
    parts = [("value", row.evidence_value, value, _copy_ok(row.evidence_value, row.evidence_decimals, value))]
    if row.evidence_n is not None and e.n is not None:
        parts.append(("n", row.evidence_n, e.n, row.evidence_n == e.n))
    if row.evidence_variance is not None and e.variance is not None:
        d = decimals_of(row.evidence_variance)
        parts.append(("variance", row.evidence_variance, e.variance, _copy_ok(row.evidence_variance, d, e.variance)))
    if row.evidence_seeds is not None and e.seeds is not None:
        parts.append(("seeds", row.evidence_seeds, e.seeds, row.evidence_seeds == e.seeds))
    return parts


def _pseudo_rows(ev: Evidence, out: Attached, cache: dict[str, tuple[Any, bytes] | None]) -> None:
    """Results entries that no evidence row names, as rows documents can be matched to."""
    for target, loaded in sorted(cache.items()):
        if loaded is None:
            continue
        rd = out.runs.get(posixpath.dirname(target))
        exp = rd.rows[0].exp_id if rd and rd.rows else None
        named = {(r.metric.lower(), r.split) for r in (rd.rows if rd else [])}
        for (metric, split), e in sorted(entries(loaded[0]).items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
            if (metric, split) in named or (metric, None) in named:
                continue
            ev.pseudo.append(Row(
                id=len(ev.rows) + len(ev.pseudo), claim=None, json_path=target, exp_id=exp, run=None,
                metric=e.metric, split=split, unit=None, evidence_value=e.value, evidence_decimals=0,
                evidence_n=None, evidence_variance=None, evidence_seeds=None, value=e.value, value_text=fmt(e.value),
                value_source="results.json", aliases=[exp] if exp else [], pseudo=True))


def _rel(ev: Evidence, path: str) -> str:
    return posixpath.relpath(path, ev.root) if path.startswith(ev.root + "/") else path
