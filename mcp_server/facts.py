"""Sources and dates of the knowledge base's facts, and the staleness report built from them.

A fact is marked in its page with `<!-- src: <url>; verified: <YYYY-MM-DD or YYYY-MM> -->`
(`src: unsourced` when no source confirmed it; the date is then the one the source material
gives). A marker at the end of a line covers that line; a marker alone on the first line under
a heading covers the whole section. The format is documented in references://index#sources.
The report lists what to re-check; it never says that a fact is still true."""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mcp_server.knowledge import KINDS, KnowledgePage, KnowledgeSection, docs

MARKER = re.compile(r"<!--\s*src:\s*(?P<src>[^\s;]+)\s*;\s*verified:\s*(?P<date>[^\s>]+)\s*-->")
_ANY_MARKER = re.compile(r"<!--\s*src:.*?-->")
_CODE_SPAN = re.compile(r"`[^`]*`")
_DATE = re.compile(r"^(20\d\d)-(0[1-9]|1[0-2])(?:-(0[1-9]|[12]\d|3[01]))?$")
UNSOURCED = "unsourced"
DEFAULT_MONTHS = 6
# Words that place a reference-page fact on a platform (profiles are placed by their file name).
_PLATFORM_WORDS: tuple[tuple[str, str], ...] = (
    ("autodl", "autodl"), ("runpod", "runpod"), ("vast", "vastai"), ("lambda", "lambda"),
    ("paperspace", "paperspace"), ("gradient", "paperspace"), ("matpool", "china"), ("gpushare", "china"),
    ("featurize", "china"), ("lanrui", "china"), ("矩池", "china"), ("恒源", "china"), ("揽睿", "china"),
    ("slurm", "generic-ssh"), ("kubernetes", "generic-ssh"), ("k8s", "generic-ssh"), ("colab", "generic-ssh"),
    ("kaggle", "generic-ssh"), ("aws", "hyperscalers"), ("ec2", "hyperscalers"), ("gcp", "hyperscalers"),
    ("azure", "hyperscalers"), ("windows", "windows-client"), ("openssh", "windows-client"),
)
_MONEY = re.compile(r"bill|charg|\$|price|cost|releas|terminat|destroy|delet|关机|释放|计费|扣费", re.I)


class MarkerError(ValueError):
    """A marker that does not follow the documented format."""


@dataclass(frozen=True)
class Fact:
    """One marked fact (a line) or a marked section, with where it lives and when it was checked."""

    section_uri: str
    platform: str
    text: str
    source: str | None  # None: unsourced
    verified: str  # as written: YYYY-MM-DD or YYYY-MM
    whole_section: bool
    money: bool  # about billing, prices or what a destructive verb deletes

    @property
    def as_of(self) -> dt.date:
        """The day the check counts from: a month-only date counts from the month's first day."""
        year, month, day = _parts(self.verified)
        return dt.date(year, month, day or 1)



def _parts(date: str) -> tuple[int, int, int | None]:
    m = _DATE.match(date)
    if not m:
        raise MarkerError(f"verified date {date!r} is not YYYY-MM-DD or YYYY-MM")
    return int(m.group(1)), int(m.group(2)), int(m.group(3)) if m.group(3) else None


def strip_markers(text: str) -> str:
    """Text without its fact markers (what search indexes and shows)."""
    return MARKER.sub("", text)


def plain(line: str, limit: int = 160) -> str:
    """A marked line as a short plain sentence for the report."""
    text = re.sub(r"\*\*|`|^\s*(?:[-*+]|\d+\.)\s+|^\|\s*", "", strip_markers(line).strip())
    text = re.sub(r"\s*\|\s*", " | ", text).strip(" |")
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "\u2026"


def platform_of(page: KnowledgePage, text: str, section: KnowledgeSection) -> str:
    if page.kind == "profiles":
        return page.path
    for where in (text, section.heading, page.path):
        low = where.lower()
        for word, name in _PLATFORM_WORDS:
            if word in low:
                return name
    return "general"


