"""The tmux engine: the wrapper in a named tmux session the user can attach to; same run dir
and exit-code contract as the shell engine (scripts/job_engine_tmux.sh)."""

from __future__ import annotations

from mcp_server.run.jobs.engines.base import RunDirEngine


class TmuxEngine(RunDirEngine):
    name = "tmux"
    library = "job_engine_tmux"

    def job_name(self, run_id: str) -> str | None:
        """The session: `tmux attach -t <this>`."""
        return "rgt-" + run_id.replace(".", "_").replace(":", "_")
