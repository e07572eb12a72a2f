"""Security (denial of service): run records on a rented box are not ours to trust. Malformed,
wrong-shaped or binary run.json files are that run's problem: every other run still lists, and
the teardown plan still plans."""

from __future__ import annotations

from tests.conftest import structured
from tests.run.jobs.conftest import Box
from tests.run.jobs.test_launch import launch, wait_status

BAD = {
    "garbage-1": b"{{{ not json",
    "list-2": b"[1, 2, 3]",
    "types-3": b'{"name": 5, "started_at": {"x": 1}, "backend": ["shell"], "secret_env_names": "WANDB"}',
    "binary-4": bytes(range(256)) * 4,
    "huge-5": b'{"name": "' + b"a" * 300_000 + b'"}',
}


async def test_security_malformed_run_records_never_break_the_listing_or_the_plan(durable_box: Box, client,
                                                                                   request) -> None:
    good = await launch(client, command="echo fine", probe_s=1)
    await wait_status(client, good["run_id"], {"succeeded"})
    runs_dir = durable_box.durable / ".rgt" / "runs"
    for run_id, body in BAD.items():
        (runs_dir / run_id).mkdir()
        (runs_dir / run_id / "run.json").write_bytes(body)
    listed = structured(await client.call_tool("list_runs", {"host": "gpu1"}))
    (outcome,) = listed["outcomes"]
    assert outcome["error"] is None, outcome
    ids = {r["run_id"] for r in outcome["runs"]["runs"]}
    assert good["run_id"] in ids and set(BAD) <= ids
    action = "none" if request.node.callspec.params["durable_box"] == "local" else "manual"
    plan = structured(await client.call_tool("plan_teardown", {"host": "gpu1", "action": action}))
    assert plan["gates"][0]["id"] == "G1" and plan["gates"][0]["state"] == "pass", plan
