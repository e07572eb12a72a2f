"""The path policy's box side. The decision is made ON the box by `rgt_check` / `rgt_confine` in
scripts/path_policy.sh, on the path as the box resolves it (every symlink followed): here are the
one list of the server's control trees, a `Scope` (where one argument may point) as the script's
words, the library text with the deny list filled in, and what the script's answer means.

A script that reads, writes, deletes or sends where a caller asked runs `library()` ahead of
itself and calls `rgt_confine <intent> <path> <Scope.words()>`, which prints the resolved path, or
`RGT-DENIED <reason>` / `RGT-OUTSIDE`; `confined_path` turns that line into the path or the error.
For a list of paths there is `check_paths` (scripts/path_check.sh)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from mcp_server import scripts
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import path_word, quote
from mcp_server.paths import deny
from mcp_server.paths.refusal import REASONS, PathRefused, outside, printable, refused
from mcp_server.paths.serving import current_settings
from mcp_server.settings import Settings

Intent = Literal["read", "write", "delete", "send"]


@dataclass(frozen=True)
class ControlTree:
    """A folder the server keeps for itself: no tool touches it on a caller's say-so."""

    name: str
    anywhere: bool  # True: a folder of this name at any depth; False: only the durable root's own
    holds: str


CONTROL_TREES: tuple[ControlTree, ...] = (
    ControlTree(".rgt", anywhere=True, holds="run dirs (run.json, pid, exit_code), manifests, box.env, names, "
                "locks"),
    ControlTree("code", anywhere=False, holds="push_code's sealed code snapshots"),
)


@functools.cache
def library() -> str:
    """The text of path_policy.sh with the deny list filled in, to run ahead of a script that
    calls rgt_check or rgt_confine."""
    text = scripts.load("path_policy")
    for word, globs in (("RGT_DENY_PATHS", deny.CREDENTIAL.paths), ("RGT_DENY_NAMES", deny.CREDENTIAL.names),
                        ("RGT_STARTUP_PATHS", deny.STARTUP.paths), ("RGT_STARTUP_NAMES", deny.STARTUP.names)):
        text = text.replace(f" {word})", f" {deny.case_patterns(globs)})")
    return text


def control_names() -> str:
    """The control trees as a reader sees them, e.g. `.rgt/ (run dirs ...), code/ (...)`."""
    return ", ".join(f"{t.name}/ ({t.holds})" for t in CONTROL_TREES)


def data_folders(settings: Settings) -> list[str]:
    """The folders of $RGT_HOME that hold data, not state: the local box's root, pulled copies and
    acceptances. A scope that names one of them as a root may reach into it."""
    return [str(settings.local_root), str(settings.pulls_dir), str(settings.pulls_dir.with_name("acceptances"))]


@dataclass(frozen=True)
class Scope:
    """Where one argument may point on a box: under one of `roots`, outside the server's control
    trees (unless `control` is False: the code that owns them), never on the deny list, and, when
    the box is this machine, never in $RGT_HOME beyond the data folders a root names."""

    roots: tuple[str, ...]
    named: str  # how an error names the roots, e.g. "the roots verify_artifacts reads"
    durable_root: str | None = None  # its .rgt/ and code/ are control trees; its runs' work dirs are data
    control: bool = True
    this_machine: bool = False
    widen: str = ""  # how the user widens the roots (an inventory key), said when a path is outside

    def words(self) -> list[str]:
        """rgt_check's WORD arguments, as shell words."""
        words = [path_word(r, "root") for r in self.roots]
        if self.control:
            if self.durable_root:
                words.append(quote("+") + path_word(f"{self.durable_root.rstrip('/')}/.rgt/runs", "root"))
            for tree in CONTROL_TREES:
                if tree.anywhere:
                    words.append(quote("!" + tree.name))
                if self.durable_root:
                    words.append(quote("!") + path_word(f"{self.durable_root.rstrip('/')}/{tree.name}", "root"))
        if self.this_machine:
            words.append(quote("%") + path_word(str(current_settings().home.absolute()), "root"))
        return words


def box_scope(durable_root: str, roots: Sequence[str], named: str, *, this_machine: bool, control: bool = True,
              widen: str = "") -> Scope:
    """A scope of some of a box's roots (its durable and scratch roots, an inventory's widening)."""
    return Scope(tuple(roots), named, durable_root, control, this_machine, widen)


