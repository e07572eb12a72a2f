"""launch_detached(rerun_of=...): the identical config again under a new run id that names the
old run, on this machine and over the test sshd; nothing of the config can change in the same
call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import error_text, structured


async def launch(client: Any, **args: Any) -> dict[str, Any]:
    res = structured(await client.call_tool("launch_detached", {"host": "gpu1", "probe_s": 0, **args}))
    return dict(res["outcomes"][0]["launch"])


async def test_a_rerun_repeats_the_config_under_a_new_linked_run_id(durable_box: Any, client: Any) -> None:
    first = await launch(client, command="echo seed=$SEED > out.txt", env={"SEED": "3"},
                         workdir=str(durable_box.work), outputs=["out.txt"])
    again = await launch(client, rerun_of=first["run_id"])
    assert again["run_id"] != first["run_id"]
    old = json.loads((Path(first["run_dir"]) / "run.json").read_text())
    new = json.loads((Path(again["run_dir"]) / "run.json").read_text())
    assert new["rerun_of"] == first["run_id"]
    for key in ("command", "workdir", "env", "secret_env_names", "backend", "outputs"):
        assert new[key] == old[key], key


async def test_a_rerun_refuses_anything_that_would_change_the_config(durable_box: Any, client: Any) -> None:
    first = await launch(client, command="true", workdir=str(durable_box.work))
    with_cmd = error_text(await client.call_tool("launch_detached", {"host": "gpu1", "rerun_of": first["run_id"],
                                                                      "command": "false"}))
    assert "give no command" in with_cmd
    with_env = error_text(await client.call_tool("launch_detached", {"host": "gpu1", "rerun_of": first["run_id"],
                                                                      "env": {"SEED": "4"}}))
    assert "these would change it: env" in with_env
    missing = error_text(await client.call_tool("launch_detached", {"host": "gpu1", "rerun_of": "nope-1"}))
    assert "no run nope-1" in missing
