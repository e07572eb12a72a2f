"""launch_detached's `watch`: an on-box patrol for the run it starts, for runs already there, or
for the whole box, and a test message through the inventory's channels (run/patrol/service.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from mcp_server.app import App
from mcp_server.errors import InputError
from mcp_server.limits import IdStr
from mcp_server.run.jobs.launch import LaunchResult
from mcp_server.run.patrol import service
from mcp_server.run.patrol.service import PatrolOptions


class WatchOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run_ids: list[IdStr] = Field(default_factory=list, max_length=64,
                                 description="with no command: runs already on the box to watch")
    interval_min: float = Field(default=10.0, ge=0.02, le=1440, description="one status line per tick")
    stall_min: float = Field(default=30.0, ge=0.02, le=10080, description="alive, log silent this long: escalate")
    idle_min: float | None = Field(default=None, ge=0.02, description="box patrol: no run this long on a metered box "
                                   "(default 30 when the inventory gives hourly_price)")
    channels: list[IdStr] | None = Field(default=None, max_length=16, description="[notify.*] names; default all")
    test: bool = Field(default=False, description="send one test message per channel from the box, start nothing")


WatchArg = Annotated[WatchOptions | None, Field(
    description="on-box patrol, messages via [notify.*]; no command: run_ids or the box")]


def _options(watch: WatchOptions, run_ids: list[str]) -> PatrolOptions:
    return PatrolOptions(run_ids=run_ids, interval_s=watch.interval_min * 60, stall_s=watch.stall_min * 60,
                         idle_s=watch.idle_min * 60 if watch.idle_min is not None else None, channels=watch.channels)


async def start_patrol(app: App, host: str, watch: WatchOptions, run_ids: list[str]) -> LaunchResult:
    spec = app.pool.spec(host)
    if spec.kind == "kubernetes":
        raise InputError("watch runs a patrol on a box with a shell (this machine, SSH, a Slurm login node), "
                         "not in a Kubernetes namespace")
    return await service.start(await app.pool.host(spec), spec, _options(watch, run_ids), app.pool.inventory.channels,
                               ledger=app.ledger, redactor=app.redactor)


async def test_channels(app: App, host: str, watch: WatchOptions) -> list[str]:
    spec = app.pool.spec(host)
    return await service.test(await app.pool.host(spec), spec, app.pool.inventory.channels, watch.channels,
                              ledger=app.ledger, redactor=app.redactor)


def watched_note(patrol: LaunchResult, watch: WatchOptions) -> str:
    return (f"patrol {patrol.run_id} watches it on the box (a status line every {watch.interval_min:g} min in its "
            "log; escalations in tail_logs/wait_for_run `patrol` and through [notify.*])")
