"""The JobEngine protocol: what owns a run's life on a box, and the run-dir engines' shared part.

A host is where a command runs; an engine is what starts a run, finds it and stops it (setsid,
tmux; Slurm and Kubernetes next). Every engine keeps the run-dir contract (rundir.py,
wrapper.py): the run's files, pid and exit code live in its run dir on the box."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Protocol

from pydantic import BaseModel

from mcp_server import scripts
from mcp_server.errors import NotFoundError, RgtError
from mcp_server.hosts.base import Host
from mcp_server.hosts.commands import path_word, quote
from mcp_server.run.jobs.onbox import job_script
from mcp_server.run.jobs.rundir import RunRecordSummary, run_dir_path, runs_dir_path
from mcp_server.run.jobs.status import STATE_FUNCS, RunState, parse_state

# The engine of a run whose run.json names none (written by hand or by an older version).
DEFAULT_ENGINE = "shell"
_NO_RUN_DIR = 3  # job_cancel.sh: the run dir does not exist
# Seconds a run gets after each signal of a cancel before the next (TERM, then KILL).
DEFAULT_GRACE_S = 5.0


class ListedRun(BaseModel):
    """One run an engine owns on a box."""

    run_id: str
    run_dir: str
    record: RunRecordSummary


class JobEngine(Protocol):
    """Submit, status of many runs, log location, cancel and list for one kind of engine.
    Run dirs are box paths (absolute or ~/...)."""

    @property
    def name(self) -> str: ...

    def job_name(self, run_id: str) -> str | None:
        """The engine's own name for a run (the tmux session to attach to); None when it has none."""
        ...

    def submit_functions(self) -> str:
        """Shell defining `rgt_submit DIR JOB SECRETS`, which the launch script calls on the box,
        under the run name's lock, once the run dir is written: start DIR/wrapper.sh detached
        with SECRETS on its stdin (JOB is `job_name`). It prints a line and exits the script
        non-zero when nothing started."""
        ...

    async def status(self, host: Host, run_dirs: Sequence[str]) -> list[RunState]:
        """The state of each run, in order, in one round trip."""
        ...

    def log_path(self, run_dir: str) -> str:
        """Where the run's output is written."""
        ...

    async def cancel(self, host: Host, run_dir: str, *, signal_first: str | None = None,
                     grace_s: float = DEFAULT_GRACE_S) -> None:
        """Stop the run: `signal_first` (a signal name such as USR1, so the job checkpoints) when
        given, then TERM, to its whole process group, each followed by up to `grace_s` of grace,
        then KILL. The caller has checked that the run is live and recorded why it stops."""
        ...

    async def list(self, host: Host, durable_root: str, limit: int) -> list[ListedRun]:
        """The runs this engine owns under the durable root: the last `limit` by run id."""
        ...


async def state_lines(host: Host, script: str, run_dirs: Sequence[str], *leading: str) -> list[str]:
    """One line per run dir, in order, from a state script run once for all of them (after the
    `leading` words, already quoted)."""
    if not run_dirs:
        return []
    res = await host.run(job_script(script, *leading, *(path_word(d, "run dir") for d in run_dirs)), timeout=25)
    res.check("reading run states")
    lines = res.text.splitlines()
    if len(lines) != len(run_dirs):
        raise RgtError("reading run states returned a line count that does not match the runs asked",
                       host=host.name, observed=len(lines), expected=len(run_dirs))
    return lines


class RunDirEngine:
    """An engine whose runs are wrapper processes on the host itself: liveness is the wrapper's
    pid, stop is its process group. Subclasses name their library script, which defines
    `rgt_submit` and `rgt_cancel` (scripts/job_engine_<name>.sh)."""

    name: str
    library: str

    def job_name(self, run_id: str) -> str | None:
        return None

    def submit_functions(self) -> str:
        return scripts.load(self.library)

    async def status(self, host: Host, run_dirs: Sequence[str]) -> list[RunState]:
        return [parse_state(line) for line in await state_lines(host, "job_status", run_dirs)]

    def log_path(self, run_dir: str) -> str:
        return f"{run_dir}/log"

    async def cancel(self, host: Host, run_dir: str, *, signal_first: str | None = None,
                     grace_s: float = DEFAULT_GRACE_S) -> None:
        job = self.job_name(PurePosixPath(run_dir).name) or ""
        tenths = str(max(1, round(grace_s * 10)))
        script = job_script("job_cancel", path_word(run_dir, "run dir"), quote(job), quote(signal_first or ""),
                            quote(tenths), libraries=(STATE_FUNCS, scripts.load(self.library)))
        res = await host.run(script, timeout=2 * grace_s + 20, slow=True)
        if res.exit_status == _NO_RUN_DIR:
            raise NotFoundError("no such run dir on this box", host=host.name, path=run_dir,
                                next_step="list_runs shows the runs on the box")
        res.check("cancelling the run")

    async def list(self, host: Host, durable_root: str, limit: int) -> list[ListedRun]:
        runs_dir = runs_dir_path(durable_root)
        script = scripts.command_words("job_list", path_word(runs_dir, "durable root"), quote(self.name),
                                       quote(DEFAULT_ENGINE), quote(str(int(limit))))
        res = await host.run(script, timeout=25)
        res.check("listing runs")
        out = []
        for line in res.text.splitlines():
            key, _, value = line.partition("=")
            run_id, tab, record = value.partition("\t")
            if key == "run" and tab:
                out.append(ListedRun(run_id=run_id, run_dir=run_dir_path(durable_root, run_id),
                                     record=RunRecordSummary.from_base64(record)))
        return out
