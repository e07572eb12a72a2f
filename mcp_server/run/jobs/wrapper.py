"""The per-run wrapper: the script that owns a detached job on the box.

It runs as a session leader (setsid, or a tmux pane), reads secrets from stdin or a
one-shot fifo (never argv, never a file that stays), records its pid, runs the command
with stdin closed and output to `log`, and on exit writes `exit_code` and `ended_at`
atomically (tmp + rename). SIGKILL of the whole group leaves no exit file: that is how
`lost` is told from `failed`."""

from __future__ import annotations

import base64

from mcp_server.hosts.commands import env_assignments, quote

WRAPPER_TEMPLATE = r"""#!/usr/bin/env bash
# remote-gpu-trainer wrapper for run @RUN_ID@. Written once at launch; never edit it while the run is live.
set -u
d=@RUN_DIR@
mode=${1:-shell}
secret_src=${2:-}
cd -- "$d" || exit 96
if [ -n "$secret_src" ]; then exec 3<"$secret_src"; else exec 3<&0; fi
while IFS='=' read -r k v <&3 || [ -n "${k:-}" ]; do
  case "$k" in ''|*[!A-Za-z0-9_]*) continue ;; esac
  export "$k=$(printf '%s' "$v" | base64 -d)"
done
exec 3<&- </dev/null
[ -n "$secret_src" ] && rm -f -- "$secret_src"
printf '%s\n' "$$" > "$d/pid.tmp" && mv -f "$d/pid.tmp" "$d/pid"
finish() {
  printf '%s\n' "$1" > "$d/exit_code.tmp" && mv -f "$d/exit_code.tmp" "$d/exit_code"
  date +%s > "$d/ended_at.tmp" && mv -f "$d/ended_at.tmp" "$d/ended_at"
}
printf '# rgt: run %s started %s on %s (command in cmd.sh)\n' @RUN_ID_Q@ "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(hostname)" >> "$d/log"
. "$d/env.sh" >> "$d/log" 2>&1 || { echo "# rgt: env.sh failed" >> "$d/log"; finish 97; exit 97; }
cd -- @WORKDIR@ 2>> "$d/log" || { echo "# rgt: workdir is missing: "@WORKDIR@ >> "$d/log"; finish 98; exit 98; }
if [ "$mode" = tmux ]; then
  bash "$d/cmd.sh" 2>&1 | tee -a "$d/log"
  code=${PIPESTATUS[0]}
else
  bash "$d/cmd.sh" >> "$d/log" 2>&1
  code=$?
fi
finish "$code"
exit "$code"
"""


def wrapper_script(run_id: str, run_dir_abs: str, workdir_word: str) -> str:
    return (WRAPPER_TEMPLATE.replace("@RUN_ID_Q@", quote(run_id)).replace("@RUN_ID@", run_id)
            .replace("@RUN_DIR@", quote(run_dir_abs)).replace("@WORKDIR@", workdir_word))


def env_script(env: dict[str, str], proxy_hook: str | None) -> str:
    """env.sh: unbuffered output by default, the profile's proxy hook, the user's variables."""
    lines = ["# written at launch", "export PYTHONUNBUFFERED=1"]
    if proxy_hook:
        lines.append(proxy_hook)  # trusted profile data, never derived from the box
    if env:
        lines.append(env_assignments(env))
    return "\n".join(lines) + "\n"


def secrets_payload(values: dict[str, str]) -> bytes:
    """NAME=base64 lines: what travels on stdin to the wrapper."""
    return "".join(f"{k}={base64.b64encode(v.encode()).decode()}\n" for k, v in values.items()).encode()
