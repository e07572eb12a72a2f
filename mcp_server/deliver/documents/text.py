"""Document text: decoding, the format, and length-preserving normalization.

Every rewrite here keeps each line's length, so a column found in the normalized text is
the column in the file: LaTeX `\\pm` becomes `±` plus spaces, comments and code become
spaces, the Unicode minus becomes `-`."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["md", "tex", "txt", "csv"]
KINDS: dict[str, Kind] = {
    ".md": "md", ".markdown": "md", ".tex": "tex", ".ltx": "tex", ".txt": "txt", ".text": "txt",
    ".csv": "csv", ".tsv": "csv", ".rst": "txt",
}
DOC_SUFFIXES = (".md", ".markdown", ".tex", ".txt", ".csv", ".tsv")

_CHARS = str.maketrans({
    "\u2212": "-", "\ufe63": "-", "\uff0d": "-",
    "\u00a0": " ", "\u2007": " ", "\u2009": " ", "\u200a": " ", "\u202f": " ", "\t": " ",
})
_GENERATED = re.compile(r"@generated|auto-?generated", re.I)

# LaTeX: commands whose arguments are labels, keys, paths or lengths, never reported values.
_TEX_ARG_CMDS = (
    "cite", "citep", "citet", "citeauthor", "citeyear", "ref", "eqref", "cref", "Cref", "autoref",
    "pageref", "label", "url", "href", "includegraphics", "input", "include", "bibliography",
    "bibliographystyle", "usepackage", "documentclass", "hspace", "vspace", "setlength",
    "addtolength", "resizebox", "scalebox", "setcounter", "addtocounter", "cline", "cmidrule",
    "arraystretch", "linespread", "fontsize", "rule", "hyperref", "cellcolor", "rowcolor",
    "definecolor", "color", "textcolor", "renewcommand\\arraystretch",
)
_TEX_ARGS = re.compile(
    r"\\(?:" + "|".join(re.escape(c) for c in _TEX_ARG_CMDS) + r")\*?(?![A-Za-z])"
    r"(?:\s*\[[^\]\n]*\])*(?:\s*\{[^{}\n]*\})+"
)
_TEX_COMMENT = re.compile(r"(?<!\\)%[^\n]*")
_TEX_SWAPS = (
    (re.compile(r"\\%"), " %"),
    (re.compile(r"\\pm(?![A-Za-z])"), "±  "),
    (re.compile(r"\\mp(?![A-Za-z])"), "±  "),
    (re.compile(r"\\times(?![A-Za-z])"), "×     "),
    (re.compile(r"\\[,;:! ]"), "  "),
    (re.compile(r"\\text(?:minus|endash)(?![A-Za-z])"), "-" + " " * 10),
    (re.compile(r"[~$]"), " "),
)
_MD_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_MD_CODE = re.compile(r"`[^`\n]+`")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_URL = re.compile(r"https?://\S+|\]\([^)\n]*\)|\bdoi:\S+|\barXiv:\S+", re.I)


def blank(text: str) -> str:
    """The same text with everything but newlines turned into spaces."""
    return re.sub(r"[^\n]", " ", text)


def _blank_match(m: re.Match[str]) -> str:
    return blank(m.group())


def decode(data: bytes) -> str:
    """UTF-8 (BOM dropped, bad bytes replaced one for one) with CR line ends removed."""
    text = data.decode("utf-8-sig", errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def kind_of(path: str) -> Kind:
    """Document format from the file name; unknown suffixes read as plain text."""
    dot = path.rfind(".")
    return KINDS.get(path[dot:].lower(), "txt") if dot > path.rfind("/") else "txt"


def normalize(text: str, kind: Kind) -> str:
    """Length-preserving rewrite that makes numbers and keywords plain."""
    text = text.translate(_CHARS)
    if kind == "tex":
        text = _TEX_COMMENT.sub(_blank_match, text)
        text = _TEX_ARGS.sub(_blank_match, text)
        for pattern, repl in _TEX_SWAPS:
            text = pattern.sub(repl, text)
    elif kind in ("md", "txt"):
        text = _HTML_COMMENT.sub(_blank_match, text)
        text = _MD_FENCE.sub(_blank_match, text)
        text = _MD_CODE.sub(_blank_match, text)
        text = _URL.sub(_blank_match, text)
    return text


class LineLocator:
    """(line, column) of an offset into the lines joined with newlines."""

    def __init__(self, lines: list[str]) -> None:
        self.starts = [0]
        for line in lines:
            self.starts.append(self.starts[-1] + len(line) + 1)

    def __call__(self, offset: int) -> tuple[int, int]:
        i = bisect.bisect_right(self.starts, offset) - 1
        return i, offset - self.starts[i]


@dataclass
class Document:
    """One document as read: original lines (for context) and normalized lines (for parsing)."""

    path: str
    kind: Kind
    lines: list[str]
    norm: list[str]
    generated: bool
    result_lines: list[bool] = field(default_factory=list)

    @classmethod
    def from_bytes(cls, path: str, data: bytes) -> Document:
        text = decode(data)
        kind = kind_of(path)
        lines = text.split("\n")
        norm = normalize(text, kind).split("\n")
        generated = any(_GENERATED.search(line) for line in lines[:5])
        doc = cls(path, kind, lines, norm, generated)
        doc.result_lines = result_sections(doc)
        return doc


_MD_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*)$")
_TEX_HEADING = re.compile(r"\\(?:chapter|section|subsection|subsubsection|paragraph)\*?\s*\{([^}]*)\}")
_RESULT_WORDS = re.compile(
    r"result|experiment|evaluat|benchmark|ablation|comparison|performance|quantitative|finding|"
    r"abstract|conclusion|summary|table|metric", re.I)


def result_sections(doc: Document) -> list[bool]:
    """Per line: is it in a result-like section? Text before the first heading counts as one
    (a README's opening claims), and so does a document without headings."""
    flags: list[bool] = []
    current = True
    for line in doc.lines:
        title = None
        if doc.kind in ("md", "txt"):
            m = _MD_HEADING.match(line)
            title = m.group(2) if m else None
        elif doc.kind == "tex":
            m2 = _TEX_HEADING.search(line)
            title = m2.group(1) if m2 else None
        if title is not None:
            current = bool(_RESULT_WORDS.search(title))
        flags.append(current)
    return flags
