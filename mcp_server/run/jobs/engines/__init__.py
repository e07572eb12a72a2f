"""The job engines by name. Adding one (Slurm, Kubernetes) is adding its file beside these and
one line below."""

from __future__ import annotations

from mcp_server.run.jobs.engines.base import JobEngine
from mcp_server.run.jobs.engines.shell import ShellEngine
from mcp_server.run.jobs.engines.tmux import TmuxEngine

ENGINES: dict[str, JobEngine] = {
    "shell": ShellEngine(),
    "tmux": TmuxEngine(),
}
