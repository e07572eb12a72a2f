"""The path policy's local side: a path on the machine running this server (push_code's source,
verify_artifacts' dest), decided on the path as this machine resolves it, every symlink followed.
The same deny list as the box's (paths/deny.py) always wins; $RGT_HOME, the server's own state,
is refused unless a root of the scope lies in it (the pulls folder verify_artifacts writes into)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mcp_server import portable
from mcp_server.paths import deny
from mcp_server.paths.policy import Intent
from mcp_server.paths.refusal import REASONS, outside, printable, refused
from mcp_server.paths.serving import current_settings


@dataclass(frozen=True)
class LocalScope:
    """Where one argument may point on this machine: under one of `roots` (none: anywhere), named
    in an error as `named`; `next_step` says how to widen it."""

    roots: tuple[Path, ...] = ()
    named: str = "its roots"
    next_step: str = ""


def _resolved(p: Path, intent: Intent) -> Path | str:
    """The path with every symlink resolved; for a write or delete its last part must not be one
    (the rule's name when it is)."""
    if intent in ("write", "delete") and p.name not in ("", ".", ".."):
        if p.is_symlink():
            return "symlink"
        return p.parent.resolve() / p.name
    return p.resolve()


def _inside(path: Path, tree: Path) -> bool:
    return path == tree or path.is_relative_to(tree)


def check_local(value: str | Path, intent: Intent, scope: LocalScope, *, what: str, done: str,
                base: Path | None = None, state_home: Path | None = None) -> Path:
    """`value` (absolute, ~/..., or relative to `base`) as this machine resolves it, or the
    PathRefused the policy answers: outside the roots, on the deny list, a start-up file for a
    write, or inside $RGT_HOME beyond the roots that lie in it."""
    text = str(value)
    step = scope.next_step or f"pass a {what} outside credential folders and the server's own state"
    if not printable(text):
        raise refused(what, "unprintable", REASONS["unprintable"], host=None, done=done, next_step=step)
    p = Path(text).expanduser()
    written = Path(os.path.abspath(p if p.is_absolute() else (base or Path.cwd()) / p))
    real = _resolved(written, intent)
    if isinstance(real, str):
        raise refused(what, real, REASONS[real], host=None, done=done, next_step=step)
    roots = [r.expanduser().resolve() for r in scope.roots]
    if roots and not any(_inside(real, r) for r in roots):
        where = " or ".join(str(r) for r in scope.roots)
        raise refused(what, "outside", outside(what, scope.named, where, on="on this machine"), host=None,
                      done=done, next_step=step)
    for form in (portable.deny_form(real), portable.deny_form(written)):  # `/`-separated on Windows too
        label = deny.label_of(form)
        if label is not None:
            raise refused(what, "credential", f"lies in {label}, on the deny list (keys, tokens, password hashes, "
                          "shell histories, cloud credential folders, the server's state files, /etc)", host=None,
                          done=done, next_step=step)
        if intent in ("write", "delete") and deny.is_startup(form):
            raise refused(what, "startup-file", REASONS["startup-file"], host=None, done=done, next_step=step)
    home = (state_home or current_settings().home).expanduser()
    for tree in {home.absolute(), home.resolve()}:
        if (_inside(real, tree) or _inside(written, tree)) and not any(_inside(r, tree) and _inside(real, r)
                                                                        for r in roots):
            raise refused(what, "state", REASONS["state"], host=None, done=done, next_step=step)
    return real
