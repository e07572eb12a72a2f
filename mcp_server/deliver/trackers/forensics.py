"""Tracker forensics as a report (VP14): tracker runs still 'running' after their job ended, several
tracker runs from one launch, runs whose run id no job has, runs tied to no run id, and the config
difference between two runs (VP1). Nothing here changes or deletes anything in a tracker."""

from __future__ import annotations

from collections import defaultdict

from mcp_server.deliver.trackers.linking import id_in_name, snippet
from mcp_server.deliver.trackers.models import (
    ConfigDiff,
    ConfigValue,
    DuplicateLaunch,
    KeyDiff,
    RunRef,
    TrackerFinding,
    TrackerReport,
    TrackerRun,
)
from mcp_server.run.jobs.status import LIVE
from mcp_server.verify.probes.control_diff import same_value

_DIED = {
    "wandb": "its W&B log has no exit record: the process died before wandb.finish (killed, out of memory or "
             "crashed); W&B's server shows such a run 'running', then 'crashed'",
    "mlflow": "MLflow still marks it RUNNING: the process ended without mlflow.end_run (killed or crashed)",
    "tensorboard": "its hparams session has no end record: the process stopped before writing one",
}


def tracker_report(runs: list[TrackerRun], jobs: dict[str, str]) -> TrackerReport:
    """Forensics over `runs` against `jobs` (this server's run id -> its state, as list_runs gives it).
    A run not tied by its config or tags is tied by a known run id inside its name or folder."""
    refs = [_ref(run, jobs) for run in runs]
    still, no_job, unlinked = [], [], []
    for run, ref in zip(runs, refs, strict=True):
        job_state = jobs.get(ref.rgt_run_id) if ref.rgt_run_id else None
        if ref.rgt_run_id is None:
            unlinked.append(TrackerFinding(kind="not_linked", run=ref, detail=_unlinked(run)))
        elif job_state is None:
            no_job.append(TrackerFinding(kind="no_job", run=ref, detail="carries a run id no job of this server has "
                                         "(launched elsewhere, or its record is gone)" + _alive_note(run)))
        elif run.state == "running" and job_state not in LIVE and job_state != "unknown":
            still.append(TrackerFinding(kind="still_running", run=ref, job_state=job_state,
                                        detail=f"the job is {job_state} but {_DIED[run.backend]}"))
    duplicates = _duplicates(refs, jobs)
    linked = sum(1 for r in refs if r.rgt_run_id is not None)
    summary = (f"{len(runs)} tracker run(s) read, {linked} tied to a run id of this server; {len(still)} still "
               f"running after their job ended, {len(duplicates)} launch(es) with more than one tracker run, "
               f"{len(no_job)} with a run id no job has, {len(unlinked)} tied to no run id. Nothing in any "
               "tracker was changed.")
    return TrackerReport(runs_read=len(runs), linked=linked, still_running=still, duplicates=duplicates,
                         no_job=no_job, not_linked=unlinked, summary=summary)


def _ref(run: TrackerRun, jobs: dict[str, str]) -> RunRef:
    rgt_run_id, matched_by = run.rgt_run_id, run.matched_by
    if rgt_run_id is None:
        rgt_run_id = id_in_name([run.name, run.id], sorted(jobs))
        matched_by = "name" if rgt_run_id else None
    return RunRef(backend=run.backend, id=run.id, name=run.name, state=run.state, rgt_run_id=rgt_run_id,
                  matched_by=matched_by, source=run.source, store=run.store)


def _unlinked(run: TrackerRun) -> str:
    return (f"no run id of this server in its config, tags or name; for the next launch add to the script: "
            f"{snippet(run.backend)}" + _alive_note(run))


def _alive_note(run: TrackerRun) -> str:
    return f"; it reads 'running' and {_DIED[run.backend]}, unless it is still running" if run.state == "running" \
        else ""


def _duplicates(refs: list[RunRef], jobs: dict[str, str]) -> list[DuplicateLaunch]:
    """Launches with more than one run in one store of one tracker. One launch logging to W&B and
    MLflow, or to two MLflow stores, is not a duplicate, nor a TensorBoard folder inside another of the
    same launch (torch's add_hparams writes its session into a subfolder)."""
    groups: dict[tuple[str, str, str], list[RunRef]] = defaultdict(list)
    for ref in refs:
        if ref.rgt_run_id is not None:
            groups[(ref.rgt_run_id, ref.backend, ref.store or ref.source)].append(ref)
    out = []
    for (rgt_run_id, _, _), group in sorted(groups.items()):
        tops = [r for r in group if not any(r.id.startswith(o.id + "/") for o in group if o is not r)]
        if len(tops) > 1:
            out.append(DuplicateLaunch(rgt_run_id=rgt_run_id, job_state=jobs.get(rgt_run_id), runs=tops))
    return out


def config_diff(a: TrackerRun, b: TrackerRun) -> ConfigDiff:
    """Keys whose values differ, and keys on one side only. MLflow keeps params as text, so a text
    value equals a number or flag that prints the same (`"0.1"` and 0.1)."""
    differing = [KeyDiff(key=k, a=a.config[k], b=b.config[k]) for k in sorted(set(a.config) & set(b.config))
                 if not _same(a.config[k], b.config[k])]
    only_a, only_b = sorted(set(a.config) - set(b.config)), sorted(set(b.config) - set(a.config))
    same = len(set(a.config) & set(b.config)) - len(differing)
    summary = (f"{len(differing)} key(s) differ, {len(only_a)} only in a, {len(only_b)} only in b, {same} the same"
               if differing or only_a or only_b else f"the configs agree on all {same} key(s)")
    return ConfigDiff(a=_ref(a, {}), b=_ref(b, {}), differing=differing, only_in_a=only_a, only_in_b=only_b,
                      same=same, summary=summary)


def _same(x: ConfigValue, y: ConfigValue) -> bool:
    if isinstance(x, str) != isinstance(y, str):
        return str(x) == str(y)
    return same_value(x, y)
