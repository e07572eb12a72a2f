"""Security: the server's own state (RGT_HOME) is private, an emptied ledger is never silently
re-created, and teardown tokens are not usable from a copy of the ledger."""

from __future__ import annotations

import logging
import sqlite3
import stat
from pathlib import Path

import pytest

from mcp_server.app import App
from mcp_server.errors import LedgerError
from mcp_server.ledger import Ledger
from mcp_server.settings import Settings


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_security_state_dir_and_ledger_are_made_private_with_a_log_line(tmp_path: Path, caplog) -> None:
    home = tmp_path / "state"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    Ledger.open(home / "ledger.sqlite").close()
    (home / "ledger.sqlite").chmod(0o644)
    (home / "known_hosts").write_text("")
    (home / "known_hosts").chmod(0o644)
    home.chmod(0o755)
    with caplog.at_level(logging.WARNING, logger="mcp_server.statedir"):
        app = App(Settings.from_env({"RGT_HOME": str(home)}))
        app.ledger.record("audit", host="local", summary="x")
    assert _mode(home) == 0o700
    assert _mode(home / "ledger.sqlite") == 0o600
    assert _mode(home / "known_hosts") == 0o600
    assert all(_mode(f) == 0o600 for f in home.glob("ledger.sqlite-*"))
    assert "was mode 644, now 600" in caplog.text and "was mode 755, now 700" in caplog.text


def test_security_a_new_ledger_is_created_private(tmp_path: Path) -> None:
    led = Ledger.open(tmp_path / "fresh" / "ledger.sqlite")
    led.record("audit", host="local", summary="x")
    assert _mode(tmp_path / "fresh") == 0o700
    assert _mode(tmp_path / "fresh" / "ledger.sqlite") == 0o600
    led.close()


def test_security_an_empty_ledger_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    path.touch()
    with pytest.raises(LedgerError, match="exists but is empty") as err:
        Ledger.open(path)
    assert "delete the empty file" in (err.value.next_step or "")
    assert path.stat().st_size == 0


def test_security_an_unreadable_ledger_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    path.mkdir()
    with pytest.raises(LedgerError, match="not a regular file"):
        Ledger.open(path)


def test_security_the_ledger_keeps_only_salted_hashes_of_tokens(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    led = Ledger.open(path)
    tok = "tdn-" + "7f3a9c" * 8
    led.issue_token(tok, host="gpu1", action="terminate", plan_hash="abc")
    raw = b"".join(f.read_bytes() for f in tmp_path.glob("ledger.sqlite*"))
    assert tok.encode() not in raw
    rec = led.token(tok)
    assert rec is not None and rec.host == "gpu1" and rec.token.startswith("sha256:")
    assert led.token(rec.token) is None, "the stored hash must not work as a token"
    assert led.consume_token(tok) is True and led.consume_token(tok) is False
    led.close()
    other = tmp_path / "other.sqlite"
    Ledger.open(other).close()
    with sqlite3.connect(other) as c:  # same hash in another ledger: its salt differs, so no match
        c.execute("INSERT INTO tokens(token, host, action, plan_hash, created) VALUES (?,?,?,?,0)",
                  (rec.token, "gpu1", "terminate", "abc"))
    assert Ledger.open(other).token(tok) is None


def test_a_schema_1_ledger_has_its_clear_tokens_hashed_on_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with sqlite3.connect(path) as c:
        c.executescript("""
            CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, kind TEXT NOT NULL,
              host TEXT, run_id TEXT, summary TEXT NOT NULL DEFAULT '', data TEXT NOT NULL DEFAULT '{}');
            CREATE TABLE hosts_seen (host TEXT PRIMARY KEY, first_seen REAL NOT NULL, last_seen REAL NOT NULL);
            CREATE TABLE tokens (token TEXT PRIMARY KEY, host TEXT NOT NULL, action TEXT NOT NULL,
              plan_hash TEXT NOT NULL, created REAL NOT NULL, consumed REAL);
            INSERT INTO tokens VALUES ('tdn-oldclear', 'gpu1', 'stop', 'h', 1.0, NULL);
            INSERT INTO events(ts, kind, host, summary) VALUES (1.0, 'audit', 'gpu1', 'kept');
            PRAGMA user_version=1;
        """)
    led = Ledger.open(path)
    rec = led.token("tdn-oldclear")
    assert rec is not None and rec.action == "stop" and rec.token != "tdn-oldclear"
    assert [e.summary for e in led.events("audit")] == ["kept"]
    led.close()
    with sqlite3.connect(path) as c:
        assert c.execute("SELECT count(*) FROM tokens WHERE token = 'tdn-oldclear'").fetchone()[0] == 0


def test_a_corrupt_ledger_is_refused_and_not_modified(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    path.write_bytes(b"not sqlite at all\n" * 100)
    before = path.read_bytes()
    with pytest.raises(LedgerError, match="not a readable SQLite database"):
        Ledger.open(path)
    assert path.read_bytes() == before


def test_a_ledger_from_a_newer_version_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE x (y)")
        c.execute("PRAGMA user_version=99")
    with pytest.raises(LedgerError, match="newer version"):
        Ledger.open(path)
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == 99


async def test_security_a_fresh_server_masks_secrets_named_by_earlier_launches_and_platform_keys(
        tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "state"
    led = Ledger.open(home / "ledger.sqlite")
    led.record("launch", host="gpu1", run_id="r1", summary="ok", data={"secret_env_names": ["WANDB_API_KEY"]})
    led.close()
    monkeypatch.setenv("WANDB_API_KEY", "wandb-secret-value-123")
    monkeypatch.setenv("RUNPOD_API_KEY", "rp-secret-value-456")
    app = App(Settings.from_env({"RGT_HOME": str(home), "RGT_CONFIG": str(tmp_path / "none.toml")}))
    app.ledger  # noqa: B018  (opening the ledger is what seeds the redactor)
    out = app.redactor.scrub("key wandb-secret-value-123 and rp-secret-value-456")
    assert "wandb-secret-value-123" not in out and "rp-secret-value-456" not in out
    await app.close()
