"""Sources and dates: every fact marker follows the documented format, every platform fact is
covered by one, and the staleness report lists what is due by platform without ever calling a
fact true."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from mcp_server import facts
from mcp_server import knowledge as k
from mcp_server.__main__ import main
from mcp_server.facts import MARKER, Fact, strip_markers

# A reference line that states something about a platform or a price (URIs do not count).
PLATFORM_LINE = re.compile(r"(?i:autodl|runpod|vast\.ai|vastai|paperspace|matpool|gpushare|featurize|lanrui|"
                           r"矩池|恒源|揽睿|\baws\b|\bec2\b|\bgcp\b|azure|colab|kaggle)|\bLambda\b|\$\d")
URI = re.compile(r"(?:references|profiles)://\S+")
TODAY = dt.date(2026, 12, 3)


def platform_profiles() -> list[k.KnowledgePage]:
    return [d for d in k.docs("profiles") if not d.path.startswith("_")]


def uncovered(page: k.KnowledgePage, needs_marker: re.Pattern[str] | None) -> list[str]:
    """Content lines with no marker of their own and no whole-section marker above them."""
    out = []
    for s in page.sections:
        lines = s.own_text.splitlines()
        first = next((line for line in lines if line.strip()), "")
        if MARKER.search(first) and not strip_markers(first).strip():
            continue
        fenced = False
        for line in lines:
            if line.strip().startswith("```"):
                fenced = not fenced
                continue
            if fenced or not line.strip() or re.fullmatch(r"\|[-| :]+\|", line.strip()) or MARKER.search(line):
                continue
            if needs_marker is None or needs_marker.search(URI.sub("", line)):
                out.append(f"{s.uri}: {line[:80]}")
    return out


def test_every_marker_follows_the_format_and_no_date_is_in_the_future() -> None:
    found = facts.all_facts()
    assert len(found) > 200
    for f in found:
        assert f.source is None or f.source.startswith("https://"), f
        assert f.as_of <= dt.date.today(), f
    assert sum(f.source is not None for f in found) >= 20, "checked facts carry their source URL"


@pytest.mark.parametrize("page", platform_profiles(), ids=lambda d: d.uri)
def test_every_line_of_a_platform_profile_carries_a_source_and_date(page: k.KnowledgePage) -> None:
    assert uncovered(page, None) == []


@pytest.mark.parametrize("page", [d for d in k.docs("references") if d.path != "index"], ids=lambda d: d.uri)
def test_every_platform_fact_in_a_reference_page_carries_a_source_and_date(page: k.KnowledgePage) -> None:
    assert uncovered(page, PLATFORM_LINE) == []


@pytest.mark.parametrize("text", [
    "<!-- src: http://example.com/x; verified: 2026-12-03 -->",
    "<!-- src: unsourced; verified: 2026-13 -->",
    "<!-- src: unsourced; verified: June 2026 -->",
])
def test_a_malformed_marker_is_refused(text: str) -> None:
    page = k.KnowledgePage(kind="references", path="x/y", text=f"# T\n\nintro\n\n## S\n\n- fact {text}\n")
    with pytest.raises(facts.MarkerError):
        facts.page_facts(page)


def test_a_marker_covers_its_line_or_under_a_heading_its_section() -> None:
    body = ("# T\n\nintro\n\n## Billing on RunPod {#b}\n\n<!-- src: unsourced; verified: 2026-06 -->\n\n"
            "- stop bills the disk $0.20\n\n## Network {#n}\n\n- proxy times out at 100 s "
            "<!-- src: https://docs.runpod.io/x; verified: 2026-12-03 -->\n- not marked\n")
    whole, line = facts.page_facts(k.KnowledgePage(kind="references", path="x/y", text=body))
    assert (whole.section_uri, whole.whole_section, whole.source, whole.platform) == (
        "references://x/y#b", True, None, "runpod")
    assert whole.money and whole.text == "Billing on RunPod"
    assert (line.section_uri, line.whole_section, line.source) == ("references://x/y#n", False,
                                                                   "https://docs.runpod.io/x")
    assert line.text == "proxy times out at 100 s" and line.as_of == dt.date(2026, 12, 3)


def fact(verified: str, source: str | None = "https://x.org/a", platform: str = "runpod", text: str = "t") -> Fact:
    return Fact(section_uri="profiles://runpod#x", platform=platform, text=text, source=source, verified=verified,
                whole_section=False, money="bill" in text)


@pytest.mark.parametrize(("today", "months", "cutoff"), [
    (dt.date(2026, 12, 3), 6, dt.date(2026, 6, 3)),
    (dt.date(2026, 8, 31), 6, dt.date(2026, 2, 28)),
    (dt.date(2026, 3, 15), 3, dt.date(2025, 12, 15)),
    (dt.date(2026, 3, 15), 0, dt.date(2026, 3, 15)),
])
def test_the_cutoff_is_the_same_day_n_months_earlier(today: dt.date, months: int, cutoff: dt.date) -> None:
    assert facts.months_before(today, months) == cutoff


def test_due_lists_old_facts_and_every_unsourced_one_and_nothing_else() -> None:
    old, fresh, month_only, unsourced = (fact("2026-05-30"), fact("2026-11-01"), fact("2026-06"),
                                         fact("2026-12-01", source=None))
    assert facts.due([old, fresh, month_only, unsourced], TODAY, 6) == [old, month_only, unsourced]
    assert facts.due([fresh], TODAY, 1) == [fresh] and facts.due([fresh], TODAY, 2) == []


def test_the_report_groups_by_platform_puts_money_first_and_never_claims_truth() -> None:
    rows = [fact("2026-01-02", platform="vastai"), fact("2026-02-01", text="stop bills the disk"),
            fact("2025-12-01"), fact("2026-12-01")]
    text = facts.report(rows, TODAY, 6)
    assert "does not say that any fact" in text and "3 of 4" in text
    runpod = text.split("### runpod (2)")[1]
    assert runpod.index("stop bills the disk") < runpod.index("2025-12-01")
    assert "### vastai (1)" in text and "still true" not in text.replace("is still true", "")
    assert facts.report([fact("2026-12-01")], TODAY).rstrip().endswith("Nothing is due.")


def test_the_real_report_covers_the_profiles_and_lists_unsourced_money_facts() -> None:
    found = facts.all_facts()
    text = facts.report(found, TODAY)
    for platform in ("autodl", "runpod", "vastai", "lambda", "paperspace", "china", "generic-ssh"):
        assert f"### {platform} (" in text
    unsourced_money = {f.section_uri for f in found if f.money and f.source is None}
    assert all(uri in text for uri in unsourced_money), "every money fact no source confirmed is listed"


def test_a_section_exposes_its_oldest_date_its_sources_and_whether_anything_is_unsourced() -> None:
    verified, sources, unsourced = facts.section_dates("references://run-local/multi-gpu#mg3")
    assert verified == "2026-12-03" and not unsourced
    assert sources == ["https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html"]
    assert facts.section_dates("references://verifying/methodology#mde") == (None, [], False)


def test_the_stale_command_prints_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stale", "--months", "0"]) == 0
    out = capsys.readouterr().out
    assert "### runpod (" in out and "0 months" in out and "does not say" in out


def test_the_stale_command_refuses_a_negative_threshold(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stale", "--months", "-1"]) == 2
    assert "--months" in capsys.readouterr().err


def test_every_section_the_report_names_resolves() -> None:
    text = facts.report(facts.all_facts(), TODAY, 0)
    named = set(re.findall(r" · ((?:references|profiles)://\S+) \(", text))
    assert len(named) > 100
    for uri in named:
        k.resolve(uri)


def test_markers_never_leak_into_page_descriptions_or_search_excerpts() -> None:
    from mcp_server.search import default_index

    assert not [d.uri for kind in k.KINDS for d in k.docs(kind) if "<!--" in d.description]
    for p in default_index().search("runpod volume disk stopped price", limit=10):
        assert all("<!--" not in h.excerpt and "verified:" not in h.excerpt for h in p.sections)
