"""push_code: a local project onto the box as an immutable, content-addressed snapshot under
<durable_root>/code/<project>/<snapshot-id>/. One round trip asks what the box has; batches of
only the files it lacks go as tar streams over the open connection (no rsync or second
connection needed on either end); the seal completes the tree from content the box already has,
proves every hash and renames the snapshot into place, read-only, folders included. A file taken
from an older snapshot that was edited on the box since it was sealed fails that proof and is sent
fresh. What this machine never sends is local_policy's."""

from __future__ import annotations

import asyncio
import functools
import io
import json
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from mcp_server import scripts
from mcp_server.errors import GateRefused, InputError, RgtError
from mcp_server.hosts.base import Host, parse_kv
from mcp_server.hosts.commands import check_name, path_word, quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.paths.serving import current_settings
from mcp_server.progress import Report
from mcp_server.run.code.local_policy import SkippedFile, check_allow_list, check_source, denied_dirs
from mcp_server.run.code.snapshot import (
    LocalFile,
    Provenance,
    check_caps,
    hash_files,
    manifest_text,
    provenance,
    select,
    sizes,
    snapshot_id,
)

BATCH_BYTES = 32 * 1024 * 1024  # one tar stream per round trip, held in memory while it is sent
SENDS_IN_FLIGHT = 2
HEADROOM_BYTES = 1024**3  # the push leaves at least this much free on the box
SKIPPED_SHOWN = 100
BOX_CHANGED = 8  # code_seal.sh's exit status: a file taken from the box did not match its hash


class PushResult(BaseModel):
    host: str
    project: str
    snapshot_id: str
    path: str = Field(description="the snapshot on the box: give it as launch_detached's workdir, or code=<id>")
    outcome: str = Field(description="sealed (new), already_there (same tree pushed before: nothing sent)")
    files: int
    bytes_total: int
    files_sent: int
    bytes_sent: int
    files_reused: int = Field(description="taken from content the box already had (earlier snapshots)")
    files_resumed: int = Field(description="already staged by an interrupted push of the same tree")
    symlinks_skipped: list[str] = Field(default_factory=list)
    skipped: list[SkippedFile] = Field(default_factory=list, description="files never sent, each with the rule "
                                       f"(first {SKIPPED_SHOWN}): a symlinked folder on its path, a credential "
                                       "folder, its name, or a key/token in its first 256 KiB")
    skipped_total: int = 0
    secrets_allowed: list[str] = Field(default_factory=list, description="sent despite a key/token match because "
                                       "allow_secrets_in named them (recorded in the ledger)")
    box_changed: list[str] = Field(default_factory=list, description="files an older snapshot on the box no longer "
                                   "held as sealed: sent fresh instead of reused")
    read_only: bool = Field(default=False, description="every file and folder of the snapshot is read-only on the "
                            "box: a run writing to a relative path fails; write under the run dir")
    provenance: Provenance
    seconds: float


def code_dir(spec: HostSpec, project: str) -> str:
    return f"{spec.durable_root.rstrip('/')}/code/{check_name(project, 'project')}"


