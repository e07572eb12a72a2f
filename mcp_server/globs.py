"""Shell-style globs over relative posix paths, shared by rosters, documents and gates.

`*` and `?` stay inside one directory, `**` spans directories (`**/` also matches no directory),
`[..]` is a character class (`[!..]` negated). A pattern comes from a caller or a file on a box,
so matching must not blow up: consecutive `**` collapse into one, and a pattern with more
wildcards than a backtracking regex handles safely is matched by a set-of-states automaton, in
time linear in the path's length times the pattern's."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mcp_server.errors import InputError

MAX_PATTERN = 1024
MAX_WILDCARDS = 64
_DSTAR_SLASH = re.compile(r"(?:\*\*/)+")


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
        toks = _tokens(_DSTAR_SLASH.sub("**/", pattern))
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

    def match(self, path: str) -> bool:
        if self._rx is not None:
            return self._rx.match(path) is not None
        states = self._closure({0})
        for ch in path:
            states = self._closure(self._step(states, ch))
            if not states:
                return False
        return len(self._toks) in states

    def _closure(self, states: set[int]) -> set[int]:
        """Add the states reachable without reading a character (a wildcard matching nothing).
        A state -(i+1) is "inside the directories token i spans": only a "/" leaves it."""
        todo, seen = list(states), set(states)
        while todo:
            i = todo.pop()
            if 0 <= i < len(self._toks) and self._toks[i].kind in ("star", "dstar", "dslash") and i + 1 not in seen:
                seen.add(i + 1)
                todo.append(i + 1)
        return seen

    def _step(self, states: set[int], ch: str) -> set[int]:
        nxt: set[int] = set()
        for i in states:
            if i < 0 or (i < len(self._toks) and self._toks[i].kind == "dslash"):
                inside = i if i < 0 else -(i + 1)
                nxt.add(inside)
                if ch == "/":
                    nxt.add(-inside)  # the token after the spanned directories
                continue
            if i >= len(self._toks):
                continue
            kind = self._toks[i].kind
            if kind in ("star", "dstar"):
                if kind == "dstar" or ch != "/":
                    nxt.add(i)
            elif self._reads(i, ch):
                nxt.add(i + 1)
        return nxt

    def _reads(self, i: int, ch: str) -> bool:
        """Whether single-character token i (a literal, `?` or a class) accepts `ch`."""
        t = self._toks[i]
        if t.kind == "lit":
            return t.text == ch
        if t.kind == "one":
            return ch != "/"
        return self._classes[i].fullmatch(ch) is not None


def glob_regex(pattern: str) -> Glob:
    """The compiled glob (the name predates the automaton; callers use `.match`)."""
    return Glob(pattern)
