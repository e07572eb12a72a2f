"""The local ledger: an append-mostly SQLite record of what the server did and saw
(audits, launches, manifests, verifications, teardown plans and decisions, probes,
reconciliations). Teardown reads it. Every write is one transaction; a corrupt file or
one from a newer version is refused with a clear error and never rewritten."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_server.errors import LedgerError
from mcp_server.redact import Redactor

SCHEMA_VERSION = 1

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
    """A teardown token as issued: bound to one host, one action and one plan's hash."""

    token: str
    host: str
    action: str
    plan_hash: str
    created: float
    consumed: float | None


class Ledger:
    """Open with Ledger.open(path); safe to share within one process."""

    def __init__(self, conn: sqlite3.Connection, path: Path, redactor: Redactor | None) -> None:
        self._conn = conn
        self.path = path
        self._lock = threading.Lock()
        self._redactor = redactor or Redactor()

    @classmethod
    def open(cls, path: Path, redactor: Redactor | None = None) -> Ledger:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, timeout=10, check_same_thread=False, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError("cannot open the ledger", path=str(path), observed=str(exc),
                              next_step="check RGT_HOME points at a writable directory") from exc
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise LedgerError(
                    f"the ledger was written by a newer version of this server (schema {version}; "
                    f"this server knows {SCHEMA_VERSION}); it was not touched",
                    path=str(path), next_step="upgrade remote-gpu-trainer-mcp, or point RGT_HOME elsewhere",
                )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=10000")
            if version < SCHEMA_VERSION:
                conn.execute("BEGIN IMMEDIATE")
                for stmt in filter(str.strip, _SCHEMA.split(";")):
                    conn.execute(stmt)
                conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                conn.execute("COMMIT")
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
        return cls(conn, path, redactor)

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

    def issue_token(self, token: str, *, host: str, action: str, plan_hash: str) -> None:
        self._write(
            "INSERT OR IGNORE INTO tokens(token, host, action, plan_hash, created) VALUES (?,?,?,?,?)",
            (token, host, action, plan_hash, time.time()),
        )

    def token(self, token: str) -> TokenRecord | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT token, host, action, plan_hash, created, consumed FROM tokens WHERE token = ?",
                (token,),
            ).fetchone()
        if row is None:
            return None
        return TokenRecord(*row)

    def consume_token(self, token: str) -> bool:
        """Mark a token used. True for exactly one caller, however many race for it."""
        cur = self._write(
            "UPDATE tokens SET consumed = ? WHERE token = ? AND consumed IS NULL", (time.time(), token)
        )
        return cur.rowcount == 1
