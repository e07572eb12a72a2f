"""Figures: each `figures/<name>/` folder against its `<name>.provenance` sidecar.

A figure is stale (blocking) when what it was drawn from moved on: a pinned run or
results digest no longer holds, a source results.json is gone, the source data digest
changed, or (without pins) the current value is not in source_data.csv. Orphans, one-way
bindings, a missing pixel check and a missing caveat are disclosed. Nothing is rebuilt:
`build` is arbitrary code, so the report only quotes it as the rebuild hint."""

from __future__ import annotations

import csv
import io
import posixpath
from typing import Any, Literal

from mcp_server.deliver.documents.numbers import parse_text, rounds_to, same
from mcp_server.deliver.evidence.layer import Evidence
from mcp_server.deliver.evidence.layout import place, probes
from mcp_server.deliver.evidence.results_file import lookup, read_results
from mcp_server.deliver.evidence.schema import check, load_json
from mcp_server.deliver.evidence.sources import Problems, join_path, read_file, read_json, sha256_bytes
from mcp_server.deliver.models import FigureStatus, Found, make
from mcp_server.errors import RgtError
from mcp_server.hosts.base import Host
from mcp_server.hosts.files import digests, list_files, realpaths

Status = Literal["fresh", "stale", "unknown"]


async def check_figures(host: Host, ev: Evidence, problems: Problems) -> tuple[list[Found], list[FigureStatus]]:
    """Findings and a fresh/stale/unknown status for every figure folder."""
    root = posixpath.join(ev.root, "figures")
    try:
        files = await list_files(host, root, "*", max_files=20000)
    except RgtError as exc:
        problems.from_error("figure", root, exc)
        return [], []
    folders: dict[str, list[str]] = {}
    for f in files:
        parts = posixpath.relpath(f, root).split("/")
        if len(parts) >= 2:
            folders.setdefault(parts[0], []).append(f)
    named = {fig for c in ev.claims for fig in c.figures}
    findings: list[Found] = []
    status: list[FigureStatus] = []
    for name in sorted(folders):
        got, st = await _one(host, ev, name, folders[name], problems)
        findings += got
        status.append(FigureStatus(figure=f"figures/{name}", status=st))
    for fig in sorted(named - {f"figures/{n}" for n in folders}):
        findings.append(make("figure_disclosure", kind="figure_missing", file=fig,
                             note="a claim names this figure folder, but it does not exist"))
    return findings, status


async def _one(host: Host, ev: Evidence, name: str, files: list[str], problems: Problems) -> tuple[list[Found], Status]:
    fig = f"figures/{name}"
    side = next((f for f in files if f.endswith(f"/{name}.provenance")), None) or next(
        (f for f in files if f.endswith(".provenance")), None)
    if side is None:
        return [make("figure_disclosure", kind="figure_orphan", file=fig, note="no .provenance sidecar")], "unknown"
    loaded = await read_json(host, side, "figure", problems)
    if loaded is None:
        return [], "unknown"
    errs = check("figure", loaded[0])
    for e in errs[:5]:
        problems.add("figure", side, "schema", f"{e.json_path}: {e.message}", json_path=e.json_path,
                     expected=e.expected)
    if errs:
        return [], "unknown"
    sc: dict[str, Any] = loaded[0]
    rel = posixpath.relpath(side, ev.root)
    out = _bindings(ev, fig, rel, sc) + await _rendered(host, ev, fig, rel, sc)
    stale = await _sources(host, ev, fig, rel, sc, problems)
    return out + stale, "stale" if stale else "fresh"


def _bindings(ev: Evidence, fig: str, rel: str, sc: dict[str, Any]) -> list[Found]:
    out: list[Found] = []
    claims = {c.id: c for c in ev.claims}
    listed = list(sc["supports_claims"])
    for cid in listed:
        c = claims.get(cid)
        if c is None:
            out.append(make("figure_disclosure", kind="figure_orphan", file=rel, claim_id=cid,
                            note=f"supports_claims names {cid}, which is not in EVIDENCE.json"))
        elif fig not in c.figures:
            out.append(make("figure_disclosure", kind="binding_one_way", file=rel, claim_id=cid,
                            note=f"the sidecar lists {cid}, but no row of {cid} names figure {fig}"))
    for c in ev.claims:
        if fig in c.figures and c.id not in listed:
            out.append(make("figure_disclosure", kind="binding_one_way", file=rel, claim_id=c.id,
                            note=f"{c.id} names figure {fig}, but its sidecar does not list {c.id}"))
    pixel = sc.get("pixel_check")
    if not pixel or not pixel.get("passed"):
        out.append(make("figure_disclosure", kind="pixel_check_missing", file=rel,
                        note="the rendered figure was not re-opened and checked" if not pixel else
                        f"pixel check failed: {pixel.get('notes') or 'no notes'}"))
    caveats = [claims[c].disclosure for c in listed if c in claims and claims[c].disclosure]
    if caveats and not (sc.get("disclosure") or "").strip():
        first = next(c for c in listed if c in claims and claims[c].disclosure)
        out.append(make("disclosure_missing", file=rel, claim_id=first,
                        note="the figure supports a claim with a caveat, but its sidecar disclosure is empty: "
                             f"{caveats[0]}"))
    return out


