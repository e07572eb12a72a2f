"""A secret reaches the job byte for byte whatever its base64 padding. A value whose length is 2
mod 3 is padded with one '=', which `IFS='=' read` drops in bash: GNU base64 still decoded the
short text, with "base64: invalid input" on the wrapper's stderr (a Slurm job's log showed it), and
a stricter decoder would have given the job nothing. The wrapper now splits the line by hand."""

from __future__ import annotations

import hashlib
import os
from typing import Any

import pytest

from tests.conftest import structured
from tests.support.wait import until


@pytest.mark.parametrize("length", [21, 22, 23])  # padding "", "==", "="
async def test_a_secret_of_any_length_arrives_whole(durable_box: Any, client: Any, monkeypatch: pytest.MonkeyPatch,
                                                    length: int) -> None:
    secret = (os.urandom(length).hex())[:length]
    monkeypatch.setenv("API_TOKEN", secret)
    res = structured(await client.call_tool("launch_detached", {
        "host": "gpu1", "command": 'printf "%s" "$API_TOKEN" | sha256sum | cut -c1-64',
        "secret_env": ["API_TOKEN"], "workdir": str(durable_box.work), "probe_s": 0}))
    run = res["outcomes"][0]["launch"]

    async def done() -> dict[str, Any] | None:
        t = structured(await client.call_tool("tail_logs", {"host": "gpu1", "run_id": run["run_id"]}))
        return t if t["state"]["status"] in ("succeeded", "failed") else None

    t = await until(done, timeout=30, what="the job to end")
    assert t["state"]["status"] == "succeeded"
    assert hashlib.sha256(secret.encode()).hexdigest() in t["text"]
    assert "invalid input" not in t["text"]
