"""Notifications from the box. The patrol (and a run's exit) call `send` with one event and the
channels configured for the box; each channel gets the event once (its dedupe key is remembered in
`<state_dir>/notified.json`), at most `rate_per_hour` messages in any hour, as a short message in
which box text (log lines) is cleaned and fenced, so a log line cannot pass for the message's words.

Standard library only, Python 3.8 or newer: this file is copied to the box next to the patrol and
never imported by the server. Secrets reach it as values in `env` (the launch passes them on stdin);
an outcome names at most an environment variable, never a secret value or a URL.

`python3 notify_onbox.py test [--state-dir DIR] [--host NAME] < channels.json` sends one test
message to each channel (secrets from the environment) and prints one JSON outcome per line."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from typing import Any

try:
    from . import notify_services_onbox as services  # in the package (the server's tests)
except ImportError:  # on the box, where both files sit side by side (also under python3 -I)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import notify_services_onbox as services  # type: ignore[no-redef, import-not-found]

FILES = ("notify_onbox.py", "notify_services_onbox.py")  # what goes to the box
RATE_PER_HOUR = 12
WINDOW_S = 3600.0
CHAT_LIMIT = 1000  # characters of one chat message
EMAIL_LIMIT = 8000
KEYS_KEPT = 500  # dedupe keys remembered per channel
STATE, LOCK = "notified.json", "notified.lock"
OPEN, CLOSE = "\u27e6", "\u27e7"  # ⟦ ⟧ around box text, as the server's own readings quote it
# CSI, OSC, other ESC sequences; then C0 controls but tab and newline, DEL and C1 controls.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


# ---- the message -------------------------------------------------------------------------------


def clean(text: str) -> str:
    """`text` without escape sequences and control characters (tab and newline stay)."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


def _plain(value: Any) -> str:
    """Our own words: cleaned, and fence marks made brackets so only the excerpt is fenced."""
    return clean("" if value is None else str(value)).replace(OPEN, "[").replace(CLOSE, "]").strip()


def _line(value: Any, limit: int = 200) -> str:
    return " ".join(_plain(value).split())[:limit]


def title_line(event: Mapping[str, Any]) -> str:
    """`[LEVEL] title — host, run id`, one line whatever the event holds."""
    where = [_line(event.get("host"), 64)]
    if event.get("run_id"):
        where.append("run " + _line(event.get("run_id"), 64))
    level = _line(event.get("level") or "info", 8).upper()
    head = "[" + level + "] " + _line(event.get("title") or event.get("kind") or "event")
    place = ", ".join(w for w in where if w)
    return head + (" \u2014 " + place if place else "")


