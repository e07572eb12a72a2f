"""Text results: strict JSON, JSONL line by line, CSV/TSV row widths.

Python's json accepts the non-standard literals NaN, Infinity and -Infinity; a metrics file
holding one is a diverged or broken metric, so they fail here, named by key path. JSONL and CSV
are read as a stream and the first bad line is named by number; a last line that is cut off (a
writer killed mid-row) is called that. A machine-written CSV ends every row with a newline, so a
last row without one is a cut row even when its field count is right (`3,` of `epoch,loss`); a
file written by hand is accepted with it when the request names it in `hand_made`."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from mcp_server.verify.artifacts.checks_base import MAX_TEXT_CHECK, CheckInput, Defect, Outcome

if TYPE_CHECKING:
    from _csv import Reader  # csv.reader's type, named only in the stubs

MAX_SCALARS = 32


class _Literal:
    """Where json met NaN / Infinity / -Infinity; found again by walking the parsed value."""

    def __init__(self, name: str) -> None:
        self.name = name


def _strict(text: str | bytes) -> Any:
    return json.loads(text, parse_constant=_Literal)


def _literals(value: Any, path: str = "$") -> Iterator[tuple[str, str]]:
    """(key path, literal) for every non-standard literal inside a parsed value."""
    if isinstance(value, _Literal):
        yield path, value.name
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _literals(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _literals(v, f"{path}[{i}]")


def _refuse_literals(value: Any, where: str = "") -> None:
    found = list(_literals(value))
    if found:
        (path, name), more = found[0], len(found) - 1
        also = f" (and {more} more)" if more else ""
        raise Defect("non_finite", f"{where}{name} literal at {path}{also}: not valid JSON, and a metric that "
                                   "is not a number")


def _too_large(inp: CheckInput) -> Outcome | None:
    if inp.size > MAX_TEXT_CHECK:
        return Outcome(detail=f"not inspected: {inp.size} bytes is too large to parse within the call budget "
                              "(bytes and sha256 still verified)", inspected=False)
    return None


def check_json(inp: CheckInput) -> Outcome:
    skip = _too_large(inp)
    if skip:
        return skip
    try:
        value = _strict(inp.path.read_bytes())
    except json.JSONDecodeError as exc:
        raise Defect("load_error", f"does not parse ({exc.msg}: line {exc.lineno} column {exc.colno})"
                                   f"{_unclosed(exc.doc)}") from exc
    _refuse_literals(value)
    scalars = _scalars(value)
    shape = f"object of {len(value)} keys" if isinstance(value, dict) else type(value).__name__
    return Outcome(detail=f"strict JSON parses: {shape}", scalars=scalars or None)


def _unclosed(doc: str | bytes) -> str:
    """A note when an object or array never closes: the file was cut short (a writer killed mid-dump)."""
    text = doc.decode("utf-8", "replace") if isinstance(doc, bytes) else doc
    body = text.strip()
    opened = body[:1]
    if opened in ("{", "[") and not body.endswith("}" if opened == "{" else "]"):
        return ": it never closes, so it was cut short"
    return ""


def _scalars(value: Any) -> dict[str, float]:
    """Top-level numbers of a JSON object (bools excluded), for a per-cell metric table."""
    out: dict[str, float] = {}
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, int | float) and not isinstance(v, bool) and len(out) < MAX_SCALARS:
                try:
                    number = float(v)
                except OverflowError:
                    continue
                if math.isfinite(number):
                    out[str(k)] = number
    return out


def check_jsonl(inp: CheckInput) -> Outcome:
    skip = _too_large(inp)
    if skip:
        return skip
    records = 0
    with inp.path.open("rb") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                value = _strict(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                last = not line.endswith(b"\n") and not f.read(1)
                why = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
                raise Defect("load_error", f"line {number} does not parse ({why})"
                                           + (": the last line, with no newline: cut off mid-write" if last else "")
                             ) from exc
            _refuse_literals(value, f"line {number}: ")
            records += 1
    if not records:
        raise Defect("empty", "no records (only blank lines)")
    return Outcome(detail=f"{records} records parse as strict JSON")


Row = tuple[int, int]  # (line number, field count)


def _read_rows(reader: Reader) -> tuple[list[str], int, Row, Row | None]:
    """(header, data row count, last row, first row whose width differs from the header's)."""
    header = next((row for row in reader if row), None)
    if header is None:
        raise Defect("empty", "no header row (only blank lines)")
    rows, last, first_bad = 0, (reader.line_num, len(header)), None
    for row in reader:
        if not row:
            continue
        rows += 1
        last = (reader.line_num, len(row))
        if len(row) != len(header) and first_bad is None:
            first_bad = last
    return header, rows, last, first_bad


def check_csv(inp: CheckInput) -> Outcome:
    skip = _too_large(inp)
    if skip:
        return skip
    delimiter = "\t" if inp.rel.lower().endswith(".tsv") else ","
    with inp.path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter=delimiter, strict=True)
        try:
            header, rows, last, first_bad = _read_rows(reader)
        except csv.Error as exc:
            cut = ": a quoted field never closes, so it was cut short" if "end of data" in str(exc) else ""
            raise Defect("load_error", f"line {reader.line_num}: {exc}{cut}") from exc
        except UnicodeDecodeError as exc:
            raise Defect("load_error", f"not UTF-8 text ({exc.reason}) after line {reader.line_num}") from exc
    with inp.path.open("rb") as fb:
        fb.seek(inp.size - 1)
        newline_end = fb.read(1) in (b"\n", b"\r")
    width = len(header)
    if first_bad is not None:
        line, got = first_bad
        if first_bad == last and got < width:
            no_newline = "" if newline_end else " (and the file does not end in a newline)"
            raise Defect("load_error", f"ragged rows: the last row (line {line}) has {got} of {width} fields: "
                                       f"cut off mid-write{no_newline}")
        raise Defect("load_error", f"ragged rows: line {line} has {got} field(s), the header has {width}")
    if not newline_end and not inp.hand_made:
        raise Defect("load_error", f"line {last[0]}: the last row has no final newline, so it was cut mid-write (a "
                                   "machine-written CSV ends every row with one); a file written by hand: name it "
                                   "in hand_made")
    tail = "" if newline_end else " (no final newline: accepted as written by hand)"
    return Outcome(detail=f"{rows} data rows x {width} columns, every row full{tail}")
