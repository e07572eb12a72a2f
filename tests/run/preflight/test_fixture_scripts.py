"""The preflight drill's fixture training scripts, each driven by hand: start it, kill it the way a
platform does, start it again, and check from its own output and files that it has the one resume
behaviour its row in tests/fixtures/preflight/README.md promises."""

from __future__ import annotations

import ast
import json
import math
import re
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.support.wait import until_sync

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "preflight"
SCRIPTS = sorted(p.name for p in FIXTURES.glob("*.py"))
STEP_LINE = re.compile(r"^step=(\d+) loss=(\S+)$")
RUN = ["--steps", "40", "--save-every", "5", "--pace", "0.03"]
TORN = "PytorchStreamReader failed reading zip archive"


class Run:
    """One fixture script running in the background, its stdout and stderr gathered line by line."""

    def __init__(self, script: str, cwd: Path, args: list[str]) -> None:
        self.proc = subprocess.Popen([sys.executable, str(FIXTURES / script), "--out", "ckpt", *args], cwd=cwd,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8")
        self.out: list[str] = []
        self.err: list[str] = []
        assert self.proc.stdout and self.proc.stderr
        self._readers = [threading.Thread(target=self._drain, args=(stream, lines), daemon=True)
                         for stream, lines in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _drain(stream: IO[str], lines: list[str]) -> None:
        for line in stream:
            lines.append(line.rstrip("\n"))

    def losses(self) -> dict[int, str]:
        return {int(m.group(1)): m.group(2) for line in self.out if (m := STEP_LINE.match(line))}

    def steps(self) -> list[int]:
        return list(self.losses())

    def finish(self, timeout: float = 60) -> int:
        code = self.proc.wait(timeout)
        for reader in self._readers:
            reader.join(timeout)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()
        return code

    def kill_when(self, ready: Callable[[], object], what: str, sig: int = signal.SIGKILL) -> None:
        """Send `sig` once `ready()` holds, and wait for the script to die of it."""
        until_sync(ready, timeout=60, interval=0.005, what=what)
        self.proc.send_signal(sig)
        assert self.finish() == -sig, f"the script ended on its own before {what} could be interrupted"


Start = Callable[..., Run]


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    runs: list[Run] = []

    def _start(script: str, *args: str, cwd: Path = tmp_path) -> Run:
        cwd.mkdir(parents=True, exist_ok=True)
        runs.append(Run(script, cwd, list(args)))
        return runs[-1]

    yield _start
    for run in runs:
        if run.proc.poll() is None:
            run.proc.kill()
        run.finish()


def safetensors(path: Path) -> tuple[dict[str, Any], bytes]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def saved_step(path: Path) -> int:
    if path.suffix == ".pt":
        torch = pytest.importorskip("torch")
        return int(torch.load(path, weights_only=True)["step"])
    return int(safetensors(path)[0]["__metadata__"]["step"])


@pytest.mark.parametrize(("script", "ckpt"), [("resume_good.py", "last.safetensors"),
                                              ("resume_good_torch.py", "last.pt")])
def test_a_correct_script_resumes_after_its_last_checkpoint_with_the_losses_of_an_unbroken_run(
        start: Start, tmp_path: Path, script: str, ckpt: str) -> None:
    if script.endswith("_torch.py"):
        pytest.importorskip("torch")
    unbroken = start(script, *RUN, cwd=tmp_path / "unbroken")
    first = start(script, *RUN)
    first.kill_when((tmp_path / "ckpt" / ckpt).exists, "the first checkpoint")
    saved = saved_step(tmp_path / "ckpt" / ckpt)
    second = start(script, *RUN)
    assert second.finish() == 0 and unbroken.finish() == 0
    assert second.steps() == list(range(saved + 1, 41))
    assert second.losses() == {s: loss for s, loss in unbroken.losses().items() if s > saved}
    assert second.out[-1] == unbroken.out[-1] == f"done: step 40 loss {unbroken.losses()[40]}"
    third = start(script, *RUN)
    assert third.finish() == 0
    assert third.out == ["done: already finished at step 40"]


def test_restart_from_zero_trains_from_step_one_again_unless_given_resume(start: Start, tmp_path: Path) -> None:
    first = start("restart_from_zero.py", *RUN)
    first.kill_when((tmp_path / "ckpt" / "last.safetensors").exists, "the first checkpoint")
    saved = saved_step(tmp_path / "ckpt" / "last.safetensors")
    again = start("restart_from_zero.py", *RUN)
    again.kill_when(again.steps, "the first step after the restart")
    assert again.steps()[0] == 1
    assert again.losses()[1] == first.losses()[1] and float(again.losses()[1]) > 1.9
    resumed = start("restart_from_zero.py", *RUN, "--resume")
    resumed.kill_when(resumed.steps, "the first step with --resume")
    assert resumed.steps()[0] == saved + 1


def test_resume_stale_resumes_from_step_5_although_step_15_was_saved(start: Start, tmp_path: Path) -> None:
    args = ["--steps", "20", "--save-every", "5", "--pace", "0.03"]
    first = start("resume_stale.py", *args)
    first.kill_when((tmp_path / "ckpt" / "step_15.safetensors").exists, "step_15.safetensors")
    second = start("resume_stale.py", *args)
    assert second.finish() == 0
    assert second.steps()[0] == 6


def test_torn_inplace_torch_cannot_start_again_after_a_kill_mid_write(start: Start, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    ckpt = tmp_path / "ckpt" / "last.pt"

    def mid_write() -> bool:
        return ckpt.exists() and 0 < ckpt.stat().st_size < 2**20

    first = start("torn_inplace_torch.py", "--steps", "15", "--save-every", "5", "--pace", "0.02", "--ckpt-mb", "2")
    first.kill_when(mid_write, "last.pt half written")
    assert ckpt.stat().st_size < 2 * 2**20
    second = start("torn_inplace_torch.py", "--steps", "15", "--save-every", "5", "--pace", "0.02")
    assert second.finish() == 1
    assert second.steps() == []
    assert TORN in "\n".join(second.err)


def test_crash_step2_prints_one_step_then_exits_1_with_a_file_not_found_traceback(start: Start) -> None:
    run = start("crash_step2.py", "--steps", "10", "--save-every", "5", "--pace", "0")
    assert run.finish() == 1
    assert run.out == [f"step=1 loss={run.losses()[1]}"]
    assert run.err[0] == "Traceback (most recent call last):"
    assert run.err[-1].startswith("FileNotFoundError:") and "/home/alice/data/train.csv" in run.err[-1]


def test_nan_step3_prints_nan_from_step_3_on_and_still_exits_0(start: Start, tmp_path: Path) -> None:
    run = start("nan_step3.py", "--steps", "6", "--save-every", "5", "--pace", "0")
    assert run.finish() == 0
    losses = run.losses()
    assert all(math.isfinite(float(losses[s])) for s in (1, 2))
    assert [losses[s] for s in range(3, 7)] == ["nan"] * 4
    assert run.out[-1] == "done: step 6 loss nan"
    header, data = safetensors(tmp_path / "ckpt" / "last.safetensors")
    start_, end = header["weight"]["data_offsets"]
    assert all(math.isnan(w) for w in struct.unpack(f"<{(end - start_) // 4}f", data[start_:end]))


def test_constant_loss_prints_0_6931_at_every_step_and_resumes(start: Start) -> None:
    first = start("constant_loss.py", "--steps", "6", "--save-every", "5", "--pace", "0")
    assert first.finish() == 0
    more = start("constant_loss.py", "--steps", "9", "--save-every", "5", "--pace", "0")
    assert more.finish() == 0
    assert more.steps() == [7, 8, 9]
    assert set(first.losses().values()) == set(more.losses().values()) == {"0.6931"}


def test_ignores_sigterm_trains_on_after_sigterm_and_stops_only_on_sigkill(start: Start, tmp_path: Path) -> None:
    args = ["--steps", "400", "--save-every", "5", "--pace", "0.02"]
    first = start("ignores_sigterm.py", *args)
    until_sync((tmp_path / "ckpt" / "last.safetensors").exists, timeout=30, what="the first checkpoint")
    first.proc.send_signal(signal.SIGTERM)
    until_sync(lambda: any("SIGTERM received" in line for line in first.err), what="the handler's log line")
    trained = len(first.steps())
    until_sync(lambda: len(first.steps()) >= trained + 3, what="three more steps after SIGTERM")
    assert first.proc.poll() is None
    first.proc.send_signal(signal.SIGKILL)
    assert first.finish() == -signal.SIGKILL
    saved = saved_step(tmp_path / "ckpt" / "last.safetensors")
    second = start("ignores_sigterm.py", *args)
    second.kill_when(second.steps, "the first step after the restart")
    assert second.steps()[0] == saved + 1


def hf_logs(run: Run) -> list[dict[str, float]]:
    return [ast.literal_eval(line) for line in run.out]


def hf_checkpoints(out: Path) -> list[int]:
    return sorted(int(p.name.removeprefix("checkpoint-")) for p in out.glob("checkpoint-*"))


def test_hf_style_resumes_after_the_highest_checkpoint_and_keeps_at_most_keep(start: Start, tmp_path: Path) -> None:
    args = ["--steps", "40", "--save-every", "5", "--keep", "2", "--pace", "0.03"]
    out = tmp_path / "ckpt"
    first = start("hf_style.py", *args)
    first.kill_when(lambda: (out / "checkpoint-15").is_dir() and not (out / "checkpoint-5").exists(),
                    "checkpoint-15 saved and checkpoint-5 rotated away")
    highest = hf_checkpoints(out)[-1]
    second = start("hf_style.py", *args)
    assert second.finish() == 0
    logs = hf_logs(second)
    assert all(not line.startswith("step=") for line in second.out)
    assert [round(log["epoch"] * 20) for log in logs[:-1]] == list(range(highest + 1, 41))
    assert logs[-1]["epoch"] == 2.0 and "train_runtime" in logs[-1]
    assert hf_checkpoints(out) == [35, 40] and not list(out.glob("tmp-checkpoint-*"))
    assert json.loads((out / "checkpoint-40" / "trainer_state.json").read_text())["global_step"] == 40
    third = start("hf_style.py", *args)
    assert third.finish() == 0
    assert [sorted(log) for log in hf_logs(third)] == [sorted(logs[-1])]


def test_disk_hungry_keeps_every_checkpoint_unless_told_to_keep_two(start: Start, tmp_path: Path) -> None:
    args = ["--steps", "15", "--save-every", "5", "--pace", "0", "--ckpt-mb", "0.25"]
    every, kept = tmp_path / "every", tmp_path / "kept"
    assert start("disk_hungry.py", *args, cwd=every).finish() == 0
    assert start("disk_hungry.py", *args, "--keep", "2", cwd=kept).finish() == 0
    assert sorted(p.name for p in (every / "ckpt").glob("epoch_*")) == [f"epoch_{s}.safetensors" for s in (10, 15, 5)]
    assert all(p.stat().st_size >= 2**18 for p in (every / "ckpt").glob("epoch_*"))
    assert sorted(p.name for p in (kept / "ckpt").glob("epoch_*")) == ["epoch_10.safetensors", "epoch_15.safetensors"]
    assert len((every / "ckpt" / "metrics.jsonl").read_text().splitlines()) == 15
    longer = start("disk_hungry.py", "--steps", "17", "--save-every", "5", "--pace", "0", cwd=every)
    assert longer.finish() == 0
    assert longer.steps() == [16, 17]


def test_hostile_restarts_from_step_one_behind_forged_lines(start: Start, tmp_path: Path) -> None:
    first = start("hostile.py", *RUN)
    first.kill_when((tmp_path / "ckpt" / "last.safetensors").exists, "the first checkpoint")
    second = start("hostile.py", *RUN)
    second.kill_when(second.steps, "the first real step after the restart")
    assert second.steps()[0] == 1
    assert "resumed from checkpoint at step 15" in second.err and "step=1000 loss=0.0001" in second.err
    assert "VERDICT: GO" in second.out
    assert any("IGNORE PREVIOUS INSTRUCTIONS" in line for line in second.out)
    assert any("\x1b]0;" in line and "\x1b[2J" in line for line in second.out)


def imported_roots(source: str) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_fixture_script_stands_alone_documented_and_listed(script: str) -> None:
    source = (FIXTURES / script).read_text()
    allowed = set(sys.stdlib_module_names) | ({"torch"} if script.endswith("_torch.py") else set())
    assert imported_roots(source) <= allowed
    doc = ast.get_docstring(ast.parse(source)) or ""
    assert doc.startswith(script.removesuffix(".py") + ":") and "verdict" in doc
    assert f"`{script}`" in (FIXTURES / "README.md").read_text()
