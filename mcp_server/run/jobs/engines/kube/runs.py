"""Runs on a Kubernetes host: launch (a Job, an Indexed Job for a sweep, a Secret for its
secrets), state, logs, list and cancel, through the API server. Two list calls per namespace
(Jobs and pods, by the server's label) answer the state of every run at once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lightkube import AsyncClient
from lightkube.codecs import from_dict
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Pod, Secret
from lightkube.types import CascadeType

from mcp_server.errors import InputError, NotFoundError
from mcp_server.hosts.kube_api import MANAGED_BY, KubeConnection, api_errors, label_value
from mcp_server.hosts.kube_options import KubeOptions
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.redact import Redactor
from mcp_server.run.jobs.engines.kube.manifests import (
    ANNOTATION_CELLS,
    ANNOTATION_COMMAND,
    CONTAINER,
    LABEL_NAME,
    LABEL_RUN,
    JobRequest,
    job_manifest,
    object_name,
    secret_manifest,
)
from mcp_server.run.jobs.engines.kube.states import latest_pod, run_state
from mcp_server.run.jobs.rundir import check_run_id, new_run_id
from mcp_server.run.jobs.status import ENDED, LIVE, RunState

SELECTOR: dict[str, str | None] = dict(MANAGED_BY)
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL = "job-name"


def options(spec: HostSpec, override: KubeOptions | None = None) -> KubeOptions:
    return (spec.kubernetes or KubeOptions()).merged(override)


@dataclass(frozen=True)
class KubeRun:
    """One run as the namespace shows it: its Job (None once gone), index in a sweep, pods."""

    run_id: str
    job: Mapping[str, Any] | None
    index: int | None
    pods: list[Mapping[str, Any]]

    @property
    def state(self) -> RunState:
        return run_state(self.job, self.pods, index=self.index)


async def _objects(client: AsyncClient, host: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    async with api_errors(host, "listing the namespace's Jobs and pods"):
        jobs, pods = await asyncio.gather(_listed(client, Job), _listed(client, Pod))
    return jobs, pods


async def _listed(client: AsyncClient, kind: Any) -> list[dict[str, Any]]:
    return [o.to_dict() async for o in client.list(kind, labels=dict(SELECTOR))]


def runs_of(jobs: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]) -> dict[str, KubeRun]:
    """Every run the namespace holds, by run id (a sweep's Job stands for each of its cells)."""
    by_job: dict[str, list[Mapping[str, Any]]] = {}
    for p in pods:
        labels = (p.get("metadata") or {}).get("labels") or {}
        by_job.setdefault(labels.get(JOB_NAME_LABEL) or labels.get("batch.kubernetes.io/job-name") or "", []).append(p)
    out: dict[str, KubeRun] = {}
    for j in jobs:
        meta = j.get("metadata") or {}
        mine = by_job.get(meta.get("name", ""), [])
        cells = ((meta.get("annotations") or {}).get(ANNOTATION_CELLS) or "").split()
        if not cells:
            rid = (meta.get("labels") or {}).get(LABEL_RUN, "")
            out[rid] = KubeRun(rid, j, None, mine)
            continue
        for i, rid in enumerate(cells):
            own = [p for p in mine if ((p.get("metadata") or {}).get("labels") or {}).get(INDEX_LABEL) == str(i)]
            out[rid] = KubeRun(rid, j, i, own)
    return out


def _job_of(run_id: str, ledger: Ledger | None, host: str) -> tuple[str, int | None]:
    """The Job name (and index) a run id lives in, from the launch the ledger recorded."""
    if ledger is not None:
        for ev in ledger.events("launch", host=host, run_id=run_id, limit=1):
            job = ev.data.get("k8s_job")
            if isinstance(job, str):
                idx = ev.data.get("k8s_index")
                return job, idx if isinstance(idx, int) else None
    return object_name(run_id), None


class KubeHost:
    """One Kubernetes host as the engine drives it: its spec and the host pool's API connection."""

    def __init__(self, spec: HostSpec, conn: KubeConnection) -> None:
        self.spec = spec
        self.conn = conn

    @property
    def client(self) -> AsyncClient:
        return self.conn.client

    @property
    def namespace(self) -> str:
        return self.conn.namespace

    async def runs(self) -> dict[str, KubeRun]:
        jobs, pods = await _objects(self.client, self.spec.name)
        return runs_of(jobs, pods)

    async def state(self, run_id: str, ledger: Ledger | None) -> RunState:
        check_run_id(run_id)
        found = (await self.runs()).get(run_id)
        if found is not None:
            return found.state
        return gone_state(ledger, self.spec.name, run_id)


def gone_state(ledger: Ledger | None, host: str, run_id: str) -> RunState:
    """A run whose Job is no longer in the namespace: what the ledger last recorded, else lost."""
    if ledger is None or not ledger.events("launch", host=host, run_id=run_id, limit=1):
        raise NotFoundError(f"no run {run_id} in this namespace and none launched by this server",
                            host=host, next_step="list_runs shows the runs in the namespace")
    for ev in ledger.events(host=host, run_id=run_id, limit=20):
        if ev.kind == "cancel":
            return RunState(status="cancelled", evidence=["cancel_run deleted the Job"])
        if ev.kind == "run_ended":
            status = ev.data.get("status")
            if status in ENDED:
                return RunState(status=status, exit_code=ev.data.get("exit_code"),
                                evidence=["the Job is gone (its ttlSecondsAfterFinished passed); this is the end "
                                          "the server last saw"])
    return run_state(None, [])


def remember_end(ledger: Ledger | None, host: str, run_id: str, state: RunState) -> None:
    """Record an ended run once, so its end outlives the Job (a finished Job is deleted after its TTL)."""
    if ledger is None or state.status not in ENDED:
        return
    if any(ev.kind in ("run_ended", "cancel") for ev in ledger.events(host=host, run_id=run_id, limit=20)):
        return
    ledger.record("run_ended", host=host, run_id=run_id, summary=f"{state.status} (Kubernetes)",
                  data={"status": state.status, "exit_code": state.exit_code})


@dataclass(frozen=True)
class Launched:
    run_ids: list[str]
    job: str
    namespace: str
    existing: bool


async def launch(kh: KubeHost, *, commands: list[str], name: str | None, env: dict[str, str],
                 secrets: dict[str, str], workdir: str | None, max_concurrent: int, override: KubeOptions | None,
                 ledger: Ledger | None, redactor: Redactor, relaunch: bool = False) -> Launched:
    """Create the run's Secret (when it has secrets), then its Job. A live run of the same name is
    returned instead of a second Job."""
    opts = options(kh.spec, override)
    if not opts.image:
        raise InputError("no container image for the run", host=kh.spec.name,
                         next_step="set kubernetes.image in the call or image in [hosts.<name>.kubernetes]")
    client = kh.client
    ns = kh.namespace
    if name:
        label_value(name)
        for run in (await kh.runs()).values():
            labels = ((run.job or {}).get("metadata") or {}).get("labels") or {}
            if labels.get(LABEL_NAME) == label_value(name) and run.index in (None, 0):
                state = run.state
                if state.status in LIVE or not relaunch and state.status not in ENDED:
                    return Launched([run.run_id], ((run.job or {}).get("metadata") or {}).get("name", ""), ns, True)
    base = new_run_id(name or ("sweep" if len(commands) > 1 else None), time.time())
    run_ids = [base] if len(commands) == 1 else [f"{base}-{i + 1}" for i in range(len(commands))]
    req = JobRequest(run_ids=run_ids, commands=commands, name=name, env=env, secret_names=sorted(secrets),
                     workdir=workdir, max_concurrent=max_concurrent)
    manifest = job_manifest(ns, req, opts)
    job_name = str(manifest["metadata"]["name"])  # type: ignore[index]
    for v in secrets.values():
        redactor.add(v)
    if ledger is not None:
        for i, rid in enumerate(run_ids):
            ledger.record("launch", host=kh.spec.name, run_id=rid, summary=f"Kubernetes Job {job_name}",
                          data={"k8s_job": job_name, "k8s_namespace": ns, "k8s_index": i if len(run_ids) > 1 else None,
                                "command": commands[i][:500], "name": name, "backend": "kubernetes",
                                "secret_env_names": sorted(secrets), "image": opts.image})
    if secrets:
        async with api_errors(kh.spec.name, "creating the run's Secret"):
            await client.create(from_dict(secret_manifest(ns, run_ids[0], secrets)))
    try:
        async with api_errors(kh.spec.name, "creating the run's Job"):
            created = await client.create(from_dict(manifest))
    except Exception:
        if secrets:  # no Job will ever use it
            await _delete_secret(kh, job_name)
        raise
    if secrets and created.metadata is not None and created.metadata.uid:
        # Owned by the Job: Kubernetes deletes the Secret with it (cancel_run, or the Job's TTL).
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": created.metadata.uid,
                 "blockOwnerDeletion": False}
        async with api_errors(kh.spec.name, "tying the run's Secret to its Job"):
            await client.patch(Secret, job_name, {"metadata": {"ownerReferences": [owner]}})
    return Launched(run_ids, job_name, ns, False)


