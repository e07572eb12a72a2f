"""plot_run tool adapter: a run's metric curves as a PNG image plus the numbers behind them.

A tool of its own rather than `tail_logs plot: true`: the image is a large content block, and
tail_logs stays the small, cheap call an agent makes often; plot_run is the occasional look."""

from __future__ import annotations

import base64
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.apps import client_supports_apps
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ImageContent, TextContent
from pydantic import BaseModel, Field

from mcp_server.app import App
from mcp_server.errors import InputError
from mcp_server.limits import HostStr, IdStr
from mcp_server.run.jobs import plot
from mcp_server.run.jobs.curve_points import SeriesPoints, curve_points
from mcp_server.run.jobs.curves import RunCurves, RunData, read_run_metrics, save_plot, summarize_run
from mcp_server.run.jobs.metrics import Points, default_keys
from mcp_server.tools._common import HOST_HELP, LAUNCH, app_of, tool_errors
from mcp_server.tools._views import shows
from mcp_server.views import MONITOR

MAX_RUNS = 16


class PlotImage(BaseModel):
    width: int
    height: int
    bytes: int
    saved_to: str | None = Field(description="box path of the PNG in the first run's dir (None when save=false)")


class PlotResult(BaseModel):
    host: str
    series: list[str] = Field(description="the keys plotted (and summarised for each run)")
    runs: list[RunCurves]
    image: PlotImage | None = Field(description="None when no series was found or matplotlib is missing")
    plot_unavailable: str | None = Field(default=None, description="why there is no image, and how to get one")
    flags: list[str] = Field(description="every run's divergence / NaN / plateau flags, prefixed by run id")
    points: list[SeriesPoints] | None = Field(
        default=None, description="each plotted series downsampled for drawing; only for a client with MCP Apps")


def _keys_for(runs: list[RunData], asked: list[str] | None) -> list[str]:
    if asked:
        return asked
    merged: dict[str, Points] = {}
    for r in runs:
        for k, v in r.data.items():
            merged.setdefault(k, v)
    return default_keys(merged)


async def _collect(app: App, host: str, run_ids: list[str], series: list[str] | None, trend_n: int,
                   diverge_factor: float) -> tuple[list[RunData], list[str]]:
    spec = app.pool.spec(host)
    h = await app.pool.host(spec)
    runs = [await read_run_metrics(h, spec, rid, app.redactor) for rid in run_ids]
    keys = _keys_for(runs, series)
    for r in runs:
        summarize_run(r, keys, trend_n=trend_n, diverge_factor=diverge_factor)
    return runs, keys


def _text(result: PlotResult) -> str:
    lines = []
    for rc in result.runs:
        status = rc.state.status if rc.state else "?"
        for s in rc.series:
            lines.append(f"{rc.run_id} [{status}] {s.key}: last {s.last} best {s.best} at step {s.best_step} "
                         f"trend {s.trend} nan {s.nan_count} inf {s.inf_count}"
                         f"{' DIVERGED' if s.diverged else ''}{' PLATEAU' if s.plateau else ''}")
    if result.plot_unavailable:
        lines.append(result.plot_unavailable)
    if result.image and result.image.saved_to:
        lines.append(f"saved: {result.image.saved_to}")
    return "\n".join(lines) or "no metrics found in the run's log or metrics files"


async def _plot(app: App, host: str, run_ids: list[str], series: list[str] | None, trend_n: int,
                diverge_factor: float, save: bool, draws: bool) -> CallToolResult:
    """The result; with `draws` (a client that renders views) also each series' points."""
    runs, keys = await _collect(app, host, run_ids, series, trend_n, diverge_factor)
    if series and not any(k in r.data for r in runs for k in series):
        found = sorted({k for r in runs for k in r.data})
        raise InputError("none of the asked series is in the run's metrics", observed=series,
                         expected=f"one of {found[:40]}" if found else "key=value or JSON lines in the log")
    flags = [f"{r.curves.run_id}: {f}" for r in runs for s in r.curves.series for f in s.flags]
    result = PlotResult(host=host, series=keys, runs=[r.curves for r in runs], image=None, flags=flags)
    if draws:
        result.points = curve_points([(r.curves.run_id, r.data) for r in runs], keys)
    content: list[TextContent | ImageContent] = []
    panels = {k: [(r.curves.run_id, r.data[k]) for r in runs if k in r.data] for k in keys}
    panels = {k: v for k, v in panels.items() if v}
    if panels:
        try:
            png = plot.render(panels, run_ids[0] if len(run_ids) == 1 else f"{len(run_ids)} runs on {host}")
        except plot.PlotUnavailable as exc:
            result.plot_unavailable = str(exc)
        else:
            spec = app.pool.spec(host)
            saved = await save_plot(await app.pool.host(spec), spec, run_ids[0], "curves.png", png) if save else None
            result.image = PlotImage(width=plot.WIDTH_PX, height=plot.HEIGHT_PX, bytes=len(png), saved_to=saved)
            content.append(ImageContent(type="image", data=base64.b64encode(png).decode(), mime_type="image/png"))
    content.insert(0, TextContent(type="text", text=_text(result)))
    # A client without MCP Apps reads the result it always did: no `points` key at all.
    data = result.model_dump(mode="json", exclude={"points"} if result.points is None else None)
    return CallToolResult(content=list(content), structured_content=data)


def register(server: MCPServer) -> None:
    # Not read-only: by default it saves curves.png into the run dir (save=false writes nothing).
    @server.tool(title="Plot training curves", annotations=LAUNCH, meta=shows(MONITOR))
    async def plot_run(
        ctx: Context,
        run_id: Annotated[IdStr | None, Field(description="the run to plot")] = None,
        host: Annotated[HostStr, Field(description=HOST_HELP)] = "local",
        run_ids: Annotated[list[IdStr] | None, Field(description="several runs overlaid (seeds, a sweep)",
                                                   max_length=MAX_RUNS)] = None,
        series: Annotated[list[IdStr] | None, Field(description="metric keys (default: up to 4, loss-like first)",
                                                  max_length=4)] = None,
        trend_n: Annotated[int, Field(description="points in the trend and plateau window", ge=3, le=1000)] = 20,
        diverge_factor: Annotated[float, Field(description="divergence: a loss this many times its best",
                                               gt=1, le=1000)] = 3.0,
        save: Annotated[bool, Field(description="write curves.png into the (first) run's dir")] = True,
    ) -> Annotated[CallToolResult, PlotResult]:
        """Plot a run's curves (PNG) with the numbers: last, best, trend, NaN/Inf, divergence, plateau.

        Metrics come from the run's log (JSON lines; `key=value` / `key: value` runs at a line's
        start or after its step marker, never pairs inside prose) and any metrics.jsonl /
        metrics.csv / progress.csv in the run dir or its workdir; x is the line's step (or epoch)
        when it has one. Keys are box text, cleaned of escape sequences. Several runs overlay
        with a legend. Without matplotlib the numbers still come back with how to install it.
        See references://run-remote/monitoring#lifecycle.
        """
        app = app_of(ctx)
        with tool_errors(app):
            ids = list(dict.fromkeys(([run_id] if run_id else []) + list(run_ids or [])))
            if not ids:
                raise InputError("give run_id (or run_ids to overlay several)",
                                 next_step="list_runs shows the run ids on the box")
            if len(ids) > MAX_RUNS:
                raise InputError("too many runs to overlay", observed=len(ids), expected=f"at most {MAX_RUNS}")
            return await _plot(app, host, ids, series, trend_n, diverge_factor, save, client_supports_apps(ctx))
