"""Security: a job on the local box gets an allow-listed environment plus the secrets its launch
names — never the server's other variables (platform API keys, whatever the MCP client config
passed)."""

from __future__ import annotations

import os

from mcp_server.hosts.local import box_env
from tests.conftest import structured
from tests.run.jobs.test_launch import launch, wait_status


async def test_security_a_local_job_never_sees_an_unnamed_server_variable(env, client, tmp_path, monkeypatch) -> None:
    durable = tmp_path / "durable"
    env.write_inventory({"gpu1": {"destination": "local", "durable_root": str(durable)}})
    unnamed = "rp-live-" + os.urandom(6).hex()
    named = "wandb-" + os.urandom(6).hex()
    monkeypatch.setenv("RUNPOD_API_KEY", unnamed)
    monkeypatch.setenv("SOME_CLIENT_SETTING", unnamed)
    monkeypatch.setenv("WANDB_API_KEY", named)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    run = await launch(client, command="env | sort; echo named=${#WANDB_API_KEY}", secret_env=["WANDB_API_KEY"],
                       probe_s=1)
    await wait_status(client, run["run_id"], {"succeeded"})
    log = (durable / ".rgt" / "runs" / run["run_id"] / "log").read_text()
    assert unnamed not in log and "RUNPOD_API_KEY" not in log and "SOME_CLIENT_SETTING" not in log
    assert f"named={len(named)}" in log, "the named secret must reach the job"
    assert "CUDA_VISIBLE_DEVICES=1,0" in log and "\nHOME=" in log and "\nPATH=" in log
    t = structured(await client.call_tool("tail_logs", {"host": "gpu1", "run_id": run["run_id"]}))
    assert unnamed not in str(t)


def test_the_allow_list_keeps_what_a_training_job_needs() -> None:
    got = box_env({"PATH": "/bin", "LC_ALL": "C.UTF-8", "CUDA_HOME": "/usr/local/cuda", "CONDA_PREFIX": "/opt/c",
                   "AWS_SECRET_ACCESS_KEY": "x", "OPENAI_API_KEY": "y", "GITHUB_TOKEN": "z", "HF_TOKEN": "t"})
    assert got == {"PATH": "/bin", "LC_ALL": "C.UTF-8", "CUDA_HOME": "/usr/local/cuda", "CONDA_PREFIX": "/opt/c"}
