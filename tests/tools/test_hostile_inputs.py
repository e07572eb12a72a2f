"""Security (robustness): every tool, given hostile arguments — NUL, control characters, text
that is not valid UTF-8, 1 MB strings, wrong types, deep nesting, huge numbers — answers a clear
coded error or a correct result, of bounded size, and the server keeps serving. One connection
for the whole matrix, like an agent's session; this machine only (no box is touched outside the
test's tmp roots)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.tools.test_stdio_malformed import INIT, Wire

BIG = "x" * 1_000_000
NESTED: Any = "leaf"
for _ in range(200):
    NESTED = {"a": NESTED}

HOSTILE: list[tuple[str, dict[str, Any]]] = [
    ("audit_box", {"host": "gpu1\x00"}),
    ("audit_box", {"host": BIG}),
    ("audit_box", {"host": "gpu1", "expect_files": [BIG]}),
    ("launch_detached", {"host": "gpu1", "command": "echo \x00 hi"}),
    ("launch_detached", {"host": "gpu1", "command": "true", "name": "a\x1b[2Jb"}),
    ("launch_detached", {"host": "gpu1", "command": "true", "env": {"A\x00": "1"}}),
    ("launch_detached", {"host": "gpu1", "command": "true", "probe_s": 10**30}),
    ("launch_detached", {"host": "gpu1", "command": NESTED}),
    ("preflight", {"host": "gpu1", "command": "echo \x00 hi"}),
    ("preflight", {"host": "gpu1", "run_id": "../x"}),
    ("preflight", {"host": "gpu1", "command": "true", "checkpoints": ["[z-a]"], "steps": 10**30}),
    ("launch_detached", {"host": "gpu1", "watch": {"run_ids": ["../x"], "interval_min": 10**30}}),
    ("tail_logs", {"host": "gpu1", "run_id": BIG}),
    ("tail_logs", {"host": "gpu1", "run_id": "../../etc"}),
    ("tail_logs", {"host": "gpu1", "path": "/tmp/x\x00y"}),
    ("tail_logs", {"host": "gpu1", "run_id": "r", "offset": -1}),
    ("list_runs", {"host": "gpu1", "name": "[z-a]"}),
    ("list_runs", {"host": "gpu1", "since": BIG}),
    ("list_runs", {"host": "gpu1", "cursor": "\x00\xff"}),
    ("wait_for_run", {"host": "gpu1", "run_id": "nope", "timeout_s": 10**12}),
    ("cancel_run", {"host": "gpu1", "run_id": "../x"}),
    ("plot_run", {"host": "gpu1", "run_id": "nope", "series": [BIG]}),
    ("verify_artifacts", {"host": "gpu1", "root": "/tmp", "roster": ["**/" * 200 + "x"]}),
    ("verify_artifacts", {"host": "gpu1", "root": "/tmp\x00", "roster": ["a"]}),
    ("verify_artifacts", {"host": "gpu1", "root": "/tmp", "roster": ["[z-a]"]}),
    ("plan_teardown", {"host": "gpu1", "action": BIG}),
    ("teardown", {"host": "gpu1", "action": "none", "token": "\x00" * 100}),
    ("run_probe", {"probe": "nope", "inputs": NESTED}),
    ("run_probe", {"probe": BIG}),
    ("reconcile_evidence", {"evidence": BIG, "documents": ["a.md"]}),
    ("reconcile_evidence", {"evidence": "/nonexistent/EVIDENCE.json", "documents": [BIG]}),
    ("capsule", {"action": "seal", "project": "/tmp/x\x00y", "path": BIG}),
    ("capsule", {"action": "propose", "project": "/tmp", "run_ids": ["../../etc"], "row": {"claim": BIG,
                                                                                          "metric": "acc"}}),
    ("capsule", {"action": "apply", "project": "/tmp", "token": "\x00" * 100}),
    ("capsule", {"action": "report", "host": "gpu1", "run_ids": ["r\x00; rm -rf ~"]}),
    ("capsule", {"action": "trackers", "path": "\x1b[2J" + "a" * 500}),
    ("capsule", {"action": "seal", "roles": NESTED}),
    ("search_references", {"query": BIG}),
    ("search_references", {"query": "\x00\x01\x02"}),
    ("aggregate_results", {"host": "gpu1", "cells": "**/" * 200, "name": "x"}),
    ("inspect_run", {"host": "gpu1", "run_id": "../../etc"}),
    ("inspect_run", {"host": "gpu1", "run_id": BIG}),
    ("inspect_run", {"host": "gpu1", "run_id": "r\x00; rm -rf ~", "window_s": 2}),
    ("inspect_run", {"host": "gpu1", "run_id": "r", "window_s": 10**30}),
    ("push_code", {"host": "gpu1", "source": "/nonexistent\x00"}),
    ("push_code", {"host": "gpu1", "source": BIG}),
    ("push_code", {"host": "gpu1", "source": "/tmp", "project": "../../etc"}),
    ("push_code", {"host": "gpu1", "source": "/nonexistent", "exclude": [BIG], "max_file_mb": 1e308}),
    ("prune_code", {"host": "gpu1", "project": "../../etc"}),
    ("prune_code", {"host": "gpu1", "project": BIG, "keep": 10**30}),
    ("prune_code", {"host": "gpu1", "project": "p", "token": "\x00" * 100}),
    ("fetch_data", {"host": "gpu1", "dest": "/etc/rgt", "url": "https://example.invalid/x"}),
    ("fetch_data", {"host": "gpu1", "dest": "x", "url": "file:///etc/shadow"}),
    ("fetch_data", {"host": "gpu1", "dest": "x", "url": BIG}),
    ("fetch_data", {"host": "gpu1", "dest": "x", "hf_repo": "a\x00b; id"}),
    ("fetch_data", {"host": "gpu1", "dest": "x\x1b[2J", "url": "https://example.invalid/x", "sha256": BIG,
                    "expected_gib": 1e308, "token_env": "A=B; id"}),
    ("prepare_box", {"host": "gpu1", "token": "\x00" * 100}),
    ("prepare_box", {"host": "gpu1", "token": BIG}),
    ("reap_vram", {"host": "gpu1", "token": "\x00" * 100}),
    ("reap_vram", {"host": "gpu1", "token": BIG, "min_age_s": 10**30}),
]
# Not valid UTF-8: a lone surrogate (what "\udcff" in JSON decodes to, and what Python makes of a
# stray 0xff byte with surrogateescape) in a string argument of every tool that takes one.
NOT_UTF8 = "r\udcff\ud800x"
HOSTILE += [
    ("audit_box", {"host": NOT_UTF8}),
    ("launch_detached", {"host": "gpu1", "command": f"echo {NOT_UTF8}", "name": NOT_UTF8}),
    ("launch_detached", {"host": "gpu1", "command": "true", "env": {"A": NOT_UTF8}}),
    ("tail_logs", {"host": "gpu1", "run_id": NOT_UTF8}),
    ("tail_logs", {"host": "gpu1", "path": f"/tmp/{NOT_UTF8}"}),
    ("list_runs", {"host": "gpu1", "name": NOT_UTF8}),
    ("wait_for_run", {"host": "gpu1", "run_id": NOT_UTF8, "timeout_s": 1}),
    ("cancel_run", {"host": "gpu1", "run_id": NOT_UTF8}),
    ("plot_run", {"host": "gpu1", "run_id": NOT_UTF8}),
    ("inspect_run", {"host": "gpu1", "run_id": NOT_UTF8, "window_s": 2}),
    ("verify_artifacts", {"host": "gpu1", "root": f"/tmp/{NOT_UTF8}", "roster": [NOT_UTF8]}),
    ("plan_teardown", {"host": "gpu1", "action": NOT_UTF8}),
    ("teardown", {"host": "gpu1", "action": "none", "token": NOT_UTF8}),
    ("run_probe", {"probe": NOT_UTF8}),
    ("reconcile_evidence", {"evidence": NOT_UTF8, "documents": [NOT_UTF8]}),
    ("search_references", {"query": NOT_UTF8}),
    ("aggregate_results", {"host": "gpu1", "cells": NOT_UTF8, "name": NOT_UTF8}),
    ("push_code", {"host": "gpu1", "source": f"/tmp/{NOT_UTF8}", "project": NOT_UTF8}),
    ("prune_code", {"host": "gpu1", "project": NOT_UTF8}),
    ("fetch_data", {"host": "gpu1", "dest": NOT_UTF8, "url": f"https://example.invalid/{NOT_UTF8}"}),
    ("prepare_box", {"host": "gpu1", "token": NOT_UTF8}),
    ("reap_vram", {"host": "gpu1", "token": NOT_UTF8}),
]


async def test_security_hostile_inputs_get_bounded_clear_answers_and_the_server_keeps_serving(
        local_box: Path, client: Any) -> None:
    async with client.session() as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert {n for n, _ in HOSTILE} == names, "every tool meets the matrix"
        for name, args in HOSTILE:
            res = await c.call_tool(name, args)
            text = "\n".join(getattr(x, "text", "") for x in res.content)
            assert len(text) < 64_000, (name, len(text))
            if res.is_error:
                assert text.strip(), name
                assert "Traceback" not in text, (name, text[:500])
                assert "[ERROR] unexpected" not in text, (name, text[:500])  # every failure mapped and coded
                assert re.search(r"\[[A-Z_]+\] ", text), (name, text[:500])
            alive = await c.call_tool("list_runs", {"host": "gpu1"})
            assert not alive.is_error, (name, alive)


async def test_an_unexpected_failure_is_a_coded_bounded_error_that_says_the_outcome_is_unknown(
        local_box: Path, client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_server.run.jobs import listing

    def broken(*a: Any, **k: Any) -> Any:
        raise KeyError("x" * 100_000)

    monkeypatch.setattr(listing, "page", broken)  # a bug: the paging helper blows up
    res = await client.call_tool("list_runs", {"host": "gpu1"})
    text = "\n".join(getattr(x, "text", "") for x in res.content)
    assert res.is_error and "[ERROR] unexpected KeyError" in text and "outcome" in text and len(text) < 5000


def _call(rid: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": args}}


def test_security_text_that_is_not_utf8_on_the_wire_gets_an_answer_and_the_server_keeps_serving(env: Any) -> None:
    """Over real stdio: raw bytes that are not UTF-8 inside a string, and a JSON escape of a lone
    surrogate (valid JSON syntax, not valid text), each get a reply; the next call is served."""
    env.write_inventory({"gpu1": {"destination": "local", "durable_root": str(env.home / "durable")}})
    wire = Wire()
    try:
        wire.send(json.dumps(INIT).encode())
        assert wire.reply()["id"] == 1
        wire.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        raw = json.dumps(_call(2, "tail_logs", {"host": "gpu1", "run_id": "RAW"})).encode()
        wire.send(raw.replace(b"RAW", b"r\xff\xfe\xc0"))
        bad = wire.reply()
        assert bad["id"] == 2 and bad["result"]["isError"], bad
        assert "[BAD_INPUT] run_id is not a valid run id" in bad["result"]["content"][0]["text"]
        for rid, name, args, field in ((3, "search_references", {"query": "disk \udcff full"}, "query"),
                                       (4, "fetch_data", {"host": "gpu1", "dest": "x\ud800",
                                                          "url": "https://h.invalid/a"}, "dest")):
            wire.send(json.dumps(_call(rid, name, args)).encode())  # json.dumps escapes the lone surrogate
            answer = wire.reply()
            assert answer["id"] == rid, answer  # its own id, or its caller waits for ever
            assert answer["error"]["message"].startswith(
                f"[BAD_INPUT] params.arguments.{field} is not valid Unicode text"), answer
            assert len(json.dumps(answer)) < 64_000
        wire.send(json.dumps(_call(5, "search_references", {"query": "disk full inodes"})).encode())
        served = wire.reply()
        assert served["id"] == 5 and not served["result"].get("isError"), served
    finally:
        wire.close()
