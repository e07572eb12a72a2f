"""The per-run wrapper: the script that owns a detached job on the box (scripts/job_wrapper.sh).

The launch writes it into the run dir as wrapper.sh; an engine runs it as a session leader
(setsid, or a tmux pane). It reads secrets from stdin or a one-shot fifo (never argv, never a
file that stays), records its pid, runs the command with stdin closed and output to `log`, and
on exit writes `exit_code` and `ended_at` atomically (tmp + rename). SIGKILL of the whole group
leaves no exit file: that is how `lost` is told from `failed`. A run that asked for
sync_to_durable has its outputs copied and verified before exit_code is written (sync.py)."""

from __future__ import annotations

import base64

from mcp_server import scripts
from mcp_server.hosts.commands import env_assignments


def wrapper_text() -> str:
    """wrapper.sh as written into every run dir: the same text for every run (the verified-copy
    functions sync_to_durable uses, then the wrapper)."""
    return scripts.load("job_sync").rstrip("\n") + "\n" + scripts.load("job_wrapper")


def env_script(env: dict[str, str], proxy_hook: str | None) -> str:
    """env.sh: unbuffered output by default, the profile's proxy hook, the user's variables."""
    lines = ["# written at launch", "export PYTHONUNBUFFERED=1"]
    if proxy_hook:
        lines.append(proxy_hook)  # trusted profile data, never derived from the box
    if env:
        lines.append(env_assignments(env))
    return "\n".join(lines) + "\n"


def secrets_payload(values: dict[str, str]) -> bytes:
    """NAME=base64 lines: what travels on stdin to the wrapper."""
    return "".join(f"{k}={base64.b64encode(v.encode()).decode()}\n" for k, v in values.items()).encode()
