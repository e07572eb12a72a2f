#!/bin/sh
# Library: the shell engine (engines/shell.py). A run is the wrapper in a new session (setsid)
# with stdin closed: it survives an SSH drop and the server's and the client's exit.

# rgt_submit DIR JOB SECRETS: start DIR/wrapper.sh detached, SECRETS on its stdin (JOB unused).
# `setsid -f` returns at once; with bash as the remote shell, `setsid job &` would keep the SSH
# call open until the job ends (see shared/recipes/sshd.md).
rgt_submit() {
  if setsid --help 2>&1 | grep -q -- --fork; then
    printf '%s' "$3" | setsid -f bash "$1/wrapper.sh" shell >/dev/null 2>&1
  else (printf '%s' "$3" | setsid bash "$1/wrapper.sh" shell >/dev/null 2>&1 &); fi
}

# rgt_cancel DIR JOB FIRST TENTHS: stop the run's whole process group (job_state.sh's
# rgt_kill_group: FIRST, then TERM, each with TENTHS of grace, then KILL).
rgt_cancel() { rgt_kill_group "$1" "$3" "$4"; }
