"""Platform doubles. Real rental platforms cannot be reached here, so teardown is exercised
against (a) a loopback HTTP server speaking the documented REST shapes of RunPod, vast.ai
and Lambda, including their known failure modes, and (b) fake `vastai` / `runpodctl`
executables on PATH. Labelled doubles, not mocks: our code talks HTTP and spawns processes."""

from __future__ import annotations

import json
import re
import stat
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HANG_LIMIT_S = 60.0  # a hanging answer never outlives a test by more than this


class Double:
    """In-memory instances keyed by id. Modes per instance:
    normal      the verb takes effect at once
    eventual    destroy/terminate answers 200, the instance disappears after `lag` polls
    remains     delete answers 200 but the instance never goes away (RunPod's trap)
    hang        the terminate call hangs past the client's timeout (until the double closes), yet takes effect"""

    def __init__(self, key: str) -> None:
        self.key = key
        self.instances: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []
        self.lock = threading.Lock()
        self.released = threading.Event()  # set on close: ends every hanging answer
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def add(self, iid: str, status: str, mode: str = "normal", lag: int = 2) -> None:
        self.instances[iid] = {"status": status, "mode": mode, "lag": lag, "gone_after": None, "polls": 0}

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()

    def _visible(self, iid: str) -> dict[str, Any] | None:
        inst = self.instances.get(iid)
        if inst is None:
            return None
        inst["polls"] += 1
        if inst["gone_after"] is not None and inst["polls"] >= inst["gone_after"]:
            self.instances.pop(iid)
            return None
        return inst

    def _destroy(self, iid: str) -> None:
        inst = self.instances[iid]
        if inst["mode"] == "remains":
            return
        if inst["mode"] == "eventual":
            inst["gone_after"] = inst["polls"] + inst["lag"]
        else:
            self.instances.pop(iid)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        double = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def _auth_ok(self) -> bool:
                got = self.headers.get("Authorization", "")
                import base64

                return got in (f"Bearer {double.key}", "Basic " + base64.b64encode(f"{double.key}:".encode()).decode())

            def _send(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method: str) -> None:
                with double.lock:
                    double.calls.append(f"{method} {self.path}")
                if not self._auth_ok():
                    return self._send(401, {"error": "unauthorized"})
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n)) if n else None
                m = re.match(r"^/(pods|instances)/([^/]+)/?(stop)?$", self.path)
                if m:
                    return self._instance(method, m.group(1), m.group(2), m.group(3), body)
                if self.path == "/instance-operations/terminate" and method == "POST":
                    iid = body["instance_ids"][0]
                    with double.lock:
                        mode = double.instances.get(iid, {}).get("mode")
                        if iid in double.instances:
                            double._destroy(iid)
                    if mode == "hang":
                        double.released.wait(HANG_LIMIT_S)
                    return self._send(200, {"data": {"terminated_instances": [{"id": iid, "status": "terminating"}]}})
                return self._send(404, {"error": "no route"})

            def _instance(self, method: str, kind: str, iid: str, stop: str | None, body: Any) -> None:
                with double.lock:
                    inst = double._visible(iid) if method == "GET" else double.instances.get(iid)
                    if inst is None:
                        return self._send(404, {"error": "not found"})
                    if method == "GET":
                        if kind == "pods":
                            return self._send(200, {"id": iid, "desiredStatus": inst["status"]})
                        if not self.path.endswith("/"):  # Lambda: /instances/{id}; vast.ai: /instances/{id}/
                            return self._send(200, {"data": {"id": iid, "status": inst["status"]}})
                        return self._send(200, {"instances": {"id": iid, "actual_status": inst["status"]}})
                    if method == "POST" and stop:
                        inst["status"] = "EXITED"
                        return self._send(200, {})
                    if method == "PUT" and body == {"state": "stopped"}:
                        inst["status"] = "exited"
                        return self._send(200, {"success": True})
                    if method == "DELETE":
                        double._destroy(iid)
                        return self._send(200, {"success": True})
                return self._send(400, {"error": "bad request"})

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def do_PUT(self) -> None:
                self._route("PUT")

            def do_DELETE(self) -> None:
                self._route("DELETE")

        return H


def fake_cli(bindir: Path, name: str, state: Path, key_env: str) -> Path:
    """A fake `vastai` or `runpodctl`: instance state in a JSON file, every argv appended
    to <state>.argv, the API key required in the environment (never in argv)."""
    script = bindir / name
    script.write_text(f"""#!{sys.executable}
import json, os, sys, fcntl
state, log = {str(state)!r}, {str(state) + '.argv'!r}
with open(log, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
if not os.environ.get({key_env!r}):
    print("error: no API key", file=sys.stderr); sys.exit(2)
if {name!r} == "runpodctl":  # runpodctl 2.x keeps the old verbs, with this warning on stderr (cmd/legacy/legacy.go)
    print(f"warning: 'runpod {{sys.argv[1]}} pod' is deprecated, use 'runpod pod {{sys.argv[1]}}' instead",
          file=sys.stderr)
with open(state, "r+") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    data = json.load(f)
    args = sys.argv[1:]
    verb, iid = args[0], args[2] if len(args) > 2 else None
    inst = data.get(iid)
    if verb in ("show", "get"):
        if inst is None:
            print("error: instance not found (404)"); sys.exit(1)
        print(json.dumps({{"actual_status": inst, "desiredStatus": inst}})); sys.exit(0)
    if inst is None:
        print("error: instance not found"); sys.exit(1)
    if verb == "stop":
        data[iid] = "exited" if {name!r} == "vastai" else "EXITED"
    elif verb in ("destroy", "remove"):
        data.pop(iid)
    f.seek(0); f.truncate(); json.dump(data, f)
    print(f"{{verb}} ok")
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script
