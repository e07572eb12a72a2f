"""An error never quotes a value the caller sent that could carry text: one with spaces, quotes,
control characters, backslashes or shell metacharacters (an instruction, an escape sequence, a
pasted document). Such a value, whole or cut and however an error spelled it (as sent, or as
Python's repr), is replaced in an error's text by `<the FIELD value>`. A plain token (a host name,
a run id, a path or glob without spaces) may still be named: it carries no instruction, and the caller
needs it to tell which of its inputs failed. One pass over every tool's error text, so a message
written anywhere (ours, the SDK's validation, a library's) is covered."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_PLAIN = re.compile(r"[\w.@:/+=,~%*?!^#\[\]{}-]{1,256}")
_PROBE = 12  # characters of a value that, found in the text, start a match


def _strings(value: object, where: str) -> Iterator[tuple[str, str]]:
    todo: list[tuple[str, object]] = [(where, value)]
    while todo:
        at, item = todo.pop()
        if isinstance(item, str):
            yield at, item
        elif isinstance(item, dict):
            todo += [(f"{at}.{k}" if isinstance(k, str) and _PLAIN.fullmatch(k) else f"{at}.<key>", v)
                     for k, v in item.items()]
            todo += [(f"a key in {at}", k) for k in item if isinstance(k, str)]
        elif isinstance(item, list):
            todo += [(f"{at}[{i}]", v) for i, v in enumerate(item)]


def _spellings(value: str) -> list[str]:
    """How an error may have written the value: as sent, as repr writes it, as JSON escapes it."""
    forms = {value, repr(value)[1:-1], value.encode("unicode_escape").decode("ascii", "replace")}
    return sorted((f for f in forms if f), key=len, reverse=True)


def _hide(text: str, form: str, label: str) -> str:
    probe = form[:_PROBE]
    out, start = [], 0
    while (i := text.find(probe, start)) >= 0:
        n = len(probe)
        while i + n < len(text) and n < len(form) and text[i + n] == form[n]:
            n += 1
        out += [text[start:i], label]
        start = i + n
    return "".join(out) + text[start:]


def unquote_arguments(text: str, arguments: dict[str, Any]) -> str:
    """`text` with every non-plain string of `arguments` (nested too) replaced by its field's label."""
    for field, value in _strings(arguments, ""):
        if _PLAIN.fullmatch(value) or not value:
            continue
        label = f"<the {field.lstrip('.') or 'argument'} value>"
        for form in _spellings(value):
            text = _hide(text, form, label)
    return text
