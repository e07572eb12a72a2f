"""Several files in one round trip: a box script prints `@@F<nonce> <name> <size>` before each
file's bytes and `@@E<nonce>` at the end (job_metrics_read.sh, preflight_read.sh). The nonce is
fresh per call, so a file's own bytes cannot fake a marker."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    name: str
    size: int  # the file's size on the box (more than the bytes sent when a window cut it)
    content: bytes


def split_sections(out: bytes, nonce: str) -> tuple[str, list[Section]]:
    """The text before the first section, and each section (the newline the script adds after a
    file's bytes removed)."""
    body = out.partition(f"@@E{nonce}\n".encode())[0]
    head, *parts = body.split(f"@@F{nonce} ".encode())
    found = []
    for part in parts:
        first, _, content = part.partition(b"\n")
        name, _, size = first.decode("utf-8", "replace").partition(" ")
        found.append(Section(name, int(size) if size.isdigit() else 0, content.removesuffix(b"\n")))
    return head.decode("utf-8", "replace"), found
