"""Prompts end to end through a real MCP client: listed with their arguments, rendered with the
host's platform facts filled in, and a bad platform refused with the ones that exist."""

from __future__ import annotations

import re

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import GetPromptResult, TextContent

from mcp_server import knowledge as k


def text_of(result: GetPromptResult) -> str:
    lines = []
    for m in result.messages:
        assert isinstance(m.content, TextContent), m.content
        lines.append(m.content.text)
    return "\n".join(lines)


async def test_the_three_lifecycle_prompts_are_listed_with_their_arguments(client) -> None:
    async with client.session() as c:
        prompts = {p.name: p for p in (await c.list_prompts()).prompts}
    assert {"remote_run", "verify_result", "deliver"} <= set(prompts)
    args = {n: {a.name: a.required for a in (p.arguments or [])} for n, p in prompts.items()}
    assert args["remote_run"] == {"host": False, "platform": False, "run_name": False}
    assert args["verify_result"]["run_id"] is True and "host" in args["verify_result"]
    assert set(args["deliver"]) == {"project_root", "run_id"}
    assert all(p.description and p.title for p in prompts.values())
    assert all(a.description for p in prompts.values() for a in (p.arguments or [])), "every argument says what it is"


async def test_remote_run_walks_six_phases_with_the_tool_for_each(client) -> None:
    async with client.session() as c:
        text = text_of(await c.get_prompt("remote_run", {"host": "local", "run_name": "abl-7"}))
    phases = re.findall(r"^Phase (\d) ", text, re.M)
    assert phases == ["0", "1", "2", "3", "4", "5"]
    for tool in ("audit_box", "launch_detached", "tail_logs", "list_runs", "verify_artifacts", "plan_teardown",
                 "teardown"):
        assert f"`{tool}(" in text
    assert 'name="abl-7"' in text and "profiles://local" in text
    assert "#iron-law" in text


async def test_remote_run_fills_in_the_platform_facts(client) -> None:
    async with client.session() as c:
        text = text_of(await c.get_prompt("remote_run", {"host": "local", "platform": "autodl"}))
    autodl = k.profile("autodl")
    assert autodl.proxy_hook in text
    assert "15 days" in text and "`release` (释放): IRREVERSIBLE" in text
    assert "`power-off` (关机): park (reversible)" in text


async def test_remote_run_uses_the_inventory_profile_of_the_host(env, client) -> None:
    env.write_inventory({"gpu1": {"destination": "root@example.invalid", "profile": "runpod"}})
    async with client.session() as c:
        text = text_of(await c.get_prompt("remote_run", {"host": "gpu1"}))
    assert "profiles://runpod" in text and "/workspace/rgt" in text and "2x" in text


async def test_remote_run_refuses_an_unknown_platform_and_names_the_known_ones(client) -> None:
    async with client.session() as c:
        with pytest.raises(MCPError) as err:
            await c.get_prompt("remote_run", {"host": "local", "platform": "nosuchcloud"})
    assert "nosuchcloud" in str(err.value) and "runpod" in str(err.value)


async def test_verify_result_is_the_probe_ladder(client) -> None:
    async with client.session() as c:
        text = text_of(await c.get_prompt("verify_result", {"run_id": "r-42", "metric": "PSNR"}))
    ladder = ("control_diff", "trajectory", "seed_variance", "mde", "leakage", "collapse")
    order = [text.index(f'"probe": "{p}"') for p in ladder]
    assert order == sorted(order), "cheapest probes first"
    assert "r-42" in text and "PSNR" in text and "bug, a real effect or noise" in text


async def test_deliver_goes_evidence_reconcile_gate(client) -> None:
    async with client.session() as c:
        text = text_of(await c.get_prompt("deliver", {"project_root": "/proj", "run_id": "r-1"}))
    steps = [text.index(w) for w in ("Evidence:", "Reconcile:", "Figures:", "Gate:")]
    assert steps == sorted(steps)
    assert 'reconcile_evidence(evidence="/proj/EVIDENCE.json"' in text
    assert "references://delivering/delivery-gate" in text


async def test_every_reference_a_prompt_names_exists(client) -> None:
    link = re.compile(r"\b(?:references|profiles)://[a-z_][a-z0-9_/-]*[a-z0-9](?:#[a-z0-9-]+)?")
    async with client.session() as c:
        texts = [text_of(await c.get_prompt("remote_run", {"platform": p})) for p in k.profiles()]
        texts.append(text_of(await c.get_prompt("verify_result", {"run_id": "x"})))
        texts.append(text_of(await c.get_prompt("deliver", {})))
    for uri in {m for t in texts for m in link.findall(t)}:
        k.resolve(uri)