def anywhere(host: Host, named: str = "the box's own folders") -> Scope:
    """Any folder on the box outside the deny list and the server's own folders: for a file the
    caller names to read (a probe's input, EVIDENCE.json and its documents)."""
    local = host.kind == "local"
    return Scope(("/", *(data_folders(current_settings()) if local else ())), named, this_machine=local)


def confine_words(durable_root: str, roots: Sequence[str], *, control: bool = True) -> list[str]:
    """rgt_check's words for `roots` on a box whose durable root is `durable_root`."""
    return Scope(tuple(roots), "", durable_root, control).words()


def refusal(answer: str, *, what: str, host: str, scope: Scope, done: str) -> PathRefused:
    """The error rgt_check's refusal line `answer` means for the argument `what`."""
    answer = answer.strip()
    where = " or ".join(scope.roots)
    own = ", ".join(t.name + "/" for t in CONTROL_TREES)
    under = "" if "/" in scope.roots else f" under {where},"
    step = f"choose a {what}{under} off the deny list and outside the server's own folders ({own}), that no " \
           "symlink leads elsewhere"
    if answer == "RGT-OUTSIDE":
        return refused(what, "outside", outside(what, scope.named or "its roots", where, on="on the box"),
                       host=host, done=done, next_step=step + (f", or {scope.widen}" if scope.widen else ""))
    reason, _, name = answer.removeprefix("RGT-DENIED ").partition(" ")
    tree = next((t for t in CONTROL_TREES if reason == "control" and t.name == name), None)
    if tree is not None:
        return refused(what, "control", f"lies in the server's own {tree.name}/ folder ({tree.holds}), resolved "
                       "on the box", host=host, done=done, next_step=step)
    if answer.startswith("RGT-DENIED ") and reason in REASONS:
        return refused(what, reason, REASONS[reason] + " (resolved on the box)", host=host, done=done, next_step=step)
    return refused(what, "unanswered", "got no answer from the box's path check", host=host, done=done,
                   next_step="check the box is reachable and has a POSIX shell, then call again")


def confined_path(answer: str, *, what: str, host: str, roots: Sequence[str], named: str = "",
                  done: str = "nothing was written") -> str:
    """The resolved path rgt_confine printed, or the PathRefused its refusal means. The error
    names the argument and the rule, never the path (the caller has it)."""
    line = answer.strip()
    if line.startswith("/") and "\n" not in line:
        return line
    raise refusal(line, what=what, host=host, scope=Scope(tuple(roots), named), done=done)


async def check_paths(host: Host, intent: Intent, paths: Sequence[str], scope: Scope, *, what: str,
                      done: str) -> list[str | PathRefused]:
    """Each path as the box resolves it, or the reason the policy refuses it, in order: one round
    trip for the lot (paths travel on stdin, one per line)."""
    out: list[str | PathRefused | None] = [None] * len(paths)
    sent: list[int] = []
    for i, p in enumerate(paths):
        if not printable(p) or not p.startswith(("/", "~")):
            out[i] = refused(what, "unprintable" if p.startswith(("/", "~")) else "relative",
                             REASONS["unprintable"] if p.startswith(("/", "~")) else
                             "is not an absolute box path (or ~/...)", host=host.name, done=done,
                             next_step=f"pass {what} as an absolute path on the box")
        else:
            sent.append(i)
    if sent:
        stdin = "".join(paths[i] + "\n" for i in sent).encode()
        res = await host.run(library() + scripts.command_words("path_check", quote(intent), *scope.words()),
                             stdin=stdin, timeout=30)
        res.check("checking paths against the path policy")
        lines = res.text.splitlines()
        for n, i in enumerate(sent):
            line = lines[n] if n < len(lines) else ""
            out[i] = line if line.startswith("/") else refusal(line, what=what, host=host.name, scope=scope,
                                                               done=done)
    return [x if x is not None else refused(what, "unanswered", "got no answer", host=host.name, done=done,
                                             next_step="call again") for x in out]


async def confine(host: Host, intent: Intent, path: str, scope: Scope, *, what: str, done: str) -> str:
    """One path as the box resolves it, or the PathRefused the policy answers."""
    (got,) = await check_paths(host, intent, [path], scope, what=what, done=done)
    if isinstance(got, PathRefused):
        raise got
    return got

