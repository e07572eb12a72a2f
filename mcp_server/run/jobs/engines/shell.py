"""The shell engine: the wrapper in a new session (setsid) with stdin closed; it survives an SSH
drop and the server's and the client's exit (scripts/job_engine_shell.sh)."""

from __future__ import annotations

from mcp_server.run.jobs.engines.base import RunDirEngine


class ShellEngine(RunDirEngine):
    name = "shell"
    library = "job_engine_shell"
