"""Start-up stays light: a server started as MCP clients start it (stdio, the console entry's
main) answers initialize and tools/list without loading what only a tool call needs, and serves
with the garbage collector on. What it loaded and the collector's state are read from the process
itself when stdin's end stops it (bench/bench_start.py measures what a start costs)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from tests.support.wait import until

# Each loads on the first call that needs it; imported at start, each costs every session.
DEFERRED = (
    "asyncssh",  # the first command on an SSH host
    "mcp_server.hosts.ssh",
    "lightkube",  # a Kubernetes host
    "mcp_server.run.jobs.engines.kube",
    "numpy",  # a probe's arithmetic (a lazy module until then)
    "jsonschema",  # a result cut to its budget, checked against its output schema
    "mcp_server.verify.artifacts.verifier",  # verify_artifacts: the pull machinery
    "mcp_server.run.preflight.service",  # preflight: the smoke and the drill
    "mcp_server.deliver.reconcile",  # reconcile_evidence: the matcher
    "mcp_server.search",  # search_references: the index
    "matplotlib",  # plot_run
)

# The server; as it exits, the modules it really loaded (a lazy one not yet touched is not) and
# the collector's state, written to argv[1].
SERVE_AND_REPORT = """\
import atexit, gc, json, os, sys
def report():
    loaded = sorted(n for n, m in sys.modules.items() if type(m).__name__ != "_LazyModule")
    with open(sys.argv[1] + ".part", "w") as f:
        json.dump({"modules": loaded, "collecting": gc.isenabled(), "set_aside": gc.get_freeze_count()}, f)
    os.replace(sys.argv[1] + ".part", sys.argv[1])
atexit.register(report)
from mcp_server.__main__ import main
sys.exit(main([]))
"""


async def started_and_listed(folder: Path) -> dict[str, Any]:
    """Start the server over stdio, initialize, list the tools, close; what it reported."""
    report = folder / "started.json"
    names = ("RGT_HOME", "RGT_CONFIG", "RGT_SSH_CONFIG", "PATH")
    params = StdioServerParameters(command=sys.executable, args=["-c", SERVE_AND_REPORT, str(report)],
                                   env={k: os.environ[k] for k in names if k in os.environ})
    async with Client(params, read_timeout_seconds=60) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
    assert {"verify_artifacts", "preflight", "run_probe", "reconcile_evidence"} <= listed
    await until(report.exists, timeout=20, what="the server's report, written as it exits")
    found: dict[str, Any] = json.loads(report.read_text())
    return found


async def test_initialize_and_tools_list_load_none_of_the_modules_a_tool_call_needs(env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    loaded = set((await started_and_listed(tmp_path))["modules"])
    assert "mcp_server.tools.artifacts" in loaded, "the report names the modules the server loaded"
    assert sorted(m for m in DEFERRED if m in loaded) == []


async def test_the_server_serves_with_the_collector_on_and_what_the_start_built_set_aside(env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    found = await started_and_listed(tmp_path)
    assert found["collecting"], "the collector paused for the start must be back on while serving"
    assert found["set_aside"] > 50_000, "the start's objects are frozen, so no collection walks them again"
