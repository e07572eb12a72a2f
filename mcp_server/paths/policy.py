"""The path policy's Python side. The decision is made ON the box by `rgt_confine` in
scripts/path_policy.sh, on the path as the box resolves it (every symlink followed): here are
the one list of the server's control trees, the script's arguments, and what its answer means.

A script that writes where a caller asked runs `library()` ahead of itself and calls
`rgt_confine <intent> <path> <words from confine_words()>`, which prints the resolved path, or
`RGT-DENIED <reason>` / `RGT-OUTSIDE`; `confined_path` turns that line into the path or the error."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from mcp_server import scripts
from mcp_server.errors import InputError
from mcp_server.hosts.commands import path_word, quote

Intent = Literal["read", "write", "delete", "send"]


@dataclass(frozen=True)
class ControlTree:
    """A folder the server keeps for itself: no tool writes into it on a caller's say-so."""

    name: str
    anywhere: bool  # True: a folder of this name at any depth; False: only the durable root's own
    holds: str


CONTROL_TREES: tuple[ControlTree, ...] = (
    ControlTree(".rgt", anywhere=True, holds="run dirs (run.json, pid, exit_code), manifests, box.env, names, "
                "locks"),
    ControlTree("code", anywhere=False, holds="push_code's sealed code snapshots"),
)

_DENIED = {
    "credential": "is a credential or system file",
    "startup-file": "is a shell or tool start-up file (.bashrc, .profile, pip or conda config)",
    "symlink": "is a symlink on the box (nothing is written through one)",
    "dotdot": "has a . or .. part",
    "unresolvable": "could not be resolved on the box",
    "unprintable": "resolves on the box to a path with a newline in it",
    "intent": "was checked for an unknown purpose",
}


def library() -> str:
    """The text of path_policy.sh, to run ahead of a script that calls rgt_confine."""
    return scripts.load("path_policy")


def control_names() -> str:
    """The control trees as a reader sees them, e.g. `.rgt/ (run dirs ...), code/ (...)`."""
    return ", ".join(f"{t.name}/ ({t.holds})" for t in CONTROL_TREES)


def confine_words(durable_root: str, roots: Sequence[str], *, control: bool = True) -> list[str]:
    """rgt_confine's ROOT arguments as shell words: the roots a path may lie under, then every
    control tree it must not lie in (a name at any depth, or the durable root's own folder).
    A reader that may read the server's own files (a run's log) passes `control=False`."""
    words = [path_word(r, "root") for r in roots]
    for tree in CONTROL_TREES if control else ():
        if tree.anywhere:
            words.append(quote("!" + tree.name))
        words.append(quote("!") + path_word(f"{durable_root.rstrip('/')}/{tree.name}", "root"))
    return words


def confined_path(answer: str, *, what: str, host: str, roots: Sequence[str]) -> str:
    """The resolved path rgt_confine printed, or the InputError its refusal means. The error
    names the argument and the rule, never the path (the caller has it)."""
    answer = answer.strip()
    if answer.startswith("/") and "\n" not in answer:
        return answer
    where = " or ".join(roots)
    own = ", ".join(t.name + "/" for t in CONTROL_TREES)
    step = f"choose a {what} under {where}, outside the server's own folders ({own}), that no symlink leads elsewhere"
    if answer == "RGT-OUTSIDE":
        raise InputError(f"{what} must lie under {where} (checked on the box, every symlink followed); nothing was "
                         "written", host=host, next_step=step)
    reason, _, name = answer.removeprefix("RGT-DENIED ").partition(" ")
    tree = next((t for t in CONTROL_TREES if reason == "control" and t.name == name), None)
    if tree is not None:
        raise InputError(f"{what} lies in the server's own {tree.name}/ folder ({tree.holds}), resolved on the box; "
                         "nothing was written", host=host, next_step=step)
    why = _DENIED.get(reason, "was refused by the box's path check") if answer.startswith("RGT-DENIED ") \
        else "got no answer from the box's path check"
    raise InputError(f"{what} {why}; nothing was written", host=host, next_step=step)
