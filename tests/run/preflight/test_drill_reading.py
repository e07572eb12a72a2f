"""How the server reads a drill back, on records shaped like the drill's own: line times, saves
grouped by the step they hold, retention and the budget's fill step, and the framework a run
seems to use (each the fix its findings name)."""

from __future__ import annotations

from mcp_server.run.preflight import hints
from mcp_server.run.preflight.budget import Target, _fill_step, budget
from mcp_server.run.preflight.judge import Drill
from mcp_server.run.preflight.series import AttemptOutput, line_times, pick_key, points_of
from mcp_server.run.preflight.timeline import events_of, saves_of


def test_each_line_gets_the_time_it_arrived_even_past_the_last_mark() -> None:
    text = "a\nbb\nccc\n"
    assert line_times(text, [[2, 0.5], [5, 0.7]]) == [0.5, 0.7, 0.7, 0.7]


def test_the_followed_series_is_the_loss_not_an_eval_loss_or_a_rate() -> None:
    assert pick_key(["lr", "eval_loss", "loss", "acc"], None) == "loss"
    assert pick_key(["val_loss", "train/loss_total"], None) == "train/loss_total"
    assert pick_key(["acc"], None) is None


def _drill(lines: list[tuple[float, str]], events: list[list[object]]) -> Drill:
    text = "".join(line + "\n" for _, line in lines)
    marks, offset = [], 0
    for t, line in lines:
        offset += len(line) + 1
        marks.append([offset, t])
    out = AttemptOutput(n=1, out=text, err="", out_times=line_times(text, marks), err_times=[])
    points_of(out, None)
    record = {"attempts": [{"n": 1, "started": 0.0, "ended": lines[-1][0], "tree_start": [0, 0],
                            "tree_end": [0, 0], "signals": []}]}
    return Drill(record=record, outputs={1: out}, events=events_of(events))


def test_saves_close_in_time_are_told_apart_by_the_step_printed_before_them() -> None:
    lines = [(0.01 * i, f"step={i} loss={2 / i:.3f}") for i in range(1, 16)]
    events = [[0.055, 1, "appear", "ck/step_5.pt", 0, 100, 1, 0], [0.105, 1, "appear", "ck/step_10.pt", 0, 100, 1, 0],
              [0.155, 1, "appear", "ck/step_15.pt", 0, 100, 1, 0]]
    d = _drill(lines, events)
    assert [(s.x, s.paths) for s in d.saves] == [(5, ["ck/step_5.pt"]), (10, ["ck/step_10.pt"]),
                                                 (15, ["ck/step_15.pt"])]


def test_a_file_rewritten_in_place_is_one_save_and_is_marked_in_place() -> None:
    events = [[0.5, 1, "appear", "ck/last.pt", 0, 10, 1, 0], [0.55, 1, "change", "ck/last.pt", 0, 20, 1, 0],
              [0.6, 1, "change", "ck/last.pt", 0, 30, 1, 0], [2.0, 1, "change", "ck/last.pt", 0, 5, 1, 0]]
    saves = saves_of(events_of(events), lambda n, t: None)
    assert len(saves) == 2  # the file cut short at 2.0 s is a new save, not growth of the first
    assert saves[0].in_place == ["ck/last.pt"] and saves[0].size == 30


def test_keeping_every_checkpoint_fills_a_small_disk_at_the_save_that_overflows_it() -> None:
    lines = [(0.01 * i, f"step={i} loss={2 / i:.3f}") for i in range(1, 16)]
    mib = 2**20
    events = [[0.01 * s + 0.005, 1, "appear", f"ck/epoch_{s}.safetensors", 0, mib, 1, 0] for s in (5, 10, 15)]
    plan, stage = budget(_drill(lines, events), 1000, Target("a 20 MiB disk", 20 * mib, None))
    assert plan.retention == "keeps every checkpoint" and plan.save_every == 5
    assert stage.result == "fail"
    # 20 MiB free: the 20th save (step 100) is the first whose checkpoints plus the one being
    # written (atomic saves keep old and new side by side) pass it
    assert plan.fills_at_step == 100
    assert _fill_step(mib, 5, 2, 1, 0.0, 20 * mib, 1000) == 1000  # keep-2 never fills it: growth alone


def test_the_framework_is_read_from_checkpoint_names_output_and_command() -> None:
    hf = events_of([[1.0, 1, "appear", "out/checkpoint-20", 1, 10, 3, 0]])
    assert hints.detect(hf, "", "python train.py") is hints.HF
    assert hints.detect([], "{'loss': 0.5, 'epoch': 0.1}", "python train.py") is hints.HF
    assert hints.detect(events_of([[1.0, 1, "appear", "ck/last.ckpt", 0, 10, 1, 0]]), "", "") is hints.LIGHTNING
    assert hints.detect([], "", "accelerate launch train.py") is hints.ACCELERATE
    assert hints.detect(events_of([[1.0, 1, "appear", "ck/model.pt", 0, 10, 1, 0]]), "", "") is hints.TORCH
    assert hints.detect([], "", "./train.sh") is hints.GENERIC
    assert "resume_from_checkpoint=True" in hints.HF.load_fix and "ckpt_path='last'" in hints.LIGHTNING.load_fix
