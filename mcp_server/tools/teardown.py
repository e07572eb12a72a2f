"""teardown tool adapter: plan without a token, execute with one."""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from mcp_server.app import App
from mcp_server.errors import InputError
from mcp_server.hosts.pool import HostSpec
from mcp_server.run.teardown.execute import execute
from mcp_server.run.teardown.plan import TeardownPlan, TeardownResult, plan
from mcp_server.tools._common import DESTRUCTIVE, app_of, tool_errors


class Confirm(BaseModel):
    confirm: bool = Field(description="true to run exactly the action described")


class TeardownOutput(BaseModel):
    plan: TeardownPlan | None = Field(default=None, description="set when called without a token")
    result: TeardownResult | None = Field(default=None, description="set when called with a token")


ACTION = ("the profile's action, e.g. power-off / release (AutoDL), stop / terminate (RunPod), "
          "stop / destroy (vast.ai), terminate (Lambda), manual")
HOST = "the box: an inventory name (instance_id and api_key_env come from there)"
TOKEN = "omit to get the plan; pass the plan's token to execute exactly that plan"
ALLOW_UNVERIFIED = ("the USER's explicit choice to tear down without a verified pull; "
                    "recorded and repeated in the result")


async def _kube_plan(app: App, spec: HostSpec, action: str, token: str | None,
                     allow_unverified: bool) -> TeardownPlan:
    """A Kubernetes host meters nothing per run: the plan lists the namespace's runs (G1 names the
    live Jobs, which cancel_run deletes) and what survives; there is no verb to confirm."""
    from mcp_server.kube import service as kube
    from mcp_server.kube.podhost import PodHost

    if token is not None:
        raise InputError("a Kubernetes host has nothing to tear down per run: no token is ever issued for it",
                         host=spec.name, next_step="cancel_run deletes a live Job; scale the node pool down in your "
                         "cloud's console")
    runs = await kube.list_runs(app, spec, limit=200, where=None)
    return await plan(PodHost(app.pool.kube(spec)), spec, action, app.ledger, allow_unverified, runs=runs)


def register(server: MCPServer) -> None:
    @server.tool(annotations=DESTRUCTIVE)
    async def teardown(
        ctx: Context,
        action: Annotated[str, Field(description=ACTION)],
        host: Annotated[str, Field(description=HOST)] = "local",
        token: Annotated[str | None, Field(description=TOKEN)] = None,
        allow_unverified: Annotated[bool, Field(description=ALLOW_UNVERIFIED)] = False,
    ) -> TeardownOutput:
        """Stop the meter safely: without a token return the plan (what stops billing, what keeps billing, \
what is lost, every gate); with its token execute it.

        Gates (Iron Law): no live run on the box; every finished run covered by a passing
        verify_artifacts whose manifest covers its outputs; nothing written under a verified
        root since; a non-destructive park offered first. Confirm re-evaluates everything,
        refuses naming each unmet gate, runs the verb once per token and polls the platform
        until the meter really stopped. Always the user's decision. See
        references://run-remote/principles#iron-law and profiles://<platform>.
        """
        app = app_of(ctx)
        with tool_errors(app):
            spec = app.pool.spec(host)
            if spec.kind == "kubernetes":
                return TeardownOutput(plan=await _kube_plan(app, spec, action, token, allow_unverified))
            box = await app.pool.host(spec)
            if token is None:
                return TeardownOutput(plan=await plan(box, spec, action, app.ledger, allow_unverified))
            caps = ctx.client_capabilities
            ask = None
            if caps is not None and caps.elicitation is not None:
                async def ask(question: str) -> bool:
                    answer = await ctx.elicit(question, Confirm)
                    return answer.action == "accept" and bool(getattr(answer.data, "confirm", False))
            result = await execute(box, spec, action, token, ledger=app.ledger, redactor=app.redactor,
                                   allow_unverified=allow_unverified, ask=ask,
                                   confirm_bound_s=app.settings.teardown_confirm_s,
                                   http_timeout_s=app.settings.http_timeout_s)
            return TeardownOutput(result=result)
