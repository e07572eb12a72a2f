"""reconcile_evidence: every number in the documents against EVIDENCE.json and the
results it points to; optionally render what the documents should include instead.

Passes: load and validate the evidence; make results.json authoritative; check runs and
figures; read the documents; extract, attribute and judge each number; claim-level gate
checks; render; report (recorded in the ledger). A bad input becomes one problem entry and
the rest of the report is still produced."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import posixpath
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from mcp_server.deliver.documents.macros import MacroDef, definitions, uses
from mcp_server.deliver.documents.tables import find_tables
from mcp_server.deliver.documents.text import Document
from mcp_server.deliver.evidence.figures import check_figures
from mcp_server.deliver.evidence.layer import Evidence, build, derived_disclosures
from mcp_server.deliver.evidence.results import attach
from mcp_server.deliver.evidence.runs import check_runs
from mcp_server.deliver.evidence.sources import (
    MAX_DOC_BYTES,
    Problems,
    absolute,
    expand,
    gather_bounded,
    join_path,
    read_file,
    read_json,
    sha256_bytes,
)
from mcp_server.deliver.matching.gate import Blocks, claim_findings, disclosure_findings, records
from mcp_server.deliver.matching.judge import Judge
from mcp_server.deliver.matching.match import build_indexes, doc_mentions
from mcp_server.deliver.models import FigureStatus, Found, NumberRecord, ReconcileReport, RenderedFile
from mcp_server.deliver.render.report import DEFAULT_LIMIT, assemble
from mcp_server.deliver.render.tables import macro_names, render
from mcp_server.errors import RgtError
from mcp_server.hosts.base import Host
from mcp_server.hosts.files import write_file
from mcp_server.ledger import Ledger
from mcp_server.paths import policy
from mcp_server.paths.refusal import PathRefused, refused
from mcp_server.progress import Counter, Report

log = logging.getLogger(__name__)
Mode = Literal["precision", "strict"]
_INLINE_RENDER = 64 * 1024


@dataclass
class Scan:
    findings: list[Found] = field(default_factory=list)
    numbers: list[NumberRecord] = field(default_factory=list)
    seen: int = 0
    mentions: int = 0
    matches: int = 0
    match_findings: Callable[[], list[Found]] = list


async def reconcile(
    host: Host, evidence: str, documents: list[str], *, mode: Mode = "precision", do_render: bool = False,
    render_dir: str | None = None, view: Literal["findings", "numbers"] = "findings", offset: int = 0,
    limit: int = DEFAULT_LIMIT, include_matches: bool = False, runs: bool = True, figures: bool = True,
    ledger: Ledger | None = None, progress: Report | None = None,
) -> ReconcileReport:
    """Reconcile `documents` (files, directories, globs) against `evidence` on `host`; `progress`
    hears each document read (of the total), then the scan."""
    problems = Problems()
    scope = policy.anywhere(host)
    ev_path = await _locate(host, absolute(host, evidence))
    # Through the path policy, resolved once on the box, so every path derived from it is absolute
    # and real (`~/` expanded, a symlinked project folder followed) and `selected` can be compared.
    ev_path = await policy.confine(host, "read", ev_path, scope, what="evidence", done="nothing was read")
    root = posixpath.dirname(ev_path)
    ev = await _load(host, ev_path, root, problems)
    findings: list[Found] = []
    fig_status: list[FigureStatus] = []
    if ev is not None:
        attached = await attach(host, ev, problems)
        findings += attached.findings
        if runs:
            findings += await check_runs(host, ev, attached.runs, problems)
        for row in ev.rows:
            derived_disclosures(row)
    paths = await _allowed(host, root, await expand(host, root, documents, problems), scope, problems)
    read = Counter(progress, len(paths) + 1, "documents read")
    docs = await _read_docs(host, root, paths, problems, read)
    scan = Scan()
    if ev is not None:
        scan = await asyncio.to_thread(_scan, ev, docs, mode == "strict")
        findings += scan.findings
        if figures:
            got, fig_status = await check_figures(host, ev, problems)
            findings += got
    await read.finished("numbers checked")
    rendered = await _render(host, ev, root, render_dir, problems) if do_render and ev is not None else []
    if include_matches:
        findings += scan.match_findings()
    report = assemble(
        findings, scan.numbers, problems.items, fig_status, rendered, documents=len(docs), numbers_seen=scan.seen,
        mentions=scan.mentions, claims=len(ev.claims) if ev else 0, rows=len(ev.rows) if ev else 0,
        evidence=ev_path, view=view, offset=offset, limit=limit,
        uncounted_matches=0 if include_matches else scan.matches)
    if ledger is not None:
        _record(ledger, host, report, mode)
    return report


def reconcile_texts(evidence: object, documents: dict[str, bytes | str], *, mode: Mode = "precision",
                    view: Literal["findings", "numbers"] = "findings", limit: int = 1000,
                    include_matches: bool = True) -> ReconcileReport:
    """Reconcile in memory: parsed EVIDENCE.json data against named document texts. No
    results.json, runs or figures are read (the EVIDENCE copies are the values)."""
    problems = Problems()
    ev = build(evidence, "EVIDENCE.json", "", problems)
    docs = [Document.from_bytes(name, text.encode("utf-8") if isinstance(text, str) else text)
            for name, text in documents.items()]
    scan = Scan()
    if ev is not None:
        for row in ev.rows:
            derived_disclosures(row)
        scan = _scan(ev, docs, mode == "strict")
    findings = scan.findings + (scan.match_findings() if include_matches else [])
    return assemble(findings, scan.numbers, problems.items, [], [], documents=len(docs), numbers_seen=scan.seen,
                    mentions=scan.mentions, claims=len(ev.claims) if ev else 0, rows=len(ev.rows) if ev else 0,
                    evidence=None, view=view, offset=0, limit=limit,
                    uncounted_matches=0 if include_matches else scan.matches)


async def _locate(host: Host, path: str) -> str:
    """EVIDENCE.json itself, or the project folder holding it."""
    if path.endswith(".json") or await host.stat(path) is not None:
        return path
    return posixpath.join(path.rstrip("/"), "EVIDENCE.json")


async def _load(host: Host, path: str, root: str, problems: Problems) -> Evidence | None:
    loaded = await read_json(host, path, "evidence", problems)
    if loaded is None:
        for p in problems.items:
            if p.input == "evidence" and p.code == "not_found":
                p.message = "evidence not found: " + p.message
                p.next_step = "pass the path of EVIDENCE.json (or of the folder holding it)"
        return None
    return build(loaded[0], path, root, problems)


def _shown(root: str, path: str) -> str:
    return posixpath.relpath(path, root) if path.startswith(root + "/") else path


async def _allowed(host: Host, root: str, paths: list[str], scope: policy.Scope,
                   problems: Problems) -> list[tuple[str, str]]:
    """The documents the path policy lets this call read, each as (named, resolved) in one round
    trip; a refused one is a problem naming the rule (the others are still reconciled)."""
    if not paths:
        return []
    out = []
    checked = await policy.check_paths(host, "read", paths, scope, what="documents",
                                       done="that document was not read; the others were")
    for p, got in zip(paths, checked, strict=True):
        if isinstance(got, PathRefused):
            problems.add("document", _shown(root, p), "path_policy", got.message, next_step=got.next_step)
        else:
            out.append((p, got))
    return out


async def _read_docs(host: Host, root: str, paths: list[tuple[str, str]], problems: Problems,
                     read: Counter) -> list[Document]:
    """Every readable document (by its resolved path, named as given), in order; `read` hears
    each one finish."""

    async def one(p: tuple[str, str]) -> Document | None:
        try:
            return await _read_doc(host, root, p, problems)
        finally:
            await read.finished(p[0])

    return [d for d in await gather_bounded(paths, one) if d is not None]


async def _read_doc(host: Host, root: str, named: tuple[str, str], problems: Problems) -> Document | None:
    path, real = named
    shown = _shown(root, path)
    try:
        data = await read_file(host, real, MAX_DOC_BYTES)
    except RgtError as exc:
        problems.from_error("document", shown, exc, next_step="fix or drop this document; the others were reconciled")
        return None
    if b"\x00" in data[:8192]:
        problems.add("document", shown, "binary", "binary file (NUL bytes), not a text document",
                     expected="Markdown, LaTeX, plain text or CSV", next_step="drop it from documents")
        return None
    return Document.from_bytes(shown, data)


_gc_lock = threading.Lock()
_gc_users = 0
_gc_saved: tuple[int, int, int] = gc.get_threshold()


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """A scan makes hundreds of thousands of small objects that all live until the report
    is built; the default young-generation threshold re-scans them thousands of times
    (about a fifth of the run). Collect less often while any scan runs, then restore."""
    global _gc_users, _gc_saved
    with _gc_lock:
        if _gc_users == 0:
            _gc_saved = gc.get_threshold()
            gc.set_threshold(max(_gc_saved[0], 50_000), *_gc_saved[1:])
        _gc_users += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_users -= 1
            if _gc_users == 0:
                gc.set_threshold(*_gc_saved)


def _scan(ev: Evidence, docs: list[Document], strict: bool) -> Scan:
    """CPU part: extract, attribute, judge; then the claim-level checks and records."""
    with _fewer_collections():
        return _scan_all(ev, docs, strict)


def _scan_all(ev: Evidence, docs: list[Document], strict: bool) -> Scan:
    out = Scan()
    bound = macro_names(ev)
    defs = {d.path: definitions(d) for d in docs}
    table: dict[str, MacroDef] = {m.name: m for ds in defs.values() for m in ds}
    idx = build_indexes(ev, bound)
    judge = Judge(idx.rows, strict)
    blocks: dict[str, Blocks] = {}
    for doc in docs:
        tables = find_tables(doc, (lambda text: uses(text, table)) if table else None)
        blocks[doc.path] = Blocks(doc, tables)
        mentions, seen = doc_mentions(doc, tables, table, idx, defs[doc.path])
        out.seen += seen
        out.mentions += len(mentions)
        for m in mentions:
            out.findings += judge.mention(m)
    out.findings += disclosure_findings(judge.attributed, blocks)
    out.findings += claim_findings(ev, judge.attributed, scanned=bool(docs))
    names = {rid: "\\" + name for name, (rid, part) in bound.items() if part == "value"}
    out.numbers = records(ev, judge.attributed, names)
    out.matches = len(judge.matched)
    out.match_findings = judge.match_findings
    return out


async def _render_folder(host: Host, root: str, render_dir: str) -> tuple[str, policy.Scope]:
    """render_dir as a folder really under the evidence folder, through the path policy: relative,
    no `..`, and no symlink on the box leading it elsewhere (nor into the server's own folders)."""
    scope = policy.Scope((root,), "the EVIDENCE.json folder", this_machine=host.kind == "local")
    parts = posixpath.normpath(render_dir).split("/")
    if render_dir.startswith(("/", "~")) or ".." in parts or "\0" in render_dir:
        raise refused("render_dir", "outside", "must be a folder inside the EVIDENCE.json folder: a relative path "
                      "without '..', e.g. 'generated'", host=host.name, done="nothing was written",
                      next_step="pass render_dir relative to the EVIDENCE.json folder")
    folder = await policy.confine(host, "write", join_path(root, render_dir), scope, what="render_dir",
                                  done="nothing was written")
    return folder, scope


async def _render(host: Host, ev: Evidence, root: str, render_dir: str | None,
                  problems: Problems) -> list[RenderedFile]:
    out: list[RenderedFile] = []
    folder, scope = await _render_folder(host, root, render_dir) if render_dir is not None else (None, None)
    made = render(ev)
    if folder is not None and scope is not None:  # each file and its temporary, through no planted symlink
        targets = [posixpath.join(folder, r.name + tail) for r in made for tail in ("", ".rgt-tmp")]
        for got in await policy.check_paths(host, "write", targets, scope, what="render_dir",
                                            done="nothing was written"):
            if isinstance(got, PathRefused):
                raise got
    for r in made:
        data = r.text.encode("utf-8")
        item = RenderedFile(name=r.name, sha256=sha256_bytes(data), bytes=len(data))
        if render_dir is None:
            item.content = r.text if len(data) <= _INLINE_RENDER else None
            if item.content is None:
                problems.add("render", r.name, "too_large", f"{len(data)} bytes: too large to return inline",
                             next_step="pass render_dir to write the generated files instead")
        else:
            target = posixpath.join(folder or root, r.name)
            try:
                await write_file(host, target, data)
                item.path = target
            except RgtError as exc:
                problems.from_error("render", target, exc)
        out.append(item)
    return out


def _record(ledger: Ledger, host: Host, report: ReconcileReport, mode: str) -> None:
    s = report.summary
    ledger.record(
        "reconcile", host=host.name,
        summary=f"{'clean' if s.clean else 'not clean'}: {s.blocking} blocking, {s.disclose} to disclose, "
                f"{s.documents} documents, {s.problems} input problems",
        data={"evidence": report.evidence, "clean": s.clean, "counts": s.counts, "documents": s.documents,
              "mentions": s.mentions, "problems": [p.model_dump(exclude_none=True) for p in report.problems[:20]],
              "mode": mode},
    )
