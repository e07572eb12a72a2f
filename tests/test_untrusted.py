"""Security (prompt-injection hygiene): text from a box reaches the agent without terminal
escape sequences or control characters that could hide or rewrite what a reviewer sees."""

from __future__ import annotations

import pytest

from mcp_server.untrusted import clean


@pytest.mark.parametrize(("raw", "want"), [
    ("\x1b[31mred\x1b[0m text", "red text"),
    ("\x1b]0;window title\x07after", "after"),
    ("\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\", "link"),
    ("clear\x1b[2J\x1b[Hscreen", "clearscreen"),
    ("back\x08\x08\x08\x08hidden", "backhidden"),
    ("nul\x00bell\x07del\x7fc1\x9bend", "nulbelldelc1end"),
    ("tab\tnew\nline\r\nkept", "tab\tnew\nline\r\nkept"),
    ("步骤 10 loss=0.5 ✓", "步骤 10 loss=0.5 ✓"),
])
def test_security_escape_sequences_and_controls_are_removed(raw: str, want: str) -> None:
    assert clean(raw) == want
