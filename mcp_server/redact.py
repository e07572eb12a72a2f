"""Known secret values, scrubbed from every text the server returns or records."""

from __future__ import annotations

import re
from typing import Any

MASK = "[REDACTED]"
_MIN_SECRET_LEN = 4  # shorter values would mask ordinary words and digits


class Redactor:
    """Holds the values of secrets the server has handled (never their names' absence)."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def add(self, value: str) -> None:
        if value and len(value) >= _MIN_SECRET_LEN and value not in self._values:
            self._values.add(value)
            # Longest first so a secret containing another is masked whole.
            alts = sorted(self._values, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(v) for v in alts))

    def scrub(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(MASK, text)

    @property
    def margin(self) -> int:
        """Bytes of context a window needs on each side to see every secret that straddles its edge."""
        return max((len(v.encode()) for v in self._values), default=1) - 1

    def scrub_window(self, before: bytes, window: bytes, after: bytes) -> str:
        """Scrub `window`, a slice of a longer byte stream, seeing `margin` bytes around it: the part
        of a secret that straddles an edge is masked too, so stepping small windows across a
        secret never rebuilds it."""
        if not self._values:
            return window.decode("utf-8", "replace")
        whole, lo, hi = before + window + after, len(before), len(before) + len(window)
        spans = []
        for v in self._values:
            b, i = v.encode(), whole.find(v.encode())
            while i != -1:
                if i < hi and i + len(b) > lo:
                    spans.append((max(i, lo), min(i + len(b), hi)))
                i = whole.find(b, i + 1)
        out, pos = [], lo
        for s, e in sorted(spans):
            if e > pos:
                out += [whole[pos:max(s, pos)].decode("utf-8", "replace"), MASK]
                pos = e
        out.append(whole[pos:hi].decode("utf-8", "replace"))
        return "".join(out)

    def scrub_obj(self, obj: Any) -> Any:
        """Scrub every string inside a JSON-like structure."""
        if self._pattern is None:
            return obj
        if isinstance(obj, str):
            return self.scrub(obj)
        if isinstance(obj, dict):
            return {self.scrub_obj(k): self.scrub_obj(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.scrub_obj(v) for v in obj]
        return obj
