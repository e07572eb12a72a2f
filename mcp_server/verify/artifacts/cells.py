"""Expected cells: a sweep's result root holds one directory per cell (e.g. `sweep/lr=*`) and each
cell must hold the same files. The count found is held against the count expected, every
incomplete cell is named with what it lacks, and each cell's metrics (the top-level numbers of its
JSON files, as the checks read them) make a bounded table."""

from __future__ import annotations

from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mcp_server.errors import InputError
from mcp_server.globs import MatchBudget, glob_regex
from mcp_server.limits import PatternStr
from mcp_server.verify.artifacts.checks import FileVerdict
from mcp_server.verify.artifacts.roster import OWN_FILES, RemoteEntry, RosterFinding, check_pattern, is_glob

MAX_CELLS_SHOWN = 50
MAX_METRICS = 16


class CellSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    glob: PatternStr = Field(description="each cell's directory under root, e.g. 'sweep/lr=*'")
    expect: int = Field(ge=1, le=100_000, description="how many cells there must be")
    files: list[PatternStr] = Field(min_length=1, max_length=50,
                                    description="files each cell must hold, e.g. ['best.pth']")

    @field_validator("glob")
    @classmethod
    def _glob(cls, v: str) -> str:
        return _relative(v.rstrip("/"))

    @field_validator("files")
    @classmethod
    def _files(cls, v: list[str]) -> list[str]:
        return [_relative(f) for f in v]

    def patterns(self) -> list[str]:
        """The roster entries the cells add: every cell's files."""
        return [f"{self.glob}/{f}" for f in self.files]


def _relative(pattern: str) -> str:
    """A roster-style relative path or glob; a validation error (not a crash) otherwise."""
    try:
        return check_pattern(pattern)
    except InputError as exc:
        raise ValueError(str(exc)) from exc


class Cell(BaseModel):
    name: str  # the directory, less the glob's fixed leading directories ('lr=3e-4' of 'sweep/lr=3e-4')
    path: str
    lacks: list[str] = Field(default_factory=list)


class CellsReport(BaseModel):
    expected: int
    found: int
    complete: int
    summary: str
    incomplete: dict[str, list[str]] = Field(default_factory=dict, description="cell -> the files it lacks")
    metrics: dict[str, dict[str, float]] = Field(default_factory=dict, description="cell -> its JSON's numbers")


def _fixed_prefix(glob: str) -> str:
    """The glob's leading directories without wildcards ('sweep/' of 'sweep/lr=*')."""
    parts = PurePosixPath(glob).parts
    fixed = []
    for part in parts[:-1]:
        if is_glob(part):
            break
        fixed.append(part)
    return "/".join(fixed) + "/" if fixed else ""


def find_cells(spec: CellSpec, entries: list[RemoteEntry], budget: MatchBudget | None = None) -> list[Cell]:
    """Every directory matching the cell glob that holds anything, with the required files it
    lacks; with a `budget`, stops (a coded error naming the glob) once the call's time is up."""
    rx, prefix = glob_regex(spec.glob), _fixed_prefix(spec.glob)
    held: dict[str, list[str]] = {}
    for n, e in enumerate(entries):
        if budget is not None:
            budget.check(spec.glob, n, len(entries))
        if OWN_FILES.search(e.path):
            continue
        parents = [str(p) for p in PurePosixPath(e.path).parents if str(p) != "."]
        for d in parents:
            if rx.match(d):
                held.setdefault(d, [])
                if e.kind == "f":
                    held[d].append(e.path[len(d) + 1:])
    out = []
    for d in sorted(held):
        lacks = [f for f in spec.files if not any(glob_regex(f).match(rel) for rel in held[d])]
        name = d[len(prefix):] if prefix and d.startswith(prefix) else d
        out.append(Cell(name=name, path=d, lacks=lacks))
    return out


def judge(spec: CellSpec, cells: list[Cell]) -> tuple[CellsReport, list[RosterFinding]]:
    """The report and the findings: incomplete and missing cells block, surplus cells are reported."""
    incomplete = [c for c in cells if c.lacks]
    complete, found = len(cells) - len(incomplete), len(cells)
    findings = [RosterFinding(path=c.path, kind="incomplete_cell", message=f"cell {c.name} lacks {', '.join(c.lacks)}")
                for c in incomplete]
    details = []
    if found < spec.expect:
        gone = spec.expect - found
        details.append(f"{gone} expected cell{'s' if gone > 1 else ''} missing entirely ({found} found)")
        findings.append(RosterFinding(path=spec.glob, kind="missing_cells", expected=f"{spec.expect} cells",
                                      actual=f"{found} found", message=details[-1]))
    elif found > spec.expect:
        details.append(f"{found} cells found, {spec.expect} expected")
        findings.append(RosterFinding(path=spec.glob, kind="extra_cells", blocking=False, expected=f"{spec.expect}",
                                      actual=f"{found}", message="more cells than declared: check the glob"))
    details += [f"cell {c.name} lacks {', '.join(c.lacks)}" for c in incomplete[:MAX_CELLS_SHOWN]]
    if len(incomplete) > MAX_CELLS_SHOWN:
        details.append(f"{len(incomplete) - MAX_CELLS_SHOWN} more incomplete cells")
    summary = f"{complete} of {max(spec.expect, found)} cells complete" + (": " + "; ".join(details) if details else "")
    report = CellsReport(expected=spec.expect, found=found, complete=complete, summary=summary,
                         incomplete={c.name: c.lacks for c in incomplete[:MAX_CELLS_SHOWN]})
    return report, findings


def with_metrics(report: CellsReport, cells: list[Cell], checks: dict[str, FileVerdict]) -> CellsReport:
    """The report plus each cell's metrics, from the checked JSON files it holds."""
    rows = {}
    for cell in cells[:MAX_CELLS_SHOWN]:
        metrics: dict[str, float] = {}
        for rel, verdict in sorted(checks.items()):
            if rel.startswith(cell.path + "/") and rel.endswith(".json") and verdict.scalars:
                for k, v in verdict.scalars.items():
                    if len(metrics) < MAX_METRICS:
                        metrics.setdefault(k, v)
        if metrics:
            rows[cell.name] = metrics
    return report.model_copy(update={"metrics": rows})
