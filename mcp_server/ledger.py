"""The local ledger: an append-mostly SQLite record of what the server did and saw
(audits, launches, manifests, verifications, teardown plans and decisions, probes,
reconciliations). Teardown reads it. Every write is one transaction; a corrupt, empty or
unreadable file, or one from a newer version, is refused with a clear error and never rewritten.
The state directory is kept 0700 and the ledger 0600 (fixed on open, with a log line), and
teardown tokens are stored only as salted hashes: a copy of the ledger confirms nothing."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_server.errors import LedgerError
from mcp_server.redact import Redactor
from mcp_server.statedir import create_private, secure_state

SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
  id      INTEGER PRIMARY KEY AUTOINCREMENT,
  ts      REAL NOT NULL,
  kind    TEXT NOT NULL,
  host    TEXT,
  run_id  TEXT,
  summary TEXT NOT NULL DEFAULT '',
  data    TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS events_by_kind ON events(kind, host, run_id, ts);
CREATE TABLE IF NOT EXISTS hosts_seen (
  host       TEXT PRIMARY KEY,
  first_seen REAL NOT NULL,
  last_seen  REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tokens (
  token     TEXT PRIMARY KEY,
  host      TEXT NOT NULL,
  action    TEXT NOT NULL,
  plan_hash TEXT NOT NULL,
  created   REAL NOT NULL,
  consumed  REAL
);
"""


@dataclass(frozen=True)
class Event:
    id: int
    ts: float
    kind: str
    host: str | None
    run_id: str | None
    summary: str
    data: dict[str, Any]


@dataclass(frozen=True)
class TokenRecord:
    """A teardown token as issued: bound to one host, one action and one plan's hash. `token`
    is the stored salted hash, never the token itself."""

    token: str
    host: str
    action: str
    plan_hash: str
    created: float
    consumed: float | None


