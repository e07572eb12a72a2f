"""The records of a W&B transaction log, `run-<id>.wandb`, which wandb-core writes beside every run
(offline and online alike), each parsed with wandb's own protobuf `Record`. wandb 0.31 ships no Python
reader of the file (its DataStore left wandb.sdk.internal when the Go core took the writing over), so
the framing is read here: LevelDB's log format (32 KiB blocks of crc32-checked chunks) after W&B's
7-byte header. A file larger than FULL_READ is read in two windows, its head (the run and its config)
and its tail (the last values and the exit record)."""

from __future__ import annotations

import importlib
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HEADER = struct.Struct("<4sHB")  # ident, magic, version
IDENT, MAGIC = b":W&B", 0xBEE1
CHUNK = struct.Struct("<IHB")  # crc32 of kind + body, body length, kind
BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
_SEED = {kind: zlib.crc32(bytes([kind])) for kind in (FULL, FIRST, MIDDLE, LAST)}

FULL_READ = 32 * 1024 * 1024
HEAD_READ = 1024 * 1024
TAIL_READ = 4 * 1024 * 1024


@dataclass
class LogRead:
    """How a log was read: `cut` when only its head and tail were, `torn` when it ends in a partial
    or corrupt chunk (a writer killed mid-block), `bad` records that did not parse."""

    cut: bool = False
    torn: bool = False
    bad: int = 0


def record_type() -> Any:
    """wandb's `Record` message class (imported here: wandb costs ~1 s to import)."""
    return importlib.import_module("wandb.proto.wandb_internal_pb2").Record


def _decode_error() -> type[Exception]:
    error: type[Exception] = importlib.import_module("google.protobuf.message").DecodeError
    return error


def is_log(head: bytes) -> bool:
    if len(head) < HEADER.size:
        return False
    ident, magic, _ = HEADER.unpack_from(head)
    return bool(ident == IDENT and magic == MAGIC)


def records(path: Path, read: LogRead) -> Iterator[Any]:
    """Each complete record of the log at `path`, in file order; `read` says what was left out."""
    record, damaged = record_type(), _decode_error()
    for payload in _payloads(path, read):
        message = record()
        try:
            message.ParseFromString(payload)
        except damaged:  # one damaged record: the others still count
            read.bad += 1
            continue
        yield message


def _payloads(path: Path, read: LogRead) -> Iterator[bytes]:
    size = path.stat().st_size
    with path.open("rb") as f:
        f.seek(HEADER.size)
        if size <= FULL_READ:
            yield from _scan(f.read(), HEADER.size, read, final=True)
            return
        read.cut = True
        yield from _scan(f.read(HEAD_READ - HEADER.size), HEADER.size, read, final=False)
        start = (size - TAIL_READ) // BLOCK * BLOCK
        f.seek(start)
        yield from _scan(f.read(), start, read, final=True)


def _scan(data: bytes, offset: int, read: LogRead, *, final: bool) -> Iterator[bytes]:
    """Records whose chunks lie wholly in `data` (the bytes at file offset `offset`). A window that
    starts mid-record skips to the next record's first chunk."""
    pos, pending = 0, None
    while pos < len(data):
        left = BLOCK - (offset + pos) % BLOCK
        if left < CHUNK.size or _padding(data, pos):
            pos += left  # the rest of the block is a zero-filled trailer
            continue
        if pos + CHUNK.size > len(data):
            read.torn = read.torn or final
            return
        crc, length, kind = CHUNK.unpack_from(data, pos)
        body = data[pos + CHUNK.size: pos + CHUNK.size + length]
        if len(body) < length or kind not in _SEED or zlib.crc32(body, _SEED[kind]) != crc:
            read.torn = read.torn or final
            return
        pos += CHUNK.size + length
        if kind == FULL:
            pending = None
            yield body
        elif kind == FIRST:
            pending = bytearray(body)
        elif pending is not None:
            pending += body
            if kind == LAST:
                yield bytes(pending)
                pending = None


def _padding(data: bytes, pos: int) -> bool:
    return data[pos: pos + CHUNK.size].count(0) == min(CHUNK.size, len(data) - pos)