@functools.cache
def _gnu_tar() -> bool:
    try:
        out = subprocess.run(["tar", "--version"], capture_output=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return b"GNU tar" in out


def _tar(root: Path, files: list[LocalFile], extra: dict[str, bytes]) -> bytes:
    """One batch as a tar stream: GNU tar when this machine has it (several times faster than
    tarfile on a big batch), else Python's tarfile. Owners are not kept; modes and mtimes are."""
    if _gnu_tar():
        with tempfile.TemporaryDirectory(prefix="rgt-push-") as tmp:
            for name, data in extra.items():
                (Path(tmp) / name).parent.mkdir(parents=True, exist_ok=True)
                (Path(tmp) / name).write_bytes(data)
            names = "".join(f.path + "\0" for f in files).encode()
            extras = ["-C", tmp, *extra] if extra else []
            res = subprocess.run(["tar", "-c", "-f", "-", "--owner=0", "--group=0", "--numeric-owner", *extras,
                                  "-C", str(root), "--null", "--no-recursion", "-T", "-"],
                                 input=names, capture_output=True, check=False)
            if res.returncode != 0:
                raise InputError("could not read the files to push: " + res.stderr.decode("utf-8", "replace")[-300:],
                                 path=str(root), next_step="a file changed or vanished while pushing: push again")
            return res.stdout
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for f in files:
            info = tarfile.TarInfo(f.path)
            info.size, info.mode = f.size, 0o755 if f.executable else 0o644
            info.mtime = int((root / f.path).stat().st_mtime)
            with (root / f.path).open("rb") as fh:
                tar.addfile(info, fh)
        for name, data in extra.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _batches(files: list[LocalFile]) -> list[list[LocalFile]]:
    out: list[list[LocalFile]] = [[]]
    size = 0
    for f in files:
        if out[-1] and size + f.size > BATCH_BYTES:
            out.append([])
            size = 0
        out[-1].append(f)
        size += f.size
    return out


@dataclass
class _BoxHas:
    """What the first round trip said: sealed already, room, contents the box has, files staged."""

    exists: bool
    avail: int | None
    ifree: int | None
    have: set[str]
    staged: set[tuple[str, str]]
    altered: list[str]
    read_only: bool


async def _ask(host: Host, dir_word: str, sid: str, manifest: str) -> _BoxHas:
    res = await host.run(scripts.command_words("code_have", dir_word, quote(sid)), stdin=manifest.encode(),
                         timeout=30)
    res.check("asking the box which files it has")
    kv = parse_kv(res.text)
    have, staged, altered = set(), set(), []
    for line in res.text.splitlines():
        kind, _, rest = line.partition(" ")
        sha, _, path = rest.partition(" ")
        if kind == "have":
            have.add(sha)
        elif kind == "staged":
            staged.add((sha, path))
        elif kind in ("altered", "extra"):
            altered.append(f"{rest} ({'changed or removed' if kind == 'altered' else 'added'})")
    avail, ifree = kv.get("df_avail", ""), kv.get("df_ifree", "")
    return _BoxHas(kv.get("exists") == "1", int(avail) if avail.isdigit() else None,
                   int(ifree) if ifree.isdigit() else None, have, staged, altered, kv.get("read_only") == "1")


def _refuse_altered(spec: HostSpec, where: str, box: _BoxHas) -> None:
    raise GateRefused(f"snapshot {where.rsplit('/', 1)[-1]} on the box was edited after it was sealed: "
                      + ", ".join(box.altered[:10]) + "; it no longer holds the tree its id names, so nothing was "
                      "sent and no run should be launched from it", host=spec.name, path=where,
                      next_step="find what writes into it (a run writing to a relative path?); prune_code it "
                      "(when no run names it) and push again")


async def _seal(host: Host, dir_word: str, sid: str, files: list[LocalFile]) -> tuple[bool | None, list[str]]:
    """The seal: (read-only, []) once sealed; (None, ["<snapshot> <path>", ...]) when files taken
    from the box failed their hash (each removed from staging, to be sent fresh)."""
    sealed = await host.run(scripts.command_words("code_seal", dir_word, quote(sid)),
                            stdin=manifest_text(files).encode(), timeout=120)
    if sealed.exit_status == BOX_CHANGED:
        return None, [line[len("changed "):] for line in sealed.text.splitlines() if line.startswith("changed ")]
    if not sealed.ok:
        raise RgtError("the box could not seal the snapshot: " + (sealed.text + sealed.err_text).strip()[-600:],
                       host=host.name, path=sid, exit_status=sealed.exit_status,
                       next_step="push again: files already staged are not sent twice")
    return parse_kv(sealed.text).get("read_only") == "1", []


async def _seal_proven(host: Host, root: Path, dir_word: str, sid: str, files: list[LocalFile],
                       progress: Report | None) -> tuple[bool, list[LocalFile], list[str]]:
    """Seal; files the box offered but that fail their hash are sent fresh and the seal runs again.
    (The local file is the truth: refusing would leave nothing to fix locally, and the edited older
    snapshot stays as it is.) Returns read-only, the files sent fresh, and what was found changed."""
    read_only, bad = await _seal(host, dir_word, sid, files)
    if read_only is not None:
        return read_only, [], []
    fresh = {entry.partition(" ")[2] for entry in bad}
    again = [f for f in files if f.path in fresh]
    if not again:
        raise RgtError("files taken from the box failed their hash and match no file of this tree: "
                       + ", ".join(bad[:10]), host=host.name, path=sid, next_step="push again")
    await _send(host, root, dir_word, sid, again, {}, progress)
    read_only, still = await _seal(host, dir_word, sid, files)
    if read_only is None:
        raise RgtError("files sent fresh still failed their hash on the box: " + ", ".join(still[:10]),
                       host=host.name, path=sid,
                       next_step="something on the box writes into the code dir while pushing: stop it, push again")
    return read_only, again, [_changed_text(entry) for entry in bad]


def _changed_text(entry: str) -> str:
    snap, _, path = entry.partition(" ")
    if snap == "-":
        return f"{path} changed on the box between its arrival and the seal: sent fresh"
    return f"snapshot {snap}'s {path} was changed on the box after it was sealed: sent fresh, not reused"


def _room(spec: HostSpec, where: str, box: _BoxHas, files: int, need: int) -> None:
    if box.avail is not None and need + HEADROOM_BYTES > box.avail:
        raise GateRefused(f"the box has {box.avail / 2**30:.1f} GiB free where the code goes; this push needs "
                          f"{need / 2**30:.2f} GiB plus 1 GiB headroom", host=spec.name, path=where)
    if box.ifree and files + 1000 > box.ifree:
        raise GateRefused(f"the box has {box.ifree} free inodes where the code goes; this push needs {files} "
                          "plus 1000 headroom", host=spec.name, path=where)


async def _send(host: Host, root: Path, dir_word: str, sid: str, send: list[LocalFile], extra: dict[str, bytes],
                progress: Report | None) -> None:
    """The batches, two in flight (one travels while the box unpacks and checks the other), each
    built in a thread while the previous ones are sent."""
    batches = _batches(send)
    need, sent = sum(f.size for f in send), 0
    lane = asyncio.Semaphore(SENDS_IN_FLIGHT)

    async def one(i: int, batch: list[LocalFile]) -> None:
        nonlocal sent
        async with lane:
            sums = {f".rgt/batch-{i}.sha": manifest_text(batch).encode()}
            payload = await asyncio.to_thread(_tar, root, batch, sums | (extra if i == len(batches) - 1 else {}))
            got = await host.run(scripts.command_words("code_receive", dir_word, quote(sid), quote(str(i))),
                                 stdin=payload, timeout=max(60.0, len(payload) / 2e6), max_output=65536, slow=True)
            if not got.ok:
                raise RgtError("a batch did not arrive intact: " + (got.text + got.err_text).strip()[-400:],
                               host=host.name, exit_status=got.exit_status,
                               next_step="push again: files that arrived whole are not sent twice")
            sent += sum(f.size for f in batch)
            if progress is not None:
                await progress(sent, need, f"sent {sent / 2**20:.1f} of {need / 2**20:.1f} MiB")

    tasks = [asyncio.create_task(one(i, b)) for i, b in enumerate(batches)]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        # A batch failed (or the call was cancelled): the others stop too, before the error is
        # told, so none keeps writing into the staging dir under a retry's feet.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


@dataclass
class _Chosen:
    """The local side's decision: what goes, what never goes and why, what goes only by permission."""

    files: list[LocalFile]
    paths: list[str]
    links: list[str]
    skipped: list[SkippedFile]
    allowed: list[LocalFile]


def _choose(root: Path, exclude: list[str], state_dir: Path, allow: list[str], max_file_mb: float,
            max_total_mb: float) -> _Chosen:
    check_source(root, state_dir)  # the path policy first: a refused source is not even looked at
    if not root.is_dir():
        raise InputError("source is not a local directory", path=str(root),
                         next_step="give the project's root directory on the machine running this server")
    denied = denied_dirs(state_dir)
    allow_set = check_allow_list(allow)
    chosen = select(root, exclude, denied)
    check_caps(sizes(root, chosen.keep), max_file_mb, max_total_mb)  # before reading a 40 GB data/ to hash it
    files, allowed, skipped = [], [], chosen.skipped
    for f in hash_files(root, chosen.keep):
        if f.secret is None:
            files.append(f)
        elif f.path in allow_set:
            files.append(f)
            allowed.append(f)
        else:
            skipped.append(SkippedFile(path=f.path, reason=f"holds {f.secret} in its first 256 KiB: not sent; "
                                       "name it in allow_secrets_in only if it is meant for the box"))
    if not files:
        raise InputError("nothing to push: every file is ignored, excluded or never sent"
                         + (f" ({len(skipped)} never sent, e.g. {skipped[0].path}: {skipped[0].reason})"
                            if skipped else ""), path=str(root))
    return _Chosen(files, [f.path for f in files], chosen.links, skipped, allowed)


async def push_code(host: Host, spec: HostSpec, source: str, project: str | None, *, exclude: list[str],
                    max_file_mb: float, max_total_mb: float, ledger: Ledger | None,
                    progress: Report | None = None, state_dir: Path | None = None,
                    allow_secrets_in: list[str] | None = None) -> PushResult:
    start = time.monotonic()
    root = Path(source).expanduser()
    chosen = _choose(root, exclude, state_dir or current_settings().home, allow_secrets_in or [], max_file_mb,
                     max_total_mb)
    project = check_name(project or root.resolve().name, "project")
    files = chosen.files
    sid, where = snapshot_id(files), code_dir(spec, project)
    dir_word = path_word(where, "code dir")
    box = await _ask(host, dir_word, sid, manifest_text(files))
    prov, diff = provenance(root, chosen.paths)
    changed: list[str] = []

    def result(outcome: str, sent: list[LocalFile], reused: int, resumed: int, read_only: bool) -> PushResult:
        return PushResult(host=spec.name, project=project, snapshot_id=sid, path=f"{where}/{sid}", outcome=outcome,
                          files=len(files), bytes_total=sum(f.size for f in files), files_sent=len(sent),
                          bytes_sent=sum(f.size for f in sent), files_reused=reused, files_resumed=resumed,
                          symlinks_skipped=chosen.links[:50], skipped=chosen.skipped[:SKIPPED_SHOWN],
                          skipped_total=len(chosen.skipped), secrets_allowed=[f.path for f in chosen.allowed],
                          box_changed=changed[:50], read_only=read_only, provenance=prov,
                          seconds=round(time.monotonic() - start, 3))

    if box.exists and box.altered:
        _refuse_altered(spec, where, box)
    if ledger is not None and chosen.allowed:
        ledger.record("code_secret_allowed", host=spec.name, summary=f"{project}: {len(chosen.allowed)} file(s)",
                      data={"project": project, "snapshot_id": sid, "source": str(root),
                            "files": [{"path": f.path, "holds": f.secret} for f in chosen.allowed]})
    if box.exists:
        return result("already_there", [], 0, 0, box.read_only)
    send = [f for f in files if f.sha256 not in box.have and (f.sha256, f.path) not in box.staged]
    resumed = sum((f.sha256, f.path) in box.staged for f in files)
    _room(spec, where, box, len(send), sum(f.size for f in send))
    extra = {".rgt/provenance.json": json.dumps(prov.model_dump(), indent=2).encode(),
             **({".rgt/uncommitted.diff": diff} if diff else {})}
    await _send(host, root, dir_word, sid, send, extra, progress)
    read_only, resent, changed = await _seal_proven(host, root, dir_word, sid, files, progress)
    send += [f for f in resent if f not in send]
    if ledger is not None:
        ledger.record("code_push", host=spec.name, summary=f"{project}/{sid}",
                      data={"project": project, "snapshot_id": sid, "path": f"{where}/{sid}",
                            "secrets_allowed": [f.path for f in chosen.allowed],
                            **prov.model_dump(exclude={"untracked"})})
    return result("sealed", send, len(files) - len(send) - resumed, resumed, read_only)
