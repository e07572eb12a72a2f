"""What depends on the operating system the server itself runs on (Linux, macOS or Windows).

A box is always POSIX (Linux, over SSH): a path, a script or a signal meant for a box is POSIX
whatever this machine is. What depends on THIS machine is decided here, from `SYSTEM` (read at
call time, so a test can replace it and drive each branch): where the state lives, whether the
`local` host can exist, what a file name from a box may be here, and how this machine knows
itself without a shell. File-descriptor work (positioned I/O, syncs, no-follow opens) is in
`portable_io`."""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath

import platformdirs
from platformdirs.api import PlatformDirsABC

from mcp_server.errors import LocalHostUnsupported


@dataclass(frozen=True)
class System:
    """This machine's OS as Python names it: `os.name` ("posix", "nt") and `sys.platform`."""

    os_name: str
    platform: str

    @property
    def posix(self) -> bool:
        return self.os_name == "posix"

    @property
    def label(self) -> str:
        return {"win32": "Windows", "darwin": "macOS", "linux": "Linux"}.get(self.platform, self.platform)

    @property
    def folds_case(self) -> bool:
        """Whether its usual file systems treat `A` and `a` as one name (NTFS, APFS by default)."""
        return self.platform in ("win32", "darwin")


SYSTEM = System(os.name, sys.platform)
WINDOWS = System("nt", "win32")
MACOS = System("posix", "darwin")
LINUX = System("posix", "linux")


def current(system: System | None = None) -> System:
    return SYSTEM if system is None else system


# ---- where the state and the inventory live ------------------------------------------------------


def _dirs(app: str, system: System) -> PlatformDirsABC:
    """platformdirs' answer for `system`: its own class for this machine (so a Linux default never
    moves), the named OS's class when a test drives another. appauthor=False: on Windows the folder
    is %LOCALAPPDATA%\\<app>, not <app>\\<app>; the other systems have no author level."""
    if system.platform == sys.platform:
        return platformdirs.PlatformDirs(app, appauthor=False)
    if system.platform == "win32":
        from platformdirs.windows import Windows

        return Windows(app, appauthor=False)
    if system.platform == "darwin":
        from platformdirs.macos import MacOS

        return MacOS(app, appauthor=False)
    from platformdirs.unix import Unix

    return Unix(app, appauthor=False)


def state_dir(app: str, system: System | None = None) -> Path:
    """The default RGT_HOME: ~/.local/state/<app> (Linux, $XDG_STATE_HOME honoured),
    ~/Library/Application Support/<app> (macOS), %LOCALAPPDATA%\\<app> (Windows)."""
    return Path(_dirs(app, current(system)).user_state_dir)


def config_dir(app: str, system: System | None = None) -> Path:
    """Where the inventory lives by default: ~/.config/<app> (Linux, $XDG_CONFIG_HOME honoured),
    ~/Library/Application Support/<app> (macOS), %LOCALAPPDATA%\\<app> (Windows)."""
    return Path(_dirs(app, current(system)).user_config_dir)


def modes_enforced(system: System | None = None) -> bool:
    """Whether 0700/0600 mean what they say here. On Windows chmod sets only the read-only flag:
    the state folder's privacy comes from the ACL %LOCALAPPDATA% inherits (its owner only)."""
    return current(system).posix


# ---- the `local` host ----------------------------------------------------------------------------


def require_local_host(name: str, system: System | None = None) -> None:
    """Refuse the `local` host where it cannot work: it runs bash in a new session and stops a
    command by signalling its process group, none of which Windows has."""
    sys_ = current(system)
    if sys_.posix:
        return
    raise LocalHostUnsupported(
        "this host is the machine running this server, and running commands there needs a POSIX system "
        "(bash, process groups, POSIX signals); this server runs on " + sys_.label,
        host=name, expected="Linux or macOS for the local host",
        next_step="name an SSH box as `host` (an inventory name, an ~/.ssh/config alias or user@host[:port]); "
        "to run jobs on this machine, run the server inside WSL (Linux there) or reach WSL over SSH")


# ---- names that come from a box ------------------------------------------------------------------

_WINDOWS_RESERVED = frozenset({"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)),
                               *(f"lpt{i}" for i in range(10))})
_WINDOWS_FORBIDDEN = set('<>:"|?*\\')


