"""prepare_box tool adapter: plan (diffs) without a token, apply exactly that plan with one."""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from mcp_server.limits import HostStr, IdStr
from mcp_server.run.audit.prepare import PreparePlan, PrepareResult, apply_prepare, plan_prepare
from mcp_server.tools._common import HOST_HELP, LAUNCH, app_of, tool_errors


class PrepareOutput(BaseModel):
    plan: PreparePlan | None = Field(default=None, description="set when called without a token")
    result: PrepareResult | None = Field(default=None, description="set when called with a token")


def register(server: MCPServer) -> None:
    @server.tool(title="Prepare a fresh box", annotations=LAUNCH)
    async def prepare_box(
        ctx: Context,
        host: Annotated[HostStr, Field(description=HOST_HELP)] = "local",
        token: Annotated[IdStr | None, Field(
            description="omit for the plan; pass its token to apply exactly it")] = None,
    ) -> PrepareOutput:
        """Prepare a fresh box from its profile: caches, mirrors, no_proxy, interpreter, tmux (plan, confirm).

        Without a token: the changes as diffs (nothing is written). The box env file
        <durable_root>/.rgt/box.env, which every launch sources: HF/pip/torch caches on the
        durable tier; behind the GFW HF_ENDPOINT=hf-mirror with HF_HUB_DISABLE_XET=1; no_proxy
        exemptions only when a proxy is set; the right interpreter's dir first on PATH when a
        launch would reach another (A18). A pip mirror only where the profile needs one and pip
        has no index; conda's mirror keys in ~/.condarc where conda exists and none set them;
        tmux when missing (root + apt). Never creates a conda env. With the token: applies
        exactly those, atomically; refuses when the box changed since the plan; a second plan is
        empty. See references://run-remote/audit-checks#a22 and #a18.
        """
        app = app_of(ctx)
        with tool_errors(app):
            spec = app.pool.spec(host)
            box = await app.pool.host(spec)
            if token is None:
                return PrepareOutput(plan=await plan_prepare(box, spec, app.ledger))
            return PrepareOutput(result=await apply_prepare(box, spec, app.ledger, token))
