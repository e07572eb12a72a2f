"""plan_teardown, then teardown with its token, behind the Iron Law, against platform doubles (a
loopback HTTP server with the documented REST shapes, fake CLIs on PATH) and the real sshd."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from mcp_server.ledger import Ledger
from tests.conftest import error_text, structured
from tests.support.platforms import Double, fake_cli
from tests.support.wait import until
from tests.verify.artifacts.pulls import until_done, write_checkpoint

KEY = "rp_live_" + "7Q2wXk9" * 3


@pytest.fixture
def double():
    d = Double(KEY)
    yield d
    d.close()


@pytest.fixture
def rig(env, box, tmp_path, monkeypatch, double):
    monkeypatch.setenv("RUNPOD_API_KEY", KEY)
    monkeypatch.setenv("VAST_API_KEY", KEY)
    monkeypatch.setenv("LAMBDA_API_KEY", KEY)
    monkeypatch.setenv("RGT_TEARDOWN_CONFIRM_S", "4")
    results = tmp_path / "results"
    results.mkdir()
    (results / "metrics.json").write_text('{"acc": 0.91}')

    def inventory(**extra):
        entry = {"destination": "testbox", "profile": "runpod", "durable_root": str(tmp_path / "durable"),
                 "instance_id": "pod-1", "api_base": double.base, "hourly_price": 2.49,
                 "verify_roots": [str(results)], **extra}
        (tmp_path / "durable").mkdir(exist_ok=True)
        env.write_inventory({"pod": entry})

    inventory()
    double.add("pod-1", "RUNNING")
    return {"inventory": inventory, "results": results, "tmp": tmp_path}


async def plan_of(client, action="terminate", **kw) -> dict:
    return structured(await client.call_tool("plan_teardown", {"host": "pod", "action": action, **kw}))


async def confirm(client, token, action="terminate", **kw):
    return await client.call_tool("teardown", {"host": "pod", "action": action, "token": token, **kw})


async def verified(client, rig) -> dict:
    for _ in range(20):
        r = structured(await client.call_tool("verify_artifacts", {"host": "pod", "root": str(rig["results"]),
                                                                   "roster": ["metrics.json"]}))
        if r["done"]:
            assert r["passed"], r["findings"]
            return r
    raise AssertionError("verification did not finish")


async def test_the_plan_says_what_stops_keeps_and_loses_billing_and_changes_nothing(rig, client, double) -> None:
    p = await plan_of(client)
    assert p["platform"] == "runpod" and p["irreversible"] is True
    assert p["stops_billing"] == ["the GPU meter (2.49 USD/h)"]
    assert any("Network Volume" in k for k in p["keeps_billing"])
    assert any("/workspace" in x for x in p["loses"])
    assert p["ready"] is False and p["token"] is None
    assert [g["id"] for g in p["gates"]] == ["G1", "G2", "G3", "G4"]
    assert {g["id"]: g["state"] for g in p["gates"]}["G2"] == "fail"
    assert "no passing verify_artifacts" in p["unmet"][0]
    assert [c for c in double.calls if not c.startswith("GET")] == [], "a plan must not act"


async def test_teardown_succeeds_after_a_real_verified_pull_and_the_ledger_shows_each_step(
        rig, client, double, env) -> None:
    await verified(client, rig)
    p = await plan_of(client)
    assert p["ready"] is True and p["token"], p["unmet"]
    res = structured(await confirm(client, p["token"]))
    assert res["executed"] and res["outcome"]["confirmed"] and res["outcome"]["final_state"] == "gone"
    assert "DELETE /pods/pod-1" in double.calls
    kinds = [e.kind for e in reversed(Ledger.open(env.home / "ledger.sqlite").events(host="pod"))]
    tail = [k for k in kinds if k.startswith("teardown")]
    assert tail == ["teardown_plan", "teardown_confirm", "teardown_outcome"]


async def test_a_pull_holding_a_truncated_checkpoint_leaves_the_plan_not_ready(rig, client) -> None:
    results = rig["results"]
    write_checkpoint(results / "good.pth")
    whole = (results / "good.pth").read_bytes()
    (results / "best.pth").write_bytes(whole[: len(whole) // 2])  # a save cut off mid-write: no zip directory
    r = await until_done(client, host="pod", root=str(results), roster=["metrics.json", "*.pth"])
    assert r["passed"] is False
    bad = {f["path"] for f in r["findings"] if f["blocking"]}
    assert bad == {"best.pth"}, r["findings"]
    assert not json.loads(Path(r["verified_path"]).read_text())["passed"]
    p = await plan_of(client)
    assert p["ready"] is False and p["token"] is None
    g2 = next(g for g in p["gates"] if g["id"] == "G2")
    assert g2["state"] == "fail" and "FAILED: best.pth" in g2["evidence"], g2


async def test_a_live_run_blocks_the_plan_and_a_confirm(rig, client) -> None:
    await verified(client, rig)
    p = await plan_of(client)
    launched = structured(await client.call_tool("launch_detached",
                                                 {"host": "pod", "command": "sleep 60", "probe_s": 0}))
    run = launched["outcomes"][0]["launch"]
    text = error_text(await confirm(client, p["token"]))
    assert "G1 no live run" in text and run["run_id"] in text and "nothing was executed" in text
    again = await plan_of(client)
    assert again["ready"] is False and "G1" in again["unmet"][0]
    assert "cancel_run" in again["unmet"][0] and "cancel_run" in again["next_step"]
    assert "allow_unverified does not lift G1" in again["next_step"]
    stopped = structured(await client.call_tool("cancel_run", {"host": "pod", "run_id": run["run_id"], "grace_s": 1}))
    assert stopped["state"]["status"] == "cancelled"
    after = await plan_of(client)
    assert next(g for g in after["gates"] if g["id"] == "G1")["state"] == "pass"


async def test_a_finished_run_never_verified_blocks_teardown(rig, client) -> None:
    await verified(client, rig)
    out = rig["tmp"] / "run-out"
    out.mkdir()
    structured(await client.call_tool("launch_detached", {"host": "pod", "command": "echo 1 > best.json",
                                                          "workdir": str(out), "outputs": ["best.json"], "probe_s": 3}))
    p = await plan_of(client)
    assert p["ready"] is False
    g2 = next(g for g in p["gates"] if g["id"] == "G2")
    assert g2["state"] == "fail" and "declared outputs not in any passing verification" in g2["evidence"]


async def test_a_write_after_the_verification_blocks_teardown(rig, client, env) -> None:
    await verified(client, rig)
    listed_at = Ledger.open(env.home / "ledger.sqlite").latest("verification", host="pod").data["listed_at"]
    late = rig["results"] / "late-eval.json"
    late.write_text("{}")
    os.utime(late, (listed_at + 1, listed_at + 1))  # written one second after the verified listing
    p = await plan_of(client)
    g3 = next(g for g in p["gates"] if g["id"] == "G3")
    assert g3["state"] == "fail" and "late-eval.json" in g3["evidence"]


async def test_security_a_same_size_rewrite_with_its_mtime_restored_blocks_teardown(rig, client, env) -> None:
    await verified(client, rig)
    target = next(p for p in sorted(rig["results"].rglob("*")) if p.is_file() and p.stat().st_size > 0)
    st = target.stat()
    data = bytearray(target.read_bytes())
    data[0] ^= 1
    target.write_bytes(bytes(data))  # same size
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # the mtime set back: only the ctime moved
    p = await plan_of(client)
    g3 = next(g for g in p["gates"] if g["id"] == "G3")
    assert g3["state"] == "fail" and target.name in g3["evidence"] and p["token"] is None


TAMPERED = {
    "wrong type": ({"passed": "yes"}, None, "passed: Input should be a valid boolean"),
    "missing field": ({}, "files", "files: Field required"),
    "extra garbage": ({"trust_me": True}, None, "trust_me: Extra inputs are not permitted"),
}


@pytest.mark.parametrize(("update", "drop", "named"), TAMPERED.values(), ids=TAMPERED.keys())
async def test_a_tampered_verification_record_is_not_a_verification(rig, client, env, update, drop, named) -> None:
    await verified(client, rig)
    ledger = env.home / "ledger.sqlite"
    event = Ledger.open(ledger).latest("verification", host="pod")
    data = {k: v for k, v in event.data.items() if k != drop} | update
    with closing(sqlite3.connect(ledger)) as db, db:
        db.execute("UPDATE events SET data = ? WHERE id = ?", (json.dumps(data), event.id))
    p = await plan_of(client)
    assert p["ready"] is False and p["token"] is None
    g2 = next(g for g in p["gates"] if g["id"] == "G2")
    assert g2["state"] == "fail" and f"event #{event.id}" in g2["evidence"] and named in g2["evidence"], g2


async def test_tokens_from_another_plan_unknown_or_replayed_are_refused(rig, client, env) -> None:
    await verified(client, rig)
    stop = await plan_of(client, action="stop")
    assert stop["ready"]
    assert "another plan" in error_text(await confirm(client, stop["token"], action="terminate"))
    assert "did not come from a teardown plan" in error_text(await confirm(client, "0" * 32))
    ok = structured(await confirm(client, stop["token"], action="stop"))
    assert ok["outcome"]["confirmed"] and ok["outcome"]["final_state"] == "EXITED"
    assert "already used" in error_text(await confirm(client, stop["token"], action="stop"))


async def test_allow_unverified_is_recorded_and_echoed(rig, client, env) -> None:
    p = await plan_of(client, allow_unverified=True)
    assert p["ready"] and p["allow_unverified"]
    assert {g["id"]: g["state"] for g in p["gates"]}["G2"] == "waived"
    res = structured(await confirm(client, p["token"], allow_unverified=True))
    assert res["allow_unverified"] is True and "WITHOUT a verified pull" in res["message"]
    ev = Ledger.open(env.home / "ledger.sqlite").latest("teardown_confirm", host="pod")
    assert ev.data["allow_unverified"] is True and ev.data["unverified_waived"] == ["G2", "G3"]


async def test_the_plan_must_match_the_confirm_flags(rig, client) -> None:
    p = await plan_of(client, allow_unverified=True)
    text = error_text(await confirm(client, p["token"]))
    assert "teardown refused" in text and "G2" in text


async def test_two_concurrent_confirms_execute_the_verb_once(rig, client, double) -> None:
    await verified(client, rig)
    p = await plan_of(client)
    a, b = await asyncio.gather(confirm(client, p["token"]), confirm(client, p["token"]))
    assert sorted([a.is_error, b.is_error]) == [False, True]
    assert double.calls.count("DELETE /pods/pod-1") == 1


async def test_delete_ok_but_the_pod_remains_is_not_reported_as_stopped(rig, client, double, monkeypatch) -> None:
    monkeypatch.setenv("RGT_TEARDOWN_CONFIRM_S", "1")  # it never stops: no need to poll long to see that
    double.add("pod-1", "RUNNING", mode="remains")
    p = await plan_of(client, allow_unverified=True)
    res = structured(await confirm(client, p["token"], allow_unverified=True))
    assert res["executed"] and res["outcome"]["confirmed"] is False
    assert "NOT confirmed" in res["message"] and "check the console" in res["message"]


async def test_vast_destroy_is_eventually_consistent_without_a_false_failure(rig, client, double) -> None:
    rig["inventory"](profile="vastai", instance_id="777")
    double.add("777", "running", mode="eventual", lag=2)
    p = await plan_of(client, action="destroy", allow_unverified=True)
    assert p["offer_park_first"] is None or "stop" in p["offer_park_first"]
    res = structured(await confirm(client, p["token"], action="destroy", allow_unverified=True))
    assert res["outcome"]["confirmed"] and res["outcome"]["polls"] >= 2


async def test_lambda_terminate_that_hangs_is_requeried_not_retried(rig, client, double, monkeypatch) -> None:
    monkeypatch.setenv("RGT_HTTP_TIMEOUT", "1")  # the hang outlasts any client timeout: keep ours short
    rig["inventory"](profile="lambda", instance_id="lam-1")
    double.add("lam-1", "active", mode="hang")
    p = await plan_of(client, allow_unverified=True)
    res = structured(await confirm(client, p["token"], allow_unverified=True))
    assert "did not answer" in res["platform_answer"] and "re-queried" in res["platform_answer"]
    assert res["outcome"]["confirmed"]
    assert double.calls.count("POST /instance-operations/terminate") == 1


def cli_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, instances: dict[str, str],
                key_env: str) -> Path:
    """The fake platform CLI `name` first on PATH, its instances' states in a JSON file (returned)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    state = tmp_path / f"{name}.json"
    state.write_text(json.dumps(instances))
    fake_cli(bindir, name, state, key_env)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    return state


