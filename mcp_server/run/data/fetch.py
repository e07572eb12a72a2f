"""fetch_data: a model, dataset or file downloaded on the box, as a detached run (so tail_logs,
wait_for_run and cancel_run follow it), resumable, retried with backoff, checked against free
bytes and inodes before it starts, verified by sha256 when one is given, and marked complete so
a second call is a no-op."""

from __future__ import annotations

import hashlib
import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from mcp_server import scripts
from mcp_server.errors import GateRefused, InputError
from mcp_server.hosts.base import Host, parse_kv
from mcp_server.hosts.commands import check_env_name, path_word, quote
from mcp_server.hosts.pool import HostSpec
from mcp_server.ledger import Ledger
from mcp_server.paths import policy
from mcp_server.redact import Redactor
from mcp_server.run.jobs.launch import LaunchRequest, LaunchResult, launch

HEADROOM_BYTES = 1024**3
MAX_EXPECTED_GIB = 1_000_000  # about a petabyte; 1e308 GiB would overflow the byte count
HF_MIN_INODES = 10_000  # a repo's file count is unknown before it is listed
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$")  # a branch, tag or commit
_URL = re.compile(r"^https?://[^\s/?#]+[^\s]*$")
_SHA = re.compile(r"^[0-9a-f]{64}$")


class FetchRequest(BaseModel):
    """What to fetch. Its text fields are checked by `_check`, whose errors never quote a value
    (a pydantic pattern error would quote it back)."""

    url: str | None = Field(default=None, description="http(s) URL of one file, taken literally")
    hf_repo: str | None = Field(default=None, description="a Hugging Face repo id, e.g. meta-llama/Llama-3.1-8B")
    hf_repo_type: Literal["model", "dataset"] = "model"
    revision: str | None = None
    dest: str = Field(description="where it lands on the box: a file for a URL, a directory for a repo")
    sha256: str | None = None
    expected_gib: float | None = Field(default=None, gt=0, description="size when the source does not say")
    token_env: str | None = Field(default=None, description="NAME of the server variable holding the token")
    attempts: int = Field(default=8, ge=1, le=50)


class FetchResult(BaseModel):
    host: str
    dest: str
    outcome: Literal["started", "already_there"]
    expected_bytes: int | None = Field(description="what the source said (a URL's Content-Length) or expected_gib")
    resumes_from: int = Field(default=0, description="bytes an earlier attempt left (.part), kept")
    sha256: str | None = Field(default=None, description="already_there: the hash the marker recorded")
    run: LaunchResult | None = Field(default=None, description="the download job: tail_logs / wait_for_run it")


def _refuse(what: str, expected: str, step: str) -> InputError:
    return InputError(f"{what}; nothing was fetched", expected=expected, next_step=step)


def _check_names(req: FetchRequest) -> None:
    """The name-like arguments, each against its own rule; an error names the argument, never its value."""
    if req.url is not None and (not _URL.match(req.url) or any(ord(c) < 32 or ord(c) == 127 for c in req.url)):
        raise _refuse("url is not an http(s) URL of one file", "http:// or https:// then a host, no spaces or "
                      "control characters (ftp and file are not fetched)", "pass the file's http(s) URL")
    if req.hf_repo is not None and (not _REPO.match(req.hf_repo) or ".." in req.hf_repo):
        raise _refuse("hf_repo is not a repo id", "owner/name: letters, digits, . _ -, each part starting with a "
                      "letter or digit, no ..", "pass the repo id as the Hub shows it")
    if req.revision is not None and (len(req.revision) > 128 or not _REVISION.match(req.revision)
                                     or ".." in req.revision):
        raise _refuse("revision is not a branch, tag or commit name", "at most 128 characters: parts of letters, "
                      "digits, . _ - joined by /, each starting with a letter or digit, no ..",
                      "pass a branch (main), a tag, or a commit hash")
    if req.sha256 is not None and not _SHA.match(req.sha256):
        raise _refuse("sha256 is not a SHA-256", "64 lowercase hex digits", "pass the file's hex digest, or omit it")
    if req.token_env is not None:
        try:
            check_env_name(req.token_env)
        except InputError:
            raise _refuse("token_env is not an environment variable name", "[A-Za-z_][A-Za-z0-9_]*, at most 128 "
                          "characters", "pass the NAME of the server's variable (e.g. HF_TOKEN)") from None
    if req.expected_gib is not None and not req.expected_gib <= MAX_EXPECTED_GIB:
        raise _refuse("expected_gib is larger than any disk", f"at most {MAX_EXPECTED_GIB:,} GiB",
                      "pass the size in GiB")
    if not req.dest or any(ord(c) < 32 or ord(c) == 127 for c in req.dest):
        raise _refuse("dest is empty or holds a control character", "an absolute box path", "pass the box path")


