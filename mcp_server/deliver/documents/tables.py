"""Tables in documents: Markdown pipe tables, CSV files and LaTeX `&`-separated rows.

A number in a table cell speaks of the metric named in its column header or in its row's
label cells (either orientation), so each cell carries that text with it. Lines that belong
to a table are kept out of the prose pass."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from mcp_server.deliver.documents.text import Document, LineLocator
from mcp_server.deliver.documents.tokens import VALUE, Token, tokenize_cell

_MD_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*)$")
_TEX_ENV = re.compile(r"\\begin\{(tabular\*?|tabularx|tabulary|longtable|tabu|array)\}")
_TEX_RULES = re.compile(
    r"\\(?:hline|toprule|midrule|bottomrule|cmidrule(?:\([lr]*\))?|cline|specialrule|addlinespace|"
    r"endhead|endfirsthead|endfoot|endlastfoot|noalign|centering|small|footnotesize|scriptsize)(?![A-Za-z])"
    r"|\\(?:cmidrule|cline)(?:\([lr]*\))?\{[^{}\n]*\}"
)
_TEX_MULTI = re.compile(r"\\multi(?:column|row)\{([0-9]+)\}\{[^{}\n]*\}")
_TEX_CAPTION = re.compile(r"\\caption(?:\[[^\]]*\])?\{((?:[^{}]|\{[^{}]*\})*)\}", re.S)
_ROLE_HEADERS = {
    "n": "n", "#n": "n", "count": "n", "num": "n", "n_samples": "n", "samples": "n",
    "std": "variance", "sd": "variance", "stdev": "variance", "±": "variance", "sem": "variance",
    "se": "variance", "ci": "variance", "ci95": "variance", "std.": "variance", "variance": "variance",
    "seeds": "seeds", "#seeds": "seeds", "runs": "seeds", "n_seeds": "seeds",
}


@dataclass
class Cell:
    """The numbers of one table cell and the text that names what they measure."""

    line: int
    tokens: list[Token]
    header: str
    labels: str
    scope: str
    percent: bool
    role_hint: str | None
    row_key: tuple[int, int]


Extra = Callable[[str], list[Token]]


@dataclass
class Tables:
    """The cells of a document's tables, and the lines and spans they occupy."""

    cells: list[Cell] = field(default_factory=list)
    lines: set[int] = field(default_factory=set)
    spans: list[tuple[int, int]] = field(default_factory=list)  # (first, last) line of each table
    extra: Extra | None = None


@dataclass
class _Raw:
    text: str
    offset: int  # absolute offset in the joined document


def find_tables(doc: Document, extra: Extra | None = None) -> Tables:
    """Every table of a document, as cells with their header and label text. `extra`
    adds tokens a cell's text stands for (uses of generated macros)."""
    out = Tables(extra=extra)
    if doc.kind == "csv":
        _csv(doc, out)
    elif doc.kind == "tex":
        _latex(doc, out)
    else:
        _markdown(doc, out)
    return out


def _cell_tokens(out: Tables, text: str) -> list[Token]:
    flat = text.replace("\n", " ")
    if "\\multi" in flat:
        flat = _TEX_MULTI.sub(lambda m: " " * len(m.group()), flat)
    toks = tokenize_cell(flat)
    if out.extra is not None and "\\" in flat:
        toks = sorted(toks + out.extra(flat), key=lambda t: t.start)
    return toks


def _split(text: str, sep: str, offset: int, quotes: bool = False) -> list[_Raw]:
    """Split on `sep` not escaped by a backslash (nor inside double quotes, for CSV)."""
    if "\\" not in text and '"' not in text:
        out, pos = [], offset
        for part in text.split(sep):
            out.append(_Raw(part, pos))
            pos += len(part) + 1
        return out
    cells, start, inq, i = [], 0, False, 0
    while i < len(text):
        c = text[i]
        if c == "\\" and not quotes:
            i += 2
            continue
        if quotes and c == '"':
            inq = not inq
        elif c == sep and not inq:
            cells.append(_Raw(text[start:i], offset + start))
            start = i + 1
        i += 1
    cells.append(_Raw(text[start:], offset + start))
    return cells


LineMap = Callable[[int], tuple[int, int]]


def _emit(out: Tables, key: int, rows: list[tuple[int, list[_Raw]]], header_rows: int,
          scope: str, locate: LineMap) -> None:
    """Turn split rows into cells: the first `header_rows` rows give the column headers."""
    headers: dict[int, str] = {}
    for _, raw in rows[:header_rows]:
        for col, cell in _columns(raw):
            headers[col] = (headers.get(col, "") + " " + _plain(cell.text)).strip()
    for r, (_, raw) in enumerate(rows[header_rows:], start=header_rows):
        cols = _columns(raw)
        toks_of = {col: _cell_tokens(out, cell.text) for col, cell in cols}
        numeric = [col for col, _ in cols if any(t.role == VALUE for t in toks_of[col])]
        labels = " | ".join(_plain(c.text) for col, c in cols if col not in numeric and c.text.strip())
        texts = dict(cols)
        for col in numeric:
            cell, toks = texts[col], toks_of[col]
            for t in toks:
                t.line, t.start = locate(cell.offset + t.start)
                t.end = t.start + len(t.text)
            header = headers.get(col, "")
            role = _ROLE_HEADERS.get(header.strip().lower())
            out.cells.append(Cell(toks[0].line, toks, header, labels, scope, "%" in header, role, (key, r)))


@functools.lru_cache(maxsize=65536)
def _plain(text: str) -> str:
    """Cell text without LaTeX span wrappers and braces, whitespace collapsed."""
    if "\\multi" in text:
        text = _TEX_MULTI.sub(" ", text)
    return " ".join(text.replace("{", " ").replace("}", " ").split())