async def test_fake_vastai_cli_on_path_is_used_with_the_key_only_in_its_environment(
        rig, client, tmp_path, monkeypatch) -> None:
    state = cli_on_path(tmp_path, monkeypatch, "vastai", {"888": "running"}, "VAST_API_KEY")
    rig["inventory"](profile="vastai", instance_id="888")
    p = await plan_of(client, action="stop", allow_unverified=True)
    res = structured(await confirm(client, p["token"], action="stop", allow_unverified=True))
    assert res["outcome"]["confirmed"] and res["outcome"]["final_state"] == "exited"
    argv = Path(str(state) + ".argv").read_text()
    assert '["stop", "instance", "888"]' in argv and KEY not in argv


async def test_fake_runpodctl_on_path_terminates(rig, client, tmp_path, monkeypatch) -> None:
    state = cli_on_path(tmp_path, monkeypatch, "runpodctl", {"pod-1": "RUNNING"}, "RUNPOD_API_KEY")
    p = await plan_of(client, allow_unverified=True)
    res = structured(await confirm(client, p["token"], allow_unverified=True))
    assert res["outcome"]["confirmed"] and json.loads(state.read_text()) == {}


async def test_runpodctls_deprecation_warning_on_stderr_does_not_break_reading_the_pod(
        rig, client, tmp_path, monkeypatch) -> None:
    # runpodctl 2.x still takes `get pod` / `stop pod` but warns on stderr; the JSON is on stdout.
    state = cli_on_path(tmp_path, monkeypatch, "runpodctl", {"pod-1": "RUNNING"}, "RUNPOD_API_KEY")
    p = await plan_of(client, action="stop", allow_unverified=True)
    res = structured(await confirm(client, p["token"], action="stop", allow_unverified=True))
    assert res["outcome"]["confirmed"] and res["outcome"]["final_state"] == "EXITED", res["outcome"]
    assert json.loads(state.read_text()) == {"pod-1": "EXITED"}


