"""One log line as a metrics record: the shapes popular trainers and loggers print.

A line gives numbers only where a metrics line puts them; free prose never becomes a series:
- its message is a JSON object or a Python dict print (HF Trainer/Accelerate `{'loss': 2.4, ...}`,
  `epoch 0: {'accuracy': 0.8}`): numbers and numeric strings only, read with json, else
  ast.literal_eval on at most MAX_DICT_CHARS characters;
- its message is a tqdm bar (Lightning's too): the postfix pairs (`..., 44.1it/s, loss=0.321]`),
  x the counter before the `/`; a dict printed right after the bar joins the record;
- a run of `key=value` / `key: value` pairs at the message start, or after step markers there
  (`step 100:`, `[epoch 3]`, `Epoch 3/10`, `iter 10:`, `Epoch(train) [1][ 50/782]`,
  `epoch 001:  450 / 1891`); after a marker also `key value` pairs and two-word keys
  (`step 1 loss 2.40`, `step 250: train loss 1.54, val loss 1.72`), but `key value` pairs count
  only when nothing but pairs follows them to the line's end, or inside `|` cells
  (`| epoch 001 | loss 9.5 | ppl 550`), where a cell that is no pair is skipped.
The message starts past what a logger writes first (date, time, level, [tags], file:line, rank
labels). A value with a unit (`123.45ms`, `433M`, `2.1s`, `0:10:00`) is dropped and the run goes
on: a series keeps one unit, and units change between lines (tqdm's s/it and it/s); a percent
keeps its number (`mfu 16.68%` -> 16.68). A marker's within-epoch counter (`[e][i/n]`,
`epoch e: i / n`) becomes the global step (e-1)*n+i (e*n+i for torchvision's 0-based
`Epoch: [e] [i/n]`)."""

from __future__ import annotations

import ast
import json
import math
import re

# The x axis, in order of preference: fairseq's update count, then the usual step names.
X_KEYS = ("num_updates", "step", "global_step", "iter", "iteration", "it", "epoch")
MAX_DICT_CHARS = 8192
MAX_LINE_CHARS = 65_536  # a longer line is no metrics line: it is skipped unread
_NOT_METRICS = frozenset({"v_num"})  # Lightning's run version in its progress bar
# Words of prose, never of a `key value` pair's key: `step 3 of warmup 5`, `Step 3: loss is 0.5`.
_PROSE_WORDS = frozenset({"a", "an", "the", "of", "in", "on", "at", "by", "for", "to", "from", "with", "and", "or",
                          "is", "was", "are", "were", "be", "been", "it", "this", "that", "as", "after", "before",
                          "than"})

# Atomic digit runs: a long run of digits that is no number is refused in linear time, not quadratic.
_NUM = (r"[-+]?(?:(?>\d+\.?\d*(?:[eE][-+]?\d+)?)|(?>\.\d+(?:[eE][-+]?\d+)?)"
        r"|infinity|Infinity|nan|NaN|NAN|inf|Inf|INF)")
_DURATION = r"(?:\d+ days?, )?\d+:\d\d(?::\d\d)?(?:\.\d+)?"
_VALUE = (rf"(?:(?P<dur>{_DURATION})|(?P<num>{_NUM})(?:(?P<pct>%)|(?P<unit>[A-Za-z/µ]+))?)"
          rf"(?:\s*\({_NUM}\))?(?![\w.:/%-])")  # `loss=1.27 (1.50)`: the running average is dropped
