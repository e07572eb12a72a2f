"""Security (issue 30): whatever a box prints, every tool's result stays within its byte budget.

A hostile or broken box prints 25 MB where a tool expects a few lines: fakes first on the test
sshd's PATH (nvidia-smi, ps, conda, python3, sha256sum, openssl, du) print ~25 MB of lines shaped
like the real output, and planted run dirs hold a 25 MB log, 200-record listings with 70 KB
run.json files and 64 metric keys of 128 characters. Each tool that parses box output is called
through the real MCP client: its structured content and its text each stay within the call's
budget (the cut result still validates against the tool's full output schema and says what was
cut, in both), the call returns within TOOL_S, and the server answers the next call."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from mcp_server.settings import OUTPUT_CAP_BYTES
from mcp_server.tools._bounded import RESULT_MAX_BYTES, bound_structured, budget, wire_size
from mcp_server.tools.surface import MAX_LINKS, bounded_call
from tests.conftest import structured
from tests.support.sshd import Sshd

HOSTILE_BYTES = 25_000_000
TOOL_S = 40  # every tool returns well inside Claude Desktop's ~60 s
RECORD = {"schema": "remote-gpu-trainer/run/v1", "backend": "shell", "command": "python train.py",
          "started_at": 1_700_000_000.0}


def hostile_lines(path: Path, line: Callable[[int], str], total: int = HOSTILE_BYTES) -> Path:
    """A file of `line(0)`, `line(1)`, ... until it holds `total` bytes (made once per module)."""
    if not path.exists():
        n = total // len(line(0)) + 1
        path.write_text("".join(line(i) for i in range(n)))
    return path


@dataclass
class Hostile:
    """The test box (inventory host gpu1 over the test sshd) and what a test planted on it."""

    durable: Path
    fakebin: Path
    data: Path
    faked: list[str] = field(default_factory=list)
    launched: list[str] = field(default_factory=list)

    def fake(self, name: str, cases: dict[str, Path], default: Path | None = None) -> None:
        """`name` first on the box's PATH: for arguments matching a case pattern it prints that
        file, otherwise `default` (or nothing)."""
        arms = "".join(f'  {pattern}) cat {file};;\n' for pattern, file in cases.items())
        rest = f"cat {default}" if default else "exit 0"
        script = self.fakebin / name
        script.write_text(f'#!/bin/sh\ncase "$*" in\n{arms}  *) {rest};;\nesac\n')
        script.chmod(0o755)
        self.faked.append(name)

    def unfake(self) -> None:
        for name in self.faked:
            (self.fakebin / name).unlink(missing_ok=True)
        self.faked.clear()

    def lines(self, name: str, line: Callable[[int], str]) -> Path:
        return hostile_lines(self.data / name, line)

    def run(self, run_id: str, log: Path | None = None, **record: Any) -> Path:
        """A run dir as the wrapper leaves it (ended, exit 0) with `log` as its log."""
        d = self.durable / ".rgt" / "runs" / run_id
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({**RECORD, "run_id": run_id, "name": run_id, **record}))
        if log is not None:
            (d / "log").hardlink_to(log)  # 25 MB, written once
        else:
            (d / "log").write_text("")
        (d / "exit_code").write_text("0\n")
        (d / "ended_at").write_text("1700000060\n")
        return d


@pytest.fixture(scope="module")
def hostile_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile")


@pytest.fixture
def hostile(env, box: Sshd, tmp_path: Path, hostile_data: Path) -> Iterator[Hostile]:
    durable = tmp_path / "durable"
    durable.mkdir()
    env.write_inventory({"gpu1": {"destination": "testbox", "profile": "generic-ssh", "durable_root": str(durable),
                                  "scratch_root": str(tmp_path / "scratch")}})
    h = Hostile(durable, box.fakebin, hostile_data)
    yield h
    h.unfake()
    for run_id in h.launched:  # the sleepers a test started, whatever became of the test
        with contextlib.suppress(OSError, ValueError):
            pgid = run_pgid(h, run_id)
            if run_id in Path(f"/proc/{pgid}/cmdline").read_text():  # still that run's wrapper
                os.killpg(pgid, signal.SIGKILL)


def gpu_row(i: int) -> str:
    return f"{i}, NVIDIA H100 80GB HBM3 {'x' * 40}, GPU-{i:036d}, 81559, 80000, 100, 90, 550.54.15, 0\n"


def pid_row(i: int) -> str:
    return f"{4_200_000 + i}, 10, GPU-{i:0100d}\n"


def ps_row(pgid: int) -> Callable[[int], str]:
    return lambda i: f"{4_200_000 + i} {pgid} S /bin/sleep 600 {'y' * 90}\n"


def metric_line(i: int) -> str:
    """A JSON metrics line: 64 series whose keys are as long as a key may be (128 characters)."""
    return json.dumps({"step": i, f"{'k' * 124}{i % 64:04d}": i * 0.5}) + "\n"


async def launch_sleeper(h: Hostile, c) -> str:
    res = structured(await c.call_tool("launch_detached", {"host": "gpu1", "command": "sleep 600", "probe_s": 0}))
    run_id: str = res["outcomes"][0]["launch"]["run_id"]
    h.launched.append(run_id)
    return run_id


def run_pgid(h: Hostile, run_id: str) -> int:
    return int((h.durable / ".rgt" / "runs" / run_id / "pid").read_text())


Scenario = Callable[[Hostile, Any], Awaitable[list[dict[str, Any]]]]


async def audit_box(h: Hostile, c) -> list[dict[str, Any]]:
    h.fake("nvidia-smi", {"*--query-gpu=index,name*": h.lines("gpus", gpu_row),
                          "*--query-compute-apps*": h.lines("pids", pid_row)})
    return [{"host": "gpu1", "detail": "all"}]


async def reap_vram(h: Hostile, c) -> list[dict[str, Any]]:
    h.fake("nvidia-smi", {"*--query-compute-apps*": h.lines("pids", pid_row)}, h.lines("gpus", gpu_row))
    return [{"host": "gpu1", "min_age_s": 0}]


async def inspect_run(h: Hostile, c) -> list[dict[str, Any]]:
    run_id = await launch_sleeper(h, c)
    h.fake("nvidia-smi", {}, h.lines("inspect-gpus", lambda i: f"{i}, 100, 90, 80000, 81559, 300.5{' ' * 90}\n"))
    return [{"host": "gpu1", "run_id": run_id, "window_s": 2, "image": False}]


async def tail_logs(h: Hostile, c) -> list[dict[str, Any]]:
    log = h.data / "long-log"
    if not log.exists():
        short = "".join(f"step {i} loss={i * 0.1:.3f} {'z' * 100}\n" for i in range(100_000))
        log.write_text("L" * (HOSTILE_BYTES // 2) + "\n" + short)
    h.run("hostile-log-1", log)
    args = {"host": "gpu1", "run_id": "hostile-log-1"}
    return [args, {**args, "max_bytes": 256 * 1024}, {**args, "lines": 5000}, {**args, "offset": 0}]


async def list_runs(h: Hostile, c) -> list[dict[str, Any]]:
    for i in range(200):  # the name field is read from the first 64 KiB of each run.json
        h.run(f"fat-{i:03d}", name="n" * 70_000)
    h.fake("ps", {}, h.lines("ps", lambda i: f"{4_200_000 + i} {4_200_000 + i} S /bin/sleep 600 {'y' * 90}\n"))
    return [{"host": "gpu1", "limit": 200}]


async def wait_for_run(h: Hostile, c) -> list[dict[str, Any]]:
    h.run("hostile-wait-1", h.lines("one-line", lambda i: "W" * HOSTILE_BYTES + "\n"))
    h.fake("ps", {}, h.lines("ps-1", ps_row(1)))
    return [{"host": "gpu1", "run_id": "hostile-wait-1", "timeout_s": 5}]


async def plot_run(h: Hostile, c) -> list[dict[str, Any]]:
    metrics = h.lines("metrics", metric_line)
    run_ids = [f"hostile-plot-{i}" for i in range(8)]  # overlaid: 8 x 64 series
    for run_id in run_ids:
        h.run(run_id, metrics)
    return [{"host": "gpu1", "run_ids": run_ids, "save": False}]


async def verify_artifacts(h: Hostile, c) -> list[dict[str, Any]]:
    root = h.durable / "results" / "r1"
    root.mkdir(parents=True)
    for i in range(3):
        (root / f"m{i}.json").write_text(json.dumps({"acc": i}))
    hashes = h.lines("hashes", lambda i: f"{i:064x}  ./m{i}.json {'q' * 40}\n")
    for name in ("sha256sum", "python3", "python", "openssl"):
        h.fake(name, {}, hashes)
    return [{"host": "gpu1", "root": str(root), "roster": ["*.json"], "budget_s": 15}]


async def prepare_box(h: Hostile, c) -> list[dict[str, Any]]:
    noise = h.lines("noise", lambda i: f"{i} {'p' * 120}\n")
    for name in ("conda", "python3", "python"):
        h.fake(name, {}, noise)
    return [{"host": "gpu1"}]


async def aggregate_results(h: Hostile, c) -> list[dict[str, Any]]:
    scratch = h.durable.parent / "scratch" / "sweep"
    for i in range(210):  # names as long as a file name may be; three finished, the rest still running
        cell = scratch / f"cell-{i:03d}-{'c' * 240}"
        cell.mkdir(parents=True)
        (cell / "metrics.json").write_text("{}")
        if i < 3:
            (cell / "DONE").write_text("")
    return [{"host": "gpu1", "root": str(scratch), "cells": "cell-*", "name": "agg"}]


async def prune_code(h: Hostile, c) -> list[dict[str, Any]]:
    code = h.durable / "code" / "proj"
    (code / ".meta").mkdir(parents=True)
    ids = [f"{i:016x}" for i in range(4)]
    for sid in ids:
        (code / sid).mkdir()
        (code / ".meta" / f"{sid}.sha").write_text("x\n")
    for i in range(200):  # runs that name a snapshot: what the plan keeps
        h.run(f"user-{i:03d}-{'u' * 60}", code_snapshot=ids[i % 4])
    h.fake("du", {}, h.lines("du", lambda i: f"{i}\t/{'d' * 120}\n"))
    return [{"host": "gpu1", "project": "proj", "keep": 1}]


async def cancel_run(h: Hostile, c) -> list[dict[str, Any]]:
    run_id = await launch_sleeper(h, c)
    h.fake("ps", {}, h.lines(f"ps-{run_id}", ps_row(run_pgid(h, run_id))))
    return [{"host": "gpu1", "run_id": run_id, "grace_s": 0.5}]


SCENARIOS: dict[str, Scenario] = {f.__name__: f for f in (
    audit_box, reap_vram, inspect_run, tail_logs, list_runs, wait_for_run, plot_run, verify_artifacts,
    prepare_box, aggregate_results, prune_code, cancel_run)}


def text_of(res: Any) -> str:
    return "\n".join(getattr(b, "text", "") or "" for b in res.content if getattr(b, "type", "") == "text")


def assert_bounded(tool: str, args: dict[str, Any], res: Any, schema: dict[str, Any] | None) -> None:
    text = text_of(res)
    assert len(text.encode()) <= OUTPUT_CAP_BYTES, f"{tool}: its text is {len(text.encode())} bytes"
    assert sum(b.type == "resource_link" for b in res.content) <= MAX_LINKS + 2, tool
    if res.is_error:
        return
    data = res.structured_content
    assert data is not None, tool
    size = wire_size(data)
    assert size <= budget(args), f"{tool}: its structured result is {size} bytes (budget {budget(args)})"
    if schema is not None:
        jsonschema.validate(data, schema)
    if data.get("totals"):  # cut: the text says so too, with the full lengths
        path, total = next(iter(data["totals"].items()))
        assert data["truncated"] is True, tool
        assert "truncated: " in text and f"{path}={total}" in text, f"{tool}: the text does not say what was cut"


async def full_output_schema(c, tool: str) -> dict[str, Any] | None:
    page = await c.read_resource(f"schemas://tools/{tool}")
    schema: dict[str, Any] | None = json.loads(page.contents[0].text)["outputSchema"]
    return schema


@pytest.mark.parametrize("tool", list(SCENARIOS))
async def test_security_25_mb_of_box_output_keeps_each_result_within_its_budget_and_the_server_serving(
        tool: str, hostile: Hostile, client) -> None:
    async with client.session() as c:
        calls = await SCENARIOS[tool](hostile, c)
        schema = await full_output_schema(c, tool)
        for args in calls:
            started = time.monotonic()
            with anyio.fail_after(TOOL_S):
                res = await c.call_tool(tool, args)
            assert time.monotonic() - started < TOOL_S
            assert_bounded(tool, args, res, schema)
        hostile.unfake()
        again = await c.call_tool("list_runs", {"host": "gpu1", "limit": 5})
        assert not again.is_error, "the server keeps serving"


async def test_every_full_output_schema_names_truncated_and_totals_and_the_published_list_stays_lean(client) -> None:
    async with client.session() as c:
        tools = (await c.list_tools()).tools
        for tool in tools:
            if tool.output_schema is None:
                continue
            assert tool.output_schema == {"type": "object"}, tool.name  # tools/list costs no more
            props = (await full_output_schema(c, tool.name) or {})["properties"]
            assert props["truncated"]["type"] == "boolean" and props["totals"]["type"] == "object", tool.name


async def test_a_cut_result_reads_the_same_in_json_text_mode(hostile: Hostile, client, monkeypatch) -> None:
    monkeypatch.setenv("RGT_RESULT_TEXT", "json")
    async with client.session() as c:
        (args,) = await aggregate_results(hostile, c)
        res = await c.call_tool("aggregate_results", args)
    data = structured(res)
    assert data["truncated"] is True and data["totals"]["cells"] == 200, data["totals"]
    assert json.loads(res.content[0].text) == data, "the text is a JSON copy of what was kept"
    assert wire_size(data) <= RESULT_MAX_BYTES


# The bound itself, on JSON data: maps and keys are cut like lists and strings, every cut is
# counted in totals, and a cut the tool's output schema refuses is never sent.
def test_a_map_with_many_keys_is_cut_like_a_list_and_each_cut_is_counted() -> None:
    data = {"files": {f"{i:04d}{'f' * 3000}": {"size": i} for i in range(5000)}, "note": "n" * 100_000, "ok": True}
    cut = bound_structured(data, 16_000, lambda _: True)
    assert cut is not None and wire_size(cut) <= 16_000 and cut["truncated"] is True
    assert cut["totals"]["files"] == 5000 and cut["totals"]["note"] == 100_000, cut["totals"]
    assert 0 < len(cut["files"]) < 5000 and all(len(k) <= 2001 for k in cut["files"]) and cut["ok"] is True
    small = {"files": {"a": {"size": 1}}, "ok": True}
    assert bound_structured(small, 16_000, lambda _: True) is small


def test_a_result_no_valid_cut_fits_becomes_a_coded_error_with_a_next_step() -> None:
    schema = {"type": "object", "required": ["rows"],
              "properties": {"rows": {"type": "array", "minItems": 1000}, "truncated": {"type": "boolean"}}}
    validator = jsonschema.Draft202012Validator(schema)
    result = {"content": [{"type": "text", "text": "{}"}], "structuredContent": {"rows": ["r" * 50] * 5000}}
    out = bounded_call(result, "list_runs", 16_000, validator.is_valid)
    assert out["isError"] is True and "structuredContent" not in out
    text = out["content"][0]["text"]
    assert text.startswith("Error executing tool list_runs: [ERROR]") and "16000 bytes" in text
    assert "next: ask for less" in text and "r" * 50 not in text

