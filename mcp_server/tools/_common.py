"""Shared pieces of the adapter layer: annotation presets, the App from the context, the
one mapping from our errors to ToolError, and fan-out over several hosts."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import re
import sqlite3
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from mcp_server.app import App
from mcp_server.errors import InputError, LedgerError, RgtError, cut_value
from mcp_server.redact import Redactor
from mcp_server.tools._lean import SHARED_ARGUMENTS

log = logging.getLogger(__name__)
MAX_ERROR_CHARS = 4000
# A path argument that cannot name a file here: the caller's input, not a failure of this machine.
_PATH_ERRNOS = {errno.ENAMETOOLONG, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ELOOP, errno.EINVAL}
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a key shown in a field path; any other is not echoed

T = TypeVar("T")
# What a `host` argument takes, said once for every tool (it is in every tool's schema: keep it short).
HOST_HELP = SHARED_ARGUMENTS["host"]  # published once, in the server instructions

# Presets, set honestly. openWorld: the tool talks to boxes outside this process. A hint equal to
# the spec's default (readOnly false, idempotent false, openWorld true) is left out: every session
# sends the list, and a client reads a missing hint as its default. destructiveHint (default true)
# is said for every tool that writes; the spec gives it no meaning for a read-only one.
def _preset(*, read_only: bool, destructive: bool, idempotent: bool, open_world: bool) -> ToolAnnotations:
    return ToolAnnotations(read_only_hint=True if read_only else None,
                           destructive_hint=None if read_only and not destructive else destructive,
                           idempotent_hint=True if idempotent else None, open_world_hint=None if open_world else False)


READ_ONLY = _preset(read_only=True, destructive=False, idempotent=True, open_world=True)
READ_ONLY_LOCAL = _preset(read_only=True, destructive=False, idempotent=True, open_world=False)
LAUNCH = _preset(read_only=False, destructive=False, idempotent=True, open_world=True)
# Starts work on each call: two identical unnamed launches start two jobs (a named one returns the
# live run instead, but the annotation must hold for every call).
STARTS_WORK = _preset(read_only=False, destructive=False, idempotent=False, open_world=True)
WRITES_LOCAL = _preset(read_only=False, destructive=False, idempotent=True, open_world=True)
DESTRUCTIVE = _preset(read_only=False, destructive=True, idempotent=False, open_world=True)
DESTRUCTIVE_IDEMPOTENT = _preset(read_only=False, destructive=True, idempotent=True, open_world=True)


def app_of(ctx: Context[Any, Any]) -> App:
    """The App the server's lifespan yielded (a bare `Context` does not know its lifespan's type)."""
    app = ctx.request_context.lifespan_context
    if not isinstance(app, App):
        raise TypeError(f"the server's lifespan yielded {type(app).__name__}, not App")
    return app


def coded_message(exc: RgtError, redactor: Redactor) -> str:
    """What the client reads for one of our errors: `[CODE] ` then the message, secrets masked."""
    text = redactor.scrub(str(exc))
    if len(text) > MAX_ERROR_CHARS:  # a message that quotes a huge input must not become a huge reply
        text = f"{text[:MAX_ERROR_CHARS]}… ({len(text) - MAX_ERROR_CHARS} more characters cut)"
    return f"[{exc.code}] {text}"


def shown_key(key: object) -> str:
    """A key of the caller's as an error may show it: a plain name as it is, anything else `<key>`."""
    return key if isinstance(key, str) and _PLAIN_KEY.fullmatch(key) else "<key>"


def lone_surrogate_at(value: object, path: str = "") -> str | None:
    """Where in `value` (a JSON-like tree) a string holds a lone surrogate, as a field path
    (`env.KEY`, `paths[2]`, `a key in env`), or None. Never the string itself: it is the caller's."""
    todo: deque[tuple[str, object]] = deque([(path, value)])
    while todo:  # a loop, not recursion: the tree may be as deep as the JSON parser allowed
        where, item = todo.popleft()
        if isinstance(item, str) and _LONE_SURROGATE.search(item):
            return where or "the value"
        if isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and _LONE_SURROGATE.search(key):
                    return f"a key in {where or 'the object'}"
                shown = shown_key(key)
                todo.append((f"{where}.{shown}" if where else shown, child))
        elif isinstance(item, (list, tuple)):
            todo.extend((f"{where}[{i}]", child) for i, child in enumerate(item))
    return None