async def test_autodl_power_off_runs_shutdown_in_the_box(rig, client, box, monkeypatch) -> None:
    monkeypatch.setenv("RGT_TEARDOWN_CONFIRM_S", "1")  # the test box never really powers off
    rig["inventory"](profile="autodl")
    fake = box.fakebin / "shutdown"
    marker = rig["tmp"] / "shutdown-called"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {marker}\n")
    fake.chmod(0o755)
    try:
        p = await plan_of(client, action="power-off")
        assert p["park"] and not p["irreversible"] and p["executor"] == "in-box"
        assert {g["id"]: g["state"] for g in p["gates"]}["G2"] == "not_required", "a park keeps the disk"
        release = await plan_of(client, action="release")
        assert "power-off (关机)" in release["offer_park_first"]
        res = structured(await confirm(client, p["token"], action="power-off"))
        await until(lambda: marker.exists() and marker.read_text().strip(), what="the detached shutdown to run")
        assert marker.read_text().strip() == "-h now"
        assert res["executed"]
    finally:
        fake.unlink()


async def test_manual_platforms_tell_the_user_exactly_what_to_do(env, box, client, tmp_path) -> None:
    env.write_inventory({"cn": {"destination": "testbox", "profile": "china", "durable_root": str(tmp_path)}})
    args = {"host": "cn", "action": "release", "allow_unverified": True}
    p = structured(await client.call_tool("plan_teardown", args))
    assert p["executor"] == "manual" and "数据盘" in p["manual_steps"]
    res = structured(await client.call_tool("teardown", {"host": "cn", "action": "release", "token": p["token"],
                                                         "allow_unverified": True}))
    assert res["executed"] is False and "stopped by hand" in res["message"]


async def test_an_unknown_action_names_the_profiles_actions(rig, client) -> None:
    text = error_text(await client.call_tool("plan_teardown", {"host": "pod", "action": "destroy"}))
    assert "'stop'" in text and "'terminate'" in text


async def test_no_credential_value_appears_in_any_output_log_or_ledger(rig, client, double, env, caplog) -> None:
    import logging

    caplog.set_level(logging.DEBUG)
    await verified(client, rig)
    p = await plan_of(client)
    res = await confirm(client, p["token"])
    everything = json.dumps([p, res.structured_content, [getattr(c, "text", "") for c in res.content]])
    assert KEY not in everything
    assert KEY not in caplog.text
    assert KEY.encode() not in (env.home / "ledger.sqlite").read_bytes()
    for f in env.home.rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f
