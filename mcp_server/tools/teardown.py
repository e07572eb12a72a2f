"""plan_teardown and teardown adapters: the plan (read-only, issues a token), then exactly that plan
executed with its token, asking the user through the client when it can (on either protocol)."""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    Resolve,
)
from pydantic import BaseModel, Field

from mcp_server.app import App
from mcp_server.errors import GateRefused, InputError
from mcp_server.hosts.pool import HostSpec
from mcp_server.limits import HostStr, IdStr
from mcp_server.run.teardown.execute import Ask, check_token, execute, question, refuse_if_changed
from mcp_server.run.teardown.plan import TeardownPlan, TeardownResult, plan
from mcp_server.tools._common import DESTRUCTIVE, READ_ONLY, app_of, tool_errors
from mcp_server.tools._views import shows
from mcp_server.views import TEARDOWN


class Confirm(BaseModel):
    confirm: bool = Field(description="true to run exactly the action described")


ACTION = "the profile's action: stop, terminate, destroy, manual, …"
HOST = "the box's inventory name (its instance_id, api_key_env)"
TOKEN = "the token plan_teardown returned"
ALLOW_UNVERIFIED = "the USER's choice to tear down without a verified pull (recorded)"


async def _kube_plan(app: App, spec: HostSpec, action: str, allow_unverified: bool) -> TeardownPlan:
    """A Kubernetes host meters nothing per run: the plan lists the namespace's runs (G1 names the
    live Jobs, which cancel_run deletes) and what survives; there is no verb to confirm."""
    from mcp_server.hosts.kube_pod import PodHost
    from mcp_server.run.jobs.engines.kube import service as kube

    runs = await kube.list_runs(app, spec, limit=200, where=None)
    return await plan(PodHost(app.pool.kube(spec)), spec, action, app.ledger, allow_unverified, runs=runs)


def _can_elicit(ctx: Context) -> bool:
    """The client declared form elicitation (a bare `elicitation: {}` counts; url-only does not)."""
    caps = ctx.client_capabilities
    e = caps.elicitation if caps is not None else None
    return e is not None and (e.form is not None or e.url is None)


async def _ask_user(ctx: Context, action: str, host: str, token: str,
                    allow_unverified: bool) -> Elicit[Confirm] | None:
    """The question for the user, built from the plan the token names; None (ask nothing) when the
    client cannot be asked or the token or plan would be refused anyway (the tool body says why).
    The SDK sends it mid-call before 2026-07-28 and as an input-required round from then on."""
    if not _can_elicit(ctx):
        return None
    app = app_of(ctx)
    with tool_errors(app):
        spec = app.pool.spec(host)
        if spec.kind == "kubernetes":
            return None
        try:
            rec = check_token(app.ledger, token, spec, action)
            box = await app.pool.host(spec)
            fresh = await plan(box, spec, action, app.ledger, allow_unverified=allow_unverified, issue=False)
            refuse_if_changed(fresh, rec)
        except GateRefused:
            return None
    return Elicit(question(fresh), Confirm)


def _answer(reply: ElicitationResult[Confirm]) -> Ask | None:
    """`execute`'s `ask` from the user's reply; None when no question was asked (the token alone
    confirms). Accept with confirm=true goes; decline, cancel or confirm=false does nothing."""
    if not isinstance(reply, AcceptedElicitation):
        go = False
    else:
        data: object = reply.data  # the resolver's plain None arrives as an accepted outcome without data
        if data is None:
            return None
        go = isinstance(data, Confirm) and data.confirm

    async def ask(_question: str) -> bool:
        return go
    return ask


def register(server: MCPServer) -> None:
    _register_plan(server)
    _register_teardown(server)


def _register_plan(server: MCPServer) -> None:
    @server.tool(title="Plan a teardown", annotations=READ_ONLY, meta=shows(TEARDOWN))
    async def plan_teardown(
        ctx: Context,
        action: Annotated[IdStr, Field(description=ACTION)],
        host: Annotated[HostStr, Field(description=HOST)] = "local",
        allow_unverified: Annotated[bool, Field(description=ALLOW_UNVERIFIED)] = False,
    ) -> TeardownPlan:
        """Plan stopping the meter: what stops or keeps billing, what is lost, each gate, a token when ready; \
show it to the user.

        Gates (Iron Law): no live run on the box; every finished run covered by a passing
        verify_artifacts whose manifest covers its outputs; nothing written under a verified
        root since; a non-destructive park offered first. It writes only the plan and its
        token to the local ledger. Pass the same action, host and
        allow_unverified to teardown with the token, only on the user's explicit yes. See
        references://run-remote/principles#iron-law and profiles://<platform>.
        """
        app = app_of(ctx)
        with tool_errors(app):
            spec = app.pool.spec(host)
            if spec.kind == "kubernetes":
                return await _kube_plan(app, spec, action, allow_unverified)
            box = await app.pool.host(spec)
            return await plan(box, spec, action, app.ledger, allow_unverified)


def _register_teardown(server: MCPServer) -> None:
    @server.tool(title="Tear down (with a plan's token)", annotations=DESTRUCTIVE)
    async def teardown(
        ctx: Context,
        action: Annotated[IdStr, Field(description=ACTION)],
        token: Annotated[IdStr, Field(description=TOKEN)],
        reply: Annotated[ElicitationResult[Confirm], Resolve(_ask_user)],
        host: Annotated[HostStr, Field(description=HOST)] = "local",
        allow_unverified: Annotated[bool, Field(description=ALLOW_UNVERIFIED)] = False,
    ) -> TeardownResult:
        """Run the plan a plan_teardown token names, once, on the user's yes: gates re-checked, meter stopped, polled.

        Refuses naming each unmet gate, a changed plan, or a used, expired or foreign token.
        When the client supports it the user is asked to confirm (a no leaves the token
        valid and changes nothing); otherwise the token is the confirmation, so call this
        only on the user's explicit yes. Always the user's decision. See
        references://run-remote/teardown and references://run-remote/principles#iron-law.
        """
        app = app_of(ctx)
        with tool_errors(app):
            spec = app.pool.spec(host)
            if spec.kind == "kubernetes":
                raise InputError("a Kubernetes host has nothing to tear down per run: no token is ever issued for it",
                                 host=spec.name, next_step="cancel_run deletes a live Job; scale the node pool down "
                                 "in your cloud's console")
            box = await app.pool.host(spec)
            return await execute(box, spec, action, token, ledger=app.ledger, redactor=app.redactor,
                                 allow_unverified=allow_unverified, ask=_answer(reply),
                                 confirm_bound_s=app.settings.teardown_confirm_s,
                                 http_timeout_s=app.settings.http_timeout_s)
