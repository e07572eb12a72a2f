"""What a launch asks for: the launch_detached request as the domain takes it, with the probe's
cap and the disk gate's default floors. A leaf beside the launch modules (launch.py,
launch_facts.py, launch_start.py) so each of them can read it and imports point one way."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mcp_server.hosts.kube_options import KubeOptions
from mcp_server.hosts.slurm_options import SlurmOptions
from mcp_server.limits import COMMAND_MAX
from mcp_server.run.jobs.rundir import Backend
from mcp_server.settings import LAUNCH_MIN_FREE_GIB, LAUNCH_MIN_FREE_INODES

MAX_PROBE_S = 25.0
DEFAULT_MIN_FREE_GIB = LAUNCH_MIN_FREE_GIB
DEFAULT_MIN_FREE_INODES = LAUNCH_MIN_FREE_INODES


class LaunchRequest(BaseModel):
    command: str = Field(min_length=1, max_length=COMMAND_MAX)
    name: str | None = None
    workdir: str | None = None
    code: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}/[0-9a-f]{16}$",
                             description="a push_code snapshot as <project>/<snapshot-id>: the run's workdir")
    env: dict[str, str] = Field(default_factory=dict)
    secret_env: list[str] = Field(default_factory=list)
    rerun_of: str | None = Field(default=None, description="the run this launch repeats (set by rerun_request)")
    backend: Backend | None = Field(default=None, description="default: slurm on a Slurm login node, else shell")
    login_node_reason: str | None = Field(default=None, max_length=500,
                                          description="why a shell/tmux job runs on a Slurm login node")
    slurm: SlurmOptions | None = Field(default=None, description="Slurm job options over the host's defaults")
    kubernetes: KubeOptions | None = Field(default=None, description="Kubernetes Job options over the host's defaults")
    allow_fallback: bool = False
    probe_s: float = Field(default=5.0, ge=0, le=MAX_PROBE_S)
    relaunch: bool = False
    min_free_gib: float = Field(default=DEFAULT_MIN_FREE_GIB, ge=0)
    min_free_inodes: int = Field(default=DEFAULT_MIN_FREE_INODES, ge=0)
    outputs: list[str] = Field(default_factory=list, description="roster patterns the run must produce")
    output_root: str | None = None
    sync_to_durable: list[str] = Field(default_factory=list, description="globs copied to the durable root on exit 0")
    on_exit: str | None = Field(default=None, max_length=8000,
                                description="shell command the wrapper runs after recording the result")
