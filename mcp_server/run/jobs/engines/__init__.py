"""The job engines by name. Adding one (Slurm, Kubernetes) is adding its file beside these and
one line below."""

from __future__ import annotations

from mcp_server.run.jobs.engines.base import JobEngine, RunDirEngine
from mcp_server.run.jobs.engines.shell import ShellEngine
from mcp_server.run.jobs.engines.slurm import SlurmEngine
from mcp_server.run.jobs.engines.tmux import TmuxEngine


def own_state(name: str | None) -> bool:
    """True when the engine's state is something other than the run dir's (Slurm's queue): a
    run-dir reading alone would call a queued job lost."""
    found = ENGINES.get(name or "")
    return found is not None and getattr(type(found), "status", None) is not RunDirEngine.status


ENGINES: dict[str, JobEngine] = {
    "shell": ShellEngine(),
    "tmux": TmuxEngine(),
    "slurm": SlurmEngine(),
}
