"""The text a tool result carries next to its structured content: a short reading of it.

Clients hand a result's text to the model; the structured content holds the whole typed result.
Repeating that JSON as text doubled every result's cost, so the text is a compact rendering:
empty and default fields left out, long lists and strings cut with a count of what was left out,
logs as their last lines, and the next step last. `RGT_RESULT_TEXT=json` restores the full JSON
text for a client that shows its model only the text."""

from __future__ import annotations

import re
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from mcp_server import untrusted
from mcp_server.settings import OUTPUT_CAP_BYTES

MAX_LINES = 40
MAX_TEXT_BYTES = OUTPUT_CAP_BYTES  # the whole reading, whatever the result holds
MAX_KEY = 80  # a key is a field name or a map key from the box (a file name): shown at most this long
MAX_VALUE = 200
MAX_ITEMS = 8
SHORT, MAX_SHORT_ITEMS = 12, 40  # a list of short values (check ids) is shown up to this many
EXPANDED = 2  # lists of at most this many objects are shown whole
LOG_LINES = 20
# Fields whose value is text read from the box (a log): shown as their last lines, labelled as data.
_TEXT_BLOCKS = {"text", "log_tail", "last_line"}
# Fields whose value quotes a file (a document's line, a reference page): fenced ⟦ ⟧ and labelled.
_QUOTED = {"context": untrusted.note("quoted from the documents read"),
           "excerpt": untrusted.note("quoted from the reference pages")}
# A False worth saying (the rest of the False flags are defaults).
_TELLING_FALSE = {"passed", "ready", "clean", "done", "ended", "complete", "live", "changed", "executed",
                  "authoritative", "eof"}
# Bookkeeping nobody reads in a summary (all of it stays in the structured result).
_NOISE = {"route", "routes", "inputs_digest", "plan_hash", "audited_at", "log_mtime", "data", "catalog",
          "round_trips", "duration_s", "offset", "polls", "status_at_start", "mime_type", "ledger_id"}
# In a one-line item these come first, in this order: what the item is, then how it stands.
_FIRST = {k: i for i, k in enumerate(("id", "ids", "name", "run_id", "host", "status", "verdict", "state", "code"))}
_NEXT = ("next_step", "next_probe", "hint")
# Numbers under these keys are Unix times: shown as UTC ISO times (between 2001 and 2100).
_EPOCH_KEYS = ("_at", "_mtime", "started", "ended")
EPOCH_MIN, EPOCH_MAX = 1e9, 4.1e9
_DROP: ContextVar[frozenset[str]] = ContextVar("summary_drop", default=frozenset())
URI = re.compile(r"\b(?:references|profiles|runs|schemas)://[^\s\"'<>)\]]+")


def _scalar(value: Any, key: str = "") -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key.endswith(_EPOCH_KEYS) \
            and EPOCH_MIN < value < EPOCH_MAX:
        return datetime.fromtimestamp(value, UTC).isoformat(timespec="seconds")
    text = str(value).replace("\n", " ⏎ ") if not isinstance(value, float) else f"{value:.6g}"
    return text if len(text) <= MAX_VALUE else text[:MAX_VALUE] + "…"


def _key(key: str) -> str:
    """A key as a line shows it: on one line, at most MAX_KEY characters."""
    key = key.replace("\n", " ⏎ ")
    return key if len(key) <= MAX_KEY else key[:MAX_KEY] + "…"


def _keep(key: str, value: Any) -> bool:
    if key in _NOISE or key in _NEXT or key in _DROP.get():
        return False
    if value is None or value == "" or value == [] or value == {}:
        return False
    return not (value is False and key not in _TELLING_FALSE)


def _inline(value: Any, key: str) -> str:
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        return ",".join(str(v) for v in value)
    return "…" if isinstance(value, (dict, list)) else _scalar(value, key)


def _item(value: Any) -> str:
    """One list item on one line: an object as its scalar fields `k=v`, the naming ones first."""
    if not isinstance(value, dict):
        return _scalar(value)
    keys = sorted((k for k, v in value.items() if _keep(k, v)), key=lambda k: _FIRST.get(k, len(_FIRST)))
    quoted = [k for k in keys if k in _QUOTED and isinstance(value[k], str)]
    line = _scalar(" ".join(f"{_key(k)}={_inline(value[k], k)}" for k in keys if k not in quoted))
    # Quoted text last, with room of its own: the fields before it never cut it (or its fence) off.
    return " ".join([line, *(f"{k}={untrusted.fence(_scalar(value[k]))}" for k in quoted)])


def _quote_labels(items: list[Any]) -> str:
    """The labels of the quoted fields these one-line items show, said once on their list's line."""
    found = {_QUOTED[k] for v in items if isinstance(v, dict) for k in v if k in _QUOTED and _keep(k, v[k])}
    return "".join(f"; {untrusted.OPEN}…{untrusted.CLOSE} {label}" for label in sorted(found))


def _block(key: str, text: str, pad: str, out: list[str]) -> None:
    lines = text.rstrip("\n").splitlines()
    more = f", last {LOG_LINES} of {len(lines)} lines" if len(lines) > LOG_LINES else ""
    out.append(f"{pad}{_key(key)} ({untrusted.NOTE}{more}):")
    out.extend(f"{pad}  {line[:400]}" for line in lines[-LOG_LINES:])


