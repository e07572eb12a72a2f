"""aggregate_results: collect the finished cells of a sweep from scratch to the durable root.

A cell is a directory the `cells` glob matches under the source root (the box's scratch root
by default); it is finished when it holds the marker file (`DONE` by default: have each cell's
command end with `&& touch <cell>/DONE`, or name a file the job writes only at the end). Each
finished cell's files are copied to `<durable_root>/results/<name>/<cell>/`, each verified by
size and sha256 on the box (scripts/job_aggregate.sh). Nothing is deleted, and a file already
at the destination with other content is never replaced: that cell fails and says so. A
second call skips cells already made durable (their receipt matches) and continues where a
spent time budget stopped. Zero cells made durable is an error, never a success.

The source root is confined exactly as verify_artifacts confines its root (under the durable or
scratch root or the host's verify_roots, by its physical path), and only regular files are
copied: a symlinked cell, file or directory is never followed; it fails its cell with the
finding verify_artifacts gives a symlink."""

from __future__ import annotations

import contextlib
from typing import Literal, get_args

from pydantic import BaseModel, Field, ValidationError

from mcp_server.errors import InputError, NotFoundError, RgtError
from mcp_server.hosts.base import Host, parse_kv
from mcp_server.hosts.commands import check_name, path_word, quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.run.jobs.onbox import job_script
from mcp_server.scripts import load
from mcp_server.verify.artifacts.manifest import confine_root
from mcp_server.verify.artifacts.roster import RosterFinding, check_pattern, is_glob, symlink_finding

BUDGET_S = 25  # seconds of copying per call; the rest of the finished cells stay `pending`
MAX_LISTED = 200
MAX_FINDINGS = 20  # per cell

CellOutcome = Literal["copied", "already_durable", "unfinished", "pending", "failed"]


class AggregatedCell(BaseModel):
    cell: str
    outcome: CellOutcome
    files: int = 0
    bytes: int = 0
    detail: str = ""
    findings: list[RosterFinding] = Field(default_factory=list, description=f"refused symlinks (first {MAX_FINDINGS})")


class AggregateResult(BaseModel):
    host: str
    root: str
    dest: str
    durable: int = Field(description="cells whose every file is at dest, verified")
    unfinished: int
    pending: int = Field(description="finished cells left for the next call")
    failed: int
    complete: bool = Field(description="no finished cell failed or pending")
    cells: list[AggregatedCell] = Field(description=f"at most {MAX_LISTED}")
    next_step: str | None = None


class AggregateRequest(BaseModel):
    cells: str
    name: str
    root: str | None = None
    marker: str = "DONE"
    files: list[str] = Field(default_factory=list)


def _check(req: AggregateRequest) -> None:
    check_name(req.name, "name")
    check_pattern(req.cells)
    if req.cells.strip("/") in (".", ""):
        raise InputError("cells names the source root itself", observed=req.cells,
                         expected="a glob of cell directories under it, e.g. 'sweep/*' or 'runs/lr=*'")
    check_pattern(req.marker)
    if is_glob(req.marker):
        raise InputError("marker is one file name, not a glob", observed=req.marker, expected="e.g. DONE")
    for p in req.files:
        check_pattern(p)


def _parse(text: str) -> tuple[dict[str, str], list[AggregatedCell]]:
    cells: list[AggregatedCell] = []
    links: dict[str, list[RosterFinding]] = {}  # cell -> its refused symlinks, printed before its cell line
    for line in text.splitlines():
        if line.startswith("link="):
            cell, _, rest = line[5:].partition("\t")
            path, _, target = rest.partition("\t")
            found = links.setdefault(cell, [])
            if len(found) < MAX_FINDINGS:
                found.append(symlink_finding(path, target))
            continue
        if not line.startswith("cell="):
            continue
        parts = line[5:].split("\t", 4)
        if len(parts) == 5:
            fields = dict(zip(("cell", "outcome", "files", "bytes", "detail"), parts, strict=True))
            with contextlib.suppress(ValidationError):  # a garbled line is no cell
                cells.append(AggregatedCell.model_validate({**fields, "findings": links.pop(parts[0], [])}))
    return parse_kv(text), cells