def local_name_problem(rel: str, system: System | None = None) -> str | None:
    """Why `rel` (a relative POSIX path from a box) cannot be written here under the same name,
    or None. On Linux and macOS every such name can; on Windows a `\\` would be a separator (and
    `..\\` a way out), `:` names a data stream, and CON, NUL, a trailing dot or space are not files."""
    if current(system).posix:
        return None
    for part in PurePosixPath(rel).parts:
        if any(c in _WINDOWS_FORBIDDEN for c in part):
            return 'holds a character Windows does not allow in a file name (\\ / : * ? " < > |)'
        if part.split(".")[0].rstrip(" ").lower() in _WINDOWS_RESERVED:
            return "is a device name on Windows (CON, PRN, AUX, NUL, COM0-9, LPT0-9)"
        if part.endswith((".", " ")) and part not in (".", ".."):
            return "ends with a dot or a space, which Windows drops from a file name"
    return None


def box_relpath(path: PurePath, root: PurePath) -> str:
    """`path` below `root` (both paths of this machine) as the relative path a box and a tar
    member take: `/`-separated whatever this machine's separator ("" for the root itself)."""
    rel = path.relative_to(root).as_posix()
    return "" if rel == "." else rel


def deny_form(path: str | PurePath, system: System | None = None) -> str:
    """A local path (a text one already `/`-separated) as the deny list matches it: `/`-separated,
    and case-folded where the file system folds case (there `~/.SSH` is `~/.ssh`)."""
    text = path.as_posix() if isinstance(path, PurePath) else path
    return text.casefold() if current(system).folds_case else text


# ---- this machine's identity without a shell -----------------------------------------------------

_MACHINE_GUID_KEY = r"SOFTWARE\Microsoft\Cryptography"


def _windows_machine_guid() -> str:
    try:
        import winreg  # Windows only; absent elsewhere (a test driving the Windows branch)
    except ImportError:
        return ""
    try:
        key = winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, _MACHINE_GUID_KEY, 0,  # type: ignore[attr-defined,unused-ignore]
                             winreg.KEY_READ | winreg.KEY_WOW64_64KEY)  # type: ignore[attr-defined,unused-ignore]
        with key:
            value = winreg.QueryValueEx(key, "MachineGuid")[0]  # type: ignore[attr-defined,unused-ignore]
    except OSError:
        return ""
    return str(value).strip()


def _windows_host_key_blob(env: dict[str, str]) -> str:
    """The base64 blob of this machine's own OpenSSH server key (Windows keeps it in ProgramData)."""
    folder = Path(env.get("ProgramData") or env.get("PROGRAMDATA") or r"C:\ProgramData") / "ssh"
    for kind in ("ed25519", "ecdsa", "rsa"):
        try:
            fields = (folder / f"ssh_host_{kind}_key.pub").read_text(encoding="utf-8", errors="replace").split()
        except OSError:
            continue
        if len(fields) >= 2:
            return fields[1]
    return ""


def identity_without_shell(env: dict[str, str] | None = None) -> dict[str, str]:
    """What scripts/verify_identity.sh prints, read in Python where no POSIX shell runs (Windows):
    RGT_MACHINE_ID, else the registry's MachineGuid; the host name; the OpenSSH server key."""
    env = dict(os.environ if env is None else env)
    kv = {"hostname": socket.gethostname(), "host_key_blob": _windows_host_key_blob(env)}
    if env.get("RGT_MACHINE_ID"):
        kv |= {"machine_id": env["RGT_MACHINE_ID"], "machine_id_source": "RGT_MACHINE_ID"}
    elif guid := _windows_machine_guid():
        kv |= {"machine_id": guid, "machine_id_source": rf"HKLM\{_MACHINE_GUID_KEY}\MachineGuid"}
    return kv


# ---- a box's signals -----------------------------------------------------------------------------

# Linux's numbers (x86-64 and arm64): a box reports a signal by name and its shell's status is
# 128 + this number. Python's `signal` module gives this machine's numbers: macOS's differ
# (USR1 is 30 there, BUS 10) and Windows has no KILL, HUP or USR1 at all.
BOX_SIGNALS = {
    "HUP": 1, "INT": 2, "QUIT": 3, "ILL": 4, "TRAP": 5, "ABRT": 6, "BUS": 7, "FPE": 8, "KILL": 9, "USR1": 10,
    "SEGV": 11, "USR2": 12, "PIPE": 13, "ALRM": 14, "TERM": 15, "STKFLT": 16, "CHLD": 17, "CONT": 18,
    "STOP": 19, "TSTP": 20, "TTIN": 21, "TTOU": 22, "URG": 23, "XCPU": 24, "XFSZ": 25, "VTALRM": 26,
    "PROF": 27, "WINCH": 28, "IO": 29, "PWR": 30, "SYS": 31,
}


def box_signal_number(name: str) -> int | None:
    """The number of a box's signal given by name (`KILL`, `SIGKILL`); None when Linux has none."""
    return BOX_SIGNALS.get(name.upper().removeprefix("SIG"))
