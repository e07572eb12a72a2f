"""inspect_run tool adapter: a live run's resource use over a short window, the verdicts, and a
small PNG of the sampled series when matplotlib is available."""

from __future__ import annotations

import base64
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ImageContent, TextContent
from pydantic import Field

from mcp_server.limits import HostStr, IdStr
from mcp_server.run.jobs import plot
from mcp_server.run.jobs.inspect import DEFAULT_WINDOW_S, MAX_WINDOW_S, InspectResult, sample_run
from mcp_server.tools._common import HOST_HELP, READ_ONLY, app_of, tool_errors
from mcp_server.tools._views import shows
from mcp_server.views import MONITOR

SERIES = (("cpu_pct", "CPU % (the run's processes)"), ("gpu_util_pct", "GPU util %"),
          ("rss_mib", "RSS MiB"), ("vram_used_mib", "VRAM used MiB"))


def _text(r: InspectResult) -> str:
    return "\n".join([f"{r.run_id} on {r.host}: {len(r.samples)} samples over {r.window_s} s"] +
                     [f"{v.severity} {v.kind}: {v.evidence} ({v.route})" for v in r.verdicts])


def _png(r: InspectResult) -> bytes | None:
    panels = {}
    for key, title in SERIES:
        pts = [(s.t, float(v)) for s in r.samples if (v := getattr(s, key)) is not None]
        if pts:
            panels[title] = [(r.run_id, pts)]
    if not panels or not plot.available():
        return None
    return plot.render(panels, f"{r.run_id} on {r.host}", xlabel="seconds")


def register(server: MCPServer) -> None:
    @server.tool(title="Inspect a live run", annotations=READ_ONLY, meta=shows(MONITOR))
    async def inspect_run(
        ctx: Context,
        run_id: Annotated[IdStr, Field(description="a live run's id")],
        host: Annotated[HostStr, Field(description=HOST_HELP)] = "local",
        window_s: Annotated[int, Field(description="seconds to sample, once a second", ge=2,
                                       le=MAX_WINDOW_S)] = DEFAULT_WINDOW_S,
        image: Annotated[bool, Field(description="add a PNG of the series (needs matplotlib)")] = True,
    ) -> Annotated[CallToolResult, InspectResult]:
        """Watch a live run for seconds: GPU util/VRAM/power, its processes' CPU and RAM, cgroup limit, disk.

        One round trip samples on the box once a second (default 20 s) and returns the series
        with verdicts and routes: data-bound (GPUs idle while the CPUs are saturated), spare
        VRAM on a metered GPU, near the memory limit, RSS creeping up (a leak), a disk that
        fills within hours. Reads only. See references://training/throughput-profiling.
        """
        app = app_of(ctx)
        with tool_errors(app):
            spec = app.pool.spec(host)
            result = await sample_run(await app.pool.host(spec), spec, run_id, window_s)
            content: list[TextContent | ImageContent] = [TextContent(type="text", text=_text(result))]
            png = _png(result) if image else None
            if png:
                content.append(ImageContent(type="image", data=base64.b64encode(png).decode(), mime_type="image/png"))
            return CallToolResult(content=list(content), structured_content=result.model_dump(mode="json"))
