"""What a reproduction found, as the server returns it: the report repro.sh wrote on the box
(repro_onbox.py's JSON) read back into per-metric verdicts, each with the sentence that says it.
The report is box text: every string is cleaned, and a report that is not what repro.sh writes
is said to be so rather than trusted."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from mcp_server import untrusted
from mcp_server.run.jobs.status import RunState

Verdict = Literal["reproduced", "differs", "could_not_run"]
Outcome = Literal["reproduced", "differs", "could_not_run", "bad_input"]
SHOWN_LINES = 10
TEXT_CUT = 400


class Tolerance(BaseModel):
    abs: float = Field(ge=0)
    rel: float = Field(ge=0)
    source: str = Field(description="run.json evaluate.tolerance, or default (1e-6 abs + 1e-6 rel)")


class MetricVerdict(BaseModel):
    capsule: str = Field(description="the capsule's run id")
    test: str
    metric: str
    outcome: Verdict
    sealed: float | None = None
    fresh: float | None = None
    abs_diff: float | None = None
    rel_diff: float | None = None
    tolerance: Tolerance | None = None
    says: str = Field(description="the verdict in one sentence, the tolerance named")


class EnvFinding(BaseModel):
    capsule: str
    status: Literal["matches", "differs", "unknown"]
    python: str
    detail: str


class ReproReport(BaseModel):
    host: str
    run_id: str
    status: Literal["running", "ended"]
    state: RunState
    outcome: Outcome | None = Field(default=None, description="set once the run has ended")
    verdicts: list[MetricVerdict] = Field(default_factory=list)
    env: list[EnvFinding] = Field(default_factory=list, description="does the box's python match each env lock")
    problems: list[str] = Field(default_factory=list, description="why the input was refused, or what went wrong")
    report_path: str
    log_tail: list[str] = Field(default_factory=list, description="the run's last log lines, when it wrote no report")
    next_step: str


class _RawMetric(BaseModel):
    metric: str
    outcome: Verdict
    sealed: float | None = None
    fresh: float | None = None
    abs_diff: float | None = None
    rel_diff: float | None = None
    tolerance: Tolerance | None = None
    why: str | None = None


class _RawTest(BaseModel):
    test: str
    exit_status: int | None = None
    metrics: list[_RawMetric] = Field(default_factory=list)


class _RawCapsule(BaseModel):
    run_id: str
    env: dict[str, Any] | None = None
    tests: list[_RawTest] = Field(default_factory=list)


class _RawReport(BaseModel):
    outcome: Outcome
    problems: list[str] = Field(default_factory=list)
    capsules: list[_RawCapsule] = Field(default_factory=list)


def _clean(text: str) -> str:
    return untrusted.clean(text)[:TEXT_CUT]


def _tol(t: Tolerance | None) -> str:
    if t is None:
        return "no tolerance applies"
    return f"tolerance {t.abs:g} abs + {t.rel:g} rel ({_clean(t.source)})"


def says(m: _RawMetric) -> str:
    """The verdict as a sentence: reproduced within / differs by X / could not run (why)."""
    name = _clean(m.metric)
    if m.outcome == "could_not_run":
        return f"{name} could not run: {_clean(m.why or 'no reason recorded')}"
    if m.outcome == "reproduced":
        return f"{name} reproduced: sealed {m.sealed:g}, fresh {m.fresh:g}, within {_tol(m.tolerance)}" \
            if m.sealed is not None and m.fresh is not None else f"{name} reproduced ({_clean(m.why or '')})"
    if m.abs_diff is None:
        return f"{name} differs: {_clean(m.why or 'no number to compare')}; {_tol(m.tolerance)}"
    rel = f"{m.rel_diff:.3g} relative" if m.rel_diff is not None else "relative undefined (sealed is 0)"
    return (f"{name} differs by {m.abs_diff:.6g} absolute ({rel}): sealed {m.sealed:g}, fresh {m.fresh:g}; "
            f"{_tol(m.tolerance)}")


def _env(c: _RawCapsule) -> EnvFinding | None:
    env = c.env or {}
    status = env.get("status")
    if status not in ("matches", "differs", "unknown"):
        return None
    return EnvFinding(capsule=_clean(c.run_id), status=status, python=_clean(str(env.get("python", "?"))),
                      detail=_clean(str(env.get("detail", ""))))


def parse_report(data: bytes) -> tuple[Outcome, list[MetricVerdict], list[EnvFinding], list[str]]:
    """The outcome, verdicts, env findings and problems of repro.sh's report; ValueError when the
    file is not one."""
    try:
        raw = _RawReport.model_validate_json(data)
    except ValidationError as exc:
        raise ValueError("the report is not what repro.sh writes") from exc
    verdicts = [MetricVerdict(capsule=_clean(c.run_id), test=_clean(t.test), metric=_clean(m.metric),
                              outcome=m.outcome, sealed=m.sealed, fresh=m.fresh, abs_diff=m.abs_diff,
                              rel_diff=m.rel_diff, tolerance=m.tolerance, says=says(m))
                for c in raw.capsules for t in c.tests for m in t.metrics]
    env = [f for f in (_env(c) for c in raw.capsules) if f is not None]
    return raw.outcome, verdicts, env, [_clean(p) for p in raw.problems]


def next_step(outcome: Outcome | None, run_id: str) -> str:
    return {
        None: f"wait_for_run(run_id={run_id}) until it ends, then read the reproduction again",
        "reproduced": "every metric reproduced within its tolerance: the capsule's numbers stand",
        "differs": "a metric differs: compare the evaluation code and env with the sealed run's (the env findings "
                   "say whether the packages match) before citing the number",
        "could_not_run": "the evaluation did not run: read each verdict's reason and the log tail, fix it, and "
                         "reproduce again",
        "bad_input": "the capsule was refused: fix what `problems` names (a new run id if sealed bytes must change)",
    }[outcome]


def shown(lines: list[str]) -> list[str]:
    return [_clean(ln) for ln in lines[-SHOWN_LINES:]]