_KEY = r"[A-Za-z_][\w./-]{0,63}"
_KEYED = re.compile(rf"(?P<key>{_KEY})\s*[=:]\s*{_VALUE}")
_KEYED2 = re.compile(rf"(?P<key>{_KEY}(?: {_KEY})?)\s*[=:]\s*{_VALUE}")
_SPACED = re.compile(rf"(?P<key>{_KEY}(?: {_KEY})?)\s+{_VALUE}")
_TEXT_VALUE = re.compile(rf"\s*{_VALUE}\s*")
_LEVEL = r"(?:TRACE|DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|CRITICAL|FATAL)\b"
# What a logger writes before the message, one token at a time.
_PREFIX = re.compile(rf"""\s*(?:
    (?>\d[\w:.,/+-]*)(?!%)                       # a date, a time, a counter, a rank label: 12:00:01,123 32/32 0:
  | \[(?:[^\]\s]{{0,40}}\d[^\]]{{0,80}}|\s*{_LEVEL}\s*|[=>.\s-]{{0,200}})\]  # [2024-01-01 12:00] [INFO] [=>..]
  | {_LEVEL}(?::[\w.<>-]+(?=:))*:?               # INFO  INFO:root:  WARNING:__main__:
  | [IWEF]\d{{4}}                                # absl / glog: I0101
  | [\w.<>-]+\.py:\d+\]?                         # absl / glog: train.py:42]
  | [\w.<>-]+:[\w.<>-]+:\d+                       # loguru: __main__:main:12
  | [a-z_][\w.]*(?=\s+-\s)                       # a logger name before " - ": __main__ - INFO -
  | [A-Za-z_][\w.-]*(?=\s+{_LEVEL})              # a logger name before its level: d2.utils.events INFO
  | <std(?:out|err)>:?                           # mpirun: [1,0]<stdout>:
  | [━─]+                                        # Keras 3's bar
  | [-|:>]+(?=\s)                                # separators
)""", re.X)
_MARKER = re.compile(r"""[\[(]?\s*(?P<word>global_step|step|iteration|iter|it|epoch)\b
    (?:\((?P<mode>\w+)\))?\s*(?P<colon>[=:#])?\s*
    (?:\[\s*(?P<e>\d+)\s*\]\s*\[\s*(?P<i>\d+)\s*(?:/\s*(?P<n>\d+)\s*)?\]      # [1][ 50/782]
      |\[\s*(?P<i2>\d+)\s*/\s*(?P<n2>\d+)\s*\]                                # Iter(train) [ 50/80000]
      |(?P<num>\d+(?:\.\d+)?)(?:\s*/\s*\d+)?                                # step 100, Epoch 3/10
       (?:[:,]?\s+(?P<ci>\d+)\s*/\s*(?P<cn>\d+)\b)?)                        # fairseq: epoch 001:  450 / 1891
    \s*[\])]?:?""", re.I | re.X)
_TQDM = re.compile(r"""(?P<desc>[^|\[\]]{0,120}?)\s*(?:\d{1,3}%\|[^|]{0,400}\|\s*)?
    (?P<n>(?>\d+))(?:/(?:\d+|\?))?(?:it)?\s*
    \[\d+:\d\d(?::\d\d)?(?:<(?:\d+:\d\d(?::\d\d)?|\?))?,[^,\]]*(?:,(?P<post>[^\]]*))?\]""", re.X)
_SEP = re.compile(r"(?:[\s,;|]|-(?=\s))*")


def _skip(text: str, pos: int) -> int:
    """Past the separators at `pos`."""
    m = _SEP.match(text, pos)
    return m.end() if m else pos


def value_of(text: str) -> float | None:
    """The number a metrics value means: `0.5`, `nan`, `16.68%` -> 16.68; None for one with a unit."""
    m = _TEXT_VALUE.fullmatch(text)
    return _value(m) if m else None


def _value(m: re.Match[str]) -> float | None:
    if m["num"] is None or m["unit"]:
        return None
    try:
        return float(m["num"])
    except ValueError:
        return None


def _key(m: re.Match[str]) -> str:
    key = m["key"]
    return key.lower() if key.lower() in X_KEYS else key


def dict_record(text: str) -> dict[str, float] | None:
    """The numbers of a JSON object or a Python dict print; None when the text is neither."""
    text = text.strip()
    if len(text) > MAX_DICT_CHARS or not text.startswith("{"):
        return None
    obj = _loads(text)
    if obj is None and (end := text.rfind("}")) > 0:
        obj = _loads(text[:end + 1])  # a dict with text after it
    if not isinstance(obj, dict):
        return None
    out: dict[str, float] = {}
    for k, v in obj.items():
        n = value_of(v) if isinstance(v, str) else _plain_number(v)
        if n is not None:
            out[str(k)] = n
    return out