def _columns(raw: list[_Raw]) -> list[tuple[int, _Raw]]:
    """Cells with their column index, honouring LaTeX \\multicolumn spans."""
    out, col = [], 0
    for cell in raw:
        m = _TEX_MULTI.search(cell.text) if "\\multi" in cell.text else None
        out.append((col, cell))
        col += int(m.group(1)) if m and "multicolumn" in m.group(0) else 1
    return out


def _has_value(out: Tables, text: str) -> bool:
    return any(t.role == VALUE for t in _cell_tokens(out, text))


def _markdown(doc: Document, out: Tables) -> None:
    norm, locate, i = doc.norm, LineLocator(doc.norm), 1
    heading = ""
    while i < len(norm):
        hm = _MD_HEADING.match(norm[i - 1])
        if hm:
            heading = hm.group(1)
        if "|" in norm[i - 1] and _MD_SEP.match(norm[i]) and "-" in norm[i]:
            start, end = i - 1, i + 1
            while end < len(norm) and "|" in norm[end] and norm[end].strip():
                end += 1
            rows = [(j, _md_row(norm[j], locate.starts[j])) for j in range(start, end) if j != i]
            before = " ".join(norm[k] for k in range(max(0, start - 2), start) if "|" not in norm[k])
            _emit(out, start, rows, 1, heading + " " + before, locate)
            out.lines.update(range(start, end))
            out.spans.append((start, end - 1))
            i = end + 1
            continue
        i += 1


def _md_row(line: str, offset: int) -> list[_Raw]:
    cells = _split(line, "|", offset)
    if cells and not cells[0].text.strip():
        cells = cells[1:]
    if cells and not cells[-1].text.strip():
        cells = cells[:-1]
    return cells


def _csv(doc: Document, out: Tables) -> None:
    norm, locate = doc.norm, LineLocator(doc.norm)
    first = next((ln for ln in norm if ln.strip()), "")
    sep = max((",", ";", "\t"), key=first.count)
    rows = [(j, _split(line, sep, locate.starts[j], quotes=True)) for j, line in enumerate(norm) if line.strip()]
    if not rows:
        return
    _emit(out, 0, rows, 1, doc.path.rsplit("/", 1)[-1], locate)
    out.lines.update(j for j, _ in rows)
    out.spans.append((rows[0][0], rows[-1][0]))


def _latex(doc: Document, out: Tables) -> None:
    text = "\n".join(doc.norm)
    locate = LineLocator(doc.norm)
    for m in _TEX_ENV.finditer(text):
        env = m.group(1)
        body_start = _skip_args(text, m.end(), 2 if env in ("tabular*", "tabularx", "tabulary") else 1)
        end = text.find("\\end{" + env + "}", body_start)
        if end < 0:
            continue
        _tex_table(out, text, body_start, end, _caption_around(text, m.start(), end), locate)
    _loose_rows(doc, out, text, locate)


def _tex_table(out: Tables, text: str, start: int, end: int, scope: str, locate: LineLocator) -> None:
    body = _TEX_RULES.sub(lambda r: " " * len(r.group()), text[start:end])
    rows: list[tuple[int, list[_Raw]]] = []
    pos = 0
    for part in re.split(r"(\\\\(?:\[[^\]]*\])?|\\tabularnewline)", body):
        if part.startswith("\\\\") or part == "\\tabularnewline":
            pos += len(part)
            continue
        if part.strip():
            rows.append((0, _split(part, "&", start + pos)))
        pos += len(part)
    rows = [r for r in rows if any(c.text.strip() for c in r[1])]
    if not rows:
        return
    header_rows = 0
    while header_rows < len(rows) - 1 and not any(_has_value(out, c.text) for c in rows[header_rows][1]):
        header_rows += 1
    first, last = locate(start)[0], locate(end)[0]
    _emit(out, first, rows, header_rows, scope, locate)
    out.lines.update(range(first, last + 1))
    out.spans.append((first, last))


def _skip_args(text: str, pos: int, count: int) -> int:
    """Position after `count` balanced {...} groups (and an optional [pos] argument)."""
    m = re.compile(r"\s*\[[^\]]*\]").match(text, pos)
    if m:
        pos = m.end()
    for _ in range(count):
        while pos < len(text) and text[pos] in " \n":
            pos += 1
        if pos >= len(text) or text[pos] != "{":
            return pos
        depth = 0
        while pos < len(text):
            depth += {"{": 1, "}": -1}.get(text[pos], 0)
            pos += 1
            if depth == 0:
                break
    return pos


def _caption_around(text: str, start: int, end: int) -> str:
    """The caption of the table/figure environment around a tabular, if any."""
    env_start = max(text.rfind("\\begin{table", 0, start), text.rfind("\\begin{figure", 0, start))
    if env_start < 0:
        return ""
    env_end = min(x for x in (text.find("\\end{table", end), text.find("\\end{figure", end), len(text)) if x >= 0)
    m = _TEX_CAPTION.search(text, env_start, env_end)
    return m.group(1) if m else ""


def _loose_rows(doc: Document, out: Tables, text: str, locate: LineLocator) -> None:
    """`a & b & c \\\\` lines outside any tabular (a table body kept in its own file)."""
    inside = set(out.lines)
    j, norm = 0, doc.norm
    while j < len(norm):
        if j in inside or not _is_amp_row(norm[j]):
            j += 1
            continue
        k = j
        while k < len(norm) and k not in inside and _is_amp_row(norm[k]):
            k += 1
        _tex_table(out, text, locate.starts[j], locate.starts[k - 1] + len(norm[k - 1]), "", locate)
        j = k


def _is_amp_row(line: str) -> bool:
    return bool(re.search(r"(?<!\\)&", line)) and line.rstrip().endswith("\\\\")
