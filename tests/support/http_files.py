"""A small HTTP file server for fetch_data's tests (started by the test, on 127.0.0.1): GET with
Range (206) like a CDN, HEAD with Content-Length, an optional Bearer token, and a switch that cuts
the first full download mid-file, the way a dropped connection does."""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Files:
    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.claimed_length: dict[str, int] = {}  # a HEAD that announces this size instead
        self.cut_first: set[str] = set()
        self.token: str | None = None
        self.gets: list[str] = []
        self.auth_seen: list[str] = []
        files = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _authorized(self) -> bool:
                got = self.headers.get("Authorization", "")
                files.auth_seen.append(got)
                if files.token and got != f"Bearer {files.token}":
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return False
                return True

            def do_HEAD(self) -> None:
                data = files.files.get(self.path)
                if data is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(files.claimed_length.get(self.path, len(data))))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()

            def do_GET(self) -> None:
                files.gets.append(self.path)
                if not self._authorized():
                    return
                data = files.files.get(self.path)
                if data is None:
                    self.send_error(404)
                    return
                m = re.match(r"bytes=(\d+)-$", self.headers.get("Range", ""))
                start = int(m.group(1)) if m else 0
                if m and start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.end_headers()
                    return
                self.send_response(206 if m else 200)
                if m:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                body = data[start:]
                if self.path in files.cut_first and not m:
                    files.cut_first.discard(self.path)
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)  # the connection drops mid-file
                    return
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
