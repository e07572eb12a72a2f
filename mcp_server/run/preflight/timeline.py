"""The drill's checkpoint events read back as saves: when each began and ended, which checkpoint
it wrote, whether it wrote in place, and which checkpoints were on disk at any moment.

An event is `[t, attempt, kind, path, is_dir, bytes, files, staging]`, kind one of appear,
replace (a new inode under the name: an atomic rename), change (same inode, other bytes or
mtime: written in place) and remove; staging is 1 for a temp file beside a checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SAVE_GAP = 0.5  # seconds: with no step in the log, final-name writes closer than this are one save


@dataclass(frozen=True)
class Event:
    t: float
    attempt: int
    kind: str
    path: str
    is_dir: bool
    size: int
    files: int
    staging: bool

    @staticmethod
    def of(raw: list[Any]) -> Event | None:
        try:
            t, attempt, kind, path, is_dir, size, files, staging = raw
            return Event(float(t), int(attempt), str(kind), str(path), bool(is_dir), int(size), int(files),
                         bool(staging))
        except (TypeError, ValueError):
            return None


@dataclass
class Save:
    start: float
    end: float
    attempt: int
    paths: list[str] = field(default_factory=list)
    in_place: list[str] = field(default_factory=list)  # names that changed under their final name
    size: int = 0
    files: int = 0
    is_dir: bool = False
    x: float | None = None  # the step it holds: the last one its attempt printed before it began


def events_of(raw: object) -> list[Event]:
    rows = raw if isinstance(raw, list) else []
    return sorted((e for e in (Event.of(r) for r in rows if isinstance(r, list)) if e), key=lambda e: e.t)


def saves_of(events: list[Event], x_at: Callable[[int, float], float | None]) -> list[Save]:
    """Writes under final names grouped into saves. A save is what the job wrote between two of
    its metrics lines (`x_at`: the last step an attempt printed by a time); where the log names
    no step, a name appearing or replaced, a file cut short (truncated to be rewritten) or a pause
    of SAVE_GAP starts the next one."""
    out: list[Save] = []
    sizes: dict[str, int] = {}
    for e in events:
        if e.staging:
            continue
        if e.kind == "remove":
            sizes.pop(e.path, None)
            continue
        last = out[-1] if out else None
        x = x_at(e.attempt, e.t)
        if last is None or e.attempt != last.attempt:
            fresh = True
        elif x is not None and last.x is not None:
            fresh = x != last.x
        else:
            fresh = e.t - last.end > SAVE_GAP or (e.kind != "change" and e.path in last.paths) or (
                e.kind == "change" and e.size < sizes.get(e.path, 0))
        sizes[e.path] = e.size
        if fresh or last is None:
            last = Save(start=e.t, end=e.t, attempt=e.attempt, x=x)
            out.append(last)
        last.end = e.t
        if e.path not in last.paths:
            last.paths.append(e.path)
        if e.kind == "change" and e.path not in last.in_place:
            last.in_place.append(e.path)
        last.size, last.files, last.is_dir = max(last.size, e.size), max(last.files, e.files), e.is_dir
    return out


def present_at(events: list[Event], t: float) -> dict[str, Event]:
    """The final checkpoints on disk at time `t`, each as its last event."""
    on: dict[str, Event] = {}
    for e in events:
        if e.t > t:
            break
        if e.staging:
            continue
        if e.kind == "remove":
            on.pop(e.path, None)
        else:
            on[e.path] = e
    return on


def staging_left(events: list[Event]) -> list[str]:
    """Temp files beside the checkpoints that were still there when the drill last looked."""
    on: dict[str, bool] = {}
    for e in events:
        if e.staging:
            on[e.path] = e.kind != "remove"
    return sorted(p for p, there in on.items() if there)


def peak_present(events: list[Event]) -> int:
    """The most final checkpoints on disk at once."""
    on: set[str] = set()
    peak = 0
    for e in events:
        if e.staging:
            continue
        if e.kind == "remove":
            on.discard(e.path)
        else:
            on.add(e.path)
        peak = max(peak, len(on))
    return peak
