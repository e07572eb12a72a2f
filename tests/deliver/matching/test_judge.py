"""Judging one printed number against an evidence value: match, rounded, scaled by 100,
unit problem or stale, in precision and strict mode. A parametrized table."""

from __future__ import annotations

import pytest

from mcp_server.deliver.documents.numbers import parse_text
from mcp_server.deliver.matching.judge import judge_value


@pytest.mark.parametrize(("text", "value", "unit", "strict", "category"), [
    ("31.42", 31.42, None, False, "match"),
    ("31.420", 31.42, None, False, "match"),
    ("3.142e1", 31.42, None, False, "match"),
    ("31.4", 31.42, None, False, "rounded_match"),
    ("31.4", 31.42, None, True, "stale"),
    ("31.5", 31.42, None, False, "stale"),
    ("76.12%", 0.7612, None, False, "scaled_match"),
    ("76.12%", 0.7612, "fraction", False, "match"),
    ("76.1%", 0.7612, "fraction", False, "rounded_match"),
    ("76.12%", 0.7612, None, True, "stale"),
    ("76.12", 0.7612, None, False, "unit_problem"),
    ("76.12", 0.7612, "fraction", False, "scaled_match"),
    ("0.7612", 76.12, None, False, "unit_problem"),
    ("0.7612", 76.12, "percent", False, "scaled_match"),
    ("76.12%", 0.7612, "raw", False, "stale"),
    ("31.42%", 31.42, None, False, "match"),
    ("3e-12", 5e-12, None, False, "stale"),
])
def test_the_judgement_table(text: str, value: float, unit: str | None, strict: bool, category: str) -> None:
    p = parse_text(text)
    assert p is not None
    assert judge_value(p.value, p.decimals, p.percent, value, unit, strict).category == category
