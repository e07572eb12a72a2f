"""plot_run through a real MCP client, on LocalHost and over the test sshd: a real run's log
becomes a PNG of the right size plus its numbers; crafted logs raise the divergence, NaN and
plateau flags; several runs overlay; without matplotlib the numbers still come back."""

from __future__ import annotations

import base64
import io
import json
import math
from pathlib import Path

import pytest

from mcp_server.run.jobs import plot
from mcp_server.run.jobs.metrics import downsample, parse_csv, parse_text, summarize
from tests.conftest import error_text, structured
from tests.run.jobs.conftest import Box
from tests.support.wait import until_sync

needs_matplotlib = pytest.mark.skipif(not plot.available(), reason="the [plots] extra (matplotlib) is not installed")


def decoded_size(png: bytes) -> tuple[int, int]:
    """Width and height as Pillow (a matplotlib dependency) decodes the PNG."""
    image = pytest.importorskip("PIL.Image").open(io.BytesIO(png))
    image.load()
    assert image.format == "PNG"
    return tuple(image.size)


async def launch(client, command: str, **args) -> dict:
    res = structured(await client.call_tool("launch_detached", {"host": "gpu1", "probe_s": 0, "command": command,
                                                                **args}))
    (outcome,) = res["outcomes"]
    assert outcome["error"] is None, outcome
    run = outcome["launch"]
    until_sync(lambda: (Path(run["run_dir"]) / "exit_code").is_file(), timeout=20, what="the run to end")
    return run


def image_of(result) -> bytes:
    (img,) = [c for c in result.content if c.type == "image"]
    assert img.mime_type == "image/png"
    return base64.b64decode(img.data)


def crafted_run(box: Box, run_id: str, log: str, files: dict[str, str] | None = None) -> None:
    """A finished run dir as the wrapper leaves it, with a log we wrote (no process needed)."""
    d = box.durable / ".rgt" / "runs" / run_id
    d.mkdir(parents=True)
    (d / "log").write_text(log)
    (d / "workdir").write_text(str(box.work))
    (d / "exit_code").write_text("0\n")
    (d / "ended_at").write_text("1\n")
    for name, text in (files or {}).items():
        (d / name).write_text(text)


@needs_matplotlib
async def test_a_real_run_plots_as_a_png_of_the_right_size_with_its_numbers(durable_box: Box, client) -> None:
    run = await launch(client, "for i in $(seq 1 40); do echo \"step=$i loss=$(awk \"BEGIN{print 2/$i}\") "
                               "acc: 0.$i\"; done")
    result = await client.call_tool("plot_run", {"host": "gpu1", "run_id": run["run_id"]})
    res = structured(result)
    assert decoded_size(image_of(result)) == (800, 450)
    assert res["image"]["bytes"] <= 256 * 1024 and res["image"]["width"] <= 1024
    (rc,) = res["runs"]
    assert rc["state"]["status"] == "succeeded" and rc["sources"] == ["log"]
    loss = next(s for s in rc["series"] if s["key"] == "loss")
    assert loss["goal"] == "min" and loss["points"] == 40 and loss["last"] == pytest.approx(0.05)
    assert loss["best"] == pytest.approx(0.05) and loss["trend"] == "improving" and not loss["diverged"]
    assert res["series"][0] == "loss" and "acc" in rc["available"]
    saved = Path(res["image"]["saved_to"])
    assert saved.parent == Path(run["run_dir"]) and saved.read_bytes() == image_of(result)


async def test_divergence_and_nan_are_flagged_on_a_crafted_log(durable_box: Box, client) -> None:
    lines = [f"step={i} loss={1 / i:.4f}" for i in range(1, 30)]
    lines += [f"step={i} loss={0.5 * 1.5 ** (i - 30):.4f}" for i in range(30, 40)] + ["step=40 loss=nan"]
    crafted_run(durable_box, "diverging", "\n".join(lines) + "\n")
    res = structured(await client.call_tool("plot_run", {"host": "gpu1", "run_id": "diverging", "save": False}))
    (loss,) = res["runs"][0]["series"]
    assert loss["diverged"] and loss["nan_count"] == 1 and loss["first_nonfinite_step"] == 40
    assert loss["best"] == pytest.approx(1 / 29, rel=1e-3) and loss["trend"] == "worsening"
    assert any("diverged" in f for f in res["flags"]) and any("non-finite" in f for f in res["flags"])
    assert res["image"] is None or res["image"]["saved_to"] is None


async def test_a_plateau_is_flagged_and_metrics_files_win_over_the_log(durable_box: Box, client) -> None:
    jsonl = "".join(json.dumps({"step": i, "val_loss": 1 / i if i < 20 else 0.05}) + "\n" for i in range(1, 61))
    crafted_run(durable_box, "flat", "val_loss=9\n", {"metrics.jsonl": jsonl})
    res = structured(await client.call_tool("plot_run", {"host": "gpu1", "run_id": "flat", "series": ["val_loss"]}))
    (s,) = res["runs"][0]["series"]
    assert s["plateau"] and not s["diverged"] and s["points"] == 60 and s["last"] == 0.05
    assert res["runs"][0]["sources"][0] == "metrics.jsonl"


