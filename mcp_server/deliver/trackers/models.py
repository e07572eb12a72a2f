"""What the tracker readers return: one `TrackerRun` per tracker run, whatever wrote it (W&B, MLflow,
TensorBoard), a `TrackerRuns` per source read, and the forensics' `TrackerReport` and `ConfigDiff`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Backend = Literal["wandb", "mlflow", "tensorboard"]
TrackerState = Literal["running", "finished", "crashed", "failed", "killed", "unknown"]
# How a tracker run was tied to this server's run id (linking.py): a config key / MLflow param, a tag,
# or the id found in the run's name or folder; None: not tied.
MatchedBy = Literal["config", "tag", "name"]
ConfigValue = str | int | float | bool | None

MAX_RUNS = 500  # tracker runs read from one source; the rest are counted, not read


class TrackerRun(BaseModel):
    """One run as its tracker recorded it. Nothing is inferred: a field the tracker does not hold is
    None (or empty)."""

    backend: Backend
    id: str = Field(description="the tracker's own run id (TensorBoard: the event folder, relative to the source)")
    name: str | None = Field(default=None, description="display name / run name / event folder name")
    project: str | None = Field(default=None, description="W&B project, MLflow experiment name, TensorBoard root")
    state: TrackerState = Field(description="as the tracker records it; a W&B run with no exit record is "
                                            "'running' (its process is alive or died before wandb.finish)")
    started_at: str | None = Field(default=None, description="UTC ISO time")
    ended_at: str | None = Field(default=None, description="UTC ISO time; None while running or when unrecorded")
    config: dict[str, ConfigValue] = Field(default_factory=dict,
                                           description="flat dotted keys (MLflow params are text)")
    tags: list[str] = Field(default_factory=list, description="tags; MLflow tags as key=value, mlflow.* left out")
    summary: dict[str, float] = Field(default_factory=dict, description="last value of each numeric metric")
    history_length: int = Field(default=0, description="logged steps: W&B history rows, else the longest series")
    history_cut: bool = Field(default=False, description="the history was read only in part (see notes)")
    rgt_run_id: str | None = Field(default=None, description="this server's run id, when the run carries it")
    matched_by: MatchedBy | None = None
    source: str = Field(description="the file or folder the run was read from")
    store: str | None = Field(default=None, description="the source it was found in (a W&B folder, an MLflow "
                                                        "store, a TensorBoard root)")
    notes: list[str] = Field(default_factory=list)


class TrackerRuns(BaseModel):
    """The runs one source holds."""

    backend: Backend
    source: str
    runs: list[TrackerRun]
    found: int = Field(description="runs found in the source; when cut, at least this many")
    cut: bool = Field(default=False, description=f"only the first {MAX_RUNS} runs (newest first where known) "
                                                 "were read")
    notes: list[str] = Field(default_factory=list)


class RunRef(BaseModel):
    """A tracker run named in a finding."""

    backend: Backend
    id: str
    name: str | None = None
    state: TrackerState
    rgt_run_id: str | None = None
    matched_by: MatchedBy | None = None
    source: str
    store: str | None = None


class TrackerFinding(BaseModel):
    """One forensic observation about one tracker run."""

    kind: Literal["still_running", "no_job", "not_linked"]
    run: RunRef
    job_state: str | None = Field(default=None, description="the state of the job the run is tied to")
    detail: str


class DuplicateLaunch(BaseModel):
    """Several tracker runs carry one launch's run id: a retried or restarted launch, or a script
    that opened its tracker twice."""

    rgt_run_id: str
    job_state: str | None = None
    runs: list[RunRef]


class TrackerReport(BaseModel):
    """Forensics over tracker runs and this server's jobs. A report: nothing in a tracker is changed."""

    runs_read: int
    linked: int = Field(description="tracker runs tied to one of this server's run ids")
    still_running: list[TrackerFinding] = Field(description="tracker says running, the job has ended")
    duplicates: list[DuplicateLaunch]
    no_job: list[TrackerFinding] = Field(description="a run id is logged but no such job is known")
    not_linked: list[TrackerFinding] = Field(description="no run id of this server found in the run")
    summary: str


class KeyDiff(BaseModel):
    key: str
    a: ConfigValue
    b: ConfigValue


class ConfigDiff(BaseModel):
    """Config keys of two tracker runs that differ, or exist on one side only (VP1's control diff)."""

    a: RunRef
    b: RunRef
    differing: list[KeyDiff]
    only_in_a: list[str]
    only_in_b: list[str]
    same: int = Field(description="keys with one value on both sides")
    summary: str
