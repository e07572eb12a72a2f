"""The three MCP Apps views in headless Chromium, each opened the way a host opens it (the bound
tool called through a real MCP client, its `ui://` resource read and rendered in a sandboxed iframe
under the spec's default CSP, its tool calls proxied to the real server). The data is real: runs on
an inventory box on this machine, a real verified pull and a real teardown plan. The page's clock
moves only when a test advances it, so the views' 30 s timers fire exactly when told.

Every test ends with no CSP violation and no script error logged; box text carrying markup must
show as text and never run (the harness's own test proves it would see either)."""

from __future__ import annotations

import asyncio
import json
import math
import time
from pathlib import Path
from typing import Any

import pytest

from mcp_server.ledger import Ledger
from tests.conftest import Caller, Env
from tests.run.jobs.test_launch import launch, wait_status
from tests.support.wait import until
from tests.ui.conftest import AppsHost
from tests.verify.artifacts.pulls import until_done

XSS_MARK = "rgt-xss-ran"
# Markup a hostile box could print or write into a run record: it runs (sets rgtXss, logs the mark)
# if a view ever parses box text as HTML.
PAYLOAD = (f"<img src=x onerror=\"window.rgtXss=1;console.log('{XSS_MARK}')\">"
           f"<script>window.rgtXss=2;console.log('{XSS_MARK}')</script>")
VERDICT = {"pass": "PASS", "fail": "FAIL", "waived": "WAIVED", "not_required": "NOT REQUIRED"}
POLL_S = 30  # the monitor's tail_logs interval while the log moves (the views' contract)
STEPS_PER_PHASE = 8


@pytest.fixture
def gpu1(env: Env, tmp_path: Path) -> Path:
    """Inventory box `gpu1` on this machine, billed like a rented SSH box (its teardown is manual, so
    a ready plan issues a real token) at 1.25 USD/h; returns its durable root."""
    durable = tmp_path / "durable"
    durable.mkdir()
    env.write_inventory({"gpu1": {"destination": "local", "profile": "generic-ssh", "durable_root": str(durable),
                                  "scratch_root": str(tmp_path / "scratch"), "hourly_price": 1.25}})
    return durable


# --- what the tests read from the view -------------------------------------------------------------

async def texts(host: AppsHost, css: str) -> list[str]:
    return [str(e["text"]) for e in await host.query(css)]


async def attr(host: AppsHost, testid: str, name: str) -> str | None:
    found = await host.query(f'[data-testid="{testid}"]')
    assert found, f"the view has no data-testid={testid!r} element"
    value = found[0]["attrs"].get(name)
    return None if value is None else str(value)


async def disabled(host: AppsHost, testid: str) -> bool:
    found = await host.query(f'[data-testid="{testid}"]')
    assert found, f"the view has no data-testid={testid!r} element"
    return bool(found[0]["disabled"])


async def shown(host: AppsHost, css: str) -> bool:
    found = await host.query(css)
    return bool(found) and "hidden" not in found[0]["attrs"]


async def row_ids(host: AppsHost) -> list[str]:
    return [str(r["attrs"]["data-run-id"]) for r in await host.query('[data-testid="run-row"]')]


async def settled_calls(host: AppsHost, name: str, count: int, timeout: float = 20) -> list[dict[str, Any]]:
    """Wait until the view has sent exactly `count` calls of `name`, each answered."""
    async def answered() -> list[dict[str, Any]] | None:
        calls = await host.calls(name)
        return calls if len(calls) >= count and all(c.get("done") for c in calls) else None
    calls: list[dict[str, Any]] = await until(answered, timeout=timeout, interval=0.1,
                                              what=f"{count} answered {name} call(s) from the view")
    assert len(calls) == count, calls
    return calls


