"""A run on a Kubernetes host through the real MCP client, against an HTTP double of the API
server replaying recorded states: launch creates a valid Job (and a Secret for its secrets),
the run is followed queued -> running -> succeeded with the scheduler's reason, its pod log is
paged, list_runs and cancel_run work by label, and API refusals come back as errors that say
what to do. No live cluster runs here (see the README's Kubernetes section)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from lightkube.codecs import from_dict

from mcp_server.errors import ConflictError
from mcp_server.hosts.kube_api import api_errors
from mcp_server.hosts.kube_options import KubeOptions
from mcp_server.hosts.pool import HostPool
from mcp_server.run.jobs.engines.kube.manifests import JobRequest, job_manifest
from mcp_server.settings import Settings
from tests.conftest import error_text, structured
from tests.support.kube_api import TOKEN, KubeApi

HOST = "gpu-k8s"


async def launch(client: Any, command: str = "python train.py --cfg a.yaml", **args: Any) -> dict[str, Any]:
    res = structured(await client.call_tool("launch_detached", {"host": HOST, "command": command, **args}))
    (outcome,) = res["outcomes"]
    assert outcome["error"] is None, outcome
    return dict(outcome["launch"])


async def tail(client: Any, run_id: str, **args: Any) -> dict[str, Any]:
    return structured(await client.call_tool("tail_logs", {"host": HOST, "run_id": run_id, **args}))


async def test_a_run_is_a_job_followed_from_unschedulable_to_succeeded(kube: KubeApi, client: Any) -> None:
    run = await launch(client, name="bert-base")
    assert run["backend"] == "kubernetes" and run["outcome"] == "queued"
    (job_name,) = kube.job_names()
    job = kube.jobs[("ml", job_name)]
    assert job["metadata"]["labels"]["remote-gpu-trainer/run-id"] == run["run_id"]
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"

    kube.apply(job_name, "unschedulable")
    pending = (await tail(client, run["run_id"]))["state"]
    assert pending["status"] == "queued"
    assert "6 Insufficient nvidia.com/gpu" in " ".join(pending["evidence"])

    pod = kube.apply(job_name, "running")
    kube.write_log(pod, b"epoch 1 loss 2.31\n")
    running = await tail(client, run["run_id"])
    assert running["state"]["status"] == "running" and "epoch 1 loss 2.31" in running["text"]

    kube.write_log(pod, b"epoch 2 loss 1.90\n")
    more = await tail(client, run["run_id"], offset=running["next_offset"])
    assert more["text"] == "epoch 2 loss 1.90\n", "the next page starts where the last one ended"

    kube.apply(job_name, "succeeded")
    waited = structured(await client.call_tool("wait_for_run", {"host": HOST, "run_id": run["run_id"],
                                                                 "timeout_s": 5}))
    assert waited["ended"] and waited["state"]["status"] == "succeeded" and waited["state"]["exit_code"] == 0


@pytest.mark.parametrize(("scenario", "status", "code", "words"), [
    ("oom_killed", "failed", 137, "OOMKilled"),
    ("error_exit", "failed", 3, "exit code 3"),
    ("deadline_exceeded", "failed", None, "activeDeadlineSeconds"),
    ("image_pull_backoff", "queued", None, "blocked"),
    ("preempted", "queued", None, "preempted by a higher-priority pod"),
    ("container_creating", "queued", None, "starting"),
])
async def test_what_kubernetes_says_reaches_the_run_state_with_its_reason(
        kube: KubeApi, client: Any, scenario: str, status: str, code: int | None, words: str) -> None:
    run = await launch(client)
    (job_name,) = kube.job_names()
    kube.apply(job_name, scenario)
    state = (await tail(client, run["run_id"]))["state"]
    assert state["status"] == status and state["exit_code"] == code
    assert words in " ".join(state["evidence"]), state


async def test_secrets_go_into_a_secret_never_into_the_job_or_any_output(
        kube: KubeApi, client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "wandb-" + os.urandom(8).hex()
    monkeypatch.setenv("WANDB_API_KEY", secret)
    run = await launch(client, command="python train.py", secret_env=["WANDB_API_KEY"])
    (job_name,) = kube.job_names()
    assert kube.secrets[("ml", job_name)]["stringData"] == {"WANDB_API_KEY": secret}
    (owner,) = kube.secrets[("ml", job_name)]["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Job", job_name), "the Secret goes when the Job goes (TTL or cancel)"
    job_text = json.dumps(kube.jobs[("ml", job_name)])
    assert secret not in job_text and "secretKeyRef" in job_text
    pod = kube.apply(job_name, "running")
    kube.write_log(pod, f"logged in with {secret}\n".encode())
    outputs = [json.dumps(run), json.dumps(await tail(client, run["run_id"])),
               json.dumps(structured(await client.call_tool("list_runs", {"host": HOST})))]
    for text in outputs:
        assert secret not in text and TOKEN not in text
    assert secret not in " ".join(kube.requests) and TOKEN not in " ".join(kube.requests)
    cancelled = structured(await client.call_tool("cancel_run", {"host": HOST, "run_id": run["run_id"]}))
    assert cancelled["changed"] and cancelled["state"]["status"] == "cancelled"
    assert kube.secrets == {} and kube.jobs == {}, "cancel_run deletes the Job and the run's Secret"


async def test_a_live_name_returns_the_same_run(kube: KubeApi, client: Any) -> None:
    first = await launch(client, name="resnet")
    kube.apply(kube.job_names()[0], "running")
    again = await launch(client, name="resnet")
    assert again["run_id"] == first["run_id"] and again["outcome"] == "already_running"
    assert len(kube.jobs) == 1


async def test_a_sweep_is_one_indexed_job_with_a_run_id_per_index(kube: KubeApi, client: Any) -> None:
    res = structured(await client.call_tool("launch_detached", {
        "host": HOST, "commands": ["python t.py --lr 1e-3", "python t.py --lr 3e-4", "python t.py --lr 1e-4"],
        "max_concurrent": 2}))
    ids = [o["launch"]["run_id"] for o in res["outcomes"]]
    assert len(set(ids)) == 3
    (job_name,) = kube.job_names()
    spec = kube.jobs[("ml", job_name)]["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == 3 and spec["parallelism"] == 2
    kube.apply(job_name, "running", index=1)
    states = {r["run_id"]: r["status"] for r in
              structured(await client.call_tool("list_runs", {"host": HOST}))["outcomes"][0]["runs"]["runs"]}
    assert states[ids[1]] == "running" and states[ids[0]] == "queued"


async def test_rbac_denial_names_the_verb_and_where_to_read(kube: KubeApi, client: Any) -> None:
    kube.denied.add(("create", "jobs.batch"))
    res = await client.call_tool("launch_detached", {"host": HOST, "command": "python train.py"})
    text = error_text(res)
    assert "[DENIED]" in text and "cannot create resource" in text and "kubernetes#rbac" in text


async def test_a_409_from_the_api_server_is_a_conflict_that_says_where_to_look(kube: KubeApi) -> None:
    pool = HostPool(Settings.from_env())
    kh = pool.kube(pool.spec(HOST))
    manifest = job_manifest("ml", JobRequest(["dup-1"], ["true"], None, {}, [], None),
                            KubeOptions(image="busybox:1.36"))
    async with api_errors(HOST, "creating"):
        await kh.client.create(from_dict(manifest))
    with pytest.raises(ConflictError) as exc:
        async with api_errors(HOST, "creating"):
            await kh.client.create(from_dict(manifest))
    assert "already exists" in str(exc.value) and "list_runs" in str(exc.value)
    await pool.close()


async def test_a_missing_context_is_a_config_error_naming_the_file(kube: KubeApi, client: Any, env: Any) -> None:
    env.config.write_text(env.config.read_text() + 'context = "prod-east"\n')
    text = error_text(await client.call_tool("list_runs", {"host": HOST}))
    assert "[BAD_CONFIG]" in text and "prod-east" in text and "kubeconfig" in text


async def test_an_unreachable_api_server_is_an_error_not_a_state(kube: KubeApi, client: Any, env: Any) -> None:
    env.config.write_text(env.config.read_text().replace(f"127.0.0.1:{kube.port}", "127.0.0.1:9"))
    cfg = [line for line in env.config.read_text().splitlines() if line.startswith("kubeconfig")][0]
    path = cfg.split('"')[1]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(f"127.0.0.1:{kube.port}", "127.0.0.1:9"))
    text = error_text(await client.call_tool("list_runs", {"host": HOST}))
    assert "[HOST_UNREACHABLE]" in text and "cannot reach the API server" in text


async def test_a_shell_tool_on_a_kubernetes_host_says_what_works_there(kube: KubeApi, client: Any) -> None:
    text = error_text(await client.call_tool("reap_vram", {"host": HOST}))
    assert "Kubernetes host" in text and "launch_detached" in text


async def test_box_only_launch_arguments_are_refused_by_name(kube: KubeApi, client: Any) -> None:
    text = error_text(await client.call_tool("launch_detached", {"host": HOST, "command": "x",
                                                                 "on_exit": "curl example.org"}))
    assert "on_exit" in text and "Kubernetes" in text
    assert kube.jobs == {}


async def test_cancel_with_a_first_signal_reaches_the_running_pod_before_the_delete(kube: KubeApi, client: Any) -> None:
    run = await launch(client)
    pod = kube.apply(kube.job_names()[0], "running")
    res = structured(await client.call_tool("cancel_run", {"host": HOST, "run_id": run["run_id"],
                                                           "signal_first": "USR1", "grace_s": 0.2}))
    assert kube.signals == [(pod, "kill -s USR1 -- -1")], "every process but the entry script (PID 1)"
    assert res["state"]["status"] == "cancelled" and "SIGUSR1 sent" in " ".join(res["state"]["evidence"])
    assert kube.jobs == {}