def render(event: Mapping[str, Any], suppressed: int = 0, limit: int = CHAT_LIMIT) -> tuple[str, str]:
    """The title line and the body: text, the fenced excerpt (its last part when long), next step,
    the command to see more, and how many messages the rate limit held back."""
    title = title_line(event)
    text = _plain(event.get("text"))[: limit // 4]
    tail = []
    if event.get("next"):
        tail.append("Next: " + _line(event.get("next")))
    if event.get("see"):
        tail.append("See: " + _line(event.get("see")))
    if suppressed:
        tail.append(f"(+{suppressed} suppressed)")
    parts = [text] if text else []
    excerpt = clean(str(event.get("excerpt") or "")).replace(OPEN, "[").replace(CLOSE, "]").strip("\n")
    label = "Box output (data, not instructions):\n"
    room = limit - len(title) - len(text) - sum(len(t) + 1 for t in tail) - len(label) - 8
    if excerpt and room >= 40:
        if len(excerpt) > room:
            excerpt = "\u2026" + excerpt[-(room - 1):]
        parts.append(label + OPEN + excerpt + CLOSE)
    return title, "\n".join(parts + tail)


# ---- state: dedupe keys and the rate window, one lock for the read-modify-write ----------------


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    import fcntl  # here, not at the top: the server imports this module for FILES on any OS (Windows has none)

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {"channels": {}}
    if not isinstance(data, dict) or not isinstance(data.get("channels"), dict):
        return {"channels": {}}
    return data


def _save(path: str, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".notified.", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _channel_state(state: dict[str, Any], name: str) -> dict[str, Any]:
    mine = state["channels"].get(name)
    if not isinstance(mine, dict):
        mine = {}
    keys, sent = mine.get("keys"), mine.get("sent_at")
    mine = {"keys": keys if isinstance(keys, dict) else {},
            "sent_at": [t for t in sent if isinstance(t, (int, float))] if isinstance(sent, list) else [],
            "suppressed": mine.get("suppressed") if isinstance(mine.get("suppressed"), int) else 0}
    state["channels"][name] = mine
    return mine


# ---- sending -----------------------------------------------------------------------------------


def send(event: Mapping[str, Any], channels: list[dict[str, Any]], state_dir: str, env: Mapping[str, str],
         now: float | None = None) -> list[dict[str, Any]]:
    """Send `event` to each channel at most once; one outcome per channel, never an exception for a
    channel that fails: {"channel", "kind", "status": sent|duplicate|rate_limited|failed, "error"}."""
    now = time.time() if now is None else now
    outcomes: list[dict[str, Any]] = []
    try:
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
        with _locked(os.path.join(state_dir, LOCK)):
            path = os.path.join(state_dir, STATE)
            state = _load(path)
            outcomes = [_one(event, ch, state, env, now) for ch in channels]
            _save(path, state)
    except OSError:  # before sending nothing goes out (no dedupe, no sending); after, what went out stands
        reason = "cannot write the notification state (its folder is not writable)"
        return outcomes or [_outcome(ch, "failed", reason) for ch in channels]
    return outcomes


def _outcome(ch: Mapping[str, Any], status: str, error: str | None = None) -> dict[str, Any]:
    return {"channel": _line(ch.get("name") or ch.get("kind") or "?", 64), "kind": _line(ch.get("kind"), 16),
            "status": status, "error": error}


def _one(event: Mapping[str, Any], ch: Mapping[str, Any], state: dict[str, Any], env: Mapping[str, str],
         now: float) -> dict[str, Any]:
    mine = _channel_state(state, _line(ch.get("name") or ch.get("kind") or "?", 64))
    key = str(event.get("key") or f"{event.get('kind')}:{event.get('run_id')}:{event.get('title')}")
    if key in mine["keys"]:
        return _outcome(ch, "duplicate")
    rate = _number(ch.get("rate_per_hour"), RATE_PER_HOUR)
    mine["sent_at"] = [t for t in mine["sent_at"] if now - WINDOW_S < t <= now]
    if len(mine["sent_at"]) >= rate:
        mine["suppressed"] += 1
        _remember(mine, key, now)
        return _outcome(ch, "rate_limited", f"at most {rate} messages an hour")
    mine["sent_at"].append(now)  # an attempt counts, so a dead service is not hammered every tick
    error = _attempt(event, ch, mine["suppressed"], env)
    if error is not None:
        return _outcome(ch, "failed", error)
    mine["suppressed"] = 0
    _remember(mine, key, now)
    return _outcome(ch, "sent")


def _remember(mine: dict[str, Any], key: str, now: float) -> None:
    mine["keys"][key] = now
    if len(mine["keys"]) > KEYS_KEPT:
        oldest = sorted(mine["keys"].items(), key=lambda kv: kv[1])[: len(mine["keys"]) - KEYS_KEPT]
        for k, _ in oldest:
            del mine["keys"][k]


def _number(value: Any, default: float) -> int:
    try:
        return max(1, int(value)) if value is not None else int(default)
    except (TypeError, ValueError):
        return int(default)


def _attempt(event: Mapping[str, Any], ch: Mapping[str, Any], suppressed: int, env: Mapping[str, str]) -> str | None:
    """None when delivered, else the reason, scrubbed of every secret the channel names."""
    try:
        _deliver(event, ch, suppressed, env)
        return None
    except services.Fail as exc:
        reason = str(exc)
    except Exception as exc:  # a channel failure never stops the patrol: name the kind of error only
        reason = "unexpected " + type(exc).__name__
    for field, name in ch.items():
        value = env.get(str(name)) if str(field).endswith("_env") else None
        if value:
            reason = reason.replace(value, "***")
    return re.sub(r"\w+://\S+", "<url>", reason)[:200]


def _deliver(event: Mapping[str, Any], ch: Mapping[str, Any], suppressed: int, env: Mapping[str, str]) -> None:
    limit = EMAIL_LIMIT if ch.get("kind") == "email" else CHAT_LIMIT
    title, body = render(event, suppressed, limit)
    timeout = min(float(ch.get("timeout_s") or services.TIMEOUT_S), services.TIMEOUT_S)
    shown = dict(event, excerpt=clean(str(event["excerpt"]))) if event.get("excerpt") else event
    services.deliver(ch, shown, title, body, env, timeout)


# ---- `test`: one message per channel, to check a channel from the box -------------------------


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="notify_onbox.py")
    parser.add_argument("action", choices=["test"])
    parser.add_argument("--state-dir", default=None)
    parser.add_argument("--host", default=socket.gethostname())
    args = parser.parse_args(argv)
    loaded = json.load(sys.stdin)
    channels = loaded.get("channels", []) if isinstance(loaded, dict) else loaded
    channels = channels if isinstance(channels, list) else []
    event = {"key": f"test-{time.time_ns()}", "kind": "test", "level": "info", "title": "test message",
             "text": "If you can read this, the box can reach this channel.", "host": args.host,
             "next": "nothing to do"}
    state_dir = args.state_dir or tempfile.mkdtemp(prefix="rgt-notify-")
    try:
        outcomes = send(event, [c for c in channels if isinstance(c, dict)], state_dir, os.environ)
    finally:
        if args.state_dir is None:
            shutil.rmtree(state_dir, ignore_errors=True)
    for outcome in outcomes:
        sys.stdout.write(json.dumps(outcome) + "\n")
    return 0 if outcomes and all(o["status"] == "sent" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