async def stays_at(host: AppsHost, count: int, seconds: float = 1.5) -> None:
    """No further tools/call arrives for a short window of real time (an absence has no event to
    wait for; the window only bounds how long the test looks)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        calls = await host.calls()
        assert len(calls) == count, calls[count:]
        await asyncio.sleep(0.1)


async def no_violation_and_no_script_ran(host: AppsHost) -> None:
    events = await host.events()
    assert events["violations"] == [], events["violations"]
    assert events["pageErrors"] == [], events["pageErrors"]
    assert not [m for m in events["console"] if XSS_MARK in m["text"]]
    assert await host.window_global("rgtXss") is None


# --- real runs on gpu1 -----------------------------------------------------------------------------

async def finished_run(client: Caller, command: str, **args: Any) -> dict[str, Any]:
    run = await launch(client, command=command, probe_s=0, **args)
    await wait_status(client, run["run_id"], {"succeeded", "failed"})
    return run


async def verified_results(client: Caller, durable: Path) -> None:
    """A finished run's results on gpu1, pulled and verified for real: the teardown gates pass."""
    results = durable / "results"
    await finished_run(client, f"mkdir -p {results} && echo '{{\"acc\": 0.91}}' > {results}/metrics.json")
    r = await until_done(client, host="gpu1", root=str(results), roster=["metrics.json"])
    assert r["passed"], r["findings"]


def phased_training(tmp_path: Path) -> tuple[str, list[Path]]:
    """A run that prints its log in three phases, each released by the test touching a file:
    8 steps of loss and acc, 8 more, then a hostile line and exit 0."""
    def step(i: int) -> str:
        return f"step={i} loss={2.2 * math.exp(-i / 6) + 0.05:.4f} acc={1 - 0.9 * math.exp(-i / 5):.4f}"

    phases = [[step(i) for i in range(1, 1 + STEPS_PER_PHASE)],
              [step(i) for i in range(1 + STEPS_PER_PHASE, 1 + 2 * STEPS_PER_PHASE)], [PAYLOAD]]
    parts, gates = [], []
    for n, lines in enumerate(phases, 1):
        text, gate = tmp_path / f"phase{n}.txt", tmp_path / f"go{n}"
        text.write_text("\n".join(lines) + "\n")
        parts += [f"while [ ! -e {gate} ]; do sleep 0.05; done", f"cat {text}"]
        gates.append(gate)
    return "; ".join(parts), gates


async def release(gate: Path, log: Path, lines: int) -> None:
    """Let the run print its next phase and wait until its log on the box holds `lines` lines."""
    gate.touch()
    await until(lambda: log.exists() and len(log.read_text().splitlines()) >= lines, timeout=20,
                what=f"{lines} lines in the run's log")


# --- the tests -------------------------------------------------------------------------------------

async def test_the_harness_sees_a_script_that_runs_and_a_csp_violation(apps_host: AppsHost) -> None:
    # Markup parsed as HTML runs its handler even under the default CSP ('unsafe-inline'), and a
    # fetch is refused (connect-src 'none'): the checks every view test ends with can fail.
    as_js = json.dumps(PAYLOAD).replace("</", "<\\/")
    await apps_host.mount("<!doctype html><body><p id=p></p><script>"
                          f"document.getElementById('p').innerHTML = {as_js};"
                          "fetch('/anything').catch(() => {});</script></body>")
    assert await apps_host.wait_for(lambda: apps_host.window_global("rgtXss"), "the payload to run") == "1"

    async def violations() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = (await apps_host.events())["violations"]
        return found
    seen = await apps_host.wait_for(violations, "a connect-src violation")
    assert any("connect-src" in v["text"] for v in seen), seen
    assert [m for m in (await apps_host.events())["console"] if XSS_MARK in m["text"]]


