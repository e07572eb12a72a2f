"""What a session costs a model's context, in bytes (issue 19): the tool list every session
sends, and the results of one whole lifecycle (the demo: audit, push, launch, wait, plot, verify,
probe, reconcile, the teardown plan), before and after the lean surface.

Before = the full pydantic schemas and each result's JSON repeated as text with every audit check
in full (RGT_RESULT_TEXT=json, audit detail "all"); after = what the server publishes by default.
A result's cost is its text content plus its structured content (a client may show either).
Targets: tools/list <= 25 KB; the lifecycle's results at most half of before."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from mcp import Client

from mcp_server.demo.runner import prepare, run_demo
from mcp_server.server import build_server

LIST_BUDGET = 25_000


def _size(result: Any) -> tuple[int, int]:
    text = sum(len(getattr(c, "text", "") or "") + len(getattr(c, "uri", "") or "") for c in result.content)
    return text, len(json.dumps(result.structured_content or {}, separators=(",", ":")))


class Recorder:
    """A client in front of the demo's that counts every result's bytes per tool."""

    def __init__(self, client: Client, full_audit: bool) -> None:
        self.client, self.full_audit = client, full_audit
        self.bytes: dict[str, list[int]] = defaultdict(lambda: [0, 0])

    async def call_tool(self, tool: str, args: dict[str, Any], **kw: Any) -> Any:
        if tool == "audit_box" and self.full_audit:
            args = {**args, "detail": "all"}
        result = await self.client.call_tool(tool, args, **kw)
        text, structured = _size(result)
        self.bytes[tool][0] += text
        self.bytes[tool][1] += structured
        return result


async def lifecycle(before: bool) -> tuple[int, int, dict[str, list[int]]]:
    """(tools/list bytes, results bytes, bytes per tool) for one demo run."""
    os.environ["RGT_RESULT_TEXT"] = "json" if before else "summary"
    base = Path(tempfile.mkdtemp(prefix="rgt-bench-context-")) / "demo"
    settings = prepare(base)
    server = build_server(settings)
    async with Client(server, read_timeout_seconds=120) as client:
        # before: the full tools as the SDK builds them; after: the published result, as on the wire
        full = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in await server.list_tools()]
        lean = (await client.list_tools()).model_dump_json(by_alias=True, exclude_none=True)
        listed = len(json.dumps({"tools": full}, separators=(",", ":"))) if before else len(lean)
        rec = Recorder(client, full_audit=before)
        rc = await run_demo(base, lambda line: None, rec)
        assert rc == 0, "the demo failed"
    return listed, sum(t + s for t, s in rec.bytes.values()), rec.bytes


async def main() -> None:
    list_before, results_before, per_before = await lifecycle(before=True)
    list_after, results_after, per_after = await lifecycle(before=False)
    print(f"{'tool':20} {'before text+structured':>24} {'after text+structured':>24}")
    for tool in per_before:
        b, a = per_before[tool], per_after.get(tool, [0, 0])
        print(f"{tool:20} {b[0]:>11,} + {b[1]:>10,} {a[0]:>11,} + {a[1]:>10,}")
    print(f"tools/list: {list_before:,} bytes before, {list_after:,} after "
          f"(target <= {LIST_BUDGET:,}: {'OK' if list_after <= LIST_BUDGET else 'MISSED'})")
    ratio = results_after / results_before
    print(f"one lifecycle's results: {results_before:,} bytes before, {results_after:,} after = {ratio:.2f} "
          f"(target <= 0.50: {'OK' if ratio <= 0.5 else 'MISSED'})")
    print(f"a session (tools/list + the lifecycle): {list_before + results_before:,} -> "
          f"{list_after + results_after:,} bytes = {(list_after + results_after) / (list_before + results_before):.2f}")


if __name__ == "__main__":
    start = time.monotonic()
    asyncio.run(main())
    print(f"bench time {time.monotonic() - start:.0f} s")
