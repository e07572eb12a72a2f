"""push_code tool adapter."""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from mcp_server.limits import HostStr, IdStr, PathStr, PatternStr
from mcp_server.run.code.prune import PrunePlan, PruneResult, confirm_prune, plan_prune
from mcp_server.run.code.push import PushResult, push_code
from mcp_server.tools._common import DESTRUCTIVE, HOST_HELP, LAUNCH, app_of, tool_errors
from mcp_server.tools._progress import reporter


class PruneOutput(BaseModel):
    plan: PrunePlan | None = Field(default=None, description="set when called without a token")
    result: PruneResult | None = Field(default=None, description="set when called with a token")


def register(server: MCPServer) -> None:
    _register_push(server)
    _register_prune(server)


def _register_push(server: MCPServer) -> None:
    @server.tool(name="push_code", title="Push code as a snapshot", annotations=LAUNCH)
    async def push_code_tool(
        ctx: Context,
        source: Annotated[PathStr, Field(description="local project directory (on the server's machine)",
                                         json_schema_extra={"x-rgt-path": "local"})],
        host: Annotated[HostStr, Field(description=HOST_HELP)] = "local",
        project: Annotated[IdStr | None, Field(description="its name on the box (default: the folder's)")] = None,
        exclude: Annotated[list[PatternStr] | None, Field(description="more gitignore patterns to leave out, e.g. "
                                                   "['data/', '*.ckpt']", max_length=64)] = None,
        max_file_mb: Annotated[float, Field(description="refuse any file larger than this", gt=0)] = 20.0,
        max_total_mb: Annotated[float, Field(description="refuse a tree larger than this", gt=0)] = 200.0,
        allow_secrets_in: Annotated[list[PathStr] | None, Field(
            description="files to send despite a key or token in them", max_length=64)] = None,
    ) -> PushResult:
        """Send a local project to the box as an immutable snapshot: <durable_root>/code/<project>/<snapshot-id>/.

        The id comes from the content: the same tree pushed again sends nothing; a changed tree
        sends only the files the box does not already have and becomes a new snapshot, so a run
        using an older snapshot keeps its exact files. Follows .gitignore (git's own listing in a
        git work tree) plus `exclude`; refuses files and trees over the caps, naming the largest.
        Never sends the server's state, credential folders (~/.ssh, ~/.aws, /etc, ...: a source
        inside one is refused), shell histories, or a file holding a private key or token (each
        listed in `skipped` with its reason; `allow_secrets_in` lets a named key/token file go).
        The snapshot is read-only, folders included: runs write outputs elsewhere.
        Lands atomically (staged, every hash checked, then one rename); an interrupted push
        resumes. Keeps git commit, branch, dirty flag and the uncommitted diff in the snapshot's
        .rgt/. Launch with workdir=<path> (or code=<snapshot-id>).
        See references://run-remote/code-and-data#push.
        """
        app = app_of(ctx)
        with tool_errors(app):
            spec = app.pool.spec(host)
            return await push_code(await app.pool.host(spec), spec, source, project, exclude=exclude or [],
                                   max_file_mb=max_file_mb, max_total_mb=max_total_mb, ledger=app.ledger,
                                   progress=reporter(ctx), state_dir=app.settings.home,
                                   allow_secrets_in=allow_secrets_in or [])


def _register_prune(server: MCPServer) -> None:
    @server.tool(name="prune_code", title="Delete old code snapshots", annotations=DESTRUCTIVE)
    async def prune_code_tool(
        ctx: Context,
        project: Annotated[IdStr, Field(description="the project's name on the box (push_code's `project`)")],
        host: Annotated[HostStr, Field(description=HOST_HELP)] = "local",
        keep: Annotated[int, Field(description="always keep this many newest snapshots", ge=1, le=1000)] = 3,
        token: Annotated[IdStr | None, Field(description="omit for the plan; its token deletes exactly its "
                                           "candidates")] = None,
    ) -> PruneOutput:
        """List a project's code snapshots, sizes and the runs naming them; delete old unused ones (plan, confirm).

        Without a token: every snapshot (newest first) with its files, bytes and the runs
        (run dirs on the box and launches in the ledger) that name it. A candidate is older than
        the newest `keep`, not `latest`, and named by no run, so every recorded result still
        leads to its exact code. With the plan's token: re-plans, refuses if the candidates
        changed, deletes exactly them. See references://run-remote/code-and-data#snapshots.
        """
        app = app_of(ctx)
        with tool_errors(app):
            spec = app.pool.spec(host)
            box = await app.pool.host(spec)
            if token is None:
                return PruneOutput(plan=await plan_prune(box, spec, project, keep, app.ledger))
            return PruneOutput(result=await confirm_prune(box, spec, project, keep, token, app.ledger))
