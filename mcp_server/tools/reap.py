"""reap_vram tool adapter: plan without a token, stop exactly the planned holders with one."""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.limits import HostStr, IdStr
from mcp_server.run.audit.gpu_checks import ZOMBIE_MIN_AGE_S
from mcp_server.run.audit.reap import ReapPlan, ReapResult, execute_reap, plan_reap
from mcp_server.settings import OUTPUT_CAP_BYTES
from mcp_server.tools._bounded import Bounded, bound_result
from mcp_server.tools._common import DESTRUCTIVE, HOST_HELP, app_of, tool_errors


class ReapOutput(Bounded):
    plan: ReapPlan | None = Field(default=None, description="set when called without a token")
    result: ReapResult | None = Field(default=None, description="set when called with a token")


HOST = HOST_HELP
TOKEN = "omit for the plan; its token stops exactly the planned processes"
MIN_AGE = "a younger holder may still be starting: left alone"
OTHERS = "offer other users' processes too (the token keeps this choice)"


def register(server: MCPServer) -> None:
    @server.tool(title="Free zombie VRAM", annotations=DESTRUCTIVE)
    async def reap_vram(
        ctx: Context,
        host: Annotated[HostStr, Field(description=HOST)] = "local",
        token: Annotated[IdStr | None, Field(description=TOKEN)] = None,
        min_age_s: Annotated[int, Field(description=MIN_AGE, ge=0, le=86_400)] = ZOMBIE_MIN_AGE_S,
        include_other_users: Annotated[bool, Field(description=OTHERS)] = False,
    ) -> ReapOutput:
        """Free VRAM held by zombie processes (audit_box A8): without a token, the plan; with it, TERM then KILL.

        A candidate holds a /dev/nvidia* node open, is not a compute process nvidia-smi lists nor
        a child of one, is not part of a run this server launched (cancel_run stops those), is
        older than min_age_s and is the SSH user's own (any user's with include_other_users).
        Nothing is offered unless nvidia-smi answered: when it fails (a driver/library mismatch
        after a driver upgrade, jobs still running), hangs or is absent, the plan says why. The
        token names each candidate by pid and start time: confirm refuses when the holders
        changed, and a pid given to another process meanwhile is never signalled. Holders in
        another container get "restart that container". Lists are cut to keep the result small
        (truncated, totals). Always the user's decision. See references://run-remote/audit-checks#a8.
        """
        app = app_of(ctx)
        with tool_errors(app):
            spec = app.pool.spec(host)
            box = await app.pool.host(spec)
            if token is None:
                out = ReapOutput(plan=await plan_reap(box, spec, app.ledger, min_age_s, include_other_users))
            else:
                out = ReapOutput(result=await execute_reap(box, spec, app.ledger, token, min_age_s,
                                                           include_other_users))
            return bound_result(out, OUTPUT_CAP_BYTES)
