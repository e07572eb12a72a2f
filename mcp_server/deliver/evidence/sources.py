"""Reading the evidence layer and the documents through a Host (local or SSH).

Every file is read with the host layer's bounded read; symlinks (`selected`) are resolved
and digests computed on the box in one batched command each, so a project on a remote box
costs a handful of round trips, not one per file. A file that cannot be used becomes one
Problem; the caller carries on with the rest."""

from __future__ import annotations

import asyncio
import hashlib
import os
import posixpath
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mcp_server.deliver.documents.text import DOC_SUFFIXES
from mcp_server.deliver.evidence.schema import load_json
from mcp_server.deliver.models import SCHEMA_RESOURCE, InputKind, InputProblem
from mcp_server.errors import NotFoundError, RgtError
from mcp_server.globs import glob_regex
from mcp_server.hosts.base import Host
from mcp_server.hosts.files import list_files, read_bytes
from mcp_server.paths import deny
from mcp_server.paths.refusal import REASONS, refused

MAX_JSON_BYTES = 16 * 1024 * 1024
MAX_DOC_BYTES = 8 * 1024 * 1024
MAX_DOCS = 5000
_CONCURRENCY = 8
_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".hypothesis",
                        ".pytest_cache", ".tox", "results"})
_MAGIC = re.compile(r"[*?\[]")
T = TypeVar("T")


@dataclass
class Problems:
    """Input problems collected along the way (one per bad input)."""

    items: list[InputProblem] = field(default_factory=list)

    def add(self, input: InputKind, path: str | None, code: str, message: str, **kw: Any) -> None:
        if code in ("schema", "invalid_json", "no_scalar_rows", "not_scalar", "duplicate_claim"):
            kw.setdefault("resource", SCHEMA_RESOURCE)
        self.items.append(InputProblem(input=input, path=path, code=code, message=message, **kw))

    def from_error(self, input: InputKind, path: str | None, exc: BaseException, next_step: str | None = None) -> None:
        if isinstance(exc, RgtError):
            msg = exc.message + (f" (observed: {exc.observed})" if exc.observed is not None else "")
            # Problem codes are lower snake case like the ones set here (`not_found`, `schema`).
            self.add(input, path, exc.code.lower(), msg, next_step=next_step or exc.next_step)
        else:
            self.add(input, path, "unreadable", f"{type(exc).__name__}: {exc}", next_step=next_step)


def join_path(root: str, rel: str) -> str:
    """A path from the project root (absolute and ~/ paths are kept as they are)."""
    if rel.startswith(("/", "~/")) or rel == "~":
        return posixpath.normpath(rel) if rel.startswith("/") else rel
    return posixpath.normpath(posixpath.join(root, rel))


def absolute(host: Host, path: str) -> str:
    """Relative paths are only meaningful on this machine: resolve them against the cwd."""
    if host.kind == "local" and not path.startswith(("/", "~")):
        return os.path.abspath(path)
    return path


async def read_file(host: Host, path: str, max_bytes: int) -> bytes:
    """Bounded read; permission and other OS errors become our errors (one boundary). A path on the
    path policy's deny list is never read, whoever named it (EVIDENCE.json can point anywhere):
    the arguments themselves were resolved and checked on the box before (reconcile.py)."""
    if deny.is_credential(path):
        raise refused("a file the evidence names", "credential", REASONS["credential"], host=host.name,
                      done="it was not read", next_step="point the evidence at result files, not credentials")
    try:
        return await read_bytes(host, path, max_bytes)
    except RgtError:
        raise
    except OSError as exc:
        raise RgtError(f"cannot read the file: {exc.strerror or exc}", host=host.name, path=path,
                       next_step="check the path and its permissions") from exc


async def read_json(host: Host, path: str, what: InputKind, problems: Problems,
                    missing_ok: bool = False) -> tuple[Any, bytes] | None:
    """Parsed JSON and its bytes, or None with one problem recorded (or none if missing_ok)."""
    try:
        data = await read_file(host, path, MAX_JSON_BYTES)
    except RgtError as exc:
        if missing_ok and isinstance(exc, NotFoundError):
            return None
        problems.from_error(what, path, exc)
        return None
    try:
        return load_json(data.decode("utf-8-sig")), data
    except UnicodeDecodeError:
        problems.add(what, path, "invalid_json", "not UTF-8 text", expected="a UTF-8 JSON file")
    except ValueError as exc:
        problems.add(what, path, "invalid_json", f"invalid JSON: {exc}",
                     next_step="fix the syntax (a trailing comma, a comment, NaN and unquoted keys are common causes)")
    return None


def sha256_bytes(data: bytes) -> str:
    """`sha256:<hex>` of some bytes, the digest form the manifests use."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _skipped(root: str, path: str) -> bool:
    """Inside a directory expansion: not a document (VCS, environments, the results tree,
    figure outputs and figure source data, which the figure pass reads)."""
    rel = posixpath.relpath(path, root) if path.startswith(root + "/") else path
    parts = rel.split("/")
    if any(p in _SKIP_DIRS for p in parts[:-1]):
        return True
    if len(parts) >= 3 and parts[0] == "figures" and (parts[2] == "output" or parts[-1] == "source_data.csv"):
        return True
    return not path.lower().endswith(DOC_SUFFIXES)


async def expand(host: Host, root: str, specs: list[str], problems: Problems) -> list[str]:
    """Document paths from files, directories and globs (relative ones start at the root)."""
    found: list[str] = []
    for spec in specs:
        try:
            found += await _expand_one(host, root, join_path(root, spec))
        except RgtError as exc:
            problems.from_error("document", spec, exc)
    seen: dict[str, None] = {}
    for f in found:
        seen.setdefault(f, None)
    paths = list(seen)
    if len(paths) > MAX_DOCS:
        problems.add("document", None, "too_many", f"{len(paths)} documents; only the first {MAX_DOCS} were read",
                     next_step="narrow the globs or directories")
        paths = paths[:MAX_DOCS]
    return paths


async def _expand_one(host: Host, root: str, path: str) -> list[str]:
    m = _MAGIC.search(path)
    if m:
        base = path[:m.start()].rsplit("/", 1)[0] or "/"
        rx = glob_regex(path)
        files = await list_files(host, base, "*", max_files=50000)
        hits = [f for f in files if rx.match(f)]
        if not hits:
            raise NotFoundError("glob matched no file", host=host.name, path=path,
                           next_step="check the pattern (relative patterns start at the EVIDENCE.json folder)")
        return hits
    if await host.stat(path) is not None:
        return [path]
    files = await list_files(host, path, "*", max_files=50000)
    docs = [f for f in files if not _skipped(path, f)]
    if not files:
        raise NotFoundError("no such file (or an empty directory)", host=host.name, path=path,
                       next_step="pass files, directories or globs of .md/.tex/.txt/.csv documents")
    return docs


async def gather_bounded(items: list[T], one: Callable[[T], Awaitable[Any]],
                         limit: int = _CONCURRENCY) -> list[Any]:
    """Run `one` over items with at most `limit` in flight; results in item order."""
    sem = asyncio.Semaphore(limit)

    async def guarded(item: T) -> Any:
        async with sem:
            return await one(item)

    return list(await asyncio.gather(*(guarded(i) for i in items)))
