"""The job engines by name. Adding one (Slurm, Kubernetes) is adding its file beside these and
one line below."""

from __future__ import annotations

from mcp_server.run.jobs.engines.base import JobEngine, RunDirEngine
from mcp_server.run.jobs.engines.shell import ShellEngine
from mcp_server.run.jobs.engines.slurm import SlurmEngine
from mcp_server.run.jobs.engines.tmux import TmuxEngine
from mcp_server.settings import Settings


def own_state(name: str | None) -> bool:
    """True when the engine's state is something other than the run dir's (Slurm's queue): a
    run-dir reading alone would call a queued job lost."""
    found = ENGINES.get(name or "")
    return found is not None and getattr(type(found), "status", None) is not RunDirEngine.status


SLURM = SlurmEngine()
ENGINES: dict[str, JobEngine] = {
    "shell": ShellEngine(),
    "tmux": TmuxEngine(),
    "slurm": SLURM,
}


def configure_engines(settings: Settings) -> None:
    """The engines' settings: how often a Slurm cluster's scheduler may be asked."""
    SLURM.poll_s = settings.slurm_poll_s
