"""verify_artifacts on a run that is still running answers "still running, verify after it
ends" and writes nothing: no manifest on the box, no local copy or PULL_VERIFIED.json, no ledger
verification. Once the run ends, the same call verifies as usual."""

from __future__ import annotations

import json
from pathlib import Path

from mcp_server.ledger import Ledger
from tests.conftest import structured
from tests.support.wait import until_sync
from tests.verify.artifacts.pulls import until_done, verify


async def test_verify_on_a_live_run_says_still_running_and_writes_nothing(results, client, env) -> None:
    gate = results / "go"
    command = f"mkdir -p out && echo '{{\"acc\": 0.5}}' > out/metrics.json; while [ ! -f {gate} ]; do sleep 0.1; done"
    launched = structured(await client.call_tool("launch_detached", {
        "host": "gpu1", "command": command, "workdir": str(results), "outputs": ["out/metrics.json"],
        "probe_s": 0}))["outcomes"][0]["launch"]
    run_dir = Path(launched["run_dir"])
    until_sync(lambda: (results / "out" / "metrics.json").is_file(), what="the run to write its output")
    before = sorted(p.name for p in results.iterdir())
    try:
        r = await verify(client, run_id=launched["run_id"])
        assert r["done"] is False and r["passed"] is None and r["phase"] == "run_live"
        assert "still running" in r["next_step"] and "wait_for_run" in r["next_step"]
        assert "Nothing was written" in r["next_step"] and r["manifest"] is None
        assert sorted(p.name for p in results.iterdir()) == before  # no manifest, no hashing job on the box
        assert not Path(r["dest"]).exists()
        ledger = Ledger.open(env.home / "ledger.sqlite")
        assert ledger.latest("verification", host="gpu1") is None
        ledger.close()
    finally:
        gate.write_text("")
    until_sync(lambda: (run_dir / "exit_code").is_file(), what="the run to end")
    done = await until_done(client, run_id=launched["run_id"])
    assert done["passed"] is True and json.loads(Path(done["verified_path"]).read_text())["passed"]


async def test_a_run_id_that_is_only_a_label_is_verified_as_before(results, client) -> None:
    r = await until_done(client, root=str(results), roster=["train.csv"], run_id="paper-table-2")
    assert r["passed"] is True