def not_unicode_error(exc: UnicodeEncodeError) -> InputError:
    """The error for text that cannot be encoded, naming the tool argument that holds it when
    the adapter's own parameters show which (the frame right under tool_errors' is the adapter)."""
    where = None
    frames = exc.__traceback__.tb_next if exc.__traceback__ else None
    if frames is not None:
        code, names = frames.tb_frame.f_code, frames.tb_frame.f_locals
        params = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        where = next((found for name in params if name in names
                      and (found := lone_surrogate_at(names[name], name))), None)
    what = f"argument {where}" if where else "a string argument"
    return InputError(f"{what} is not valid Unicode text (it holds a lone surrogate, such as a \\udcff "
                      "escape or bytes that are not UTF-8)",
                      next_step="send that argument again as valid UTF-8 text")


@contextlib.contextmanager
def tool_errors(app: App) -> Iterator[None]:
    """Our errors -> ToolError (the model reads the message, led by the error's code). Bugs stay bugs.

    mcp 2.x turns a ToolError into a result with only its text (no structured content), so the
    code travels in the text; the SDK puts `Error executing tool <name>: ` before it."""
    try:
        yield
    except RgtError as exc:
        raise ToolError(coded_message(exc, app.redactor)) from exc
    except UnicodeEncodeError as exc:
        raise ToolError(coded_message(not_unicode_error(exc), app.redactor)) from exc
    except (ValidationError, re.error, UnicodeError) as exc:
        raise ToolError(coded_message(InputError(f"the input was not usable: {type(exc).__name__}: "
                                                 f"{cut_value(exc)}"), app.redactor)) from exc
    except OSError as exc:
        if exc.errno not in _PATH_ERRNOS:
            raise ToolError(coded_message(RgtError(f"a local file operation failed: {cut_value(exc)}",
                                                   next_step="check the disk and permissions on this machine"),
                                          app.redactor)) from exc
        raise ToolError(coded_message(InputError(f"a path given is not usable here: {cut_value(exc)}"),
                                      app.redactor)) from exc
    except sqlite3.Error as exc:
        raise ToolError(coded_message(LedgerError(
            f"the ledger failed: {cut_value(exc)}", path=str(app.settings.ledger_path),
            next_step="check the disk and the file; the call's outcome is not recorded"), app.redactor)) from exc
    except Exception as exc:
        # A bug, or a failure no boundary mapped: the client still gets a coded, bounded answer
        # that says what is uncertain; the traceback goes to the log (stderr).
        log.exception("unexpected error in a tool call")
        raise ToolError(coded_message(RgtError(
            f"unexpected {type(exc).__name__}: {cut_value(exc)}",
            next_step="the outcome of this call is unknown: check list_runs (and the ledger) before repeating it"),
            app.redactor)) from exc


class HostError(BaseModel):
    """Why one host of a fan-out has no result; the others are unaffected."""

    code: str = Field(description="stable error code, e.g. HOST_UNREACHABLE, HOST_KEY_REFUSED, AUTH_FAILED")
    message: str


async def fan_out(
    app: App, names: list[str], one: Callable[[str], Awaitable[T]]
) -> list[tuple[str, T | None, HostError | None]]:
    """Run `one` for each host concurrently; an error on one box never hides the others."""

    async def guarded(name: str) -> tuple[str, T | None, HostError | None]:
        try:
            return name, await one(name), None
        except RgtError as exc:
            return name, None, HostError(code=exc.code, message=app.redactor.scrub(str(exc)))
        except Exception as exc:  # one host's unexpected failure must not hide the others' results
            log.exception("unexpected error for host %s", name)
            return name, None, HostError(code=RgtError.code, message=app.redactor.scrub(
                f"unexpected {type(exc).__name__}: {cut_value(exc)} (the outcome on this host is unknown)"))

    return list(await asyncio.gather(*(guarded(n) for n in names)))
