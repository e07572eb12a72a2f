"""The box's half of a packed pull: pack the manifest's files into one deterministic tar (GNU tar
when the box has a capable one, else the Python packer below), hash it once, and clean up.

The packer runs detached (scripts/verify_tar_run.sh) so a large pack never holds a tool call.
File names travel on stdin, NUL-separated, never in a command line. The job directory is
<root>/.rgt-pull/pack-<job>/ (a `.rgt-` name, so never part of a roster), or a fresh
directory under the box's $TMPDIR when the root is read-only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mcp_server import scripts
from mcp_server.errors import CommandFailed
from mcp_server.hosts.base import Host, parse_kv

PackerChoice = Literal["auto", "gnu", "python"]
PackState = Literal["packing", "dead", "gone"]
_STATES: dict[str, PackState] = {"RGT-PACKING": "packing", "RGT-DEAD": "dead", "RGT-GONE": "gone"}

# Regular files only, in the order given, with the same fixed metadata GNU tar is told to use.
PACKER_PY = r"""
import hashlib, io, os, stat, sys, tarfile

def pack(out):
    names = [n for n in sys.stdin.buffer.read().split(b"\0") if n]
    skipped = 0
    with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as tar:
        for raw in names:
            name = os.fsdecode(raw)
            try:
                mode = os.lstat(raw).st_mode
                if not stat.S_ISREG(mode):
                    raise OSError("not a regular file")
                # Read whole (the files packed are small) so a file that shrinks meanwhile cannot
                # leave a short member behind a header that promised more.
                with open(os.open(raw, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
                    data = f.read()
            except OSError as exc:
                print(f"{name}: {exc.strerror or exc}", file=sys.stderr)
                skipped += 1
                continue
            info = tarfile.TarInfo(name)  # mtime 0, uid/gid 0, no user or group names
            info.size, info.mode = len(data), stat.S_IMODE(mode)
            tar.addfile(info, io.BytesIO(data))
    return 1 if skipped else 0

def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    print(h.hexdigest())
    return 0

if __name__ == "__main__":
    sys.exit(pack(sys.argv[2]) if sys.argv[1] == "pack" else digest(sys.argv[2]))
"""


@dataclass(frozen=True)
class PackStarted:
    box_dir: str
    packer: str


@dataclass(frozen=True)
class PackDone:
    rc: int
    sha256: str
    size: int
    err: str

    @property
    def usable(self) -> bool:
        """A tar was written and hashed (members it lacks are named when it is unpacked)."""
        return self.size > 0 and len(self.sha256) == 64


async def start_pack(host: Host, abs_root: str, job: str, names: list[str],
                     packer: PackerChoice = "auto") -> PackStarted | None:
    """Start packing `names` (relative to `abs_root`, packed in this order); None when the box
    has no packer or no writable directory for the tar."""
    script = scripts.command("verify_tar_start", abs_root, job, packer, scripts.load("verify_tar_run"), PACKER_PY)
    payload = b"".join(n.encode("utf-8", "surrogateescape") + b"\0" for n in names)
    res = await host.run(script, stdin=payload, timeout=30)
    kv = parse_kv(res.text)
    if "RGT-NOPACKER" in res.text or "RGT-NODIR" in res.text:
        return None
    if not kv.get("dir") or not kv.get("packer"):
        raise CommandFailed("could not start packing on the box", host=host.name, path=abs_root,
                            stderr=res.err_text or res.text)
    return PackStarted(box_dir=kv["dir"], packer=kv["packer"])


async def poll_pack(host: Host, box_dir: str) -> PackDone | PackState:
    res = await host.run(scripts.command("verify_tar_poll", box_dir), timeout=30)
    head, _, err = res.text.partition("RGT-ERR\n")
    first = head.split("\n", 1)[0].strip()
    if first in _STATES:
        return _STATES[first]
    kv = parse_kv(head)
    if "sha256" not in kv:
        raise CommandFailed("could not read the packer's result on the box", host=host.name, path=box_dir,
                            stderr=res.err_text or res.text)
    return PackDone(rc=_int(kv.get("pack_rc")), sha256=kv["sha256"].lower(), size=_int(kv.get("bytes")), err=err)


async def clean_pack(host: Host, box_dir: str) -> None:
    """Stop the packer if it still runs and remove its directory and tar (best effort)."""
    await host.run(scripts.command("verify_tar_clean", box_dir), timeout=30)


def _int(text: str | None) -> int:
    return int(text) if text and text.lstrip("-").isdigit() else -1
