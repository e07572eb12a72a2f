"""Globs: the same answers as the shell-style semantics they document, and no blow-up on a
hostile pattern (security: a roster or document glob comes from a caller or a box)."""

from __future__ import annotations

import random
import re

import pytest

from mcp_server.errors import InputError
from mcp_server.globs import Glob, _regex, _tokens


@pytest.mark.parametrize(("pattern", "path", "want"), [
    ("best.pth", "best.pth", True),
    ("*.pth", "ckpt/best.pth", False),
    ("**/*.pth", "best.pth", True),
    ("**/*.pth", "a/b/best.pth", True),
    ("**/x", "ax", False),
    ("ckpt/**", "ckpt/a/b.pt", True),
    ("**.json", "a/b/metrics.json", True),
    ("test/*/metrics.json", "test/seed1/metrics.json", True),
    ("test/*/metrics.json", "test/a/b/metrics.json", False),
    ("seed[0-2]/m.json", "seed1/m.json", True),
    ("seed[!0-2]/m.json", "seed1/m.json", False),
    ("run?.log", "run1.log", True),
    ("run?.log", "run/.log", False),
    ("**/**/**/**/**/**/**/**/a", "x/y/a", True),
    ("[unclosed", "[unclosed", True),
])
def test_glob_semantics(pattern: str, path: str, want: bool) -> None:
    assert bool(Glob(pattern).match(path)) is want


def test_the_automaton_agrees_with_the_regex_on_random_patterns() -> None:
    rng = random.Random(7)
    atoms = ["a", "b", "/", "*", "**", "**/", "?", "[ab]", "[!a]", "."]
    for _ in range(3000):
        pattern = "".join(rng.choice(atoms) for _ in range(rng.randint(1, 7)))
        path = "".join(rng.choice("ab/.") for _ in range(rng.randint(0, 8)))
        g = Glob(pattern)
        g._rx = None  # force the automaton
        ref = re.compile(_regex(_tokens(pattern))).match(path) is not None
        assert g.match(path) is ref, (pattern, path)


@pytest.mark.parametrize("pattern", [
    "**/" * 30 + "x",
    "*a" * 30 + "b",
    ("**/*a*a*a*/" * 5) + "b",
])
def test_security_a_hostile_glob_goes_to_the_linear_automaton(pattern: str) -> None:
    g = Glob(pattern)
    # A backtracking regex takes minutes on these; the automaton holds at most two states per
    # token whatever the path, so its work is linear in the path's length.
    assert g._rx is None or pattern.startswith("**/**/")
    path = "/".join(["a" * 40] * 20)
    assert not g.match(path)
    assert len(g._toks) <= 2 * len(pattern)


def test_security_a_glob_with_too_many_wildcards_or_characters_is_refused() -> None:
    with pytest.raises(InputError, match="too many wildcards"):
        Glob("*x" * 100)
    with pytest.raises(InputError, match="too long"):
        Glob("a" * 2000)
