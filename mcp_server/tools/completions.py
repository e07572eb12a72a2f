"""Argument completions (`completion/complete`) for the prompts' and resource templates' arguments:
`host`, `run_id`, `platform`, `path` and `anchor`. Cheap by design: the inventory, the ledger, the
user's ssh config and the knowledge base are read; no box is ever contacted.

MCP completes prompt and resource-template arguments only (a tool's arguments have no reference
type in the protocol). The SDK's completion handler gets no request context, so a middleware
hands it the App for the length of each `completion/complete` request."""

from __future__ import annotations

import contextvars
import glob
import logging
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.types import Completion, CompletionArgument, CompletionContext, PromptReference, ResourceTemplateReference

from mcp_server.app import App
from mcp_server.errors import RgtError
from mcp_server.hosts.pool import LOCAL
from mcp_server.knowledge import Kind, doc, docs, profiles

log = logging.getLogger(__name__)

MAX_VALUES = 100  # the protocol's cap on one answer
LEDGER_SCAN = 5000  # launch events read for run ids (newest first)
INCLUDE_DEPTH = 8  # nested ssh config Include files followed
_KEYWORD = re.compile(r"^\s*([A-Za-z]+)\s*(?:=\s*|\s+)(.*)$")
_PATTERN_CHARS = ("*", "?", "!")

_app: contextvars.ContextVar[App | None] = contextvars.ContextVar("rgt_completion_app", default=None)

Ref = PromptReference | ResourceTemplateReference


def _words(rest: str) -> list[str]:
    try:
        return shlex.split(rest, comments=True)
    except ValueError:  # an unbalanced quote: take the words as they are
        return rest.split()


def _includes(words: list[str], base: Path) -> list[Path]:
    """The files an `Include` names: `~` expanded, relative paths under the including file's folder
    (`~/.ssh` for the user's config), globs expanded in sorted order."""
    found: list[Path] = []
    for w in words:
        pattern = Path(w).expanduser()
        pattern = pattern if pattern.is_absolute() else base / pattern
        found += [Path(p) for p in sorted(glob.glob(str(pattern)))]
    return found


def _host_words(path: Path, depth: int = 0) -> Iterator[str]:
    """Every word of every `Host` line of an ssh config, following `Include` files."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    for line in text.splitlines():
        m = _KEYWORD.match(line)
        if m is None:
            continue
        keyword, words = m.group(1).lower(), _words(m.group(2))
        if keyword == "host":
            yield from words
        elif keyword == "include" and depth < INCLUDE_DEPTH:
            for inc in _includes(words, path.parent):
                yield from _host_words(inc, depth + 1)


def ssh_aliases(path: Path | None) -> list[str]:
    """The concrete `Host` aliases of an ssh config (None: no config); patterns (`*`, `?`, `!neg`)
    and quoted words with spaces are skipped, since they name no host one can type."""
    if path is None:
        return []
    return list(dict.fromkeys(w for w in _host_words(path) if w and not any(c in w for c in _PATTERN_CHARS)
                              and not any(c.isspace() for c in w)))


def host_names(app: App) -> list[str]:
    """Inventory names, `local`, the ssh config's aliases, then hosts that ran something."""
    names: list[str] = []
    try:
        names += list(app.pool.inventory.hosts)
    except RgtError as exc:  # a broken inventory: the tools report it; completion just skips it
        log.debug("completion: inventory unreadable: %s", exc)
    names += [LOCAL, *ssh_aliases(app.settings.ssh_config)]
    try:
        names += [e.host for e in app.ledger.events("launch", limit=LEDGER_SCAN) if e.host]
    except RgtError as exc:
        log.debug("completion: ledger unreadable: %s", exc)
    return list(dict.fromkeys(names))


def run_ids(app: App, host: str | None) -> list[str]:
    """Launched run ids, newest first; only `host`'s when one is given."""
    try:
        events = app.ledger.events("launch", host=host or None, limit=LEDGER_SCAN)
    except RgtError as exc:
        log.debug("completion: ledger unreadable: %s", exc)
        return []
    return list(dict.fromkeys(e.run_id for e in events if e.run_id))


def profile_names() -> list[str]:
    """What a `platform` argument accepts: every profile and every family's variants."""
    found = profiles()
    return sorted({*found, *(v.name for p in found.values() for v in p.variants)})


def page_paths(kind: Kind) -> list[str]:
    """The pages of a knowledge folder; `_`-prefixed ones (schemas, aliases) are not for reading."""
    return [d.path for d in docs(kind) if not d.path.startswith("_")]


def anchors(kind: Kind, path: str | None) -> list[str]:
    """The section anchors of one page, in page order; none when the page is unknown."""
    if not path:
        return []
    try:
        page = doc(kind, path)
    except RgtError:
        return []
    return [s.anchor for s in page.sections]


def _kind(ref: Ref) -> Kind | None:
    if isinstance(ref, ResourceTemplateReference):
        scheme = ref.uri.partition("://")[0]
        return "references" if scheme == "references" else "profiles" if scheme == "profiles" else None
    return None


def candidates(app: App, ref: Ref, name: str, given: dict[str, str]) -> list[str]:
    """Every value `name` may take under `ref`, before prefix filtering."""
    kind = _kind(ref)
    if name == "host":
        return host_names(app)
    if name == "run_id":
        return run_ids(app, given.get("host"))
    if name == "platform":
        return page_paths("profiles") if kind == "profiles" else profile_names()
    if name == "path" and kind == "references":
        return page_paths("references")
    if name == "anchor" and kind is not None:
        return anchors(kind, given.get("path" if kind == "references" else "platform"))
    return []


def pick(values: list[str], prefix: str) -> Completion:
    """The values starting with `prefix` (case-insensitive), at most MAX_VALUES of them."""
    low = prefix.lower()
    hits = [v for v in values if v.lower().startswith(low)]
    return Completion(values=hits[:MAX_VALUES], total=len(hits), has_more=len(hits) > MAX_VALUES)


async def _bind_app(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Middleware: the App is visible to the completion handler while it answers."""
    if ctx.method != "completion/complete" or not isinstance(ctx.lifespan_context, App):
        return await call_next(ctx)
    token = _app.set(ctx.lifespan_context)
    try:
        return await call_next(ctx)
    finally:
        _app.reset(token)


async def complete(ref: Ref, argument: CompletionArgument, context: CompletionContext | None) -> Completion:
    """The completion handler: an unknown argument (or no App) gets an empty list, never an error."""
    app = _app.get()
    if app is None:
        return Completion(values=[], total=0, has_more=False)
    given = (context.arguments if context else None) or {}
    return pick(candidates(app, ref, argument.name, given), argument.value)


def register(server: MCPServer) -> None:
    server.middleware.append(_bind_app)
    server.completion()(complete)  # type: ignore[no-untyped-call]
