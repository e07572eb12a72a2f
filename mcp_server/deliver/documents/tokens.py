"""Numeric tokens of one line, each with a role: a reported value, an annotation (± band,
n, seed count) or something that is not a reported number at all (identifier, citation,
year, section or figure number, version, date, range, list marker, p-value).

The word just before a number decides most roles, so it is read once with string
operations; the few regexes left are anchored at the number's end."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mcp_server.deliver.documents.numbers import NUMBER_RE, Parsed, parse_match

VALUE, VARIANCE, N, SEEDS, IGNORE = "value", "variance", "n", "seeds", "ignore"


@dataclass(slots=True)
class Token:
    """One number in a line: where, as printed, its value and precision, and its role."""

    start: int
    end: int
    text: str
    value: float
    decimals: int
    percent: bool
    role: str
    deltaish: bool = False
    counted: bool = False
    macro: str | None = None
    claimed: bool = False
    line: int = -1


# Words before a number that make it a reference, not a value (any number) ...
_REF_ANY = frozenset({
    "sec", "secs", "section", "sections", "table", "tables", "tab", "fig", "figs", "figure", "figures", "eq",
    "eqs", "equation", "appendix", "app", "chapter", "ch", "alg", "algorithm", "line", "lines", "step", "steps",
    "theorem", "thm", "lemma", "prop", "page", "pages", "p", "pp", "no", "part", "row", "rows", "col", "column",
    "version", "release", "python", "cuda", "torch", "pytorch", "v",
})
# ... or, for integers only, an index or a setting.
_REF_INT = frozenset({
    "epoch", "epochs", "iter", "iteration", "layer", "stage", "level", "fold", "seed", "rank", "top", "scale",
    "factor", "batch", "id", "round", "trial", "run", "k",
})
_PM_WORDS = frozenset({"std", "stdev", "s.d", "sd", "sem", "s.e", "se", "σ", "sigma"})
_DELTA_WORDS = frozenset({
    "by", "gain", "gains", "improve", "improves", "improved", "improvement", "improvements", "increase",
    "increases", "increased", "decrease", "decreases", "decreased", "drop", "drops", "dropped", "reduce",
    "reduces", "reduced", "reduction", "margin", "higher", "lower", "better", "worse", "delta", "difference",
    "diff", "boost", "boosts", "boosted", "outperform", "outperforms", "outperformed", "δ",
})
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.§#σΔ")

_DIGIT = re.compile(r"[0-9]")
_UNIT_SUFFIX = re.compile(r"(?:dB|db|pp|pt)(?![A-Za-z])")
_MULTIPLIER = re.compile(r"\s*[x×](?![A-Za-z0-9])")
_CITATION = re.compile(r"\s*[0-9]+(?:\s*[,\u2013-]\s*[0-9]+)*\s*")
_SEEDS_AFTER = re.compile(r"\s*(?:random\s+|independent\s+|different\s+)?(?:seeds?|runs|trials)(?![A-Za-z])", re.I)
_DELTA_AFTER = re.compile(
    r"\s*(?:%|dB|db|pp|points?|pts)?\s*(?:higher|lower|better|worse|more|less|gain|improvement|"
    r"increase|decrease|drop|above|below|ahead|behind|over(?!\s+[0-9]))(?![A-Za-z])", re.I)
_COUNTED = re.compile(
    r"\s*(?:epochs?|steps?|iterations?|iters?|layers?|images?|samples?|examples?|params?|"
    r"parameters|gpus?|hours?|hrs?|h|minutes?|mins?|seconds?|secs?|days?|weeks?|batch(?:es)?|"
    r"tokens?|words?|classes|categories|million|billion|thousand|[kmbKMB]|gb|mb|kb|tb|gib|mib|"
    r"bits?|bytes?|times|px|pixels?|channels?|heads?|blocks?|dims?|dimensions?|nodes?|"
    r"workers?|cores?|users?|subjects?|participants?|people|patients?|sentences?|"
    r"documents?|pages?|queries|videos?|frames?|scenes?|months?|years?)(?![A-Za-z])",
    re.I,
)


_MEMO_MAX = 200_000
# A Token's fields up to `counted`: what a cell's text alone decides.
_CellToken = tuple[int, int, str, float, int, bool, str, bool, bool]
_cell_memo: dict[str, tuple[_CellToken, ...]] = {}
_parsed: dict[str, Parsed] = {}


def clear_memo() -> None:
    """Forget remembered tokenizations (benchmarks measure cold runs)."""
    _cell_memo.clear()
    _parsed.clear()


def tokenize_cell(text: str) -> list[Token]:
    """Tokens of a table cell. A cell's tokens depend on its text alone, and the same cell
    text recurs across tables and documents, so the analysis is remembered."""
    got = _cell_memo.get(text)
    if got is None:
        got = tuple((t.start, t.end, t.text, t.value, t.decimals, t.percent, t.role, t.deltaish, t.counted)
                    for t in tokenize(text, in_table=True))
        if len(_cell_memo) < _MEMO_MAX:
            _cell_memo[text] = got
    return [Token(*fields) for fields in got]


def tokenize(line: str, *, heading: bool = False, in_table: bool = False) -> list[Token]:
    """Every number in a normalized line, with its role."""
    out: list[Token] = []
    if not _DIGIT.search(line):
        return out
    for m in NUMBER_RE.finditer(line):
        p = _parsed.get(m.group())
        if p is None:
            p = parse_match(m)
            if len(_parsed) < _MEMO_MAX:
                _parsed[m.group()] = p
        s, e = m.start(), m.end()
        prev, word, op = _before(line, s)
        role = _role(line, m, s, e, prev, word, op, heading, in_table)
        tok = Token(s, e, line[s:e], abs(p.value) if role == VARIANCE else p.value, p.decimals, p.percent, role)
        if role == VALUE:
            nxt = line[e:e + 3].lstrip()[:1]
            wordy = nxt.isalpha() or nxt == "%"
            tok.deltaish = (m.group("sign") == "+" or word in _DELTA_WORDS or (word == "of" and prev in _DELTA_WORDS)
                            or (word == "to" and prev == "up") or (wordy and bool(_DELTA_AFTER.match(line, e))))
            tok.counted = wordy and not p.percent and bool(_COUNTED.match(line, e))
        out.append(tok)
    return out


def _before(line: str, s: int) -> tuple[str, str, str]:
    """(word before last, last word, operator) in front of position s, lower-cased."""
    core = line[max(0, s - 40):s].rstrip()
    op = ""
    if core and core[-1] in "=:<>≤≥~":
        op = core[-1]
        core = core[:-1].rstrip()
    j = len(core)
    while j > 0 and core[j - 1] in _WORD_CHARS:
        j -= 1
    word = core[j:].lower().strip(".")
    rest = core[:j].rstrip()
    k = len(rest)
    while k > 0 and rest[k - 1] in _WORD_CHARS:
        k -= 1
    return rest[k:].lower().strip("."), word, op


def _role(line: str, m: re.Match[str], s: int, e: int, prev: str, word: str, op: str,
          heading: bool, in_table: bool) -> str:
    if _not_a_value(line, m, s, e, word, op, heading, in_table):
        return IGNORE
    b1 = line[s - 1:s] if s else ""
    if m.group("sign") == "-" and b1 == "+":
        return VARIANCE
    tail = line[max(0, s - 4):s].rstrip()
    if tail.endswith(("±", "+/-", "+-")) or word in _PM_WORDS or word.endswith("±"):
        return VARIANCE
    if word == "n" and op in ("=", ":"):
        return N
    if word in ("seed", "seeds") and op in ("=", ":"):
        return SEEDS
    if line[e:e + 2].strip()[:1].isalpha() and _SEEDS_AFTER.match(line, e):
        return SEEDS
    return VALUE


def _not_a_value(line: str, m: re.Match[str], s: int, e: int, word: str, op: str,
                 heading: bool, in_table: bool) -> bool:
    a1 = line[e:e + 1]
    if a1.isalpha() and not _UNIT_SUFFIX.match(line, e):
        return True
    a2 = line[e + 1:e + 2]
    if (a1 == "\\" and a2.isalpha()) or (a1 in "-/:\u2013." and a1 and a2.isdigit()):
        return True
    b1, b2 = (line[s - 1], line[s - 2:s - 1]) if s else ("", "")
    if (b1 in "-/:.\u2013" and b1 and b2.isdigit()) or (b1 in "-/" and b1 and b2.isalpha()):
        return True
    if line[e:e + 3].lstrip()[:1] in ("x", "×") and _MULTIPLIER.match(line, e):
        return True
    body = m.group("body")
    integer = "." not in body and not m.group("exp") and not m.group("pow")
    if integer and ((a1 == "," and a2.isdigit()) or (b1 == "," and b2.isdigit())):
        return True
    if word in _REF_ANY or word in ("#", "§"):
        return True
    if integer and word in _REF_INT:
        return True
    if "[" in line[:s] and _in_citation(line, s, e):
        return True
    if (integer and not in_table and not op and not m.group("sign") and not m.group("pct") and len(body) == 4
            and 1900 <= int(body) <= 2099):
        return True
    if integer and not line[:s].strip() and line[e:e + 2] in (". ", ") ", ".", ")"):
        return True
    return heading and not line[:s].strip(" #")


def _in_citation(line: str, s: int, e: int) -> bool:
    lb = line.rfind("[", 0, s)
    if lb < 0 or "]" in line[lb:s]:
        return False
    rb = line.find("]", e)
    return rb >= 0 and bool(_CITATION.fullmatch(line[lb + 1:rb]))
