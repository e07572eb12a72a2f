"""What preflight asks and answers: the request, a finding per check with its evidence and the
page that fixes it, a stage per part of the drill, and one verdict."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from mcp_server.run.jobs.status import RunState

Level = Literal["pass", "warn", "fail", "skipped"]
StageName = Literal["smoke", "checkpoint", "drill", "budget"]
Verdict = Literal["GO", "GO with warnings", "NO-GO"]
_ORDER = {"pass": 0, "skipped": 1, "warn": 2, "fail": 3}


class Finding(BaseModel):
    level: Level
    what: str = Field(description="one sentence: what the drill found")
    evidence: list[str] = Field(default_factory=list, description="the facts it rests on")
    fix: str | None = Field(default=None, description="what to change, for the framework the run seems to use")
    route: str | None = Field(default=None, description="the reference section that fixes it")


class Stage(BaseModel):
    stage: StageName
    result: Level
    findings: list[Finding]


def stage(name: StageName, findings: list[Finding]) -> Stage:
    """A stage's result is its worst finding; a stage with none was not reached."""
    worst = max((f.level for f in findings), key=_ORDER.__getitem__, default="skipped")
    return Stage(stage=name, result=worst, findings=findings)


def why_of(stages: list[Stage]) -> list[str]:
    """The findings that decide the verdict, fails first, as `stage LEVEL: what (fix)`."""
    rows = [(f.level, f"{s.stage} {f.level.upper()}: {f.what}" + (f" (fix: {f.fix})" if f.fix else ""))
            for s in stages for f in s.findings if f.level in ("fail", "warn")]
    return [text for level, text in sorted(rows, key=lambda r: r[0] != "fail")]


def verdict_of(stages: list[Stage]) -> Verdict:
    levels = {s.result for s in stages}
    if "fail" in levels:
        return "NO-GO"
    return "GO with warnings" if "warn" in levels else "GO"


class Budget(BaseModel):
    planned_steps: float | None
    checkpoint_bytes: int | None = Field(description="one checkpoint (a file, or a folder taken whole)")
    checkpoint_files: int | None
    save_every: float | None = Field(description="steps between saves, as the smoke saved")
    retention: str | None = Field(description="keeps every checkpoint, keeps the newest K, or one name overwritten")
    peak_bytes: int | None = Field(default=None, description="projected for planned_steps")
    peak_inodes: int | None = None
    target: str | None = Field(default=None, description="what the projection is compared with")
    free_bytes: int | None = None
    free_inodes: int | None = None
    fills_at_step: float | None = Field(default=None, description="where the projected run runs out of room")


class PreflightResult(BaseModel):
    host: str
    run_id: str
    status: Literal["running", "done"]
    verdict: Verdict | None = Field(description="GO, GO with warnings or NO-GO; null while the drill runs")
    why: list[str] = Field(default_factory=list, description="each failing, then each warning finding, one line")
    stages: list[Stage]
    seconds_per_step: float | None = Field(default=None, description="measured in the smoke, on this host's CPU")
    series: str | None = Field(default=None, description="the loss series the drill followed, and its stream")
    framework: str | None = Field(default=None, description="what the run seems to use, for the fixes")
    budget: Budget | None = None
    state: RunState | None = None
    next_step: str
