"""What push_code never sends from this machine, whatever folder the agent names: the server's own
state, the user's credential folders (a source inside one is refused outright, by the path
policy's local side), files named like shell histories, password databases or gh's token file,
and any file whose first bytes hold a private key or an access token. The folders and names are
the path policy's deny list (paths/deny.py); a content match alone may be let through, file by
file, with allow_secrets_in; the folder and name rules never. Reasons name the rule, never the
secret."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pydantic import BaseModel

from mcp_server import portable
from mcp_server.errors import InputError
from mcp_server.paths import deny
from mcp_server.paths.local import LocalScope, check_local

# A token or key sits in a config, a notebook cell or a key file: all within the first bytes.
# Bounded, so a push of a big tree pays at most this much regex per file (its hash reads it all).
SCAN_BYTES = 256 * 1024

_NAMES: list[tuple[tuple[str, ...], str]] = [
    (deny.HISTORIES, "a shell or REPL history"),
    (deny.PASSWORD_DBS, "a password database"),
    (deny.SERVER_STATE, "this server's own state (http-token, ledger, pinned host keys)"),
]
_ANY_NAME = re.compile("|".join(fnmatch.translate(p) for patterns, _ in _NAMES for p in patterns))

# A header followed closely by key material: a parser that only names the header is no key, while
# a key in a JSON string (backslash-n escapes), split across string literals or behind Proc-Type
# lines is.
_KEY_BODY = rb"-----(?s:.{0,100}?)[A-Za-z0-9+/]{32}"
_AWS_SECRET = rb"_(?:secret_access_key|SECRET_ACCESS_KEY)[\"']?\s*[:=]\s*[\"']?[A-Za-z0-9/+=]{40}"
# Each opens with a literal, which keeps Python's re on its fast path (a search for that literal
# at memory speed, then the rest only where it occurs): one pass per pattern over the file's head,
# where an alternation of literals would try every one at every byte (some 30 times slower).
_SECRETS: list[tuple[re.Pattern[bytes], str]] = [
    (re.compile(rb"-----BEGIN (OPENSSH )?(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?" + _KEY_BODY), "private key"),
    (re.compile(rb"gh[pousr]_[A-Za-z0-9]{36}(?![A-Za-z0-9_])"), "a GitHub token"),
    (re.compile(rb"github_pat_[A-Za-z0-9_]{40,}"), "a GitHub token"),
    (re.compile(rb"AKIA[A-Z0-9]{16}(?![A-Z0-9])"), "an AWS access key id"),
    (re.compile(rb"ASIA[A-Z0-9]{16}(?![A-Z0-9])"), "an AWS access key id"),
    (re.compile(rb"aws" + _AWS_SECRET), "an AWS secret access key"),
    (re.compile(rb"AWS" + _AWS_SECRET), "an AWS secret access key"),
    (re.compile(rb"hf_[A-Za-z0-9]{30,}"), "a Hugging Face token"),
    (re.compile(rb"xox[abposr]-[A-Za-z0-9-]{10,}"), "a Slack token"),
    (re.compile(rb"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"), "an npm token"),
    (re.compile(rb"pypi-AgE[A-Za-z0-9_-]{50,}"), "a PyPI token"),
]


class SkippedFile(BaseModel):
    path: str
    reason: str


@dataclass(frozen=True)
class DeniedDir:
    path: Path
    label: str
    prefix: str  # the path with a trailing "/", for a fast test of the files inside


def denied_dirs(state_dir: Path) -> list[DeniedDir]:
    """The folders nothing is ever sent from: the server's state, the credential folders under
    the user's home and root's ~/.ssh, and the system folders, each as written and as resolved (a
    symlinked ~/.ssh is the folder it points at)."""
    home = Path.home()
    named = [(state_dir, "the server's own state folder ($RGT_HOME)")]
    named += [(home / sub, f"~/{sub}") for sub in deny.CREDENTIAL_FOLDERS]
    named += [(Path(s), s) for s in (*deny.LOCAL_SYSTEM_FOLDERS, *deny.SYSTEM_FOLDERS)]
    named += [(Path("/root/.ssh"), "/root/.ssh")]
    out: list[DeniedDir] = []
    for path, label in named:
        for form in {path.expanduser().absolute(), path.expanduser().resolve()}:
            out.append(DeniedDir(form, label, portable.deny_form(form).rstrip("/") + "/"))
    return out


def check_source(root: Path, state_dir: Path) -> None:
    """Refuse a source the path policy refuses to send: on the deny list (a credential folder,
    /etc), or inside the server's own state. No override exists."""
    check_local(root, "send", LocalScope(next_step="point source at the project's own folder"), what="source",
                done="push_code never sends from it; nothing was sent", state_home=state_dir)


def denied_dir_of(real: str, denied: list[DeniedDir]) -> str | None:
    """The label of the denied folder `real` (a file's absolute path with no symlink in it) lies
    in. String prefixes: a push of thousands of files checks each against every folder; `/`-separated
    and, where the file system folds case, folded (portable.deny_form)."""
    real = portable.deny_form(real)
    return next((d.label for d in denied if real.startswith(d.prefix)), None)


def name_reason(rel: str) -> str | None:
    """Why a file is never sent, by its name alone."""
    p = PurePosixPath(rel)
    if _ANY_NAME.match(p.name):
        return next(reason for patterns, reason in _NAMES if any(fnmatch.fnmatchcase(p.name, x) for x in patterns))
    if any(fnmatch.fnmatchcase(rel, g) or fnmatch.fnmatchcase(rel, "*/" + g) for g in deny.GH_TOKEN_FILES):
        return "the GitHub CLI's token file (gh/hosts.yml)"
    return None


def content_reason(head: bytes) -> str | None:
    """What secret the first SCAN_BYTES of a file hold, named by kind; None when none."""
    for pattern, reason in _SECRETS:
        found = pattern.search(head)
        if found is not None:
            if reason == "private key":
                return "an OpenSSH private key" if found.group(1) else "a PEM private key"
            return reason
    return None


def check_allow_list(allow: list[str]) -> set[str]:
    """allow_secrets_in's entries as the relative paths the snapshot lists."""
    out = set()
    for entry in allow:
        p = PurePosixPath(entry)
        if not entry or p.is_absolute() or ".." in p.parts or any(ord(c) < 32 for c in entry):
            raise InputError("allow_secrets_in takes file paths relative to source, without ..",
                             next_step="name each file exactly as the push result's `skipped` lists it")
        out.add(p.as_posix())
    return out
