"""Printed numbers: grammar, printed precision, rounding, and which tokens are reported
values at all. Pure functions, parametrized tables."""

from __future__ import annotations

import pytest

from mcp_server.deliver.documents.numbers import decimals_of, fmt, parse_text, rounds_to
from mcp_server.deliver.documents.tokens import tokenize


@pytest.mark.parametrize(("text", "value", "decimals", "percent"), [
    ("31.42", 31.42, 2, False), ("31.420", 31.42, 3, False), ("-0.61", -0.61, 2, False), ("+1.5", 1.5, 1, False),
    (".5", 0.5, 1, False), ("3.2e-4", 3.2e-4, 5, False), ("3.2E-04", 3.2e-4, 5, False), ("76.12%", 76.12, 2, True),
    ("76.12 %", 76.12, 2, True), ("1,000", 1000.0, 0, False), ("3.2×10^{-4}", 3.2e-4, 5, False),
    ("1e3", 1000.0, -3, False),
    ("\u22120.61", -0.61, 2, False),
])
def test_a_printed_number_reads_with_its_precision(text: str, value: float, decimals: int, percent: bool) -> None:
    p = parse_text(text)
    assert p is not None and p.value == pytest.approx(value) and (p.decimals, p.percent) == (decimals, percent)


@pytest.mark.parametrize(("value", "decimals"), [(31.42, 2), (100, 0), (3.2e-4, 5), (1e-10, 10), (0.5, 1), (2.0, 1)])
def test_a_json_number_keeps_its_written_precision(value: float, decimals: int) -> None:
    assert decimals_of(value) == decimals
    assert parse_text(fmt(value)).value == value  # type: ignore[union-attr]


@pytest.mark.parametrize(("printed", "decimals", "value", "ok"), [
    (31.4, 1, 31.42, True), (31.5, 1, 31.42, False), (31.423, 3, 31.42, False), (31.0, 0, 31.42, False),
    (31.4, 1, 31.45, True), (31.5, 1, 31.45, True), (31.5, 1, 31.46, True), (31.4, 1, 31.46, False),
])
def test_rounding_is_judged_at_the_printed_precision(printed: float, decimals: int, value: float, ok: bool) -> None:
    assert rounds_to(printed, decimals, value) is ok


def roles(line: str) -> list[tuple[str, str]]:
    return [(t.text, t.role) for t in tokenize(line)]


@pytest.mark.parametrize(("line", "expected"), [
    ("Set5 x4 v2 C1 H264 ResNet-50 GPT-4", [("50", "ignore"), ("4", "ignore")]),
    ("see [12] and [3, 5-7]", [("12", "ignore"), ("3", "ignore"), ("5", "ignore"), ("7", "ignore")]),
    ("Sec. 4.2, Table 2, Fig.~3, Eq 5, §6, #7", [("4.2", "ignore"), ("2", "ignore"), ("3", "ignore"), ("5", "ignore"),
                                                 ("6", "ignore"), ("7", "ignore")]),
    ("(2026) in 1999", [("2026", "ignore"), ("1999", "ignore")]),
    ("v1.2.3 and 1.2.3", [("1.2", "ignore")]),
    ("2026-07-10 at 12:30", [("2026", "ignore"), ("07", "ignore"), ("10", "ignore"), ("12", "ignore"),
                             ("30", "ignore")]),
    ("p < 0.05", [("0.05", "ignore")]),
    ("31.42 ± 0.08 (n=100, 3 seeds)", [("31.42", "value"), ("0.08", "variance"), ("100", "n"), ("3", "seeds")]),
    ("31.42+-0.08 and 31.42 +/- 0.08", [("31.42", "value"), ("-0.08", "variance"), ("31.42", "value"),
                                        ("0.08", "variance")]),
    ("std=0.3 seeds=5", [("0.3", "variance"), ("5", "seeds")]),
    ("(n=2000, in 2026)", [("2000", "n"), ("2026", "ignore")]),
    ("31.42dB 12.3M 4x", [("31.42", "value"), ("12.3", "ignore"), ("4", "ignore")]),
])
def test_only_reported_values_are_values(line: str, expected: list[tuple[str, str]]) -> None:
    assert roles(line) == expected


def test_a_list_marker_and_a_heading_number_are_not_values() -> None:
    assert roles("1. first item 31.42") == [("1", "ignore"), ("31.42", "value")]
    heading = tokenize("## 4.2 Results 31.4", heading=True)
    assert [(t.text, t.role) for t in heading] == [("4.2", "ignore"), ("31.4", "value")]


def test_a_delta_and_a_count_are_marked_so_a_keyword_does_not_claim_them() -> None:
    toks = {t.text: t for t in tokenize("gains of 1.2 dB, +0.3, 0.4 higher, 300 epochs, 100 images, 31.42")}
    assert toks["1.2"].deltaish and toks["+0.3"].deltaish and toks["0.4"].deltaish
    assert toks["300"].counted and toks["100"].counted
    assert not toks["31.42"].deltaish and not toks["31.42"].counted
