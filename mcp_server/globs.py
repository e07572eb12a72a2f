"""Shell-style globs over relative posix paths, shared by rosters, documents and gates.

`*` and `?` stay inside one directory, `**` spans directories (`**/` also matches no directory),
`[..]` is a character class (`[!..]` negated). A pattern comes from a caller or a file on a box,
so matching must not blow up: consecutive `**` collapse into one, and a pattern with more
wildcards than a backtracking regex handles safely is matched by an automaton whose state set is
a bit mask, stepped once per character and cached per (state, character): linear in the path's
length, a dict lookup per character once warm. Long matching loops take a `MatchBudget`, and
`off_loop` runs them in a worker thread so they never hold the event loop."""

from __future__ import annotations

import asyncio
import functools
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from mcp_server.errors import InputError

MAX_PATTERN = 1024
MAX_WILDCARDS = 64
MAX_DFA_STEPS = 200_000
_DSTAR_SLASH = re.compile(r"(?:\*\*/)+")
T = TypeVar("T")


@dataclass(frozen=True)
class _Tok:
    kind: str  # "lit", "one" (?), "star" (*), "dstar" (**), "dslash" (**/), "class"
    text: str = ""
    negate: bool = False


def _tokens(pattern: str) -> list[_Tok]:
    out: list[_Tok] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append(_Tok("dslash"))
            i += 3
        elif pattern.startswith("**", i):
            out.append(_Tok("dstar"))
            i += 2
        elif pattern[i] == "*":
            out.append(_Tok("star"))
            i += 1
        elif pattern[i] == "?":
            out.append(_Tok("one"))
            i += 1
        elif pattern[i] == "[" and (j := pattern.find("]", i + 1)) > 0:
            body = pattern[i + 1:j]
            out.append(_Tok("class", body[1:] if body.startswith("!") else body, body.startswith("!")))
            i = j + 1
        else:
            out.append(_Tok("lit", pattern[i]))
            i += 1
    return out


def _merged(toks: list[_Tok]) -> list[_Tok]:
    """Runs of `*` and `**` as one token: `[^/]*.*` is `.*` and `[^/]*[^/]*` is `[^/]*`, so a
    run of stars neither changes the answer nor adds states to step through."""
    out: list[_Tok] = []
    for t in toks:
        if out and t.kind in ("star", "dstar") and out[-1].kind in ("star", "dstar"):
            out[-1] = _Tok("dstar" if "dstar" in (t.kind, out[-1].kind) else "star")
        else:
            out.append(t)
    return out


def _regex(toks: list[_Tok]) -> str:
    parts = {"one": "[^/]", "star": "[^/]*", "dstar": ".*", "dslash": "(?:.*/)?"}
    out = []
    for t in toks:
        if t.kind == "lit":
            out.append(re.escape(t.text))
        elif t.kind == "class":
            out.append("[" + ("^" if t.negate else "") + t.text.replace("\\", "\\\\") + "]")
        else:
            out.append(parts[t.kind])
    return "".join(out) + r"\Z"


