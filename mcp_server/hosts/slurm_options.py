"""Slurm job options: the `[hosts.<name>.slurm]` table of the inventory (the cluster's defaults)
and the `slurm` argument of a launch (overrides). Each value is checked against what Slurm
accepts for it; they reach `sbatch` as quoted arguments, never as shell text."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

_NAME = r"^[A-Za-z0-9_.+-]{1,64}$"


class SlurmOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    partition: str | None = Field(default=None, pattern=_NAME, description="--partition")
    account: str | None = Field(default=None, pattern=_NAME, description="--account")
    qos: str | None = Field(default=None, pattern=_NAME, description="--qos")
    constraint: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.&|,*\[\]()-]{1,128}$",
                                   description="--constraint, e.g. 'a100|h100'")
    gpus: int | None = Field(default=None, ge=0, le=1024, description="GPUs for the job")
    gpu_request: Literal["gpus", "gres"] = Field(default="gpus",
                                                 description="how the cluster takes GPUs: --gpus N or --gres=gpu:N")
    nodes: int | None = Field(default=None, ge=1, le=4096,
                              description="--nodes: a multi-node job (start its ranks with srun; see the README)")
    ntasks_per_node: int | None = Field(default=None, ge=1, le=1024,
                                        description="--ntasks-per-node: srun's tasks (ranks) per node")
    cpus_per_task: int | None = Field(default=None, ge=1, le=4096, description="--cpus-per-task")
    mem: str | None = Field(default=None, pattern=r"^[0-9]{1,9}[KMGT]?$", description="--mem, e.g. 64G")
    time: str | None = Field(default=None, pattern=r"^([0-9]{1,4}-)?[0-9]{1,6}(:[0-9]{2}){0,2}$",
                             description="--time: minutes, H:MM:SS or D-HH:MM")
    requeue: bool = Field(default=False, description="--requeue: Slurm may requeue the job after preemption")
    warn_signal: Literal["USR1", "USR2", ""] = Field(
        default="USR1", description="signal the job's processes get warn_s before the time limit, to checkpoint "
        "('' for none; a program without a handler for it ends there)")
    warn_s: int = Field(default=60, ge=10, le=86_400, description="seconds before the time limit for warn_signal")

    def merged(self, override: SlurmOptions | None) -> SlurmOptions:
        """These defaults with every field the override sets."""
        if override is None:
            return self
        return self.model_copy(update=override.model_dump(exclude_unset=True))

    def sbatch_args(self) -> list[str]:
        """The options as sbatch arguments."""
        out = [f"--{flag}={v}" for flag, v in (("partition", self.partition), ("account", self.account),
                                                ("qos", self.qos), ("constraint", self.constraint),
                                                ("nodes", self.nodes), ("ntasks-per-node", self.ntasks_per_node),
                                                ("cpus-per-task", self.cpus_per_task), ("mem", self.mem),
                                                ("time", self.time)) if v is not None]
        if self.gpus:
            out.append(f"--gpus={self.gpus}" if self.gpu_request == "gpus" else f"--gres=gpu:{self.gpus}")
        if self.warn_signal:  # the batch shell passes it on (job_batch_slurm.sh): B: reaches only that shell
            out.append(f"--signal=B:URG@{self.warn_s}")
        return out + (["--requeue"] if self.requeue else ["--no-requeue"])
