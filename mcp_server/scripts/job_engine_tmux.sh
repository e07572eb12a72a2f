#!/usr/bin/env bash
# Library: the tmux engine (engines/tmux.py). A run is the wrapper in a named tmux session the
# user can attach to; same run dir and exit-code contract as the shell engine.

# rgt_submit DIR SESSION SECRETS: start DIR/wrapper.sh in a new detached session. SECRETS go
# through a one-shot fifo the wrapper reads and removes (never argv, never a file that stays).
rgt_submit() {
  f="$1/secrets.fifo"; mkfifo -m 600 "$f" || exit 1
  # The fifo's writer: the inner sh expands its own $1 (the fifo path).
  # shellcheck disable=SC2016
  printf '%s' "$3" | setsid -f timeout 120 sh -c 'cat > "$1"' sh "$f" >/dev/null 2>&1
  tmux new-session -d -s "$2" "bash $(printf %q "$1/wrapper.sh") tmux $(printf %q "$f")" \
    || { rm -f -- "$f"; echo "RGT-TMUX-FAILED"; exit 1; }
}

# rgt_cancel DIR SESSION FIRST TENTHS: stop the run's process group (as the shell engine), then
# its session.
rgt_cancel() { rgt_kill_group "$1" "$3" "$4"; tmux kill-session -t "$2" 2>/dev/null; return 0; }
