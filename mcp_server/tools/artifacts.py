"""verify_artifacts tool adapter."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from mcp_server.app import App
from mcp_server.errors import InputError
from mcp_server.hosts.base import Host
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.limits import HostStr, IdStr, PathStr, PatternStr
from mcp_server.run.jobs.rundir import RunOutputs, declared_outputs, read_run_record
from mcp_server.tools._common import HOST_HELP, WRITES_LOCAL, app_of, tool_errors
from mcp_server.tools._progress import reporter
from mcp_server.verify.artifacts.cells import CellSpec
from mcp_server.verify.artifacts.request import VerifyRequest, VerifyResult

HostArg = Annotated[HostStr, Field(description=HOST_HELP)]
RootArg = Annotated[PathStr | None, Field(
    description="box result root (default: the run's output root)",
    json_schema_extra={"x-rgt-path": "box"})]
RosterArg = Annotated[list[PatternStr] | None, Field(
    description="files that must exist (globs under root); default: the run's outputs",
    max_length=1000)]
RunIdArg = Annotated[IdStr | None, Field(
    description="the run they belong to (gives root and roster)")]
DestArg = Annotated[PathStr | None, Field(description="local destination (default $RGT_HOME/pulls/<host>/<run>)",
                                          json_schema_extra={"x-rgt-path": "local"})]
BudgetArg = Annotated[float, Field(
    description="seconds before done=false (call again)", ge=2, le=55)]
AllowPickleArg = Annotated[bool, Field(
    description="allow unsafe pickle loads (only files you trust)")]
ExpectKeysArg = Annotated[list[IdStr] | None, Field(
    description="keys every checkpoint must hold, e.g. 'model'", max_length=50)]
HandMadeArg = Annotated[list[PatternStr] | None, Field(
    description="hand-written files (globs): a last row may lack its newline", max_length=100)]
CellsArg = Annotated[CellSpec | None, Field(
    description="a sweep's cells: all must be there; a metric table per cell")]
PackArg = Annotated[bool, Field(
    description="pull small files as one tar packed on the box")]
AcceptFromArg = Annotated[HostStr | None, Field(
    description="accept mode: the producer host, whose verified copy `host` re-hashes")]
CompareWithArg = Annotated[int | None, Field(
    description="accept mode: an earlier acceptance id to compare with")]


def launched_outputs(ledger: Ledger, host: str, run_id: str, *, own_roster: bool = False) -> RunOutputs | None:
    """The outputs this server recorded when it launched the run: trusted over the box's own
    run.json, which anyone on the box can rewrite (to point the pull at /etc, say). With a roster
    of the call's own, a run that declared none is read at its output_dir."""
    for ev in ledger.events("launch", host=host, run_id=run_id, limit=1):
        found, output_dir = ev.data.get("outputs"), ev.data.get("output_dir")
        if isinstance(found, dict):
            return RunOutputs.model_validate(found)
        if own_roster and isinstance(output_dir, str):
            return RunOutputs(root=output_dir, patterns=[])
        raise InputError(f"run {run_id} declared no outputs when it was launched", host=host,
                         next_step="pass root and roster (the files that must exist)")
    return None


async def run_outputs(ledger: Ledger, box: Host, spec: HostSpec, run_id: str, *, own_roster: bool = False
                      ) -> RunOutputs:
    """A run's declared outputs: this server's launch record, else (a run another server launched)
    the box's run.json, whose root the listing still confines."""
    launched = launched_outputs(ledger, spec.name, run_id, own_roster=own_roster)
    if launched is not None:
        return launched
    if own_roster:
        record = await read_run_record(box, spec.durable_root, run_id)
        if record.outputs is not None:
            return record.outputs
        if record.output_dir:
            return RunOutputs(root=record.output_dir, patterns=[])
    return await declared_outputs(box, spec.durable_root, run_id)


async def _box(app: App, spec: HostSpec) -> Host:
    """Where the files are: the box, or on a Kubernetes host the PVC through a reader pod."""
    if spec.kind == "kubernetes":
        from mcp_server.hosts.kube_pod import PodHost  # loads the Kubernetes client only for such a host

        return PodHost(app.pool.kube(spec))
    return await app.pool.host(spec)


async def _verify(app: App, box: Host, spec: HostSpec, req: VerifyRequest,
                  progress: Callable[[int, int, str], Awaitable[None]]) -> VerifyResult:
    """The pull and its checks; their machinery (tar, the resumable puller) loads on the first call, not at start."""
    from mcp_server.verify.artifacts.verifier import verify_artifacts

    return await verify_artifacts(box, spec, req, pulls_dir=app.settings.pulls_dir, ledger=app.ledger,
                                  pull_roots=app.settings.pull_roots, progress=progress)


def register(server: MCPServer) -> None:
    @server.tool(name="verify_artifacts", title="Pull and verify results", annotations=WRITES_LOCAL)
    async def verify_artifacts_tool(
        ctx: Context,
        host: HostArg = "local",
        root: RootArg = None,
        roster: RosterArg = None,
        run_id: RunIdArg = None,
        dest: DestArg = None,
        budget_s: BudgetArg = 35.0,
        allow_pickle: AllowPickleArg = False,
        expect_keys: ExpectKeysArg = None,
        hand_made: HandMadeArg = None,
        cells: CellsArg = None,
        pack: PackArg = False,
        accept_from: AcceptFromArg = None,
        compare_with: CompareWithArg = None,
    ) -> VerifyResult:
        """Pull results off the box and prove every byte: roster, on-box SHA-256 manifest, resumable pull, load checks.

        Builds the run's SHA-256 manifest on the box (hashed there, in parallel; kept in
        <durable_root>/.rgt/manifests/, one per run, never in your data dir), pulls resumably
        with the hash computed while receiving, checks each file by type (safetensors offsets,
        torch weights-only load, json/csv/npz/parquet), writes a local PULL_VERIFIED.json and
        records it in the ledger. A run still running is not verified (nothing is written).
        Returns within budget_s with done=false when more remains. Teardown trusts only this. With
        accept_from, a second machine accepts the producer's bundle instead (ACCEPTED.json, ledger
        `acceptance`). See references://run-remote/principles#iron-law and references://run-remote/artifact-layout.
        """
        app = app_of(ctx)
        with tool_errors(app):
            spec = app.pool.spec(host)
            box = await _box(app, spec)
            producer = app.pool.spec(accept_from).name if accept_from else None
            if run_id and not producer and (root is None or (roster is None and cells is None)):
                outputs = await run_outputs(app.ledger, box, spec, run_id, own_roster=bool(roster or cells))
                root, roster = root or outputs.root, roster or outputs.patterns
            if not root or not (roster or cells or producer):
                raise InputError("give root and roster (or cells), or the run_id of a run that declared outputs")

            report = reporter(ctx)

            async def progress(done: int, total: int, path: str) -> None:
                await report(done, total, f"pulling {path}")

            req = VerifyRequest(root=root, roster=roster or [], run_id=run_id, dest=dest, budget_s=budget_s,
                                allow_pickle=allow_pickle, expect_keys=expect_keys, hand_made=hand_made or [],
                                cells=cells, pack=pack, accept_from=producer, compare_with=compare_with)
            return await _verify(app, box, spec, req, progress)
