#!/bin/sh
# Library: rgt_make_run DIR WORKDIR RUN_JSON CMD ENV WRAPPER SYNC [ON_EXIT] creates one run dir
# with its files (the wrapper contract in rundir.py); each content argument is written byte for
# byte. SYNC is the sync_spec ("" when the run asked for no copy to the durable root: no file);
# ON_EXIT the on_exit.sh the wrapper runs after recording the result ("" or absent: none).
# Needs job_state.sh (rgt_oom). Exits the script when DIR already exists.
rgt_make_run() {
  mkdir "$1" || { echo RGT-MKDIR-FAILED; exit 1; }
  # Every write is checked: on a full disk (or inode table) the run must not exist half-written,
  # and a job whose files could not be written is never started.
  if ! { printf '%s' "$3" > "$1/run.json" && printf '%s' "$4" > "$1/cmd.sh" && printf '%s' "$5" > "$1/env.sh" \
      && printf '%s' "$6" > "$1/wrapper.sh" && { [ -z "$7" ] || printf '%s' "$7" > "$1/sync_spec"; } \
      && { [ -z "${8:-}" ] || printf '%s' "$8" > "$1/on_exit.sh"; } && printf '%s\n' "$2" > "$1/workdir" \
      && { ! read -r _rgt_boot < /proc/sys/kernel/random/boot_id || printf '%s\n' "$_rgt_boot" > "$1/boot_id"; } \
      && : > "$1/log"; } 2>/dev/null; then
    rm -rf -- "$1"; echo "RGT-WRITE-FAILED $1"; exit 1
  fi
  rgt_oom > "$1/oom_base"
}
