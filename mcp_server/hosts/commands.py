"""Shell words for a box: every user-supplied word is validated, then quoted with
shlex.quote, and the one-line wrapper every remote command runs in. The scripts themselves
live in `mcp_server/scripts/*.sh` and take these words as their arguments."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from mcp_server import portable
from mcp_server.errors import CommandTimeout, InputError, cut_value
from mcp_server.hosts.base import FileStat

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
PID_MARKER = b"RGT-PID:"


def refuse_nul(text: str, what: str = "a value") -> str:
    """`text`, unless it holds a NUL character, which no shell word, argument or file name can carry."""
    if "\0" in text:
        raise InputError(f"{what} holds a NUL character", observed=cut_value(repr(text), 120),
                         next_step="remove the NUL (\\x00) from the value")
    return text


def quote(word: str) -> str:
    """Quote one word for a POSIX shell."""
    return shlex.quote(refuse_nul(word))


def join(words: Iterable[str]) -> str:
    """Quote and join literal words into one command."""
    return " ".join(quote(w) for w in words)


def check_name(name: str, what: str) -> str:
    """A run name, host name or similar: letters, digits, dot, dash, underscore."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InputError(
            f"{what} is not a safe name",
            observed=name,
            expected="1-64 characters from A-Z a-z 0-9 . _ -, not starting with . _ or -",
            next_step=f"choose another {what}",
        )
    return name


def check_env_name(name: str) -> str:
    if not _ENV_NAME_RE.match(name):
        raise InputError(
            "environment variable name is not valid",
            observed=name,
            expected="[A-Za-z_][A-Za-z0-9_]*",
        )
    return name


def check_path(path: str, what: str = "path") -> str:
    """A path on a box: absolute or under ~/, no control characters, no leading dash."""
    if not isinstance(path, str) or not path:
        raise InputError(f"{what} is empty", expected="an absolute path or ~/...")
    if any(ord(c) < 32 for c in path):
        raise InputError(f"{what} contains a control character", observed=cut_value(repr(path)))
    if path.startswith("-"):
        raise InputError(
            f"{what} starts with '-' and would be read as an option",
            observed=path,
            expected="an absolute path or ~/...",
        )
    if not (path == "~" or path.startswith(("/", "~/"))):
        raise InputError(
            f"{what} must be absolute or start with ~/",
            observed=path,
            next_step="pass the full path on the box",
        )
    return path


def path_word(path: str, what: str = "path") -> str:
    """One shell word for a validated box path; `~/x` expands to the remote $HOME."""
    check_path(path, what)
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        rest = path[2:]
        return '"$HOME"' + ("/" + shlex.quote(rest) if rest else "")
    return shlex.quote(path)


def env_assignments(env: dict[str, str]) -> str:
    """`export K=V` lines for non-secret variables (values quoted)."""
    return "\n".join(f"export {check_env_name(k)}={shlex.quote(v)}" for k, v in env.items())


def remote_wrapper(script: str) -> str:
    """What the box's login shell runs: report the process-group id, then exec a clean
    shell. sshd makes the login shell a session leader without a pty, so its pid is the
    process group we kill when a call is cancelled or times out."""
    inner = shlex.quote(script)
    return (
        "printf 'RGT-PID:%s\\n' \"$$\" >&2; "
        f"if command -v bash >/dev/null 2>&1; then exec bash --noprofile --norc -c {inner}; "
        f"else exec sh -c {inner}; fi"
    )


# A script longer than this travels ahead of the command's stdin instead of on its command line:
# the box's login shell gets the command as ONE argument, which Linux caps at 128 KiB (the wrapper
# holds the script twice), and a refused exec shows only as a reset connection.
INLINE_SCRIPT_MAX = 32 * 1024


def remote_command(script: str, stdin: bytes | None) -> tuple[str, bytes | None]:
    """The box's command line and the bytes for its stdin. A long script is read from stdin into
    a private temp file (GNU `head -c` reads exactly its length, never the payload after it), run
    from there and removed by its own first line; the payload follows it on stdin."""
    if len(script) <= INLINE_SCRIPT_MAX:
        return remote_wrapper(script), stdin
    body = ('rm -f -- "$0"\n' + script).encode()
    boot = ("printf 'RGT-PID:%s\\n' \"$$\" >&2; f=$(mktemp) || exit 125; "
            f"head -c {len(body)} > \"$f\" || exit 125; "
            "if command -v bash >/dev/null 2>&1; then exec bash --noprofile --norc \"$f\"; else exec sh \"$f\"; fi")
    return boot, body + (stdin or b"")


def kill_group(pgid: int, signal: str = "TERM") -> str:
    return f"kill -{signal} -- -{int(pgid)} 2>/dev/null; true"


def command_timeout(host: str, script: str, limit: float) -> CommandTimeout:
    return CommandTimeout(f"command ran past {limit:g} s; its process group on the box was killed",
                          host=host, command=script,
                          next_step="raise the timeout or run the work detached (launch_detached)")


def shell_status(status: int | None, signal_name: str | None) -> int | None:
    """The exit status a shell would report: 128 + the signal's number for a signal death; None
    when the box reported neither (its outcome is unknown)."""
    if status is not None and status >= 0:
        return status
    if signal_name:  # the box's (Linux) number, not this machine's: macOS numbers differ, Windows lacks most
        return 128 + (portable.box_signal_number(signal_name) or 0)
    return None


def read_range_command(path: str, offset: int, length: int | None) -> str:
    """Stream a file from `offset` (`tail -c +N` seeks), `length` bytes of it when given (`head -c`
    stops there, which ends tail with SIGPIPE; the pipeline's status is head's)."""
    if length is None:
        return f"exec tail -c +{int(offset) + 1} -- {path_word(path)}"
    return f"tail -c +{int(offset) + 1} -- {path_word(path)} | head -c {int(length)}"


def stat_command(path: str) -> str:
    return f"stat -L -c '%s %Y %F' -- {path_word(path)} 2>/dev/null || true"


def parse_stat(text: str) -> FileStat | None:
    """Size and mtime from `stat_command`'s output; None unless it names a regular file."""
    parts = text.split(" ", 2)
    if len(parts) < 3 or not parts[2].startswith("regular"):
        return None
    return FileStat(size=int(parts[0]), mtime=float(parts[1]))
