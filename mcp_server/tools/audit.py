"""audit_box tool adapter."""

from __future__ import annotations

import time
from typing import Annotated, Literal, TypedDict

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from mcp_server.app import App
from mcp_server.errors import InputError
from mcp_server.hosts.reach import connection_report, reach
from mcp_server.hosts.transport import CALL_BUDGET_S
from mcp_server.limits import MAP_MAX, HostStr, IdStr, PathStr
from mcp_server.progress import Counter
from mcp_server.run.audit.box import AuditResult, audit, problems_only
from mcp_server.run.audit.model import Check, ExpectGpu
from mcp_server.run.audit.multibox import confine_shared, cross_checks
from mcp_server.run.teardown.cost import accrued
from mcp_server.tools._common import HOST_HELP, READ_ONLY, HostError, app_of, fan_out, tool_errors
from mcp_server.tools._progress import reporter

MAX_HOSTS = 32
Policy = Literal["strict", "accept-new"]
Detail = Literal["problems", "all"]

# The arguments, each with the description the model reads.
HostArg = Annotated[HostStr | None, Field(
    description=HOST_HELP)]
HostsArg = Annotated[list[HostStr] | None, Field(
    description="several boxes to audit at once instead of `host`", max_length=MAX_HOSTS)]
PathsArg = Annotated[list[PathStr] | None, Field(
    description="extra box paths to measure (bytes, inodes)", max_length=16, json_schema_extra={"x-rgt-path": "box"})]
ExpectGpuArg = Annotated[ExpectGpu | None, Field(
    description="what you rented: GPU name substring, count, memory")]
PythonArg = Annotated[PathStr | None, Field(
    description="the job's interpreter (default: the profile's, else python3)")]
CodeDirArg = Annotated[PathStr | None, Field(
    description="box project dir: scanned for CRLF scripts, framework pins",
    json_schema_extra={"x-rgt-path": "box"})]
ExpectFilesArg = Annotated[dict[PathStr, IdStr] | None, Field(
    description="box path -> sha256 of your local copy (proves it is deployed)", max_length=MAP_MAX)]
OneJobArg = Annotated[bool, Field(
    description="with `hosts`: one job; adds A21 (shared FS), A30 (fabric, MTU)")]
SharedPathArg = Annotated[PathStr | None, Field(
    description="A21: the directory every box must share (default: durable root)",
    json_schema_extra={"x-rgt-path": "box"})]
DetailArg = Annotated[Detail, Field(
    description="problems: WARN/FAIL in full, PASS ids, SKIPs by reason; all: all, and the connection doctor")]
PolicyArg = Annotated[Policy | None, Field(
    description="host-key policy (accept-new pins a first-seen key)")]


class AuditOutcome(BaseModel):
    host: str
    audit: AuditResult | None = None
    error: HostError | None = None


class AuditBoxResult(BaseModel):
    outcomes: list[AuditOutcome] = Field(description="one per host, in the order asked")
    job_checks: list[Check] = Field(default_factory=list,
                                    description="with one_job: A21 and A30 across the reachable boxes")


class _AuditArgs(TypedDict):
    """The audit options a call passes through unchanged to every box."""

    paths: list[str] | None
    expect_gpu: ExpectGpu | None
    python: str | None
    code_dir: str | None
    expect_files: dict[str, str] | None


async def _audit_one(app: App, name: str, policy: Policy | None, args: _AuditArgs, detail: Detail) -> AuditResult:
    started = time.monotonic()
    result = await _audit_full(app, name, policy, args)
    if detail == "problems":
        return problems_only(result)
    spec = app.pool.spec(name, policy)
    if spec.kind == "ssh":  # all in full: how the connection itself does, step by step
        result.connection = await connection_report(app.pool, spec, CALL_BUDGET_S - (time.monotonic() - started))
    return result


async def _audit_full(app: App, name: str, policy: Policy | None, args: _AuditArgs) -> AuditResult:
    spec = app.pool.spec(name, policy)
    if spec.kind == "kubernetes":
        from mcp_server.run.jobs.engines.kube.audit import audit_kube  # lightkube loads only for such a host

        return await audit_kube(spec, app.pool.kube(spec))
    host = await reach(app.pool, spec)  # an SSH box that cannot be reached is diagnosed step by step
    result = await audit(host, spec, ledger=app.ledger, **args)
    result.accrued_cost = accrued(app.ledger, spec)
    transport = getattr(host, "transport", None)  # an SSH host says how it got there
    if transport is not None and transport.kind != "direct":
        result.transport = transport
    if result.idle_warning and result.accrued_cost:
        result.idle_warning += f" Accrued so far: {result.accrued_cost}."
    return result


async def _confine_shared(app: App, name: str, policy: Policy | None, path: str) -> None:
    spec = app.pool.spec(name, policy)
    if spec.kind != "kubernetes":
        await confine_shared((await app.pool.host(spec), spec), path)


def register(server: MCPServer) -> None:
    @server.tool(title="Audit a GPU box", annotations=READ_ONLY)
    async def audit_box(
        ctx: Context, host: HostArg = "local", hosts: HostsArg = None, paths: PathsArg = None,
        expect_gpu: ExpectGpuArg = None, python: PythonArg = None, code_dir: CodeDirArg = None,
        expect_files: ExpectFilesArg = None, host_key_policy: PolicyArg = None, one_job: OneJobArg = False,
        shared_path: SharedPathArg = None, detail: DetailArg = "problems",
    ) -> AuditBoxResult:
        """Audit a GPU box before paying: GPUs, health, zombie VRAM, disk bytes AND inodes, cgroup limits, env, survival tier.

        Each check returns PASS/WARN/FAIL/SKIP with the evidence it saw and a route (a
        references:// URI explaining it). Read-only apart from one probe file created and
        removed in the durable root (with one_job, one A21 marker file too). One SSH round trip per box; several boxes run
        concurrently and one unreachable box never hides the others.
        See references://run-remote/audit-checks and profiles://<platform>.
        """  # noqa: E501 -- the first line is the tool's description for the model: one line, unchanged
        app = app_of(ctx)
        args = _AuditArgs(paths=paths, expect_gpu=expect_gpu, python=python, code_dir=code_dir,
                          expect_files=expect_files)
        if hosts:
            done = Counter(reporter(ctx), len(hosts), "hosts audited")

            async def one(name: str) -> AuditResult:
                try:
                    return await _audit_one(app, name, host_key_policy, args, detail)
                finally:
                    await done.finished(name)

            rows = await fan_out(app, list(hosts), one)
            outcomes = [AuditOutcome(host=n, audit=r, error=e) for n, r, e in rows]
            if not one_job:
                return AuditBoxResult(outcomes=outcomes)
            with tool_errors(app):
                specs = [app.pool.spec(n, host_key_policy) for n, r, _ in rows if r is not None]
                boxes = [(await app.pool.host(spec), spec) for spec in specs]
                return AuditBoxResult(outcomes=outcomes, job_checks=await cross_checks(boxes, shared_path))
        with tool_errors(app):
            if not host:
                raise InputError("give `host` or `hosts`")
            if one_job:
                raise InputError("one_job needs `hosts`: the boxes of the job (two or more)")
            if shared_path:
                await _confine_shared(app, host, host_key_policy, shared_path)
            result = await _audit_one(app, host, host_key_policy, args, detail)
        return AuditBoxResult(outcomes=[AuditOutcome(host=host, audit=result)])
