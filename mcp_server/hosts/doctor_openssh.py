"""The doctor's use of the OpenSSH client tools: run one bounded, read-only, the effective settings
(`ssh -G`), and the options every probing `ssh`/`sftp` gets so that it changes nothing: no
known_hosts update, no multiplexing, no forwards, no local command, no prompt."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from mcp_server.hosts.destination import Destination
from mcp_server.hosts.doctor_models import EffectiveSettings
from mcp_server.hosts.local import box_env
from mcp_server.portable_io import kill_session, own_session

DEFAULT_USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "/etc/ssh/ssh_known_hosts")
_NONE = "none"


@dataclass(frozen=True)
class ToolRun:
    """What one OpenSSH tool did: its exit status and output (None: killed at its bound)."""

    rc: int | None
    stdout: str
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.rc is None


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


def tool_env() -> dict[str, str]:
    """What the OpenSSH tools see: the local allow-list plus the agent socket (auth needs it)."""
    env = box_env()
    if sock := os.environ.get("SSH_AUTH_SOCK"):
        env["SSH_AUTH_SOCK"] = sock
    return env


def agent_reachable() -> bool:
    """SSH_AUTH_SOCK is set and names a socket that exists."""
    sock = os.environ.get("SSH_AUTH_SOCK")
    if not sock:
        return False
    with contextlib.suppress(OSError):
        return stat.S_ISSOCK(os.stat(sock).st_mode)
    return False


async def run_tool(argv: list[str], timeout_s: float, stdin: bytes | None = None) -> ToolRun:
    """Run `argv` (no shell) for at most `timeout_s`; on the bound its process group is killed."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=tool_env(),
            **own_session(),
        )
    except FileNotFoundError:
        return ToolRun(127, "", f"{argv[0]}: not on PATH")
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), max(timeout_s, 0.1))
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            kill_session(proc.pid, proc.kill)
        out, err = await proc.communicate()
        return ToolRun(None, out.decode(errors="replace"), err.decode(errors="replace"))
    return ToolRun(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def config_args(ssh_config: Path | None) -> list[str]:
    """`-F` as the server reads the config: the named file, none when it is missing, or the default."""
    if ssh_config is None:
        return []
    return ["-F", str(ssh_config) if ssh_config.is_file() else "/dev/null"]


def destination_args(dest: Destination) -> list[str]:
    """User and port the destination names explicitly (they win over the config, as in ssh)."""
    args = []
    if dest.user:
        args += ["-o", f"User={dest.user}"]
    if dest.port:
        args += ["-o", f"Port={dest.port}"]
    return args


def _quoted(path: str) -> str:
    return f'"{path}"' if " " in path else path


def probe_args(dest: Destination, ssh_config: Path | None, connect_timeout_s: float,
               known_hosts: list[str]) -> list[str]:
    """Options for a probing ssh/sftp: strict keys against `known_hosts`, and nothing written."""
    files = " ".join(_quoted(f) for f in known_hosts) or "/dev/null"
    return [
        *config_args(ssh_config), *destination_args(dest),
        "-o", "BatchMode=yes", "-o", f"ConnectTimeout={max(1, round(connect_timeout_s))}",
        "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={files}",
        "-o", "UpdateHostKeys=no", "-o", "ControlMaster=no", "-o", "ControlPath=none",
        "-o", "ClearAllForwardings=yes", "-o", "ForwardAgent=no", "-o", "PermitLocalCommand=no",
        "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=2",
    ]


def _int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def _some(value: str | None) -> str | None:
    return None if value is None or value.lower() == _NONE else value


def parse_ssh_g(text: str) -> EffectiveSettings:
    """The options of `ssh -G` output that decide how the box is reached."""
    single: dict[str, str] = {}
    identities: list[str] = []
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key == "identityfile":
            identities.append(str(Path(value).expanduser()))
        elif key:
            single.setdefault(key, value)
    known = (single.get("userknownhostsfile", "") + " " + single.get("globalknownhostsfile", "")).split()
    return EffectiveSettings(
        source="ssh -G", host=single.get("hostname", ""), port=_int(single.get("port")) or 22,
        user=single.get("user"), identity_files=identities,
        proxy_jump=_some(single.get("proxyjump")), proxy_command=_some(single.get("proxycommand")),
        strict_host_key_checking=single.get("stricthostkeychecking"),
        server_alive_interval=_int(single.get("serveraliveinterval")),
        server_alive_count_max=_int(single.get("serveralivecountmax")),
        host_key_alias=_some(single.get("hostkeyalias")),
        known_hosts_files=[str(Path(f).expanduser()) for f in known if f.lower() != _NONE],
    )


def as_written(dest: Destination) -> EffectiveSettings:
    """The destination as parsed, for a machine without the OpenSSH client."""
    return EffectiveSettings(
        source="inventory", host=dest.host, port=dest.port or 22, user=dest.user or getpass.getuser(),
        known_hosts_files=[str(Path(f).expanduser()) for f in DEFAULT_USER_KNOWN_HOSTS],
    )


async def effective_settings(dest: Destination, ssh_config: Path | None,
                             timeout_s: float) -> tuple[EffectiveSettings, ToolRun | None]:
    """`ssh -G` where the client is installed, else the destination as written."""
    if not have("ssh"):
        return as_written(dest), None
    run = await run_tool(["ssh", "-G", *config_args(ssh_config), *destination_args(dest), "--", dest.host],
                         timeout_s)
    if run.rc != 0:
        return as_written(dest), run
    return parse_ssh_g(run.stdout), run
