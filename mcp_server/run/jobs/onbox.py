"""Job scripts as they run on the box: the shell-function libraries a script needs, then the
script (scripts/job_*.sh) with its arguments."""

from __future__ import annotations

from collections.abc import Sequence

from mcp_server import scripts
from mcp_server.run.jobs.status import STATE_FUNCS


def job_script(name: str, *words: str, libraries: Sequence[str] = (STATE_FUNCS,)) -> str:
    """Script `name` run with shell words `words` (quoted, or `path_word`s), after `libraries`
    (texts of library scripts; by default the run-state functions)."""
    return "".join(lib.rstrip("\n") + "\n" for lib in libraries) + scripts.command_words(name, *words)