def _section_facts(page: KnowledgePage, s: KnowledgeSection) -> list[Fact]:
    out: list[Fact] = []
    lines = s.own_text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    fenced = False
    for i, raw in enumerate(lines):
        fenced = fenced != raw.lstrip().startswith("```")
        line = "" if fenced else _CODE_SPAN.sub("", raw)  # a marker quoted in code is an example
        if len(_ANY_MARKER.findall(line)) != len(MARKER.findall(line)):
            raise MarkerError(f"{s.uri}: a marker is not `<!-- src: <url|unsourced>; verified: <date> -->`: "
                              f"{line[:80]}")
        for m in MARKER.finditer(line):
            _parts(m.group("date"))
            src = m.group("src")
            if src != UNSOURCED and not src.startswith("https://"):
                raise MarkerError(f"{s.uri}: source {src!r} is neither an https URL nor {UNSOURCED!r}")
            whole = i == first and not strip_markers(line).strip()
            text = s.heading if whole else plain(line)
            out.append(Fact(section_uri=s.uri if s.level > 1 else page.uri, platform=platform_of(page, text, s),
                            text=text, source=None if src == UNSOURCED else src, verified=m.group("date"),
                            whole_section=whole, money=bool(_MONEY.search(s.own_text if whole else line))))
    return out


def page_facts(page: KnowledgePage) -> list[Fact]:
    return [f for s in page.sections for f in _section_facts(page, s)]


@functools.cache
def all_facts() -> tuple[Fact, ...]:
    """Every marked fact of every reference and profile page, in page order."""
    return tuple(f for kind in KINDS for d in docs(kind) for f in page_facts(d))


def months_before(today: dt.date, months: int) -> dt.date:
    """The same day `months` earlier (clamped to the month's last day)."""
    year, month = divmod(today.year * 12 + today.month - 1 - months, 12)
    month += 1
    for day in range(today.day, 0, -1):
        try:
            return dt.date(year, month, day)
        except ValueError:
            continue
    raise AssertionError("unreachable: every month has a first day")


def due(facts: Iterable[Fact], today: dt.date, months: int = DEFAULT_MONTHS) -> list[Fact]:
    """Facts to re-check: verified before the cut-off, or never confirmed against a source."""
    cutoff = months_before(today, months)
    return [f for f in facts if f.source is None or f.as_of < cutoff]


def report(facts: Sequence[Fact], today: dt.date, months: int = DEFAULT_MONTHS) -> str:
    """The staleness report as markdown, grouped by platform, money facts first, oldest first."""
    listed = due(facts, today, months)
    cutoff = months_before(today, months)
    head = [f"Generated {today.isoformat()} from the markers in the pages: {len(listed)} of {len(facts)} dated "
            f"facts are due — verified before {cutoff.isoformat()} ({months} months) or never confirmed against "
            "a source. This list says what to re-check; it does not say that any fact, listed or not, is still "
            "true. Re-check a fact against its source (or find one), then update its marker's date."]
    groups: dict[str, list[Fact]] = {}
    for f in listed:
        groups.setdefault(f.platform, []).append(f)
    for platform in sorted(groups):
        rows = sorted(groups[platform], key=lambda f: (not f.money, f.as_of, f.section_uri))
        head.append(f"\n### {platform} ({len(rows)})\n")
        head += [_row(f) for f in rows]
    if not listed:
        head.append("\nNothing is due.")
    return "\n".join(head) + "\n"


def summary(facts: Sequence[Fact], today: dt.date, months: int = DEFAULT_MONTHS) -> str:
    """Counts per platform of the facts due, for pages that only point at the full report."""
    listed = due(facts, today, months)
    counts: dict[str, list[Fact]] = {}
    for f in listed:
        counts.setdefault(f.platform, []).append(f)
    rows = [f"- {p}: {len(fs)} due ({sum(f.money for f in fs)} about money)" for p, fs in sorted(counts.items())]
    return (f"As of {today.isoformat()}, {len(listed)} of {len(facts)} dated facts are due a re-check "
            f"(older than {months} months or unsourced):\n\n" + "\n".join(rows or ["- none"]) + "\n")


def _row(f: Fact) -> str:
    src = f.source or "unsourced"
    scope = "section" if f.whole_section else "line"
    money = " · money" if f.money else ""
    return f"- {f.verified} · {src} · {f.section_uri} ({scope}{money}) — {f.text}"


def section_dates(section_uri: str) -> tuple[str | None, list[str], bool]:
    """(oldest verified date, source URLs, any unsourced) of the facts marked in one section."""
    mine = [f for f in all_facts() if f.section_uri == section_uri]
    if not mine:
        return None, [], False
    oldest = min(mine, key=lambda f: f.as_of).verified
    sources = list(dict.fromkeys(f.source for f in mine if f.source))
    return oldest, sources, any(f.source is None for f in mine)