def _summary(spec: HostSpec, kv: dict[str, str], cells: list[AggregatedCell]) -> AggregateResult:
    count = {o: sum(1 for c in cells if c.outcome == o) for o in get_args(CellOutcome)}
    durable = count["copied"] + count["already_durable"]
    pending, failed = count["pending"], count["failed"]
    step = None
    if pending:
        step = "call aggregate_results again with the same arguments: it continues with the pending cells"
    elif failed:
        step = "read each failed cell's detail (df -h / df -i on the durable root; a differing file needs a new name)"
    return AggregateResult(host=spec.name, root=kv.get("root", ""), dest=kv.get("dest", ""), durable=durable,
                           unfinished=count["unfinished"], pending=pending, failed=failed,
                           complete=not pending and not failed, cells=cells[:MAX_LISTED], next_step=step)


def _refuse_nothing_durable(spec: HostSpec, req: AggregateRequest, root: str, cells: list[AggregatedCell]) -> None:
    if not cells:
        raise NotFoundError(f"no cell directory matches {req.cells!r} under the source root", host=spec.name,
                            path=root, next_step="check the glob against the layout (cells are directories, "
                            "e.g. 'sweep/*'); root defaults to the box's scratch root")
    finished = [c for c in cells if c.outcome != "unfinished"]
    if not finished:
        names = ", ".join(c.cell for c in cells[:10])
        raise NotFoundError(f"0 of {len(cells)} cell(s) are finished: none holds {req.marker}", host=spec.name,
                            path=root, observed=names, next_step="wait for the runs (list_runs), or name with "
                            "`marker` the file your job writes only once a cell is done; nothing was copied")
    if not any(c.outcome in ("copied", "already_durable", "pending") for c in finished):
        why = "; ".join(f"{c.cell}: {c.detail}" for c in finished[:5])
        step = "check the durable root is writable and has space (df -h, df -i); the scratch copies are untouched"
        if any(c.findings for c in finished):
            step = ("a symlink is never followed or copied: name the regular files to copy with `files`, or put "
                    "the real files in the cells; otherwise " + step)
        raise RgtError(f"no finished cell could be made durable ({len(finished)} failed)", host=spec.name,
                       path=root, observed=why, next_step=step)


async def aggregate_cells(host: Host, spec: HostSpec, req: AggregateRequest, *,
                          ledger: Ledger | None = None) -> AggregateResult:
    """Copy every finished cell under the source root to `<durable>/results/<name>/`, verified."""
    _check(req)
    root = req.root or spec.scratch_root
    facts = await confine_root(host, root, spec.result_roots)
    words = [quote(facts.abs_root), quote(req.cells), quote(req.marker), path_word(spec.durable_root, "durable root"),
             quote(req.name), quote(str(BUDGET_S)), *map(quote, req.files)]
    res = await host.run(job_script("job_aggregate", *words, libraries=(load("job_sync"),)), timeout=BUDGET_S + 90,
                         slow=True)
    res.check("aggregating cells", next_step="check the source root and the durable root on the box")
    if res.text.startswith("RGT-NOROOT"):
        raise NotFoundError("the source root does not exist on the box", host=spec.name, path=root,
                            next_step="pass root: the directory that holds the cells (default: the scratch root)")
    if res.text.startswith("RGT-MOVED"):
        raise InputError("refused: the source root's physical path changed after it was checked (a symlink on "
                         "the way to it?)", host=spec.name, path=root,
                         next_step="pass root as the directory itself, not through a symlink; nothing was copied")
    if res.text.startswith("RGT-NODURABLE"):
        raise NotFoundError("the durable root does not exist on the box", host=spec.name, path=spec.durable_root,
                            next_step="create it, or set durable_root for this host in the inventory")
    kv, cells = _parse(res.text)
    _refuse_nothing_durable(spec, req, kv.get("root", root), cells)
    result = _summary(spec, kv, cells)
    if ledger is not None:
        ledger.record("aggregate", host=spec.name, summary=f"{result.durable} cell(s) durable in {result.dest}",
                      data={"root": result.root, "dest": result.dest, "durable": result.durable,
                            "failed": result.failed, "pending": result.pending, "unfinished": result.unfinished})
    return result

