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


def env_script(env: dict[str, str], proxy_hook: str | None, dirs: dict[str, str] | None = None) -> str:
    """env.sh: unbuffered output by default, the profile's proxy hook, the run's own directories
    (`dirs`: RGT_CODE_DIR, RGT_OUTPUT_DIR), then the user's variables (a name they set wins)."""
    lines = ["# written at launch", "export PYTHONUNBUFFERED=1"]
    if proxy_hook:
        lines.append(proxy_hook)  # trusted profile data, never derived from the box
    if dirs or env:
        lines.append(env_assignments({**(dirs or {}), **env}))
    return "\n".join(lines) + "\n"


def run_dirs(code_dir: str, output_dir: str | None, run_dir: str) -> dict[str, str]:
    """The job's RGT_CODE_DIR (the code it runs: a snapshot, or the workdir) and RGT_OUTPUT_DIR
    (where it writes: a snapshot run's own work dir, else the workdir)."""
    dirs = {"RGT_CODE_DIR": code_dir, "RGT_OUTPUT_DIR": output_dir or code_dir}
    if output_dir and output_dir != code_dir:
        # Python writes bytecode next to the modules it imports, in the snapshot through the links
        # (a script's own folder is resolved past its link): the run dir holds it instead.
        dirs["PYTHONPYCACHEPREFIX"] = f"{run_dir}/pycache"
    return dirs


def secrets_payload(values: dict[str, str]) -> bytes:
    """NAME=base64 lines: what travels on stdin to the wrapper."""
    return "".join(f"{k}={base64.b64encode(v.encode()).decode()}\n" for k, v in values.items()).encode()
