"""push_code tool adapter."""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.run.code.push import PushResult, push_code
from mcp_server.tools._common import LAUNCH, app_of, tool_errors
from mcp_server.tools._progress import reporter


def register(server: MCPServer) -> None:
    @server.tool(name="push_code", annotations=LAUNCH)
    async def push_code_tool(
        ctx: Context,
        source: Annotated[str, Field(description="local project directory (on the machine running this server)",
                                     max_length=4096)],
        host: Annotated[str, Field(description='"local", an inventory name, an ~/.ssh/config alias or '
                                   "user@host[:port]")] = "local",
        project: Annotated[str | None, Field(description="name of the project's code dir on the box (default: the "
                                             "source directory's name)")] = None,
        exclude: Annotated[list[str] | None, Field(description="more gitignore-style patterns to leave out, e.g. "
                                                   "['data/', '*.ckpt']", max_length=64)] = None,
        max_file_mb: Annotated[float, Field(description="refuse any file larger than this", gt=0)] = 20.0,
        max_total_mb: Annotated[float, Field(description="refuse a tree larger than this", gt=0)] = 200.0,
    ) -> PushResult:
        """Send a local project to the box as an immutable snapshot: <durable_root>/code/<project>/<snapshot-id>/.

        The id comes from the content: the same tree pushed again sends nothing; a changed tree
        sends only the files the box does not already have and becomes a new snapshot, so a run
        using an older snapshot keeps its exact files. Follows .gitignore (git's own listing in a
        git work tree) plus `exclude`; refuses files and trees over the caps, naming the largest.
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
                                   progress=reporter(ctx))