async def _rendered(host: Host, ev: Evidence, fig: str, rel: str, sc: dict[str, Any]) -> list[Found]:
    missing = [r for r in sc.get("rendered") or [] if await host.stat(join_path(join_path(ev.root, fig), r)) is None]
    if not missing:
        return []
    return [make("figure_disclosure", kind="figure_not_rendered", file=rel,
                 note="rendered files absent: " + ", ".join(missing[:5]))]


async def _sources(host: Host, ev: Evidence, fig: str, rel: str, sc: dict[str, Any], problems: Problems) -> list[Found]:
    hint = f"rebuild: cd {fig} && {sc['build']}" if sc.get("build") else "rebuild the figure from its results"
    src_path = join_path(join_path(ev.root, fig), sc["source_data"]) if sc.get("source_data") else None
    src_text = await _text(host, src_path) if src_path else None
    out: list[Found] = []
    if sc.get("source_data_sha256") and src_path:
        try:
            got = (await digests(host, [src_path])).get(src_path)
        except RgtError as exc:
            problems.from_error("figure", rel, exc)
            got = sc["source_data_sha256"]
        if got != sc["source_data_sha256"]:
            out.append(_stale(rel, "source_data_changed", f"source_data digest {got or 'missing'} != recorded "
                                                          f"{sc['source_data_sha256']}; {hint}"))
    for i, entry in enumerate(sc["built_from"]):
        out += await _entry(host, ev, rel, i, entry, src_text, hint)
    return out


async def _entry(host: Host, ev: Evidence, rel: str, i: int, b: dict[str, Any], src: str | None,
                 hint: str) -> list[Found]:
    path = join_path(ev.root, b["results_json"])
    real = await realpaths(host, probes(path))
    real_dir = real[posixpath.dirname(path)]
    jp = f"$.built_from[{i}]"
    try:
        raw = await read_file(host, posixpath.join(real_dir, posixpath.basename(path)), 16 * 1024 * 1024)
    except RgtError:
        return [_stale(rel, "results_missing", f"{b['results_json']} no longer exists; {hint}", jp)]
    out: list[Found] = []
    # A plain copy (or a folder outside any runs/) names no run: nothing to compare the pin with.
    at = place(path, real, ev.root)
    run_now = at.run_id or (posixpath.basename(at.run_dir) if at.layout == "selected_link" else None)
    if b.get("run_id") and run_now and b["run_id"] != run_now:
        out.append(_stale(rel, "run_changed", f"built from run {b['run_id']}, {b['results_json']} now resolves to "
                                              f"{run_now}; {hint}", jp))
    if b.get("results_sha256") and b["results_sha256"] != sha256_bytes(raw):
        out.append(_stale(rel, "results_changed", f"{b['results_json']} digest changed since the build; {hint}", jp))
    try:
        data = load_json(raw.decode("utf-8-sig"))
    except ValueError:
        return out
    if not isinstance(data, dict) or check("results", data):
        return out
    table = read_results(data).table()
    e = lookup(table, b["metric"], b.get("split"))
    if e is not None and src is not None and not _in_source(src, e.value, b.get("exp_id")):
        out.append(_stale(rel, "value_missing", f"current {b['metric']} {e.value:g} of {b.get('exp_id') or 'its run'} "
                                                f"is not in source_data; {hint}", jp))
    return out


def _in_source(text: str, value: float, exp_id: str | None) -> bool:
    """Is the value printed in source_data (in the rows naming exp_id, when there are any)?"""
    rows = list(csv.reader(io.StringIO(text)))
    mine = [r for r in rows if exp_id and any(c.strip() == exp_id for c in r)]
    for row in mine or rows:
        for cell in row:
            p = parse_text(cell)
            if p is not None and (same(p.value, value) or rounds_to(p.value, p.decimals, value)):
                return True
    return False


async def _text(host: Host, path: str) -> str | None:
    try:
        return (await read_file(host, path, 16 * 1024 * 1024)).decode("utf-8", errors="replace")
    except RgtError:
        return None


def _stale(rel: str, kind: str, note: str, json_path: str | None = None) -> Found:
    return make("figure_stale", kind=kind, file=rel, note=note, json_path=json_path)
