"""The remote manifest: size + SHA-256 of every roster file, computed ON the box with the
fastest hasher there (Python hashlib, else openssl, else sha256sum), files hashed in
parallel up to the box's cores. Hashing runs detached so a large roster never holds a
tool call; the finished manifest is kept on the box in the state dir, one per run
(<durable_root>/.rgt/manifests/<run id>.json), replaced atomically by each new round."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from mcp_server import __version__, scripts
from mcp_server.errors import CommandFailed, InputError
from mcp_server.hosts.base import Host, parse_kv
from mcp_server.hosts.commands import path_word, quote
from mcp_server.paths import policy
from mcp_server.paths.policy import Scope, anywhere, box_scope
from mcp_server.verify.artifacts.roster import RemoteEntry, parse_listing

SCHEMA = "remote-gpu-trainer/PULL/v2"
MAX_LIST = 200_000

HASHER_PY = r"""
import hashlib, os, stat, sys
from concurrent.futures import ProcessPoolExecutor

def one(p):
    # The listing said "regular file"; a swap since (the file or a parent made a symlink) is
    # refused here, at open time: no symlink is followed, the opened thing must be a regular file.
    parent = os.path.dirname(p) or b"."
    if os.path.realpath(parent) != os.path.abspath(parent):
        return p, -1, "a parent directory is now a symlink"
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        return p, -1, "cannot open without following a symlink: " + e.strerror
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return p, -1, "not a regular file at hash time"
        # Plain read() of fresh 1 MiB bytes measured faster here than readinto + memoryview.
        h, n = hashlib.sha256(), 0
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b); n += len(b)
    return p, n, h.hexdigest()

def report(results):
    out = sys.stdout.buffer
    for p, n, d in results:
        if n < 0:
            sys.stderr.write("refused " + p.decode("utf-8", "replace") + ": " + d + "\n"); sys.stderr.flush()
            continue
        out.write(d.encode() + b"\t" + str(n).encode() + b"\t" + p + b"\n"); out.flush()

def main():
    paths = [p for p in sys.stdin.buffer.read().split(b"\n") if p]
    workers = max(1, min(int(sys.argv[1]), len(paths)))
    if workers == 1:
        report(map(one, paths))
        return
    # Processes, not threads: hashing in threads did not scale across cores in measurements. The pool
    # is shut down before the interpreter exits: left to exit-time cleanup, its wake-up pipe can
    # already be closed ("Exception ignored ... Bad file descriptor" on stderr, read as a failure).
    with ProcessPoolExecutor(workers) as pool:
        report(pool.map(one, paths, chunksize=1))

if __name__ == "__main__":
    main()
"""


class ManifestFile(BaseModel):
    path: str
    bytes: int
    sha256: str


class Manifest(BaseModel):
    schema_: str = Field(default=SCHEMA, alias="schema")
    run_id: str | None
    host: str
    root: str
    roster: list[str]
    created_at_utc: str
    tool: str = "remote-gpu-trainer-mcp"
    tool_version: str = __version__
    hasher: str
    files: list[ManifestFile]
    totals: dict[str, int]

    model_config = {"populate_by_name": True}

    def canonical(self) -> bytes:
        return (json.dumps(self.model_dump(by_alias=True), sort_keys=True, indent=2) + "\n").encode()


def result_scope(host: Host, allowed: Sequence[str]) -> Scope:
    """Where a result root may lie: under `allowed` (HostSpec.result_roots: the durable root first,
    then the scratch root and the inventory's verify_roots), outside the durable root's control
    trees except each run's own work dir; with no `allowed` (accept mode: a verified copy on the
    accepting machine), anywhere outside the deny list and the server's own folders."""
    if not allowed:
        return anywhere(host, "the folders verify_artifacts reads")
    return box_scope(allowed[0], allowed, "the roots verify_artifacts reads", this_machine=host.kind == "local",
                     widen="list the directory in the host's verify_roots (inventory)")


def listing_script(root: str, scope: Scope, max_entries: int = MAX_LIST) -> str:
    return policy.library() + scripts.command_words("verify_list", path_word(root, "root"),
                                                    quote(str(max_entries + 1)), *scope.words())


@dataclass(frozen=True)
class RootFacts:
    """What the listing learned about the root and the box's tools."""

    abs_root: str  # the root's physical path
    nproc: int
    now: float | None  # the box's clock at the listing
    python: str = ""
    openssl: str = ""
    under: int | None = None  # which allowed root (1-based) holds the root, when some were given

    @property
    def hasher(self) -> str:
        """The fastest hasher the box has: Python hashlib, else openssl, else sha256sum."""
        return "python-hashlib" if self.python else "openssl" if self.openssl else "sha256sum"

    @classmethod
    def parse(cls, text: str, host: str, root: str) -> RootFacts:
        kv = parse_kv(text)
        if not kv.get("abs"):
            raise CommandFailed("the listing did not report the root's physical path", host=host, path=root)
        nproc = kv.get("nproc", "")
        return cls(abs_root=kv["abs"], nproc=max(1, int(nproc)) if nproc.isdigit() else 1, now=_float(kv.get("now")),
                   python=kv.get("python", ""), openssl=kv.get("openssl", ""),
                   under=int(kv["under"]) if kv.get("under", "").isdigit() else None)


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


