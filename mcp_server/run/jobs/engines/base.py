"""Launch backends: how a wrapper is started detached, cancelled, and where its log is.

A backend is a small interface over shell snippets that run inside the launcher script
on the box (`$d` is the absolute run dir, `$RGT_SECRETS` the secret payload held in a
non-exported shell variable). A Slurm backend (sbatch/squeue/sacct/scancel) fits the same
shape: start -> sbatch of wrapper.sh, status -> squeue/sacct, cancel -> scancel."""

from __future__ import annotations

from typing import Protocol

from mcp_server.hosts.commands import quote


class LaunchBackend(Protocol):
    name: str

    def start(self, run_id: str) -> str:
        """Shell that starts "$d/wrapper.sh" detached, feeding it "$RGT_SECRETS"."""
        ...

    def cancel(self, run_id: str) -> str:
        """Shell that stops the run whose dir is "$d" (TERM to its group, then KILL)."""
        ...

    def log_path(self, run_dir: str) -> str: ...


_KILL_GROUP = (
    'pid=$(cat "$d/pid" 2>/dev/null); if [ -n "$pid" ]; then kill -TERM -- "-$pid" 2>/dev/null; '
    'i=0; while kill -0 -- "-$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; '
    'kill -KILL -- "-$pid" 2>/dev/null; fi; true'
)


class ShellBackend:
    """setsid: a new session with stdin closed; survives SSH drop, server and client exit."""

    name = "shell"

    def start(self, run_id: str) -> str:
        # `setsid -f` returns at once; with bash as the remote shell, `setsid job &` would keep
        # the SSH call open until the job ends (see shared/recipes/sshd.md).
        return ('if setsid --help 2>&1 | grep -q -- --fork; then '
                'printf \'%s\' "$RGT_SECRETS" | setsid -f bash "$d/wrapper.sh" shell >/dev/null 2>&1; '
                'else (printf \'%s\' "$RGT_SECRETS" | setsid bash "$d/wrapper.sh" shell >/dev/null 2>&1 &); fi')

    def cancel(self, run_id: str) -> str:
        return _KILL_GROUP

    def log_path(self, run_dir: str) -> str:
        return f"{run_dir}/log"


def tmux_session(run_id: str) -> str:
    return "rgt-" + run_id.replace(".", "_").replace(":", "_")


class TmuxBackend:
    """A named tmux session the user can attach to; same run dir and exit-code contract.
    Secrets go through a one-shot fifo the wrapper reads and removes."""

    name = "tmux"

    def start(self, run_id: str) -> str:
        session = quote(tmux_session(run_id))
        return (
            'f="$d/secrets.fifo"; mkfifo -m 600 "$f" || exit 1; '
            'printf \'%s\' "$RGT_SECRETS" | setsid -f timeout 120 sh -c \'cat > "$1"\' sh "$f" >/dev/null 2>&1; '
            f'tmux new-session -d -s {session} "bash $(printf %q "$d/wrapper.sh") tmux $(printf %q "$f")" '
            '|| { rm -f -- "$f"; echo "RGT-TMUX-FAILED"; exit 1; }'
        )

    def cancel(self, run_id: str) -> str:
        return f"{_KILL_GROUP}; tmux kill-session -t {quote(tmux_session(run_id))} 2>/dev/null; true"

    def log_path(self, run_dir: str) -> str:
        return f"{run_dir}/log"


BACKENDS: dict[str, LaunchBackend] = {"shell": ShellBackend(), "tmux": TmuxBackend()}
