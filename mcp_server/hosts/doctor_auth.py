"""The doctor's session steps through the real OpenSSH client: which authentication works (read
from `ssh -v`, never its raw lines: only the parsed facts, never key material) and whether the
endpoint carries SFTP."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from mcp_server.hosts.destination import Destination
from mcp_server.hosts.doctor_models import DoctorStep, EffectiveSettings, FailureClass, failed, passed
from mcp_server.hosts.doctor_openssh import agent_reachable, have, probe_args, run_tool

_CAN_CONTINUE = re.compile(r"Authentications that can continue: ([\w@.,-]+)")
_AUTHENTICATED = re.compile(r'Authenticated to .* using "([\w@.-]+)"')
_ACCEPTED = re.compile(r"Server accepts key: (\S+)")
_DENIED = re.compile(r"Permission denied \(([\w@.,-]+)\)")
# ssh's own words for failures other than authentication (a jump host hides the direct steps).
# Host-key failures come first: they are definitive even when a hop's own -v output says it
# authenticated.
_HOST_KEY: tuple[tuple[str, FailureClass, str], ...] = (
    ("REMOTE HOST IDENTIFICATION HAS CHANGED", "host_key_mismatch", "the box's host key changed"),
    ("host key is known for", "host_key_unknown", "no trusted host key for the box"),
    ("Host key verification failed", "host_key_unknown", "host key verification failed"),
)
_TRANSPORT: tuple[tuple[str, FailureClass, str], ...] = (
    ("Could not resolve hostname", "dns_failed", "a name on the way does not resolve"),
    ("Connection refused", "connection_refused", "a connection on the way was refused"),
    ("banner exchange", "banner_timeout", "no SSH banner arrived"),
    ("timed out", "timeout", "a connection on the way timed out"),
)
NO_AGENT = ("no ssh-agent is reachable: MCP clients start the server with a minimal environment, so "
            "name SSH_AUTH_SOCK in the client config's env, or set an unencrypted IdentityFile")
ENCRYPTED = ("the key is passphrase-protected and no agent holds it: add it to ssh-agent (ssh-add) and "
             "pass SSH_AUTH_SOCK to the server")


@dataclass
class AuthOutcome:
    """What `ssh -v` said about authentication."""

    method: str | None = None
    offered: list[str] = field(default_factory=list)
    accepted_unusable: list[str] = field(default_factory=list)
    transport: tuple[FailureClass, str] | None = None


def _first(stderr: str, table: tuple[tuple[str, FailureClass, str], ...]) -> tuple[FailureClass, str] | None:
    return next(((cls, why) for text, cls, why in table if text in stderr), None)


def read_auth(stderr: str, rc: int | None) -> AuthOutcome:
    """Parse `ssh -v` stderr (and `true`'s exit status) into the methods offered, the one that
    worked, and a failure before authentication. A hop's lines mix in: only exit 0 is success."""
    out = AuthOutcome()
    for names in _CAN_CONTINUE.findall(stderr) + _DENIED.findall(stderr):
        out.offered += [m for m in names.split(",") if m and m not in out.offered]
    methods = _AUTHENTICATED.findall(stderr)
    if rc == 0 and methods:
        out.method = methods[-1]
        return out
    out.accepted_unusable = list(dict.fromkeys(_ACCEPTED.findall(stderr)))
    out.transport = _first(stderr, _HOST_KEY)
    if out.transport is None and not _DENIED.search(stderr):
        out.transport = _first(stderr, _TRANSPORT) or ("other_error", f"ssh exited with status {rc}")
    return out


async def encrypted_keys(identity_files: list[str], timeout_s: float) -> list[str]:
    """The existing identity files that need a passphrase (asked of ssh-keygen with an empty one)."""
    found = []
    for f in identity_files:
        if Path(f).is_file():
            run = await run_tool(["ssh-keygen", "-y", "-P", "", "-f", f], timeout_s)
            if run.rc not in (0, None) and "passphrase" in run.stderr:
                found.append(f)
    return found


async def _auth_failure(out: AuthOutcome, settings: EffectiveSettings, took: float,
                        timeout_s: float) -> DoctorStep:
    agent = agent_reachable()
    evidence = [f"agent reachable: {'yes' if agent else 'no'}",
                f"server offers: {', '.join(out.offered) or 'nothing seen'}"]
    if out.transport:
        cls, why = out.transport
        return failed("auth", took, cls, f"ssh stopped before authentication: {why}", evidence)
    encrypted = await encrypted_keys(settings.identity_files, timeout_s)
    evidence += [f"accepted by the server but not usable: {p}" for p in out.accepted_unusable]
    evidence += [f"passphrase-protected: {p}" for p in encrypted]
    hint = ENCRYPTED if encrypted and not agent else (None if agent else NO_AGENT)
    return failed("auth", took, "auth_failed", "no authentication method worked", evidence, extra_route=hint)


async def auth_step(dest: Destination, ssh_config: Path | None, settings: EffectiveSettings,
                    known_hosts: list[str], connect_timeout_s: float,
                    timeout_s: float) -> tuple[DoctorStep, str | None]:
    """`ssh -v <dest> true` in batch mode with strict host keys: the method that worked, or why none."""
    start = time.monotonic()
    argv = ["ssh", "-v", "-T", *probe_args(dest, ssh_config, connect_timeout_s, known_hosts), "--", dest.host, "true"]
    run = await run_tool(argv, timeout_s)
    took = time.monotonic() - start
    if run.timed_out:
        return failed("auth", took, "timeout", f"ssh did not finish within {timeout_s:g} s"), None
    out = read_auth(run.stderr, run.rc)
    if out.method is None:
        return await _auth_failure(out, settings, took, timeout_s), None
    evidence = [f"agent reachable: {'yes' if agent_reachable() else 'no'}",
                f"server offers: {', '.join(out.offered) or 'none needed'}", f"authenticated with: {out.method}"]
    return passed("auth", took, f"authenticated with {out.method}", evidence), out.method


async def sftp_step(dest: Destination, ssh_config: Path | None, known_hosts: list[str],
                    connect_timeout_s: float, timeout_s: float) -> tuple[DoctorStep, bool | None]:
    """`sftp -b -` with one `pwd`: does this endpoint carry the SFTP subsystem?"""
    if not have("sftp"):
        return failed("sftp", 0.0, "other_error", "the OpenSSH sftp client is not on PATH"), None
    start = time.monotonic()
    argv = ["sftp", "-b", "-", *probe_args(dest, ssh_config, connect_timeout_s, known_hosts), "--", dest.host]
    run = await run_tool(argv, timeout_s, stdin=b"pwd\n")
    took = time.monotonic() - start
    if run.timed_out:
        return failed("sftp", took, "no_sftp", f"the SFTP handshake did not finish within {timeout_s:g} s"), False
    if run.rc == 0 and "Remote working directory" in run.stdout:
        return passed("sftp", took, "SFTP is available", ["sftp: yes"]), True
    reason = "subsystem request failed" if "subsystem request failed" in run.stderr else f"sftp exit {run.rc}"
    return failed("sftp", took, "no_sftp", "this endpoint does not carry SFTP", ["sftp: no", reason]), False