def _loads(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _plain_number(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        return float(v)
    except OverflowError:
        return None


def message_start(line: str) -> int:
    """Where the message begins: past the date, time, level, tags and file:line a logger writes first."""
    pos = 0
    while (m := _PREFIX.match(line, pos)) and m.end() > pos:
        pos = m.end()
    return len(line) - len(line[pos:].lstrip())


def _marker_x(m: re.Match[str]) -> dict[str, float]:
    word = m["word"].lower()
    train = m["mode"] is None or m["mode"].lower() == "train"
    if m["e"] is not None:
        e, i = int(m["e"]), int(m["i"])
        if not (m["n"] and train):
            return {"epoch": float(e)}
        n = int(m["n"])
        return {"epoch": float(e), "step": float(e * n + i if m["colon"] else max(e - 1, 0) * n + i)}
    if m["i2"] is not None:
        return {"step": float(m["i2"])} if train else {}
    x = {word: float(m["num"])}
    if m["ci"] is not None and word == "epoch":
        x["step"] = max(x["epoch"] - 1, 0) * int(m["cn"]) + int(m["ci"])
    return x


def _pairs(text: str, pos: int, after_marker: bool) -> dict[str, float]:
    """A run of pairs from `pos`; `key value` pairs (after a marker only) count when the run
    reaches the text's end."""
    record: dict[str, float] = {}
    spaced: list[str] = []
    keyed = _KEYED2 if after_marker else _KEYED
    while True:
        pos = _skip(text, pos)
        m = keyed.match(text, pos)
        if m is None and after_marker and (m := _SPACED.match(text, pos)) is not None:
            if _PROSE_WORDS & set(m["key"].lower().split()):
                break
            spaced.append(_key(m))
        if m is None:
            break
        pos = m.end()
        if (v := _value(m)) is not None:
            record[_key(m)] = v
    if spaced and text[pos:].strip(" \t,;|"):
        for key in spaced:
            record.pop(key, None)
    return record


def _tqdm_record(line: str, pos: int) -> dict[str, float] | None:
    m = _TQDM.match(line, pos)
    if m is None:
        return None
    record = _pairs(m["post"] or "", 0, after_marker=False)
    for key in _NOT_METRICS & record.keys():
        del record[key]
    if marker := _MARKER.match(m["desc"].strip()):
        record.update(_marker_x(marker))
    record["step"] = float(m["n"])
    if line.startswith("{", m.end()):
        record.update(dict_record(line[m.end():]) or {})
    return record


def line_record(line: str) -> dict[str, float]:
    """The record one log line holds (the module's docstring); {} for prose."""
    if len(line) > MAX_LINE_CHARS:
        return {}
    pos = message_start(line)
    if line.startswith("{", pos):
        found = dict_record(line[pos:])
        if found is not None:
            return found
    first = len(line) - len(line.lstrip())
    if (bar := _tqdm_record(line, pos) or _tqdm_record(line, first)) is not None:
        return bar
    x: dict[str, float] = {}
    while len(x) < 4 and (marker := _MARKER.match(line, pos)) and marker.end() > pos:
        x.update(_marker_x(marker))
        pos = _skip(line, marker.end())
    if x and line.startswith("{", pos):
        return {**(dict_record(line[pos:]) or {}), **x}
    if x and "|" in line[pos:]:
        record: dict[str, float] = {}
        for cell in line[pos:].split("|"):
            record.update(_pairs(cell, 0, after_marker=True))
        return {**record, **x}
    return {**_pairs(line, pos, after_marker=bool(x)), **x}


def has_series(record: dict[str, float]) -> bool:
    """Whether the record holds a value besides its x keys."""
    return any(k not in X_KEYS for k in record)


def x_of(record: dict[str, float]) -> float | None:
    """The record's x: its first finite x key in X_KEYS order."""
    return next((record[k] for k in X_KEYS if k in record and math.isfinite(record[k])), None)