async def test_the_teardown_view_shows_a_real_plans_gates_and_confirm_sends_only_its_token(
        apps_host: AppsHost, client: Caller, gpu1: Path, env: Env) -> None:
    await verified_results(client, gpu1)
    opened = await apps_host.open("plan_teardown", {"host": "gpu1", "action": "manual"})
    assert (opened["uri"], opened["mimeType"]) == ("ui://rgt/teardown.html", "text/html;profile=mcp-app")
    plan = opened["result"]["structuredContent"]
    assert plan["ready"] and plan["token"], plan["unmet"]

    await apps_host.wait_text("plan-state", lambda t: t.startswith("READY"), "says the plan is ready")
    assert "1.25" in await apps_host.text("price")
    gates = await texts(apps_host, '[data-testid="gates"] [data-testid="gate"]')
    assert len(gates) == len(plan["gates"]) == 4
    for text, gate in zip(gates, plan["gates"], strict=True):
        assert gate["id"] in text and VERDICT[gate["state"]] in text and gate["evidence"] in text, text
    assert await texts(apps_host, '[data-testid="stops-billing"] > li') == plan["stops_billing"]
    assert await texts(apps_host, '[data-testid="keeps-billing"] > li') == plan["keeps_billing"]
    assert await texts(apps_host, '[data-testid="lost"] > li') == plan["loses"] != []
    assert not await disabled(apps_host, "confirm")
    await apps_host.screenshot("teardown")
    assert await apps_host.calls() == [], "the view calls nothing before the user confirms"

    await apps_host.click("confirm")
    result = await apps_host.wait_text("result", bool, "shows the teardown's result")
    assert "decision recorded" in result, result
    (call,) = await settled_calls(apps_host, "teardown", 1)
    assert call["arguments"] == {"action": "manual", "host": "gpu1", "token": plan["token"]}
    assert call["isError"] is False and await apps_host.calls() == [call]
    confirmed = Ledger.open(env.home / "ledger.sqlite").latest("teardown_confirm", host="gpu1")
    assert confirmed is not None and confirmed.data["plan_hash"] == plan["plan_hash"]
    assert await disabled(apps_host, "confirm"), "a plan runs once"
    await no_violation_and_no_script_ran(apps_host)


async def test_the_teardown_view_keeps_confirm_off_until_ready_and_shows_the_servers_refusal(
        apps_host: AppsHost, client: Caller, gpu1: Path, tmp_path: Path) -> None:
    blocked = await apps_host.open("plan_teardown", {"host": "gpu1", "action": "manual"})
    assert blocked["result"]["structuredContent"]["ready"] is False
    await apps_host.wait_text("plan-state", lambda t: t.startswith("NOT READY"), "says the plan is blocked")
    assert await disabled(apps_host, "confirm")
    g2 = [g for g in await texts(apps_host, '[data-testid="gate"]') if "G2" in g]
    assert g2 and "FAIL" in g2[0], g2

    await verified_results(client, gpu1)
    ready = (await apps_host.open("plan_teardown", {"host": "gpu1", "action": "manual"}))["result"]
    token = ready["structuredContent"]["token"]
    assert token
    await apps_host.wait_text("plan-state", lambda t: t.startswith("READY"), "says the plan is ready")
    # The box changes after the plan (a run starts): the server's re-check must refuse the confirm.
    gate = tmp_path / "release-live-run"
    live = await launch(client, command=f"while [ ! -e {gate} ]; do sleep 0.05; done", probe_s=0)
    try:
        await apps_host.click("confirm")
        refusal = await apps_host.wait_text("refusal", lambda t: "G1" in t, "names the unmet gate")
        assert live["run_id"] in refusal and "nothing was executed" in refusal, refusal
        assert await apps_host.text("result") == ""
        (call,) = await settled_calls(apps_host, "teardown", 1)
        assert call["arguments"] == {"action": "manual", "host": "gpu1", "token": token}
        assert call["isError"] is True
    finally:
        gate.touch()
    await no_violation_and_no_script_ran(apps_host)