@needs_matplotlib
async def test_several_runs_overlay_in_one_image(durable_box: Box, client) -> None:
    for seed in (1, 2, 3):
        crafted_run(durable_box, f"seed{seed}", "".join(f"step={i} loss={seed / i}\n" for i in range(1, 50)))
    result = await client.call_tool("plot_run", {"host": "gpu1", "run_ids": ["seed1", "seed2", "seed3"]})
    res = structured(result)
    assert [r["run_id"] for r in res["runs"]] == ["seed1", "seed2", "seed3"]
    assert [r["series"][0]["last"] for r in res["runs"]] == pytest.approx([1 / 49, 2 / 49, 3 / 49])
    assert decoded_size(image_of(result)) == (800, 450)


async def test_bad_input_names_what_was_wrong(durable_box: Box, client) -> None:
    crafted_run(durable_box, "r1", "step=1 loss=1\n")
    assert "[BAD_INPUT]" in error_text(await client.call_tool("plot_run", {"host": "gpu1"}))
    text = error_text(await client.call_tool("plot_run", {"host": "gpu1", "run_id": "r1", "series": ["bleu"]}))
    assert "[BAD_INPUT]" in text and "loss" in text
    assert "NOT_FOUND" in error_text(await client.call_tool("plot_run", {"host": "gpu1", "run_id": "nope"}))


async def test_without_matplotlib_the_numbers_come_back_with_how_to_install(
        durable_box: Box, client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plot, "available", lambda: False)
    crafted_run(durable_box, "r2", "step=1 loss=1\nstep=2 loss=0.5\n")
    result = await client.call_tool("plot_run", {"host": "gpu1", "run_id": "r2"})
    res = structured(result)
    assert res["image"] is None and "pip install" in res["plot_unavailable"]
    assert res["runs"][0]["series"][0]["last"] == 0.5 and not [c for c in result.content if c.type == "image"]


def test_log_formats_parse_to_the_same_series() -> None:
    text = ("step=1 loss=2.0 acc: 0.1\n12:00:01 INFO step: 2 loss: 1.5 lr=1e-3\n"
            '{"step": 3, "loss": 1.0, "acc": 0.3}\n{"step": 4, "loss": "nan"}\n')
    s = parse_text(text)
    assert [p[0] for p in s["loss"]] == [1, 2, 3, 4] and s["loss"][:3] == [(1, 2.0), (2, 1.5), (3, 1.0)]
    assert math.isnan(s["loss"][3][1]) and s["acc"] == [(1, 0.1), (3, 0.3)]
    assert parse_csv("epoch,train_loss,name\n1,0.5,a\n2,0.4,b\n") == {"train_loss": [(1, 0.5), (2, 0.4)]}
    assert summarize("acc", s["acc"]).goal == "max" and summarize("acc", s["acc"]).best == 0.3


def test_downsampling_keeps_spikes_and_nans() -> None:
    pts = [(float(i), 1.0 + i * 1e-6) for i in range(100_000)]
    pts[31_337] = (31_337.0, 500.0)
    pts[77_777] = (77_777.0, math.nan)
    kept = downsample(pts, 1000)
    assert len(kept) <= 1100 and (31_337.0, 500.0) in kept
    assert any(x == 77_777.0 and math.isnan(y) for x, y in kept)
    assert [p[0] for p in kept] == sorted(p[0] for p in kept)


async def test_a_csv_in_the_runs_workdir_is_read(durable_box: Box, client) -> None:
    crafted_run(durable_box, "csvrun", "starting\n")
    (durable_box.work / "metrics.csv").write_text("epoch,train_loss,val_acc\n" + "".join(
        f"{e},{1 / e:.4f},{e / 10:.2f}\n" for e in range(1, 11)))
    res = structured(await client.call_tool("plot_run", {"host": "gpu1", "run_id": "csvrun", "save": False}))
    rc = res["runs"][0]
    assert rc["sources"] == ["workdir/metrics.csv"] and res["series"] == ["train_loss", "val_acc"]
    acc = next(s for s in rc["series"] if s["key"] == "val_acc")
    assert acc["goal"] == "max" and acc["best"] == 1.0 and acc["last_step"] == 10 and acc["trend"] == "improving"


def write_tfevents(folder: Path, series: dict[str, list[float]]) -> None:
    """A TensorBoard event file as TensorBoard's own writer makes it (TF1 simple_value scalars)."""
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(folder))
    for step in range(len(next(iter(series.values())))):
        values = [summary_pb2.Summary.Value(tag=tag, simple_value=vals[step]) for tag, vals in series.items()]
        writer.add_event(event_pb2.Event(step=step, wall_time=1.0 + step, summary=summary_pb2.Summary(value=values)))
    writer.close()


async def test_tensorboard_event_files_in_the_workdir_are_read(durable_box: Box, client) -> None:
    tb_dir = durable_box.work / "tb" / "train"
    tb_dir.mkdir(parents=True)
    loss = [1.0 / (i + 1) for i in range(30)] + [float("nan")]
    write_tfevents(tb_dir, {"train/loss": loss, "lr": [0.1] * 31})
    crafted_run(durable_box, "tbrun", "no metrics in this log\n")
    res = structured(await client.call_tool("plot_run", {"host": "gpu1", "run_id": "tbrun", "save": False,
                                                         "series": ["train/loss"]}))
    run = res["runs"][0]
    assert any(src.startswith("tfevents:tb/train/events.out.tfevents.") for src in run["sources"]), run["sources"]
    assert set(run["available"]) >= {"train/loss", "lr"}
    (s,) = run["series"]
    assert s["points"] == 31 and s["nan_count"] == 1 and s["first_nonfinite_step"] == 30
