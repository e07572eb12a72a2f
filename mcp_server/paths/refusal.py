"""How the path policy says no, on a box and on this machine alike: one error type whose message
starts "<argument> refused by the path policy (<rule>)", says what the rule protects and what was
not done, and never quotes the path (the caller has it; a path can carry a planted instruction)."""

from __future__ import annotations

from mcp_server.errors import InputError

REASONS = {
    "credential": "holds credentials or is a protected system file (the deny list: keys, tokens, password "
                  "hashes, shell histories, cloud credential folders, the server's state files, /etc, /proc, "
                  "/sys, /dev)",
    "startup-file": "is a shell or tool start-up file (.bashrc, .profile, pip or conda config), never written",
    "state": "lies in the server's own state folder ($RGT_HOME)",
    "symlink": "is a symlink (nothing is written or deleted through one)",
    "dotdot": "has a . or .. part",
    "unresolvable": "could not be resolved",
    "unprintable": "is not printable text (a newline, a control character or invalid UTF-8)",
    "intent": "was checked for an unknown purpose",
}


# A path argument the path policy refused is BAD_INPUT like any other bad argument: no class of its own,
# since every error class carries its own code (clients branch on it) and this is not a new kind of error.
# Its text names the argument and the rule, never the path.
PathRefused = InputError


def refused(what: str, rule: str, reason: str, *, host: str | None, done: str, next_step: str) -> PathRefused:
    """The error for `what` (the argument, e.g. `dest`, `documents`, `file.path`) refused by `rule`."""
    return PathRefused(f"{what} refused by the path policy ({rule}): {what} {reason}; {done}", host=host,
                       next_step=next_step)


def outside(what: str, named: str, where: str, *, on: str) -> str:
    """The reason a path outside its roots is refused, e.g. `dest is outside the roots fetch_data
    writes: dest must lie under /a or /b (resolved on the box, every symlink followed)`."""
    return f"is outside {named}: {what} must lie under {where} (resolved {on}, every symlink followed)"


def printable(path: str) -> bool:
    """Non-empty, no control character, valid UTF-8: a path a shell line and a message can carry."""
    if not path or any(ord(c) < 32 or ord(c) == 127 for c in path):
        return False
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