async def test_the_monitor_follows_a_growing_run_by_offset_and_stops_polling_at_its_end(
        apps_host: AppsHost, gpu1: Path, tmp_path: Path) -> None:
    command, gates = phased_training(tmp_path)
    opened = await apps_host.open("launch_detached", {"host": "gpu1", "name": "phased", "command": command,
                                                       "probe_s": 0})
    assert opened["uri"] == "ui://rgt/monitor.html"
    run = opened["result"]["structuredContent"]["outcomes"][0]["launch"]
    log, run_id = Path(run["log_path"]), run["run_id"]
    await apps_host.wait_text("run-id", lambda t: t == run_id, "shows the run")
    await apps_host.wait_text("poll-status", lambda t: t == "polling", "follows the run")
    assert await apps_host.text("host") == "gpu1" and "running" in await apps_host.text("run-state")
    (first,) = await settled_calls(apps_host, "tail_logs", 1)
    assert "offset" not in first["arguments"], "the first read takes the last lines"
    # The first plot follows the first read, which has set its next timer by then: the clock may move.
    await settled_calls(apps_host, "plot_run", 1)
    assert "1.25" in await apps_host.text("cost")

    await release(gates[0], log, 1 + STEPS_PER_PHASE)  # the wrapper's header line, then the steps
    await apps_host.advance(POLL_S)
    second = (await settled_calls(apps_host, "tail_logs", 2))[1]["arguments"]
    assert second == {"host": "gpu1", "run_id": run_id, "offset": second["offset"]} and second["offset"] > 0
    points = str(2 * STEPS_PER_PHASE)  # loss and acc
    # The curve is drawn in the same turn as the next read is timed: the clock may move after it.
    await apps_host.wait_for(lambda: attr_is(apps_host, "curve", "data-points", points), "8 steps drawn")
    assert len(await apps_host.query('[data-testid="curve"] polyline, [data-testid="curve"] path')) == 2
    assert any(f"step={STEPS_PER_PHASE} " in line for line in await texts(apps_host, '[data-testid="log"] > *'))
    assert all(c["arguments"] == {"host": "gpu1", "run_id": run_id, "save": False}
               for c in await apps_host.calls("plot_run"))

    await apps_host.advance(POLL_S)  # nothing new: the next read backs off to twice the interval
    await settled_calls(apps_host, "tail_logs", 3)
    await apps_host.wait_for(lambda: text_of_id(apps_host, "next-poll", "1 m"), "the back-off shown", timeout=5)
    await apps_host.advance(POLL_S)
    await stays_at(apps_host, len(await apps_host.calls()))

    await release(gates[1], log, 1 + 2 * STEPS_PER_PHASE)
    await apps_host.advance(POLL_S)  # the backed-off read is due now
    await settled_calls(apps_host, "tail_logs", 4)
    points = str(4 * STEPS_PER_PHASE)
    await apps_host.wait_for(lambda: attr_is(apps_host, "curve", "data-points", points), "16 steps drawn")
    assert "running" in await apps_host.text("run-state")
    await apps_host.screenshot("monitor")

    await release(gates[2], log, 2 + 2 * STEPS_PER_PHASE)
    await until(lambda: (log.parent / "exit_code").exists(), timeout=20, what="the run's exit_code file")
    await apps_host.advance(POLL_S)
    await apps_host.wait_text("poll-status", lambda t: t == "stopped", "stops at the end")
    assert "succeeded" in await apps_host.text("run-state")
    lines = await texts(apps_host, '[data-testid="log"] > *')
    assert lines[-1] == PAYLOAD, lines[-3:]
    sent = len(await apps_host.calls())
    await apps_host.advance(600)  # ten minutes: past the longest back-off and the plot interval
    await stays_at(apps_host, sent)
    assert await apps_host.text("poll-status") == "stopped"
    await no_violation_and_no_script_ran(apps_host)


async def attr_is(host: AppsHost, testid: str, name: str, value: str) -> bool:
    return await attr(host, testid, name) == value


async def text_of_id(host: AppsHost, element_id: str, text: str) -> bool:
    found = await host.query(f"#{element_id}")
    return bool(found) and text in str(found[0]["text"])


async def test_the_monitor_samples_on_inspect_and_cancels_only_after_its_own_confirmation(
        apps_host: AppsHost, gpu1: Path, tmp_path: Path) -> None:
    gate = tmp_path / "never"
    opened = await apps_host.open("launch_detached", {
        "host": "gpu1", "command": f"while [ ! -e {gate} ]; do sleep 0.05; done", "probe_s": 0})
    run_id = opened["result"]["structuredContent"]["outcomes"][0]["launch"]["run_id"]
    await apps_host.wait_text("poll-status", lambda t: t == "polling", "follows the run")
    before = await apps_host.text("gpu")
    await apps_host.click("inspect")
    (sampled,) = await settled_calls(apps_host, "inspect_run", 1, timeout=40)
    assert sampled["arguments"]["run_id"] == run_id and sampled["arguments"]["host"] == "gpu1"
    assert sampled["isError"] is False
    # This box has no GPU: the sample says so (a box with one shows util and VRAM).
    await apps_host.wait_text("gpu", lambda t: t != before and not t.startswith("sampling for"), "shows the sample")
    assert not await shown(apps_host, "#cancel-box")
    await apps_host.click("cancel")
    await apps_host.wait_for(lambda: shown(apps_host, "#cancel-box"), "the in-view confirmation")
    assert await apps_host.calls("cancel_run") == [], "the first click only asks"
    await apps_host.click("cancel-confirm")
    (call,) = await settled_calls(apps_host, "cancel_run", 1)
    assert call["arguments"]["run_id"] == run_id and call["arguments"]["host"] == "gpu1"
    assert set(call["arguments"]) <= {"host", "run_id", "reason"}, call["arguments"]
    await apps_host.wait_text("run-state", lambda t: "cancelled" in t, "shows the run cancelled")
    await apps_host.wait_text("poll-status", lambda t: t == "stopped", "stops following")
    await no_violation_and_no_script_ran(apps_host)


