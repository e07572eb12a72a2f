"""Realistic fakes of the services notifications go to, started by a test on 127.0.0.1 with a free
port: `HttpReceiver` stands in for every webhook service (it records each request whole and answers
what a test tells it to, e.g. DingTalk's `{"errcode": 310000, ...}` with HTTP 200), and `SmtpSink`
is a small SMTP server speaking enough of RFC 5321 for Python's smtplib (greeting, EHLO/HELO with
AUTH PLAIN LOGIN, AUTH, MAIL, RCPT, DATA with dot-stuffing, RSET, NOOP, QUIT; no STARTTLS). Standard
library only."""

from __future__ import annotations

import base64
import email
import email.policy
import json
import socketserver
import threading
import urllib.parse
from dataclasses import dataclass, field
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Answer:
    status: int = 200
    body: bytes = b"ok"
    content_type: str = "text/plain"
    hang: bool = False  # answer nothing until the receiver stops (a service that times out)


class HttpReceiver:
    """An HTTP server recording every request; `answer(path, ...)` sets the reply for a path."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._answers: dict[str, Answer] = {}
        self._release = threading.Event()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _record(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                parts = urllib.parse.urlsplit(self.path)
                request = Request(self.command, parts.path, urllib.parse.parse_qs(parts.query),
                                  dict(self.headers.items()), self.rfile.read(length))
                with receiver._lock:
                    receiver.requests.append(request)
                    answer = receiver._answers.get(parts.path, Answer())
                if answer.hang:
                    receiver._release.wait(30)
                    return
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            do_POST = do_GET = do_PUT = _record

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def answer(self, path: str, status: int = 200, body: bytes | dict[str, Any] = b"ok", hang: bool = False) -> None:
        if isinstance(body, dict):
            self._answers[path] = Answer(status, json.dumps(body).encode(), "application/json", hang)
        else:
            self._answers[path] = Answer(status, body, "text/plain", hang)

    def start(self) -> HttpReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()


@dataclass
class Envelope:
    mail_from: str
    rcpt_tos: list[str]
    data: bytes
    auth: tuple[str, str] | None
    message: EmailMessage = field(init=False)

    def __post_init__(self) -> None:
        parsed = email.message_from_bytes(self.data, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        self.message = parsed


class SmtpSink:
    """An SMTP server that keeps every message it accepts; `users` (name -> password) when set are
    the only logins it accepts (535 otherwise)."""

    def __init__(self, users: dict[str, str] | None = None) -> None:
        self.messages: list[Envelope] = []
        self.users = users
        sink = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                _Session(sink, self.rfile, self.wfile).run()

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> SmtpSink:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Session:
    """One SMTP connection: one command line at a time, the reply codes RFC 5321 gives them."""

    def __init__(self, sink: SmtpSink, rfile: Any, wfile: Any) -> None:
        self.sink, self.rfile, self.wfile = sink, rfile, wfile
        self.mail_from: str | None = None
        self.rcpt: list[str] = []
        self.auth: tuple[str, str] | None = None

    def reply(self, line: str) -> None:
        self.wfile.write(line.encode() + b"\r\n")
        self.wfile.flush()

    def read(self) -> str | None:
        raw = self.rfile.readline(65536)
        return raw.decode("utf-8", "replace").rstrip("\r\n") if raw else None

    def run(self) -> None:
        self.reply("220 sink.test ESMTP ready")
        while (line := self.read()) is not None:
            verb, _, arg = line.partition(" ")
            verb = verb.upper()
            if verb == "QUIT":
                self.reply("221 bye")
                return
            self.command(verb, arg)

    def command(self, verb: str, arg: str) -> None:
        if verb == "EHLO":
            self.reply("250-sink.test")
            self.reply("250-AUTH PLAIN LOGIN")
            self.reply("250 8BITMIME")
        elif verb == "HELO":
            self.reply("250 sink.test")
        elif verb == "AUTH":
            self.authenticate(arg)
        elif verb == "MAIL":
            self.mail_from, self.rcpt = _address(arg), []
            self.reply("250 ok")
        elif verb == "RCPT":
            if self.mail_from is None:
                self.reply("503 need MAIL first")
                return
            self.rcpt.append(_address(arg))
            self.reply("250 ok")
        elif verb == "DATA":
            self.data()
        elif verb == "RSET":
            self.mail_from, self.rcpt = None, []
            self.reply("250 ok")
        elif verb == "NOOP":
            self.reply("250 ok")
        else:
            self.reply("502 command not implemented")

    def authenticate(self, arg: str) -> None:
        mechanism, _, initial = arg.partition(" ")
        if mechanism.upper() == "PLAIN":
            if not initial:
                self.reply("334 ")
                initial = self.read() or ""
            _, user, password = base64.b64decode(initial).decode().split("\0")
        elif mechanism.upper() == "LOGIN":
            self.reply("334 " + base64.b64encode(b"Username:").decode())
            user = base64.b64decode(self.read() or "").decode()
            self.reply("334 " + base64.b64encode(b"Password:").decode())
            password = base64.b64decode(self.read() or "").decode()
        else:
            self.reply("504 mechanism not supported")
            return
        if self.sink.users is not None and self.sink.users.get(user) != password:
            self.reply("535 authentication failed")
            return
        self.auth = (user, password)
        self.reply("235 authenticated")

    def data(self) -> None:
        if self.mail_from is None or not self.rcpt:
            self.reply("503 need MAIL and RCPT first")
            return
        self.reply("354 end with <CRLF>.<CRLF>")
        lines = []
        while (raw := self.rfile.readline(65536)) and raw.rstrip(b"\r\n") != b".":
            lines.append(raw[1:] if raw.startswith(b".") else raw)
        self.sink.messages.append(Envelope(self.mail_from, list(self.rcpt), b"".join(lines), self.auth))
        self.mail_from, self.rcpt = None, []
        self.reply("250 queued")


def _address(arg: str) -> str:
    """`FROM:<a@b> SIZE=1` -> `a@b`."""
    _, _, rest = arg.partition(":")
    return rest.strip().split(" ")[0].strip("<>")
