"""run_probe end to end through a real MCP client: the exact per-probe schema, the ledger
record, bounded file inputs on the sshd box, bad input, and the README examples."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from mcp_server.ledger import Ledger
from tests.conftest import error_text, hints, structured

DOC = Path(__file__).resolve().parents[2] / "README.md"
PROBE_IDS = {"control_diff", "trajectory", "seed_variance", "mde", "leakage", "collapse", "metric_sanity",
             "checkpoint_identity"}
VERDICTS = {"bug", "effect", "noise", "instability", "stochastic", "underpowered", "confounded", "collapsed",
            "leak", "clean", "unverified", "not_applicable"}


@pytest.fixture
def gpu1(env, box, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    env.write_inventory({"gpu1": {"destination": "testbox"}})
    return tmp_path


async def tool(client) -> object:  # type: ignore[no-untyped-def]
    async with client.session() as c:
        listed = await c.list_tools()
    return next(t for t in listed.tools if t.name == "run_probe")


async def test_run_probe_is_read_only_and_each_probe_has_its_own_exact_schema(client) -> None:  # type: ignore[no-untyped-def]
    t = await tool(client)
    assert hints(t.annotations)[:2] == (True, False)
    published = t.input_schema["properties"]["inputs"]  # type: ignore[attr-defined]
    assert set(published["properties"]["probe"]["enum"]) == PROBE_IDS  # tools/list: each probe named once
    async with client.session() as c:
        whole = json.loads((await c.read_resource("schemas://tools/run_probe")).contents[0].text)
    schema, output = whole["inputSchema"], whole["outputSchema"]  # the exact schemas, one read away
    inputs = schema["properties"]["inputs"]
    assert set(inputs["discriminator"]["mapping"]) == PROBE_IDS
    defs = schema["$defs"]
    for ref in inputs["discriminator"]["mapping"].values():
        d = defs[ref.rsplit("/", 1)[-1]]
        assert d["additionalProperties"] is False
        assert len(d["properties"]["probe"].get("enum", [d["properties"]["probe"].get("const")])) == 1
    assert set(defs["MdeInputs"]["properties"]) >= {"sd", "n", "claimed_effect", "alpha", "power"}
    assert schema["required"] == ["inputs"]
    verdict_enum = output["properties"]["verdict"]["enum"]
    assert set(verdict_enum) == VERDICTS


async def test_every_result_is_recorded_in_the_ledger_with_its_verdict(client, env) -> None:  # type: ignore[no-untyped-def]
    r = structured(await client.call_tool("run_probe", {"run_id": "sweep-3", "inputs": {
        "probe": "mde", "sd": 3.42, "n": 3, "claimed_effect": 5.0}}))
    assert r["verdict"] == "underpowered" and r["ledger_id"]
    ledger = Ledger.open(env.settings().ledger_path)
    try:
        (event,) = ledger.events("probe", run_id="sweep-3")
    finally:
        ledger.close()
    assert event.id == r["ledger_id"]
    assert event.summary.startswith("mde: underpowered")
    assert event.data["inputs_digest"] == r["inputs_digest"] and event.data["disclosure"] == r["disclosure"]


async def test_an_unknown_probe_names_the_probes_that_exist(client) -> None:  # type: ignore[no-untyped-def]
    text = error_text(await client.call_tool("run_probe", {"inputs": {"probe": "vibes"}}))
    assert "seed_variance" in text and "checkpoint_identity" in text


async def test_a_misspelt_field_is_refused_rather_than_ignored(client) -> None:  # type: ignore[no-untyped-def]
    text = error_text(await client.call_tool("run_probe", {"inputs": {"probe": "mde", "sd": 1.0, "n": 3,
                                                                      "claimed_efect": 2.0}}))
    assert "claimed_efect" in text


async def test_nan_sent_as_a_string_is_read_as_a_logged_nan(client) -> None:  # type: ignore[no-untyped-def]
    r = structured(await client.call_tool("run_probe", {"inputs": {
        "probe": "trajectory", "metric": "loss", "run": {"values": [2.0, 1.0, "NaN", 0.5]}}}))
    assert r["verdict"] == "instability" and r["measurements"]["run"]["first_nonfinite_step"] == 2


async def test_a_file_over_its_size_limit_is_refused_before_transfer(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    big = gpu1 / "huge.csv"
    big.write_text("step,acc\n" + "".join(f"{i},0.5\n" for i in range(200_000)))
    text = error_text(await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "trajectory", "metric": "acc",
        "run": {"file": {"path": str(big), "max_bytes": 1_000_000}, "column": "acc"}}}))
    assert "over the 1000000-byte limit" in text and "host gpu1" in text


async def test_a_missing_file_and_a_relative_path_are_clear_errors(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    missing = error_text(await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "trajectory", "metric": "acc", "run": {"file": {"path": str(gpu1 / "nope.csv")}, "column": "acc"}}}))
    assert "file not found" in missing
    relative = error_text(await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "trajectory", "metric": "acc", "run": {"file": {"path": "logs/a.csv"}, "column": "acc"}}}))
    assert "must be absolute" in relative


async def test_the_digest_follows_the_file_bytes_not_just_the_arguments(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    f = gpu1 / "seeds.csv"
    args = {"host": "gpu1", "inputs": {"probe": "mde", "sd": 1.0, "n": 3}}
    first = structured(await client.call_tool("run_probe", args))
    again = structured(await client.call_tool("run_probe", args))
    assert first["inputs_digest"] == again["inputs_digest"]
    f.write_text("seed,v\n0,1\n1,2\n")
    ref = {"host": "gpu1", "inputs": {"probe": "seed_variance", "baseline": {"name": "b", "file": {"path": str(f)},
                                      "column": "v"}, "arms": [{"name": "a", "values": [1.5]}]}}
    one = structured(await client.call_tool("run_probe", ref))
    f.write_text("seed,v\n0,1\n1,3\n")
    two = structured(await client.call_tool("run_probe", ref))
    assert one["inputs_digest"] != two["inputs_digest"]
    assert one["inputs_read"][0]["sha256"] != two["inputs_read"][0]["sha256"]


async def test_long_lists_in_measurements_are_cut_but_counted(client) -> None:  # type: ignore[no-untyped-def]
    run = {f"k{i}": i for i in range(500)}
    r = structured(await client.call_tool("run_probe", {"inputs": {
        "probe": "control_diff", "run": {"inline": run}, "control": {"inline": {}}}}))
    assert r["measurements"]["differing_count"] == 500
    assert len(r["measurements"]["differing"]) == 25 and len(r["measurements"]["undeclared"]) == 25


def doc_examples() -> list[dict]:
    text = DOC.read_text(encoding="utf-8")
    found = re.findall(r"^(?:\.venv/bin/)?remote-gpu-trainer-mcp call run_probe (.+)$", text, flags=re.M)
    return [json.loads(shlex.split(line)[0]) for line in found]


def test_the_readme_section_has_one_example_per_probe() -> None:
    probes = {ex["inputs"]["probe"] for ex in doc_examples()}
    assert probes == PROBE_IDS


async def test_the_readme_examples_without_files_run_as_written(client) -> None:  # type: ignore[no-untyped-def]
    inline = [ex for ex in doc_examples() if '"file"' not in json.dumps(ex)]
    assert len(inline) >= 4
    for ex in inline:
        r = structured(await client.call_tool("run_probe", ex))
        assert r["verdict"] in VERDICTS and r["disclosure"]
