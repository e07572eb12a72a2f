"""Forensics over real tracker runs (conftest.py) and this server's jobs: a killed launch still
'running' in every tracker, a retried launch's duplicate runs, runs with an unknown run id or none, and
the config difference between two runs."""

from __future__ import annotations

import pytest

from mcp_server.deliver.trackers.forensics import config_diff, tracker_report
from mcp_server.deliver.trackers.models import TrackerRun
from mcp_server.deliver.trackers.sources import read_source
from tests.deliver.trackers.conftest import ALPHA, BETA, ELSEWHERE, Tracked

JOBS = {ALPHA: "succeeded", BETA: "failed"}


@pytest.fixture(scope="module")
def runs(tracked: Tracked) -> list[TrackerRun]:
    sources = (tracked.wandb, tracked.mlruns, tracked.sqlite, tracked.tb)
    return [run for s in sources for run in read_source(str(s)).runs]


def test_a_killed_launch_is_still_running_in_every_tracker_after_its_job_ended(runs: list[TrackerRun]) -> None:
    report = tracker_report(runs, JOBS)
    still = {(f.run.backend, f.run.rgt_run_id, f.job_state) for f in report.still_running}
    assert still == {("wandb", BETA, "failed"), ("mlflow", BETA, "failed"), ("tensorboard", BETA, "failed")}
    wandb = next(f for f in report.still_running if f.run.backend == "wandb")
    assert "no exit record" in wandb.detail


def test_a_run_still_running_while_its_job_runs_is_not_reported(runs: list[TrackerRun]) -> None:
    report = tracker_report(runs, {ALPHA: "succeeded", BETA: "running"})
    assert report.still_running == []


def test_two_tracker_runs_from_one_launch_are_a_duplicate_within_each_tracker(runs: list[TrackerRun]) -> None:
    report = tracker_report(runs, JOBS)
    dups = {(d.rgt_run_id, d.runs[0].backend, len(d.runs), d.job_state) for d in report.duplicates}
    assert dups == {(ALPHA, "wandb", 2, "succeeded"), (ALPHA, "mlflow", 2, "succeeded")}, \
        "one launch in W&B and MLflow is not a duplicate, and the SQLite store holds one run of it"
    assert all(len({r.source for r in d.runs}) == len(d.runs) for d in report.duplicates)


def test_a_tensorboard_folder_is_tied_to_its_launch_by_the_run_id_in_its_name(runs: list[TrackerRun]) -> None:
    report = tracker_report(runs, JOBS)
    tb = next(f for f in report.still_running if f.run.backend == "tensorboard")
    assert tb.run.matched_by == "name" and tb.run.name == BETA
    assert report.linked == len(runs) - 1, "all but the folder named by no run id"


def test_runs_with_a_run_id_no_job_has_or_with_none_are_reported_apart(runs: list[TrackerRun]) -> None:
    report = tracker_report(runs, JOBS)
    assert [(f.run.backend, f.run.rgt_run_id) for f in report.no_job] == [("wandb", ELSEWHERE)]
    assert [(f.run.backend, f.run.name) for f in report.not_linked] == [("tensorboard", "untitled")]
    assert "RGT_RUN_ID" in report.not_linked[0].detail, "the line the script should add"
    assert "Nothing in any tracker was changed" in report.summary


def test_config_diff_lists_the_keys_that_differ_between_two_runs(runs: list[TrackerRun]) -> None:
    wandb = [r for r in runs if r.backend == "wandb" and r.rgt_run_id == ALPHA]
    first, retry = sorted(wandb, key=lambda r: r.config["seed"] or 0)
    diff = config_diff(first, retry)
    assert {(d.key, d.a, d.b) for d in diff.differing} == {("seed", 1, 2), ("batch", 8, 16)}
    assert diff.only_in_a == [] and diff.only_in_b == [] and diff.same == 4


def test_config_diff_across_trackers_treats_mlflow_text_params_as_their_values(runs: list[TrackerRun]) -> None:
    wandb = next(r for r in runs if r.backend == "wandb" and r.rgt_run_id == ALPHA and r.config["seed"] == 1)
    mlflow = next(r for r in runs if r.backend == "mlflow" and r.rgt_run_id == ALPHA and r.config["seed"] == "1")
    diff = config_diff(wandb, mlflow)
    assert diff.differing == [] and diff.same == 3
    assert diff.only_in_a == ["model.kind", "model.width", "rgt_run_id"] and diff.only_in_b == []
