"""sync_to_durable: the outputs a run copies from scratch to the durable root once its command
exits 0, so a box that dies after the run does not take the only copy with it.

The wrapper does the copy on the box (scripts/job_sync.sh): every file the globs match under
the source root lands at `<durable_root>/results/<run_id>/<its path under the source root>`,
through a temporary sibling renamed into place only after size and sha256 match the source.
A glob that matches nothing, a failed copy or a hash that differs makes the run `sync_failed`
(never `succeeded`); its exit_code file keeps the command's own 0."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mcp_server.verify.artifacts.roster import check_pattern

# In a glob, stands for the run's id (the job sees it as $RGT_RUN_ID): one queue, one glob,
# each cell copying only its own directory.
RUN_ID_TOKEN = "{run_id}"


class RunSync(BaseModel):
    """What the wrapper copies after the command exits 0, and where to."""

    root: str = Field(description="the source root the globs are relative to (the output root or workdir)")
    patterns: list[str]
    dest: str = Field(description="<durable_root>/results/<run_id> on the box")

    def spec_text(self) -> str:
        """sync_spec as the wrapper reads it: source root, destination, then one glob per line."""
        return "\n".join([self.root, self.dest, *self.patterns]) + "\n"


def results_dir(durable_root: str, name: str) -> str:
    """Where durable copies of a run (or of an aggregated sweep) live on the box."""
    return f"{durable_root.rstrip('/')}/results/{name}"


def check_sync_patterns(patterns: list[str]) -> None:
    """Globs relative to the source root, as a roster's are; `{run_id}` is allowed anywhere."""
    for p in patterns:
        check_pattern(p.replace(RUN_ID_TOKEN, "x"))


def run_sync(root: str, patterns: list[str], durable_root: str, run_id: str) -> RunSync | None:
    """One run's sync: `{run_id}` in the globs made concrete; None when nothing is to be copied."""
    if not patterns:
        return None
    return RunSync(root=root, patterns=[p.replace(RUN_ID_TOKEN, run_id) for p in patterns],
                   dest=results_dir(durable_root, run_id))