class Glob:
    """A compiled glob: `match(path)` is truthy when the whole path matches."""

    def __init__(self, pattern: str) -> None:
        if len(pattern) > MAX_PATTERN:
            raise InputError("glob too long", observed=f"{len(pattern)} characters", expected=f"<= {MAX_PATTERN}")
        self.pattern = pattern
        toks = _merged(_tokens(_DSTAR_SLASH.sub("**/", pattern)))
        wild = [t for t in toks if t.kind not in ("lit", "class", "one")]
        if len(wild) > MAX_WILDCARDS:
            raise InputError("glob has too many wildcards", observed=pattern[:200],
                             expected=f"at most {MAX_WILDCARDS} * or **")
        self._toks = toks
        self._classes = {i: re.compile(_regex([t])[:-2]) for i, t in enumerate(toks) if t.kind == "class"}
        # A backtracking regex is safe with one directory-spanning wildcard and few stars per
        # directory; anything else goes through the automaton.
        spans = sum(t.kind in ("dstar", "dslash") for t in toks)
        per_dir = max((seg.count("*") for seg in pattern.replace("**", "").split("/")), default=0)
        self._rx = re.compile(_regex(toks)) if spans <= 1 and per_dir <= 2 else None
        self._masks(toks)
        self._dfa: dict[int, dict[str, int]] = {}
        self._cached = 0

    def _masks(self, toks: list[_Tok]) -> None:
        """The automaton as bit masks. Bit i: "before token i" (bit len(toks): matched). Bit
        off+i: "inside the directories the `**/` at i spans", which only a "/" leaves."""
        def bits(*kinds: str) -> int:
            return sum(1 << i for i, t in enumerate(toks) if t.kind in kinds)
        self._off = len(toks) + 1
        self._accept = 1 << len(toks)
        self._star, self._dslash = bits("star"), bits("dslash")
        self._eps = bits("star", "dstar", "dslash")  # each may match nothing
        self._any = bits("dstar") | (self._dslash << self._off)  # loops on every character
        self._reads_of: dict[str, int] = {}
        self._start = self._closure(1)

    def match(self, path: str) -> bool:
        if self._rx is not None:
            return self._rx.match(path) is not None
        # A lazily built DFA: each (state set, character) step is computed once per glob, so
        # the cost per character is a dict lookup, whatever the pattern.
        s, dfa = self._start, self._dfa
        for ch in path:
            row = dfa.get(s)
            if row is None:
                row = dfa[s] = {}
            nxt = row.get(ch)
            if nxt is None:
                nxt = row[ch] = self._step(s, ch)
                self._cached += 1
                if self._cached > MAX_DFA_STEPS:  # a path crafted to visit new states: memory stays bounded
                    self._dfa, self._cached = {}, 0
            if not nxt:
                return False
            s = nxt
        return bool(s & self._accept)

    def _closure(self, s: int) -> int:
        """Add the states reachable without reading a character (a wildcard matching nothing)."""
        while True:
            n = s | ((s & self._eps) << 1)
            if n == s:
                return s
            s = n

    def _step(self, s: int, ch: str) -> int:
        ds = s & self._dslash
        n = ((s & self._reads(ch)) << 1) | (s & self._any) | (ds << self._off)
        if ch == "/":
            n |= (ds << 1) | (((s >> self._off) & self._dslash) << 1)
        else:
            n |= s & self._star
        return self._closure(n)

    def _reads(self, ch: str) -> int:
        """The single-character tokens (a literal, `?` or a class) that accept `ch`, as bits."""
        got = self._reads_of.get(ch)
        if got is None:
            got = 0
            for i, t in enumerate(self._toks):
                if ((t.kind == "lit" and t.text == ch) or (t.kind == "one" and ch != "/")
                        or (t.kind == "class" and self._classes[i].fullmatch(ch) is not None)):
                    got |= 1 << i
            if len(self._reads_of) > MAX_DFA_STEPS:  # paths of many distinct characters: bounded memory
                self._reads_of = {}
            self._reads_of[ch] = got
        return got


@functools.lru_cache(maxsize=512)
def glob_regex(pattern: str) -> Glob:
    """The compiled glob, compiled once per pattern (callers match it against many paths; the
    name predates the automaton)."""
    return Glob(pattern)


@dataclass
class MatchBudget:
    """When a matching loop must stop: past `deadline` (time.monotonic) or once `stop` is set
    because the call awaiting it was cancelled. `budget_s` is what the caller asked for."""

    deadline: float
    budget_s: float
    stop: threading.Event = field(default_factory=threading.Event)

    def check(self, pattern: str, done: int, total: int) -> None:
        """Called between paths: raises once the call's time is up, naming the pattern."""
        if self.stop.is_set():
            raise InputError(f"matching the glob {pattern[:200]!r} stopped: the call was cancelled")
        if time.monotonic() > self.deadline:
            raise InputError(
                f"matching the glob {pattern[:200]!r} did not finish within the call's budget of "
                f"{self.budget_s:g} s", observed=f"{done} of {total} paths matched",
                expected="a glob that matches the listing within budget_s",
                next_step="narrow the glob (fewer * and **, a fixed directory or suffix), or call again "
                          "with a larger budget_s")


async def off_loop(fn: Callable[[MatchBudget], T], budget: MatchBudget) -> T:
    """`fn(budget)` in a worker thread, so a long match never holds the event loop; cancelling
    the awaiting call stops the worker at its next `budget.check`."""
    try:
        return await asyncio.to_thread(fn, budget)
    finally:
        budget.stop.set()
