"""Security: a malformed line on stdio gets a JSON-RPC error reply (the SDK's transport drops it
silently, leaving a client to wait for ever) and the server keeps serving; stdin's end stops it."""

from __future__ import annotations

import json
import os
import select
import subprocess
from typing import Any

from tests.run.audit.test_audit_box import console_script

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


class Wire:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([console_script()], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=dict(os.environ))

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float = 20) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "no reply"
        answer: dict[str, Any] = json.loads(self.proc.stdout.readline())
        return answer

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


def test_security_malformed_json_rpc_gets_an_error_reply_and_the_server_keeps_serving(env) -> None:  # type: ignore[no-untyped-def]
    wire = Wire()
    try:
        wire.send(json.dumps(INIT).encode())
        assert wire.reply()["id"] == 1
        wire.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        wire.send(b"{not json at all")
        assert wire.reply() == {"jsonrpc": "2.0", "id": None,
                                "error": {"code": -32700, "message": "not valid JSON; ignored"}}
        wire.send(b'{"jsonrpc":"2.0","id":8}')  # an id, no method: not a request
        bad = wire.reply()
        assert bad["id"] == 8 and bad["error"]["code"] == -32600
        wire.send(b'{"jsonrpc":"2.0","id":9,"method":"tools/list","params":' + b"[" * 3000 + b"]" * 3000 + b"}")
        assert wire.reply()["error"]["code"] in (-32700, -32600)
        wire.send(b'{"jsonrpc":"2.0","id":10,"method":"tools/list"}')
        assert wire.reply()["id"] == 10
        assert wire.proc.stdin is not None
        wire.proc.stdin.close()
        assert wire.proc.wait(timeout=20) == 0, "stdin's end stops the server"
    finally:
        wire.close()


def test_security_a_request_with_text_that_is_not_unicode_gets_a_coded_error_with_its_own_id(env) -> None:  # type: ignore[no-untyped-def]
    """A lone surrogate escape is valid JSON syntax but not text: the SDK's parser refuses the
    line, and the reply must still carry the request's id, or its caller waits for ever."""
    wire = Wire()
    try:
        wire.send(json.dumps(INIT).encode())
        assert wire.reply()["id"] == 1
        wire.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        call = {"jsonrpc": "2.0", "id": "call-7", "method": "tools/call",
                "params": {"name": "search_references", "arguments": {"query": "secret-\udcff-tail"}}}
        wire.send(json.dumps(call).encode())  # json.dumps writes the lone surrogate as a \udcff escape
        bad = wire.reply()
        assert bad["id"] == "call-7", bad
        assert bad["error"]["code"] == -32602 and bad["error"]["data"] == {"code": "BAD_INPUT"}
        message = bad["error"]["message"]
        assert message.startswith("[BAD_INPUT] params.arguments.query is not valid Unicode text"), message
        assert "UTF-8" in message and "secret-" not in message, "names the field, never echoes the value"
        wire.send(b'{"jsonrpc":"2.0","id":12,"method":"ping","params":{"\\ud800":1}}')
        assert wire.reply()["error"]["message"].startswith("[BAD_INPUT] a key in params is not valid Unicode")
        wire.send(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"\\udcff"}}')
        wire.send(b'{"jsonrpc":"2.0","id":13,"method":"tools/list"}')
        served = wire.reply()
        assert served["id"] == 13 and "result" in served, "a notification gets no reply; the server serves on"
    finally:
        wire.close()
