"""One error hierarchy. Errors are data; the message is composed from the fields.

Third-party exceptions (asyncssh, OSError, sqlite3) are mapped to these at exactly one
boundary each (hosts/ssh.py, hosts/local.py, ledger.py); tools/_common.py maps these to
the MCP ToolError. Anything else that escapes is a bug: the tool boundary logs its traceback
and answers a bounded `[ERROR]` that says the call's outcome is unknown.

Each class has a stable UPPER_SNAKE `code`: clients branch on it (a tool error's text
starts `[CODE] `, a fan-out outcome carries it), so a code is never renamed or reused.
"""

from __future__ import annotations

from typing import Any, ClassVar

_COMMAND_CUT = 100
_TAIL_LINES = 10
_VALUE_CUT = 300  # an input quoted back is cut: a 10 MB argument must not come back as a 10 MB reply


def cut_command(command: str, limit: int = _COMMAND_CUT) -> str:
    """A command shortened for an error message (never the whole script)."""
    flat = " ".join(command.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def tail_lines(text: str, lines: int = _TAIL_LINES) -> str:
    """The last few lines of some output, for an error message."""
    return "\n".join(text.strip().splitlines()[-lines:])


def cut_value(value: Any, limit: int = _VALUE_CUT) -> str:
    """A value quoted in an error message, at most `limit` characters and a note of its length."""
    text = str(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


class RgtError(Exception):
    """Base of every error this server raises on purpose.

    Fields say what happened where (host, command, path), what was observed and what was
    expected, and what to do next. The message is written for the model reading it.
    """

    code: ClassVar[str] = "ERROR"

    def __init__(
        self,
        message: str,
        *,
        host: str | None = None,
        command: str | None = None,
        path: str | None = None,
        observed: Any = None,
        expected: Any = None,
        exit_status: int | None = None,
        stderr: str | None = None,
        next_step: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.host = host
        self.command = cut_command(command) if command else None
        self.path = path
        self.observed = observed
        self.expected = expected
        self.exit_status = exit_status
        self.stderr = tail_lines(stderr) if stderr else None
        self.next_step = next_step

    def __str__(self) -> str:
        parts = []
        where = ", ".join(
            f"{k} {v}" for k, v in (("host", self.host), ("path", self.path)) if v
        )
        parts.append(f"[{cut_value(where)}] {self.message}" if where else self.message)
        if self.command:
            parts.append(f"command: {self.command}")
        if self.exit_status is not None:
            parts.append(f"exit status: {self.exit_status}")
        if self.observed is not None:
            parts.append(f"observed: {cut_value(self.observed)}")
        if self.expected is not None:
            parts.append(f"expected: {cut_value(self.expected)}")
        if self.stderr:
            parts.append(f"stderr (last lines):\n{cut_value(self.stderr, 2000)}")
        if self.next_step:
            parts.append(f"next: {self.next_step}")
        return "\n".join(parts)


class InputError(RgtError):
    """A tool argument is wrong: say which, what it was, and what is accepted."""

    code = "BAD_INPUT"


class ConfigError(RgtError):
    """The inventory, a profile or a setting is wrong."""

    code = "BAD_CONFIG"


class NotFoundError(RgtError):
    """A named thing (host, run, file) does not exist."""

    code = "NOT_FOUND"


class TransportError(RgtError):
    """The connection failed. Proves nothing about what runs on the box."""

    code = "HOST_UNREACHABLE"


class HostKeyError(TransportError):
    """The box's host key is unknown or has changed: refused, never waved through."""

    code = "HOST_KEY_REFUSED"


class AuthError(TransportError):
    """The box refused our credentials."""

    code = "AUTH_FAILED"


class CommandTimeout(RgtError):
    """A remote or local command ran past its time limit and was killed."""

    code = "COMMAND_TIMEOUT"


class CommandFailed(RgtError):
    """A command the tool needed exited non-zero."""

    code = "COMMAND_FAILED"


class LedgerError(RgtError):
    """The local ledger cannot be opened or written without risking its contents."""

    code = "LEDGER_UNAVAILABLE"


class GateRefused(RgtError):
    """A safety gate refused an action; every unmet gate is named."""

    code = "GATE_REFUSED"


class DeniedError(RgtError):
    """The other side understood who we are and refused the action (an RBAC denial, a quota)."""

    code = "DENIED"


class ConflictError(RgtError):
    """The object exists already in a state that this action would clash with."""

    code = "CONFLICT"


class LocalHostUnsupported(RgtError):
    """The `local` host cannot exist on this machine's OS (it needs bash, process groups and POSIX
    signals: Windows has none of them); an SSH box works from any OS."""

    code = "LOCAL_HOST_UNSUPPORTED"