async def test_the_run_list_pages_filters_expands_a_row_and_shows_a_hostile_name_as_text(
        apps_host: AppsHost, client: Caller, gpu1: Path) -> None:
    runs = [await finished_run(client, f"echo step=1 loss=0.9; echo step=2 loss=0.{i}", name=f"r{i}")
            for i in range(1, 4)]
    failed = await finished_run(client, "echo step=1 loss=0.5; exit 3", name="broken")
    # The box is not ours to trust: its run record can say anything, markup included.
    record = Path(runs[0]["run_dir"]) / "run.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "name": PAYLOAD}))

    opened = await apps_host.open("list_runs", {"host": "gpu1", "limit": 3})
    assert opened["uri"] == "ui://rgt/runs.html"
    await apps_host.wait_for(lambda: rows_are(apps_host, 3), "the first page of 3 runs")
    info = await apps_host.text("page-info")
    assert "of 4" in info and "page 1 of 2" in info, info
    assert await disabled(apps_host, "prev-page") and not await disabled(apps_host, "next-page")
    first_page = await row_ids(apps_host)
    newest = runs[2]["run_id"]
    assert newest in first_page

    await apps_host.press(f'[data-testid="run-row"][data-run-id="{newest}"]', "Enter")
    await apps_host.wait_for(lambda: detail_drawn(apps_host), "the row's tail and curve")
    assert "step=2 loss=0.3" in (await apps_host.query('[data-testid="row-detail"]'))[0]["text"]
    await apps_host.screenshot("runs")

    await apps_host.click("next-page")
    await apps_host.wait_text("page-info", lambda t: "page 2 of 2" in t, "the second page")
    second_page = await row_ids(apps_host)
    assert len(second_page) == 1 and not set(first_page) & set(second_page)
    assert set(first_page) | set(second_page) == {r["run_id"] for r in [*runs, failed]}
    assert await disabled(apps_host, "next-page") and not await disabled(apps_host, "prev-page")
    (paged,) = [c for c in await apps_host.calls("list_runs") if "cursor" in c["arguments"]]
    assert paged["arguments"]["limit"] == 3 and paged["arguments"]["host"] == "gpu1"
    hostile = next(r for r in await apps_host.query('[data-testid="run-row"]')
                   if r["attrs"]["data-run-id"] == runs[0]["run_id"])
    assert PAYLOAD in hostile["text"], hostile["text"]

    await apps_host.click("prev-page")
    await apps_host.wait_text("page-info", lambda t: "page 1 of 2" in t, "back on the first page")
    await apps_host.select("state-filter", "failed")
    await apps_host.wait_for(lambda: rows_are(apps_host, 1), "only the failed run")
    assert await row_ids(apps_host) == [failed["run_id"]]
    assert (await apps_host.calls("list_runs"))[-1]["arguments"]["state"] == ["failed"]
    await no_violation_and_no_script_ran(apps_host)


async def rows_are(host: AppsHost, n: int) -> bool:
    return len(await host.query('[data-testid="run-row"]')) == n


async def detail_drawn(host: AppsHost) -> bool:
    """The expanded row shows its log lines and a drawn curve."""
    detail = await host.query('[data-testid="row-detail"]')
    curve = await host.query('[data-testid="row-detail"] svg[data-points]')
    return bool(detail) and "step=2" in str(detail[0]["text"]) and bool(curve) \
        and curve[0]["attrs"]["data-points"] not in ("0", None)
