"""Printed numbers: the token grammar, what a token's printed precision is, and the
comparison rules (exact, rounded at printed precision, scaled by 100).

Precision is counted the way a reader reads it: `31.40` has two decimals, `3.2e-4` has five
(one mantissa decimal, exponent -4), `1,000` has none."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# Signs only where a sign can stand (not after a word character or a dot: `PSNR-31.42`
# reads 31.42, `2026-07` reads no negative month). Digits are ASCII only.
NUMBER_RE = re.compile(
    r"(?<![\w.])(?P<sign>[+\-]?)"
    r"(?P<body>(?:[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])|[0-9]+)(?:\.[0-9]+)?|\.[0-9]+)"
    r"(?:(?P<exp>[eE][+\-]?[0-9]+)(?![0-9A-Za-z])"
    r"|\s*(?:×|\*|\\cdot)\s*10\s*\^\s*\{?\s*(?P<pow>[+\-]?[0-9]+)\s*\}?)?"
    r"(?P<pct>\s?%)?"
)

_REL_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Parsed:
    """A printed number: its value (a percent sign is kept apart, not applied)."""

    value: float
    decimals: int
    percent: bool


def parse_match(m: re.Match[str]) -> Parsed:
    """Value, printed precision and percent flag of one NUMBER_RE match."""
    body = m.group("body").replace(",", "")
    whole, _, frac = body.partition(".")
    exponent = 0
    if m.group("exp"):
        exponent = int(m.group("exp")[1:])
    elif m.group("pow"):
        exponent = int(m.group("pow"))
    value = float(body) * (10.0 ** exponent) if exponent else float(body)
    if m.group("sign") == "-":
        value = -value
    return Parsed(value, len(frac) - exponent, bool(m.group("pct")))


def parse_text(text: str) -> Parsed | None:
    """The number a whole string holds (`"31.42"`, `"76.1%"`), or None."""
    m = NUMBER_RE.fullmatch(text.strip().replace("\u2212", "-"))
    return parse_match(m) if m else None


def decimals_of(value: float | int) -> int:
    """Printed precision of a JSON number as Python writes it back (repr)."""
    if isinstance(value, int):
        return 0
    m = NUMBER_RE.fullmatch(repr(value))
    return parse_match(m).decimals if m else 0


def fmt(value: float | int) -> str:
    """The shortest text that reads back as exactly this value."""
    return str(value) if isinstance(value, int) else repr(value)


def same(printed: float, value: float) -> bool:
    """Equal up to float noise (relative 1e-9; no absolute floor, so 3e-12 != 5e-12)."""
    if printed == value:
        return True
    return abs(printed - value) <= _REL_EPS * max(abs(printed), abs(value))


def rounds_to(printed: float, decimals: int, value: float) -> bool:
    """Does `value`, rounded at the printed precision, give the printed number?

    Integers (no decimals) never round-match: `31` is not a rounding of 31.42, and bare
    integers are too often counts. The half-way case is inclusive, so both half-up and
    half-even rounding pass (31.45 prints as 31.4 or 31.5)."""
    if decimals < 1:
        return False
    half = 0.5 * 10.0 ** (-decimals)
    slack = _REL_EPS * max(abs(printed), abs(value), half)
    return abs(printed - value) <= half + slack


def strict_equal(printed: float, value: float) -> bool:
    """The original reconciler's test: math.isclose with rel_tol 1e-9, abs_tol 0."""
    return math.isclose(printed, value, rel_tol=1e-9, abs_tol=0.0)
