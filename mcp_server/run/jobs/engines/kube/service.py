"""The run tools' Kubernetes side, called by the tool adapters when the host is a Kubernetes
host: launch (one Job, or one Indexed Job for `commands`), tail, list, wait and cancel."""

from __future__ import annotations

import os

from mcp_server.app import App
from mcp_server.errors import InputError
from mcp_server.hosts.pool import HostSpec
from mcp_server.run.jobs.cancel import CancelResult
from mcp_server.run.jobs.engines.kube import runs as kruns
from mcp_server.run.jobs.engines.kube.views import launch_results, list_kube_runs, states_of, tail
from mcp_server.run.jobs.launch import LaunchRequest, LaunchResult, secret_values
from mcp_server.run.jobs.listing import HostRuns
from mcp_server.run.jobs.logs import TailResult
from mcp_server.run.jobs.runscan import RunFilter
from mcp_server.run.jobs.status import ENDED
from mcp_server.run.jobs.wait import POLL_S, Progress, WaitResult, wait_on

_NOT_ON_KUBERNETES = {"outputs": "outputs", "output_root": "output_root", "sync_to_durable": "sync_to_durable",
                      "on_exit": "on_exit", "slurm": "slurm", "login_node_reason": "login_node_reason"}


def kube_host(app: App, spec: HostSpec) -> kruns.KubeHost:
    """The engine's view of a Kubernetes host, over the pool's API connection (one per host)."""
    return kruns.KubeHost(spec, app.pool.kube(spec))


def _refuse_box_only(req: LaunchRequest) -> None:
    """Launch arguments that need a shell on a box, which a Kubernetes host has not."""
    given = [k for k in _NOT_ON_KUBERNETES if getattr(req, k)]
    if req.backend not in (None, "kubernetes"):
        given.append(f"backend={req.backend}")
    if given:
        raise InputError("not available on a Kubernetes host: " + ", ".join(given),
                         next_step="drop them; on Kubernetes the pod log is the run's log and outputs belong on "
                         "the PVC (kubernetes.pvc)")


async def launch(app: App, spec: HostSpec, commands: list[str], req: LaunchRequest,
                 max_concurrent: int = 1) -> list[LaunchResult]:
    _refuse_box_only(req)
    kh = kube_host(app, spec)
    secrets = secret_values(req.secret_env, os.environ, app.redactor)
    launched = await kruns.launch(kh, commands=commands, name=req.name, env=req.env, secrets=secrets,
                                  workdir=req.workdir, max_concurrent=max_concurrent, override=req.kubernetes,
                                  ledger=app.ledger, redactor=app.redactor, relaunch=req.relaunch)
    return launch_results(kh, launched, await states_of(kh, launched.run_ids))


async def tail_run(app: App, spec: HostSpec, run_id: str | None, path: str | None, *, offset: int | None,
                   max_bytes: int, lines: int | None) -> TailResult:
    if path is not None or run_id is None:
        raise InputError("on a Kubernetes host, tail a run by run_id (its pod's log); there is no path to read")
    return await tail(kube_host(app, spec), run_id, redactor=app.redactor, ledger=app.ledger, offset=offset,
                      max_bytes=max_bytes, lines=lines)


async def list_runs(app: App, spec: HostSpec, *, limit: int, where: RunFilter | None) -> HostRuns:
    return await list_kube_runs(kube_host(app, spec), app.ledger, limit=limit, where=where)


async def cancel(app: App, spec: HostSpec, run_id: str, reason: str | None, signal_first: str | None = None,
                 grace_s: float = 5.0) -> CancelResult:
    kh = kube_host(app, spec)
    before = await kh.state(run_id, app.ledger)
    if before.status in ENDED:
        code = f" (exit code {before.exit_code})" if before.exit_code is not None else ""
        return CancelResult(host=spec.name, run_id=run_id, changed=False, status_before=before.status, state=before,
                            message=f"the run had already ended: {before.status}{code}; nothing was changed")
    after = await kruns.cancel(kh, run_id, app.ledger, reason, signal_first, grace_s)
    return CancelResult(host=spec.name, run_id=run_id, changed=True, status_before=before.status, state=after,
                        message="the Job was deleted: Kubernetes sent its pods SIGTERM and their grace period "
                        "(30 s); a sweep's Job holds every cell, so each cell ends with it")


async def wait(app: App, spec: HostSpec, run_id: str, *, timeout_s: float, progress: Progress | None,
               poll_s: float = POLL_S) -> WaitResult:
    kh = kube_host(app, spec)

    async def poll() -> TailResult:
        return await tail(kh, run_id, redactor=app.redactor, ledger=app.ledger, offset=None, max_bytes=4096,
                          lines=1)

    return await wait_on(spec.name, run_id, poll, timeout_s=timeout_s, progress=progress, poll_s=poll_s)
