"""The tool surface as clients see it: names, honest annotations, schemas, descriptions."""

from __future__ import annotations

from mcp_server.tools._lean import SHARED_ARGUMENTS
from tests.conftest import hints

EXPECTED = {
    # name: (read_only, destructive, idempotent, open_world)
    "audit_box": (True, False, True, True),
    "launch_detached": (False, False, False, True),  # two identical unnamed calls start two jobs
    "tail_logs": (True, False, True, True),
    "list_runs": (True, False, True, True),
    "verify_artifacts": (False, False, True, True),
    "plan_teardown": (True, False, True, True),  # writes only its plan and token to the local ledger
    "teardown": (False, True, False, True),
    "run_probe": (True, False, True, True),
    "reconcile_evidence": (False, False, True, True),
    "search_references": (True, False, True, False),
    "aggregate_results": (False, False, True, True),
    "cancel_run": (False, True, True, True),
    "wait_for_run": (True, False, True, True),
    "plot_run": (False, False, True, True),  # saves curves.png into the run dir by default
    "reap_vram": (False, True, False, True),  # a token stops exactly the planned processes, once
    "inspect_run": (True, False, True, True),
    "prepare_box": (False, False, True, True),  # writes only the planned files, once per token
    "push_code": (False, False, True, True),  # the same tree again sends nothing and changes nothing
    "prune_code": (False, True, False, True),  # a token deletes exactly the planned snapshots, once
    "fetch_data": (False, False, False, True),  # starts a download job (a live one of the name is returned)
    "preflight": (False, False, False, True),  # starts a drill run each call
    "capsule": (False, False, False, True),  # reproduce starts a run; apply spends its token once
}


async def test_the_tool_list_and_its_annotations(client) -> None:
    async with client.session() as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
    assert set(EXPECTED) == set(tools), "every tool's annotations are asserted here"
    for name, (ro, de, idem, ow) in EXPECTED.items():
        assert hints(tools[name].annotations) == (ro, de, idem, ow), name
    destructive = [n for n, t in tools.items() if t.annotations and t.annotations.destructive_hint]
    assert sorted(destructive) == ["cancel_run", "prune_code", "reap_vram", "teardown"]


async def test_every_tool_has_a_typed_schema_an_output_schema_and_a_model_facing_first_line(client) -> None:
    async with client.session() as c:
        tools = (await c.list_tools()).tools
    for t in tools:
        assert t.input_schema.get("type") == "object", t.name
        assert t.output_schema is not None, t.name
        first = (t.description or "").splitlines()[0]
        assert 20 < len(first) < 220, t.name
        for prop, spec in t.input_schema.get("properties", {}).items():
            # `host` is described once, in the server's instructions (test_lean_surface holds it there)
            assert spec.get("description") or "$ref" in str(spec) or "anyOf" in spec or prop in SHARED_ARGUMENTS, \
                (t.name, prop)
