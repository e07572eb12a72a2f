"""fetch_data tool adapter."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.limits import HostStr, IdStr, PathStr, UrlStr
from mcp_server.run.data.fetch import FetchRequest, FetchResult, fetch_data
from mcp_server.tools._common import HOST_HELP, STARTS_WORK, app_of, tool_errors


def register(server: MCPServer) -> None:
    @server.tool(name="fetch_data", title="Download data on the box", annotations=STARTS_WORK)
    async def fetch_data_tool(
        ctx: Context,
        dest: Annotated[PathStr, Field(description="box path under the durable or scratch root: a file (url) or "
                                       "a folder (hf_repo)", json_schema_extra={"x-rgt-path": "box"})],
        host: Annotated[HostStr, Field(description=HOST_HELP)] = "local",
        url: Annotated[UrlStr | None, Field(description="http(s) URL of one file")] = None,
        hf_repo: Annotated[IdStr | None, Field(description="a Hugging Face repo id, e.g. Qwen/Qwen2.5-0.5B")] = None,
        hf_repo_type: Annotated[Literal["model", "dataset"], Field(description="for hf_repo")] = "model",
        revision: Annotated[IdStr | None, Field(description="for hf_repo: a branch, tag or commit")] = None,
        sha256: Annotated[IdStr | None, Field(description="for url: the file's expected SHA-256")] = None,
        expected_gib: Annotated[float | None, Field(description="size to check room for if the source says none",
                                                    gt=0)] = None,
        token_env: Annotated[IdStr | None, Field(description="NAME of the server env var with the token, e.g. "
                                               "HF_TOKEN")] = None,
        attempts: Annotated[int, Field(description="download attempts, with backoff", ge=1,
                                       le=50)] = 8,
    ) -> FetchResult:
        """Download a model, dataset or file ON the box (not via this machine) as a detached run.

        Checks free bytes and inodes against the size first and refuses before downloading;
        resumes a partial file (curl -C -) or repo (hf download), retrying transient errors;
        verifies sha256 when given; writes a completion marker so calling again is a no-op
        (outcome already_there). Hugging Face uses the box's HF_ENDPOINT mirror and HF_HOME
        from prepare_box. Progress ("rgt-fetch: N of M bytes") shows in tail_logs.
        See references://run-remote/code-and-data#fetch.
        """
        app = app_of(ctx)
        with tool_errors(app):
            spec = app.pool.spec(host)
            req = FetchRequest(url=url, hf_repo=hf_repo, hf_repo_type=hf_repo_type, revision=revision, dest=dest,
                               sha256=sha256, expected_gib=expected_gib, token_env=token_env, attempts=attempts)
            return await fetch_data(await app.pool.host(spec), spec, req, ledger=app.ledger, redactor=app.redactor)