class Ledger:
    """Open with Ledger.open(path); safe to share within one process."""

    def __init__(self, conn: sqlite3.Connection, path: Path, redactor: Redactor | None, salt: bytes) -> None:
        self._conn = conn
        self._salt = salt
        self.path = path
        self._lock = threading.Lock()
        self._redactor = redactor or Redactor()

    @classmethod
    def open(cls, path: Path, redactor: Redactor | None = None) -> Ledger:
        files = (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"))
        try:
            _refuse_unusable(path)
            secure_state(path.parent, files)
            create_private(path)
            conn = sqlite3.connect(path, timeout=10, check_same_thread=False, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError("cannot open the ledger", path=str(path), observed=str(exc),
                              next_step="check RGT_HOME points at a writable directory") from exc
        try:
            _migrate(conn, path)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise LedgerError(
                "the ledger file is not a readable SQLite database (corrupt or not ours); it was not "
                "modified", path=str(path), observed=str(exc),
                next_step="move the file aside (keep it: it is the record teardown relies on) and retry",
            ) from exc
        except LedgerError:
            conn.close()
            raise
        secure_state(path.parent, files)
        return cls(conn, path, redactor, _salt(conn))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _write(self, sql: str, args: tuple[Any, ...]) -> sqlite3.Cursor:
        with self._lock:
            try:
                return self._conn.execute(sql, args)
            except sqlite3.Error as exc:
                raise LedgerError("ledger write failed; nothing was recorded", path=str(self.path),
                                  observed=str(exc)) from exc

    def record(
        self, kind: str, *, host: str | None = None, run_id: str | None = None,
        summary: str = "", data: dict[str, Any] | None = None,
    ) -> int:
        """Append one event. Known secret values are scrubbed before anything is written."""
        payload = json.dumps(self._redactor.scrub_obj(data or {}), sort_keys=True, default=str)
        now = time.time()
        cur = self._write(
            "INSERT INTO events(ts, kind, host, run_id, summary, data) VALUES (?,?,?,?,?,?)",
            (now, kind, host, run_id, self._redactor.scrub(summary), payload),
        )
        if host is not None:
            self._write(
                "INSERT INTO hosts_seen(host, first_seen, last_seen) VALUES (?,?,?) "
                "ON CONFLICT(host) DO UPDATE SET last_seen=excluded.last_seen",
                (host, now, now),
            )
        return int(cur.lastrowid or 0)

    def events(
        self, kind: str | None = None, *, host: str | None = None, run_id: str | None = None,
        since: float | None = None, limit: int = 1000,
    ) -> list[Event]:
        """Matching events, newest first."""
        where: list[str] = []
        args: list[object] = []
        for col, val in (("kind", kind), ("host", host), ("run_id", run_id)):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        if since is not None:
            where.append("ts >= ?")
            args.append(since)
        sql = "SELECT id, ts, kind, host, run_id, summary, data FROM events"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC LIMIT ?"
        args.append(limit)
        with self._lock:
            rows = self._conn.execute(sql, args).fetchall()
        return [Event(r[0], r[1], r[2], r[3], r[4], r[5], self._data(r[0], r[6])) for r in rows]

    def _data(self, event_id: int, raw: str) -> dict[str, Any]:
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise LedgerError(f"ledger event #{event_id} holds unreadable data (not a JSON object); the ledger was "
                              "not modified", path=str(self.path),
                              next_step="move the file aside (keep it: it is the record teardown relies on) and retry")
        return data

    def latest(self, kind: str, *, host: str | None = None, run_id: str | None = None) -> Event | None:
        found = self.events(kind, host=host, run_id=run_id, limit=1)
        return found[0] if found else None

    def event(self, event_id: int) -> Event | None:
        """One event by its id."""
        with self._lock:
            r = self._conn.execute("SELECT id, ts, kind, host, run_id, summary, data FROM events WHERE id = ?",
                                   (event_id,)).fetchone()
        return None if r is None else Event(r[0], r[1], r[2], r[3], r[4], r[5], self._data(r[0], r[6]))

    def first_seen(self, host: str) -> float | None:
        with self._lock:
            row = self._conn.execute("SELECT first_seen FROM hosts_seen WHERE host = ?", (host,)).fetchone()
        return None if row is None else float(row[0])

    def _token_key(self, token: str) -> str:
        return _token_key(self._salt, token)

    def issue_token(self, token: str, *, host: str, action: str, plan_hash: str) -> None:
        """Store the token's salted hash only: whoever can read the ledger still cannot confirm."""
        self._write(
            "INSERT OR IGNORE INTO tokens(token, host, action, plan_hash, created) VALUES (?,?,?,?,?)",
            (self._token_key(token), host, action, plan_hash, time.time()),
        )

    def token(self, token: str) -> TokenRecord | None:
        key = self._token_key(token)
        with self._lock:
            row = self._conn.execute(
                "SELECT token, host, action, plan_hash, created, consumed FROM tokens WHERE token = ?",
                (key,),
            ).fetchone()
        if row is None or not hmac.compare_digest(str(row[0]), key):
            return None
        return TokenRecord(*row)

    def consume_token(self, token: str) -> bool:
        """Mark a token used. True for exactly one caller, however many race for it."""
        cur = self._write(
            "UPDATE tokens SET consumed = ? WHERE token = ? AND consumed IS NULL",
            (time.time(), self._token_key(token)),
        )
        return cur.rowcount == 1


def _refuse_unusable(path: Path) -> None:
    """An existing ledger that is empty, not a file or unreadable is refused: re-creating it would
    silently drop every verification and teardown record."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise LedgerError("the ledger path is not a regular file; it was not touched", path=str(path),
                          next_step="point RGT_HOME at the server's state directory")
    if st.st_size == 0:
        raise LedgerError(
            "the ledger file exists but is empty: its records (verifications, teardown plans) are gone, and "
            "it was not re-created silently", path=str(path),
            next_step="restore it from a backup, or delete the empty file to start a new ledger knowingly")
    if not os.access(path, os.R_OK | os.W_OK):
        raise LedgerError("the ledger file is not readable and writable by this user; it was not touched",
                          path=str(path), next_step="fix its owner or mode (it should be 0600, owned by you)")


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise LedgerError(
            f"the ledger was written by a newer version of this server (schema {version}; "
            f"this server knows {SCHEMA_VERSION}); it was not touched",
            path=str(path), next_step="upgrade remote-gpu-trainer-mcp, or point RGT_HOME elsewhere",
        )
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=10000")
    if version == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    for stmt in filter(str.strip, _SCHEMA.split(";")):
        conn.execute(stmt)
    conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('token_salt', ?)", (secrets.token_hex(32),))
    if version == 1:  # schema 1 kept tokens in clear: replace each by its salted hash
        salt = _salt(conn)
        for (tok,) in conn.execute("SELECT token FROM tokens WHERE token NOT LIKE 'sha256:%'").fetchall():
            conn.execute("UPDATE tokens SET token = ? WHERE token = ?", (_token_key(salt, tok), tok))
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    conn.execute("COMMIT")


def _salt(conn: sqlite3.Connection) -> bytes:
    return bytes.fromhex(conn.execute("SELECT value FROM meta WHERE key = 'token_salt'").fetchone()[0])


def _token_key(salt: bytes, token: str) -> str:
    return "sha256:" + hmac.new(salt, token.encode(), hashlib.sha256).hexdigest()