def _render(data: dict[str, Any], pad: str, out: list[str], depth: int = 0,
            said: dict[str, Any] | None = None) -> None:
    """`data` as indented lines; `said`: the scalars an enclosing object already showed (a nested
    `host: gpu1` under `host: gpu1` says nothing new)."""
    said = {} if said is None else said
    here = {**said, **{k: v for k, v in data.items() if not isinstance(v, (dict, list))}}
    for key, value in data.items():
        if not _keep(key, value) or (key in said and said[key] == value):
            continue
        if key in _TEXT_BLOCKS and isinstance(value, str):
            _block(key, value, pad, out)
        elif key in _QUOTED and isinstance(value, str):
            out.append(f"{pad}{key} ({_QUOTED[key]}): {untrusted.fence(_scalar(value))}")
        elif isinstance(value, dict):
            if depth >= 2:
                out.append(f"{pad}{_key(key)}: {_item(value)}")
                continue
            out.append(f"{pad}{_key(key)}:")
            _render(value, pad + "  ", out, depth + 1, here)
        elif isinstance(value, list):
            _list(key, value, pad, out, depth, here)
        else:
            out.append(f"{pad}{_key(key)}: {_scalar(value, key)}")


def _list(key: str, value: list[Any], pad: str, out: list[str], depth: int, said: dict[str, Any]) -> None:
    more = f" (+{len(value) - MAX_ITEMS} more)" if len(value) > MAX_ITEMS else ""
    if all(not isinstance(v, (dict, list)) for v in value):
        if all(len(str(v)) <= SHORT for v in value[:MAX_SHORT_ITEMS]):  # ids, names: all of them fit a line
            more = f" (+{len(value) - MAX_SHORT_ITEMS} more)" if len(value) > MAX_SHORT_ITEMS else ""
            out.append(f"{pad}{_key(key)}: {', '.join(str(v) for v in value[:MAX_SHORT_ITEMS])}{more}")
            return
        out.append(f"{pad}{_key(key)}: {', '.join(_scalar(v) for v in value[:MAX_ITEMS])}{more}")
        return
    if len(value) <= EXPANDED and depth < 2 and all(isinstance(v, dict) for v in value):
        out.append(f"{pad}{_key(key)} ({len(value)}):")
        for v in value:  # a few results (one per host, say): each in full
            lines: list[str] = []
            _render(v, pad + "    ", lines, depth + 1, said)
            out.extend([f"{pad}  - {lines[0].lstrip()}", *lines[1:]] if lines else [])
        return
    out.append(f"{pad}{_key(key)} ({len(value)}{_quote_labels(value[:MAX_ITEMS])}):")
    out.extend(f"{pad}  - {_item(v)}" for v in value[:MAX_ITEMS])
    if more:
        out.append(f"{pad}  …{more}")


def _next_steps(data: Any, found: list[str]) -> None:
    """Every next step in the result, outermost first, each once."""
    if isinstance(data, dict):
        for key in _NEXT:
            value = data.get(key)
            text = _item(value) if isinstance(value, dict) else value
            if isinstance(text, str) and text and text not in found:
                found.append(text)
        for value in data.values():
            _next_steps(value, found)
    elif isinstance(data, list):
        for value in data[:MAX_ITEMS]:
            _next_steps(value, found)


def cut_note(data: dict[str, Any]) -> str | None:
    """The first line of a reading whose result was cut to fit its budget (tools/_bounded): what
    was cut, with the full lengths, so the text says what the structured result says."""
    totals = data.get("totals")
    if data.get("truncated") is not True or not isinstance(totals, dict) or not totals:
        return None
    shown = ", ".join(f"{_key(str(k))}={_scalar(v)}" for k, v in list(totals.items())[:MAX_ITEMS])
    more = f" (+{len(totals) - MAX_ITEMS} more)" if len(totals) > MAX_ITEMS else ""
    return f"truncated: lists or strings cut to keep the result small; full lengths (totals): {shown}{more}"


def summarize(data: dict[str, Any], drop: frozenset[str] = frozenset()) -> str:
    """The text form of one structured result (see the module's note); `drop`: fields of this
    tool's result that a reading can do without."""
    note = cut_note(data)
    out: list[str] = [] if note is None else [note]
    token = _DROP.set(drop if note is None else drop | {"totals"})
    try:
        _render(data, "", out)
    finally:
        _DROP.reset(token)
    if len(out) > MAX_LINES:
        out = [*out[:MAX_LINES], f"… {len(out) - MAX_LINES} more lines in the structured result"]
    steps: list[str] = []
    _next_steps(data, steps)
    out.extend(f"next: {_scalar(s)}" for s in steps[:3])
    text = "\n".join(out) if out else "done (no fields to show)"
    raw = text.encode()
    if len(raw) <= MAX_TEXT_BYTES:
        return text
    kept = raw[:MAX_TEXT_BYTES - 80].decode(errors="ignore").rsplit("\n", 1)[0]
    return f"{kept}\n… the rest of this reading is cut (the structured result has its fields)"


def uris(data: Any, found: list[str] | None = None) -> list[str]:
    """Every resource URI the result names (routes, pages, runs), each once, in order."""
    found = [] if found is None else found
    if isinstance(data, dict):
        for value in data.values():
            uris(value, found)
    elif isinstance(data, list):
        for value in data:
            uris(value, found)
    elif isinstance(data, str):
        for uri in URI.findall(data):
            uri = uri.rstrip(".,;:")
            if uri not in found:
                found.append(uri)
    return found
