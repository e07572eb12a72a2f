"""Tracker runs read from the files the real libraries wrote (conftest.py): W&B offline logs through
wandb's own Record messages, MLflow stores through MlflowClient, TensorBoard through its loader."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from mcp_server.deliver.trackers import wandb_log
from mcp_server.deliver.trackers.models import TrackerRun
from mcp_server.deliver.trackers.sources import read_source
from mcp_server.deliver.trackers.wandb_offline import read_log
from mcp_server.errors import InputError, NotFoundError
from tests.deliver.trackers.conftest import ALPHA, BETA, ELSEWHERE, Tracked


def one(runs: list[TrackerRun], **where: object) -> TrackerRun:
    found = [r for r in runs if all(getattr(r, k, None) == v or r.config.get(k) == v for k, v in where.items())]
    assert len(found) == 1, [(r.id, r.name, r.rgt_run_id) for r in runs]
    return found[0]


def tree_digest(path: Path) -> dict[str, str]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def test_a_wandb_offline_run_is_read_with_its_config_tags_last_metrics_and_history(tracked: Tracked) -> None:
    got = read_source(str(tracked.wandb))
    assert got.backend == "wandb" and got.found == 4 and not got.cut
    alpha = one(got.runs, rgt_run_id=ALPHA, seed=1)
    assert alpha.state == "finished" and alpha.project == "tiny" and alpha.name == "tiny-1"
    assert alpha.matched_by == "config"
    assert alpha.config["lr"] == 0.1 and alpha.config["model.kind"] == "line" and "_wandb" not in alpha.config
    assert alpha.summary["loss"] == pytest.approx(tracked.final["alpha"]["loss"])
    assert alpha.history_length == 20 and alpha.started_at and alpha.ended_at and alpha.notes == []


def test_a_wandb_folder_may_be_named_by_its_run_folder_or_its_log(tracked: Tracked) -> None:
    log = tracked.wandb_log(ALPHA, 1)
    for source in (log, log.parent):
        runs = read_source(str(source)).runs
        assert [r.rgt_run_id for r in runs] == [ALPHA]


def test_the_mlflow_file_store_and_sqlite_store_are_read_through_mlflows_client(tracked: Tracked) -> None:
    for source in (str(tracked.mlruns), tracked.mlruns.as_uri(), f"sqlite:///{tracked.sqlite}", str(tracked.sqlite)):
        got = read_source(source)
        assert got.backend == "mlflow"
        alpha = one(got.runs, rgt_run_id=ALPHA, seed="1")
        assert alpha.state == "finished" and alpha.project == "tiny" and alpha.matched_by == "tag"
        assert alpha.config == {"batch": "8", "lr": "0.1", "seed": "1"}, "MLflow keeps params as text"
        assert "rgt_run_id=" + ALPHA in alpha.tags and not any(t.startswith("mlflow.") for t in alpha.tags)
        assert alpha.summary["loss"] == pytest.approx(tracked.final["alpha"]["loss"])
        assert alpha.history_length == 20 and alpha.started_at and alpha.ended_at
    assert len(read_source(str(tracked.mlruns)).runs) == 3


def test_reading_an_mlflow_store_leaves_every_byte_of_it_as_it_was(tracked: Tracked) -> None:
    before = tree_digest(tracked.mlruns) | tree_digest(tracked.sqlite)
    read_source(str(tracked.mlruns))
    read_source(str(tracked.sqlite))
    assert tree_digest(tracked.mlruns) | tree_digest(tracked.sqlite) == before


def test_an_mlflow_file_store_copied_without_its_trash_folder_is_read_from_a_copy(tracked: Tracked,
                                                                                 tmp_path: Path) -> None:
    store = tmp_path / "copied"
    shutil.copytree(tracked.mlruns, store, ignore=shutil.ignore_patterns(".trash"))
    before = tree_digest(store)
    assert len(read_source(str(store)).runs) == 3
    assert tree_digest(store) == before and not (store / ".trash").exists()


def test_tensorboard_event_folders_are_runs_with_their_scalars_and_hparams(tracked: Tracked) -> None:
    got = read_source(str(tracked.tb))
    assert got.backend == "tensorboard" and got.found == 3
    alpha = one(got.runs, name=ALPHA)
    assert alpha.state == "finished" and alpha.config["lr"] == 0.1 and alpha.config["seed"] == 1
    assert alpha.summary["loss"] == pytest.approx(tracked.final["alpha"]["loss"])
    assert alpha.history_length == 20 and alpha.rgt_run_id is None, "tied by its folder name, in the report"
    killed = one(got.runs, name=BETA)
    assert killed.state == "running" and killed.history_length == 400 and killed.ended_at is None


def test_a_killed_wandb_run_has_no_exit_record_and_reads_running(tracked: Tracked) -> None:
    killed = read_log(tracked.wandb_log(BETA, 0))
    assert killed.state == "running" and killed.ended_at is None
    assert 0 < killed.history_length < 400, "wandb-core had written only whole blocks when it was killed"
    assert any("no exit record" in n for n in killed.notes)


def test_a_wandb_log_cut_mid_chunk_is_read_up_to_its_last_whole_record(tracked: Tracked, tmp_path: Path) -> None:
    whole = tracked.wandb_log(ALPHA, 2)
    cut = tmp_path / "run-cut.wandb"
    cut.write_bytes(whole.read_bytes()[: wandb_log.BLOCK + 1000])
    run = read_log(cut)
    assert run.rgt_run_id == ALPHA and run.state == "running"
    assert 0 < run.history_length < 300
    assert any("partial or damaged chunk" in n for n in run.notes)


def test_a_large_wandb_log_is_read_in_its_head_and_tail(tracked: Tracked, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tracked.wandb_log(ALPHA, 2)
    assert log.stat().st_size > 3 * wandb_log.BLOCK
    monkeypatch.setattr(wandb_log, "FULL_READ", 2 * wandb_log.BLOCK)
    monkeypatch.setattr(wandb_log, "HEAD_READ", wandb_log.BLOCK)
    monkeypatch.setattr(wandb_log, "TAIL_READ", wandb_log.BLOCK)
    run = read_log(log)
    assert run.state == "finished" and run.rgt_run_id == ALPHA, "the run from the head, the exit from the tail"
    assert run.history_cut and 0 < run.history_length < 300
    assert run.summary["loss"] == pytest.approx(tracked.final["retry"]["loss"])


def test_a_source_with_more_runs_than_asked_says_it_was_cut(tracked: Tracked) -> None:
    got = read_source(str(tracked.wandb), max_runs=2)
    assert len(got.runs) == 2 and got.found == 4 and got.cut


def test_a_source_holding_no_tracker_files_is_refused_with_what_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(InputError) as err:
        read_source(str(tmp_path))
    assert "no tracker runs" in str(err.value) and "TensorBoard" in str(err.value)
    assert str(tmp_path) not in str(err.value)
    with pytest.raises(NotFoundError):
        read_source(str(tmp_path / "absent"))


def test_a_credential_folder_is_refused_by_the_path_policy() -> None:
    with pytest.raises(InputError) as err:
        read_source("~/.ssh")
    assert "refused by the path policy" in str(err.value) and "nothing was read" in str(err.value)


def test_a_sqlite_file_that_is_not_an_mlflow_store_is_refused(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "other.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE t (x)")
    con.close()
    with pytest.raises(InputError) as err:
        read_source(str(db))
    assert "not an MLflow tracking store" in str(err.value)


def test_run_ids_are_found_in_the_config_key_the_tag_or_not_at_all(tracked: Tracked) -> None:
    runs = read_source(str(tracked.wandb)).runs
    assert sorted(r.rgt_run_id or "" for r in runs) == sorted([ALPHA, ALPHA, BETA, ELSEWHERE])