async def list_root(host: Host, root: str, allowed: Sequence[str] = ()) -> tuple[RootFacts, list[RemoteEntry]]:
    """The root's facts and entries, the root through the path policy (`result_scope`): a box's
    own run.json or a misled agent cannot point the pull at /etc, a key or the server's own files;
    the control trees inside the root are never listed."""
    facts, body = await _listing(host, root, allowed, MAX_LIST)
    entries = parse_listing(body)
    if len(entries) > MAX_LIST:
        raise InputError(f"more than {MAX_LIST} files under the root", host=host.name, path=root,
                         next_step="point root at the result directory, not the project or a cache")
    return facts, entries


async def confine_root(host: Host, root: str, allowed: Sequence[str]) -> RootFacts:
    """The root's facts, refused exactly as list_root refuses a root outside `allowed`; lists no file."""
    return (await _listing(host, root, allowed, -1))[0]


async def _listing(host: Host, root: str, allowed: Sequence[str], max_entries: int) -> tuple[RootFacts, bytes]:
    scope = result_scope(host, allowed)
    res = await host.run(listing_script(root, scope, max_entries), timeout=30)
    res.check("listing the result root")
    if res.stdout.startswith((b"RGT-OUTSIDE", b"RGT-DENIED")):
        raise policy.refusal(res.stdout.decode("utf-8", "replace").splitlines()[0], what="root", host=host.name,
                             scope=scope, done="nothing was listed, hashed or pulled")
    if res.stdout.startswith(b"RGT-NOROOT"):
        raise InputError("the result root does not exist on the box", host=host.name, path=root,
                         next_step="pass the directory that holds the results (absolute or ~/...)")
    head, _, body = res.stdout.partition(b"RGT-LIST\n")
    return RootFacts.parse(head.decode("utf-8", "replace"), host.name, root), body


async def start_hashing(host: Host, facts: RootFacts, files: list[RemoteEntry]) -> str:
    """Start the detached hasher; returns the job id (its dir is <root>/.rgt-hash-<id>)."""
    job = secrets.token_hex(6)
    jd = _job_dir(facts.abs_root, job)
    runner_args = (facts.abs_root, jd, facts.hasher, str(facts.nproc), facts.python)
    script = scripts.command("verify_hash_start", jd, HASHER_PY, scripts.load("verify_hash_run"), *runner_args)
    payload = "".join(f"{f.path}\n" for f in files).encode()
    res = await host.run(script, stdin=payload, timeout=30)
    if "RGT-HASHING" not in res.text:
        raise CommandFailed("could not start hashing on the box", host=host.name, stderr=res.err_text)
    return job


def _job_dir(abs_root: str, job: str) -> str:
    return f"{abs_root}/.rgt-hash-{job}"


async def poll_hashing(host: Host, abs_root: str, job: str) -> tuple[bool, dict[str, tuple[int | None, str]], str]:
    """(finished, {path: (bytes or None, sha256)}, stderr tail)."""
    res = await host.run(scripts.command("verify_hash_poll", _job_dir(abs_root, job)), timeout=30)
    head, _, rest = res.text.partition("RGT-OUT\n")
    out, _, err = rest.partition("RGT-ERR\n")
    done = head.startswith("RGT-RC ")
    got: dict[str, tuple[int | None, str]] = {}
    for line in out.splitlines():
        parts = line.split("\t", 2)
        if len(parts) == 3 and len(parts[0]) == 64:
            path = parts[2][2:] if parts[2].startswith("./") else parts[2]
            got[path] = (int(parts[1]) if parts[1].isdigit() else None, parts[0].lower())
    return done, got, err


def manifest_path(durable_root: str, run_id: str | None, abs_root: str) -> str:
    """The one manifest of a run (or of a root verified without a run id) in the state dir:
    <durable_root>/.rgt/manifests/<run id>.json, replaced by each new round."""
    key = re.sub(r"[^A-Za-z0-9._-]", "_", run_id).lstrip(".")[:96] if run_id else ""
    key = key or "root-" + sha256_hex(abs_root.encode())[:16]
    return f"{durable_root.rstrip('/')}/.rgt/manifests/{key}.json"


async def write_manifest(host: Host, abs_root: str, job: str, manifest: Manifest, target: str) -> str:
    """Write the manifest to `target` (manifest_path), replacing the previous round's atomically;
    returns its absolute path on the box. Nothing is written beside the data."""
    script = scripts.command_words("verify_manifest_write", quote(_job_dir(abs_root, job)),
                                   path_word(target, "manifest path"))
    res = await host.run(script, stdin=manifest.canonical(), timeout=30)
    for line in res.text.splitlines():
        if line.startswith("RGT-MANIFEST "):
            return line.split(" ", 1)[1]
    raise CommandFailed("could not write the manifest on the box (is the durable root writable?)",
                        host=host.name, path=target, stderr=res.err_text)


def build_manifest(host_name: str, root: str, roster: list[str], run_id: str | None, hasher: str,
                   files: list[tuple[str, int, str]]) -> Manifest:
    return Manifest(
        run_id=run_id, host=host_name, root=root, roster=roster,
        created_at_utc=datetime.now(UTC).isoformat(timespec="seconds"), hasher=hasher,
        files=[ManifestFile(path=p, bytes=n, sha256=d) for p, n, d in files],
        totals={"files": len(files), "bytes": sum(n for _, n, _ in files)},
    )


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
