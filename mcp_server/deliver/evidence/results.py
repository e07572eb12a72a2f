"""The results a row points at are authoritative: read each results file (through
`selected`, in a run capsule, in any accepted shape), check the EVIDENCE copy against it,
and take its value, n and variance.

Also here: the pointer checks (a `selected` link must resolve under `runs/`, a recorded run
id or results digest must still hold), the legacy-layout note, and the results-only
metrics no claim names (they let a number beside `SSIM` be reported as unbacked instead
of misjudged)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from mcp_server.deliver.documents.numbers import decimals_of, fmt, rounds_to, same
from mcp_server.deliver.evidence.layer import Evidence, Row
from mcp_server.deliver.evidence.layout import Layout, Place, place, probes
from mcp_server.deliver.evidence.results_file import MetricEntry, ResultsFile, lookup, read_results
from mcp_server.deliver.evidence.schema import check
from mcp_server.deliver.evidence.sources import Problems, join_path, read_json, sha256_bytes
from mcp_server.deliver.models import Found, make
from mcp_server.hosts.base import Host
from mcp_server.hosts.files import realpaths

Loaded = tuple[ResultsFile, bytes]


@dataclass
class RunDir:
    """One run directory the evidence reaches, with the rows that read from it."""

    path: str
    exp_dir: str | None
    run_id: str | None
    layout: Layout = "other"
    rows: list[Row] = field(default_factory=list)


@dataclass
class Attached:
    findings: list[Found] = field(default_factory=list)
    runs: dict[str, RunDir] = field(default_factory=dict)


async def attach(host: Host, ev: Evidence, problems: Problems) -> Attached:
    """Read every results file the rows name and make its values authoritative."""
    out = Attached()
    rows = [r for r in ev.rows if r.results_json]
    files = {r.id: join_path(ev.root, r.results_json or "") for r in rows}
    wanted = sorted({p for f in files.values() for p in probes(f)})
    real = await realpaths(host, wanted) if wanted else {}
    cache: dict[str, Loaded | None] = {}
    readers: dict[str, list[Row]] = {}
    for row in rows:
        path = files[row.id]
        at = place(path, real, ev.root)
        rd = _run_dir(out, at, ev.root)
        rd.rows.append(row)
        row.resolved_run_id = rd.run_id
        target = posixpath.join(real.get(posixpath.dirname(path), posixpath.dirname(path)), posixpath.basename(path))
        readers.setdefault(target, []).append(row)
        if target not in cache:
            cache[target] = await _read_results(host, target, row, problems)
        loaded = cache[target]
        if loaded is None:
            _missing(row, target, problems, cache)
            continue
        results, raw = loaded
        _pins(out, ev, row, rd, sha256_bytes(raw))
        _apply(out, ev, row, results.table(), target)
    _pseudo_rows(ev, cache, readers)
    return out


def _run_dir(out: Attached, at: Place, root: str) -> RunDir:
    rd = out.runs.get(at.run_dir)
    if rd is not None:
        return rd
    rd = RunDir(at.run_dir, at.exp_dir, at.run_id, at.layout)
    out.runs[at.run_dir] = rd
    if at.selected is None:
        return rd
    shown = _rel_to(root, at.selected)
    exp_id = posixpath.basename(posixpath.dirname(at.selected))
    if at.outside_runs:
        out.findings.append(make(
            "evidence_out_of_date", kind="selected_outside_runs", file=shown, exp_id=exp_id,
            note=f"`selected` resolves to {at.run_dir}, not to a run under {at.exp_dir}/runs/: the pointer no longer "
                 "names an append-only run"))
    elif at.layout == "selected_link":
        out.findings.append(make(
            "legacy_layout", kind="selected_symlink", file=shown, exp_id=exp_id,
            note=f"`selected` is a symlink to runs/{at.run_id}: the legacy layout, still read. Current guidance "
                 "records the chosen run by id (EVIDENCE rows naming runs/<run-id>/ or a plain selected/ copy) "
                 "instead of re-pointing a link"))
    return rd


def _rel_to(root: str, path: str) -> str:
    return posixpath.relpath(path, root) if path.startswith(root + "/") else path


async def _read_results(host: Host, target: str, row: Row, problems: Problems) -> Loaded | None:
    concrete = row.run not in (None, "selected")
    loaded = await read_json(host, target, "results", problems, missing_ok=concrete)
    if loaded is None:
        return None
    errs = check("results", loaded[0])
    if errs:
        for e in errs[:5]:
            problems.add("results", target, "schema", f"{e.json_path}: {e.message}", json_path=e.json_path,
                         expected=e.expected, next_step="fix the results file; rows reading it are judged against "
                                                        "EVIDENCE")
        return None
    return read_results(loaded[0]), loaded[1]


def _missing(row: Row, target: str, problems: Problems, cache: dict[str, Any]) -> None:
    if row.run not in (None, "selected") and not any(p.path == target for p in problems.items):
        row.disclose(f"run_offloaded: run {row.run} is not on disk (light tier); the EVIDENCE copy was used")
    else:
        row.disclose("evidence_source_missing: results.json could not be read; the EVIDENCE copy was used")


def _pins(out: Attached, ev: Evidence, row: Row, rd: RunDir, digest: str) -> None:
    where = _row_place(ev, row)
    if row.run_id_pin and rd.run_id and row.run_id_pin != rd.run_id:
        now = "`selected` now points at" if rd.layout == "selected_link" else "the row now reads"
        out.findings.append(make("evidence_out_of_date", kind="selected_repointed", **where,
                                 note=f"recorded run {row.run_id_pin}, {now} {rd.run_id}"))
    if row.results_sha256 and row.results_sha256 != digest:
        out.findings.append(make("evidence_out_of_date", kind="run_modified", **where,
                                 note=f"results.json digest {digest} differs from the recorded "
                                      f"{row.results_sha256}: the run was changed after it was recorded"))


def _apply(out: Attached, ev: Evidence, row: Row, table: dict[tuple[str, str | None], MetricEntry],
           target: str) -> None:
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


def _parts(row: Row, e: MetricEntry, value: float) -> list[tuple[str, float, float, bool]]:
    parts = [("value", row.evidence_value, value, _copy_ok(row.evidence_value, row.evidence_decimals, value))]
    if row.evidence_n is not None and e.n is not None:
        parts.append(("n", row.evidence_n, e.n, row.evidence_n == e.n))
    if row.evidence_variance is not None and e.variance is not None:
        d = decimals_of(row.evidence_variance)
        parts.append(("variance", row.evidence_variance, e.variance, _copy_ok(row.evidence_variance, d, e.variance)))
    if row.evidence_seeds is not None and e.seeds is not None:
        parts.append(("seeds", row.evidence_seeds, e.seeds, row.evidence_seeds == e.seeds))
    return parts


def _pseudo_rows(ev: Evidence, cache: dict[str, Loaded | None], readers: dict[str, list[Row]]) -> None:
    """Results entries that no evidence row names, as rows documents can be matched to;
    they go by the names of the rows reading the same file (its experiment id, else aliases)."""
    for target, loaded in sorted(cache.items()):
        if loaded is None:
            continue
        mine = readers.get(target, [])
        exp = next((r.exp_id for r in mine if r.exp_id), None)
        names = [exp] if exp else sorted({a for r in mine for a in r.aliases})
        named = {(r.metric.lower(), r.split) for r in mine}
        for (metric, split), e in sorted(loaded[0].table().items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
            if (metric, split) in named or (metric, None) in named or (split is None and any(
                    m == metric for m, _ in named)):
                continue
            ev.pseudo.append(Row(
                id=len(ev.rows) + len(ev.pseudo), claim=None, json_path=target, exp_id=exp, run=None,
                metric=e.metric, split=split, unit=None, evidence_value=e.value, evidence_decimals=0,
                evidence_n=None, evidence_variance=None, evidence_seeds=None, value=e.value, value_text=fmt(e.value),
                value_source="results.json", aliases=names, pseudo=True))


def _rel(ev: Evidence, path: str) -> str:
    return posixpath.relpath(path, ev.root) if path.startswith(ev.root + "/") else path
