"""Generated LaTeX macros: `\\newcommand{\\X}{31.42}` definitions found in any LaTeX
document, and the places where `\\X` is used. A use is a printed number whose value is
the definition's, and it is `generated` (not typed by hand)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mcp_server.deliver.documents.text import Document, LineLocator, blank
from mcp_server.deliver.documents.tokens import VALUE, Token, tokenize

_DEF = re.compile(
    r"\\(?:(?:re)?newcommand|providecommand|DeclareRobustCommand)\*?\s*"
    r"(?:\{\s*\\(?P<a>[A-Za-z@]+)\s*\}|\\(?P<b>[A-Za-z@]+))\s*(?:\[[0-9]\]\s*)?\{"
    r"|\\(?:g|e|x)?def\s*\\(?P<c>[A-Za-z@]+)\s*\{"
)
_USE = re.compile(r"\\([A-Za-z@]+)(?![A-Za-z@])")


@dataclass
class MacroDef:
    name: str
    doc: str
    line: int
    tokens: list[Token]  # tokens of the body; positions are columns in `line`
    body: str


def definitions(doc: Document) -> list[MacroDef]:
    """Macro definitions of a LaTeX document; their text is blanked out of the prose."""
    if doc.kind != "tex":
        return []
    text = "\n".join(doc.norm)
    locate = LineLocator(doc.norm)
    found: list[MacroDef] = []
    spans: list[tuple[int, int]] = []
    for m in _DEF.finditer(text):
        name = m.group("a") or m.group("b") or m.group("c")
        end = _close(text, m.end())
        if end < 0:
            continue
        body = text[m.end():end]
        line, col = locate(m.end())
        toks = tokenize(body.replace("\n", " "), in_table=True)  # one value: a 4-digit integer is no year
        for t in toks:
            t.line, t.start = locate(m.end() + t.start)
            t.end = t.start + len(t.text)
        found.append(MacroDef(name, doc.path, line, toks, body.strip()))
        spans.append((m.start(), end + 1))
    if spans:
        _blank_spans(doc, text, spans)
    return found


def _close(text: str, pos: int) -> int:
    """Index of the brace closing the group opened just before `pos`, or -1."""
    depth = 1
    for i in range(pos, min(len(text), pos + 2000)):
        c = text[i]
        if c == "{" and text[i - 1] != "\\":
            depth += 1
        elif c == "}" and text[i - 1] != "\\":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _blank_spans(doc: Document, text: str, spans: list[tuple[int, int]]) -> None:
    chars = list(text)
    for s, e in spans:
        chars[s:e] = blank(text[s:e])
    doc.norm = "".join(chars).split("\n")


def uses(line: str, table: dict[str, MacroDef]) -> list[Token]:
    """Tokens for the macro uses in one normalized line (value from the definition)."""
    out: list[Token] = []
    if "\\" not in line:
        return out
    for m in _USE.finditer(line):
        d = table.get(m.group(1))
        if d is None:
            continue
        values = [t for t in d.tokens if t.role == VALUE]
        head = values[0] if values else (d.tokens[0] if d.tokens else None)
        if head is None:
            continue
        for t in d.tokens:
            if t is not head and t.role == VALUE:
                continue
            out.append(Token(m.start(), m.end(), m.group(0), t.value, t.decimals, t.percent, t.role, macro=d.name))
    return out