def _check(req: FetchRequest, spec: HostSpec) -> None:
    """What can be told here; where dest really lands is decided on the box (`policy.confined_path`)."""
    if (req.url is None) == (req.hf_repo is None):
        raise InputError("give exactly one of url or hf_repo")
    _check_names(req)
    roots = [spec.durable_root.rstrip("/") + "/", spec.scratch_root.rstrip("/") + "/"]
    parts = req.dest.split("/")
    if not any(req.dest.startswith(r) for r in roots) or ".." in parts or "." in parts:
        raise InputError("dest must be under the box's durable or scratch root, without . or .. parts",
                         host=spec.name, expected=f"under {spec.durable_root} or {spec.scratch_root}",
                         next_step="pass a box path under one of those roots")


def _roots(spec: HostSpec) -> list[str]:
    """The roots a fetch may write under, then the control trees it may not (rgt_confine's words)."""
    return policy.confine_words(spec.durable_root, [spec.durable_root, spec.scratch_root])


def _gate(spec: HostSpec, kv: dict[str, str], need: int | None, hf: bool) -> None:
    avail, ifree = int(kv.get("df_avail") or 0), int(kv.get("df_ifree") or 0)
    if need is not None and kv.get("df_avail") and need + HEADROOM_BYTES > avail:
        raise GateRefused(f"not enough room: {need / 2**30:.2f} GiB to fetch plus 1 GiB headroom, "
                          f"{avail / 2**30:.2f} GiB free where it lands; nothing was downloaded", host=spec.name,
                          next_step="free space (or fetch to the other root), then call again")
    if kv.get("df_ifree") and ifree and ifree < (HF_MIN_INODES if hf else 100):
        raise GateRefused(f"not enough inodes: {ifree} free where it lands; nothing was downloaded",
                          host=spec.name, next_step="delete many small files (per-sample outputs, caches) first")


def fingerprint(req: FetchRequest) -> str:
    """What was asked for, as a hash (a URL may carry a signature): the completion marker keeps
    it, so a different source into the same dest is not taken for done."""
    what = f"url {req.url} {req.sha256 or ''}" if req.url else \
        f"hf {req.hf_repo_type} {req.hf_repo} {req.revision or 'default'}"
    return hashlib.sha256(what.encode()).hexdigest()[:32]


def _command(req: FetchRequest, length: int | None, spec: HostSpec) -> str:
    attempts = quote(str(req.attempts))
    if req.url is not None:
        words = [quote(req.url), path_word(req.dest, "dest"), quote(req.sha256 or ""), attempts,
                 quote("" if length is None else str(length)), quote(fingerprint(req))]
        return policy.library() + scripts.command_words("fetch_url", *words, *_roots(spec))
    words = [quote(req.hf_repo or ""), quote(req.hf_repo_type), quote(req.revision or ""), path_word(req.dest, "dest"),
             attempts, quote(fingerprint(req))]
    return policy.library() + scripts.command_words("fetch_hf", *words, *_roots(spec))


async def fetch_data(host: Host, spec: HostSpec, req: FetchRequest, *, ledger: Ledger | None,
                     redactor: Redactor) -> FetchResult:
    _check(req, spec)
    res = await host.run(policy.library() + scripts.command_words(
        "fetch_check", path_word(req.dest, "dest"), quote(req.url or ""), *_roots(spec)), timeout=30)
    res.check("checking where the download lands")
    kv = parse_kv(res.text)
    what = {"part": "dest's .part file", "marker": "dest's completion marker"}.get(kv.get("confine_of", ""), "dest")
    policy.confined_path(kv.get("confine", ""), what=what, host=spec.name, roots=[spec.durable_root, spec.scratch_root])
    if kv.get("done") and kv.get("done_source") != fingerprint(req):
        raise InputError("dest already holds a different fetch (another URL, repo, revision or sha256)",
                         host=spec.name, next_step="choose another dest, or delete that one first")
    if kv.get("done"):
        return FetchResult(host=spec.name, dest=req.dest, outcome="already_there", expected_bytes=None,
                           sha256=kv["done"] if _SHA.match(kv["done"]) else None)
    if req.hf_repo and not (kv.get("hf") or kv.get("hfcli")):
        raise InputError("the box has neither `hf` nor `huggingface-cli`", host=spec.name,
                         next_step="pip install -U huggingface_hub on the box (prepare_box sets its caches), then "
                         "call again")
    length = int(kv["length"]) if kv.get("length", "").isdigit() else None
    need = length if length is not None else (int(req.expected_gib * 2**30) if req.expected_gib else None)
    part = int(kv.get("part") or 0)
    _gate(spec, kv, None if need is None else max(0, need - part), req.hf_repo is not None)
    name = "fetch-" + re.sub(r"[^A-Za-z0-9._-]", "-", (req.hf_repo or urlsplit(req.url or "").path).rsplit("/", 1)[-1]
                             or "data")[:48].strip("-._")
    launch_req = LaunchRequest(
        command=f"bash -c {quote(_command(req, length, spec))}", name=name,
        secret_env=[req.token_env] if req.token_env else [],
        env={"RGT_FETCH_TOKEN_VAR": req.token_env} if req.token_env else {}, probe_s=2.0,
        relaunch=True, min_free_gib=0, min_free_inodes=0)
    run = await launch(host, spec, launch_req, ledger=ledger, redactor=redactor)
    return FetchResult(host=spec.name, dest=req.dest, outcome="started", expected_bytes=need, resumes_from=part,
                       run=run)