async def _delete_secret(kh: KubeHost, name: str) -> None:
    try:
        async with api_errors(kh.spec.name, "deleting the run's Secret"):
            await kh.client.delete(Secret, name)
    except NotFoundError:
        pass


async def _signal_first(kh: KubeHost, run_id: str, signal: str, grace_s: float) -> str:
    """Send `signal` to every process of the run's running pod but its PID 1 (the entry script),
    by exec, then give it `grace_s` to act (a checkpoint on USR1) before the deletion's TERM."""
    run = (await kh.runs()).get(run_id)
    pod = latest_pod(run.pods) if run is not None else None
    if pod is None or (pod.get("status") or {}).get("phase") != "Running":
        return f"no running pod to send SIG{signal} to"
    name = str((pod.get("metadata") or {}).get("name"))
    async with api_errors(kh.spec.name, f"sending SIG{signal} in pod {name}"):
        await kh.client.exec(name, container=CONTAINER, command=["bash", "-c", f"kill -s {signal} -- -1"],
                             stdin=b"", stdout=True, stderr=True, decode=None)
    await asyncio.sleep(grace_s)
    return f"SIG{signal} sent to the processes of pod {name}, then {grace_s:g} s of grace"


async def cancel(kh: KubeHost, run_id: str, ledger: Ledger | None, reason: str | None = None,
                 signal_first: str | None = None, grace_s: float = 5.0) -> RunState:
    """Optionally signal the run's processes first (USR1: checkpoint), then delete the run's Job
    (its pods get SIGTERM and their grace period; foreground: the Job goes after its pods); the
    Secret it owns goes with it. A sweep's cell cancels the whole Indexed Job."""
    before = await kh.state(run_id, ledger)
    if before.status in ENDED:
        return before
    first = await _signal_first(kh, run_id, signal_first, grace_s) if signal_first else None
    job, _ = _job_of(run_id, ledger, kh.spec.name)
    if ledger is not None:
        ledger.record("cancel", host=kh.spec.name, run_id=run_id, summary=reason or "cancel_run",
                      data={"k8s_job": job})
    async with api_errors(kh.spec.name, "deleting the run's Job"):
        await kh.client.delete(Job, job, cascade=CascadeType.FOREGROUND)
    await _delete_secret(kh, job)
    return RunState(status="cancelled", evidence=[*([first] if first else []), f"Job {job} deleted (foreground: its "
                                                  "pods got SIGTERM and their grace period); its Secret deleted"])


def summary_fields(run: KubeRun) -> dict[str, Any]:
    meta = (run.job or {}).get("metadata") or {}
    stamp = meta.get("creationTimestamp")
    command = (meta.get("annotations") or {}).get(ANNOTATION_COMMAND)
    return {"name": (meta.get("labels") or {}).get(LABEL_NAME), "started_at_utc": stamp,
            "command": None if run.index not in (None, 0) else (command or "")[:200] or None}
