"""The deny list: what no tool reads, writes, deletes or sends, on a box or on this machine,
whatever roots allow. One list: the box's `rgt_confine` gets it as shell `case` patterns
(`policy.library()` fills them in), this machine's checks match it with `fnmatch`, and
push_code's per-file rules (`run/code/local_policy.py`) are built from its parts.

Each rule is globs on the whole absolute path (folders: `*` there also matches `/`, as in a shell
`case`) and globs on the path's last part alone (file names), checked on the path as written and
as resolved."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass

# Folders of credentials at any depth (a home's ~/.ssh, a user's /root/.ssh, a copied one).
CREDENTIAL_FOLDERS = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".config/gcloud", ".config/gh", ".docker")
# Files that hold a key or a password, by name, in any folder.
KEY_FILES = (".netrc", ".git-credentials", ".pgpass", "*.pem", "*.key", "id_rsa*", "id_dsa*", "id_ecdsa*",
             "id_ed25519*")
HISTORIES = (".*history", "fish_history", ".lesshst", ".viminfo")
PASSWORD_DBS = ("shadow", "shadow-", "gshadow", "gshadow-")
GH_TOKEN_FILES = ("gh/hosts.yml", "gh/hosts.yaml")
# The server's own state files (in $RGT_HOME), wherever a copy of one lies.
SERVER_STATE = ("http-token", "ledger.sqlite", "ledger.sqlite-*", "known_hosts", "known_hosts.old")
# System files and folders: password databases, sudoers, live kernel and process state.
SYSTEM_FILES = ("/etc/shadow*", "/etc/gshadow*", "/etc/sudoers*")
SYSTEM_FOLDERS = ("/proc", "/sys", "/dev")
# On this machine only: /etc as a whole is never sent to a box or written (a rented box must not
# get the user's system configuration); on a box, /etc is outside every root anyway.
LOCAL_SYSTEM_FOLDERS = ("/etc",)
# Written only: a file a shell or a tool runs or reads at start-up (a write there runs code later).
STARTUP_FILES = (".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv",
                 ".zprofile", ".zlogin", ".pam_environment", ".condarc")
STARTUP_FOLDERS = (".config/pip", ".pip", ".config/systemd", ".config/autostart")

_SAFE = re.compile(r"^[A-Za-z0-9._/*?-]+$")  # what a glob may hold to sit unquoted in a shell `case`


@dataclass(frozen=True)
class Globs:
    """One rule's patterns: `paths` on the whole absolute path (`*` crossing `/`), `names` on its
    last part alone (so `*` there never crosses a folder)."""

    paths: tuple[str, ...]
    names: tuple[str, ...]

    def matches(self, path: str) -> bool:
        name = path.rstrip("/").rsplit("/", 1)[-1]
        return any(fnmatch.fnmatchcase(path, g) for g in self.paths) or \
            any(fnmatch.fnmatchcase(name, g) for g in self.names)


def _folders(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(g for n in names for g in (f"*/{n}", f"*/{n}/*"))


CREDENTIAL = Globs(
    paths=(*_folders(CREDENTIAL_FOLDERS), *(f"*/{f}" for f in GH_TOKEN_FILES), *SYSTEM_FILES,
           *(g for s in SYSTEM_FOLDERS for g in (s, f"{s}/*"))),
    names=(*KEY_FILES, *HISTORIES, *PASSWORD_DBS, *SERVER_STATE))
STARTUP = Globs(paths=_folders(STARTUP_FOLDERS), names=STARTUP_FILES)


def case_patterns(globs: Iterable[str]) -> str:
    """Globs as one shell `case` pattern list (`a|b|c`); each is checked to need no quoting."""
    found = list(globs)
    bad = [g for g in found if not _SAFE.match(g)]
    if bad:
        raise ValueError(f"a deny-list glob needs quoting in a shell case pattern: {bad}")
    return "|".join(found)


def is_credential(path: str) -> bool:
    """Whether an absolute path is on the deny list (as the box's `rgt_denied` decides it)."""
    return CREDENTIAL.matches(path)


def is_startup(path: str) -> bool:
    """Whether an absolute path is a start-up file or lies in a start-up folder."""
    return STARTUP.matches(path)


def label_of(path: str) -> str | None:
    """Which entry of this machine's deny list (the box's, and /etc as a whole) an absolute path
    falls under, as an error names the rule (`~/.ssh`, `/etc`, `a file named like *.pem`); None
    when it is on none."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    for folder in CREDENTIAL_FOLDERS:
        if any(fnmatch.fnmatchcase(path, g) for g in _folders([folder])):
            return f"~/{folder} (a credential folder, wherever it lies)"
    for system in (*SYSTEM_FOLDERS, *LOCAL_SYSTEM_FOLDERS):
        if path == system or path.startswith(system + "/"):
            return system
    if any(fnmatch.fnmatchcase(path, g) for g in SYSTEM_FILES):
        return "a system password or sudoers file"
    if any(fnmatch.fnmatchcase(path, f"*/{g}") for g in GH_TOKEN_FILES):
        return "gh/hosts.yml (the GitHub CLI's token file)"
    for pattern in CREDENTIAL.names:
        if fnmatch.fnmatchcase(name, pattern):
            return f"a file named like {pattern}"
    return None
