#!/bin/bash
# remote-gpu-trainer: the entry of a run's container on Kubernetes (the Job's command runs
# `bash -c <this script>`). The run-dir contract, on the durable volume when one is mounted:
# DIR/exit_code and DIR/ended_at written atomically when the command ends, so an exit survives
# the pod. The command's output goes to the container's stdout: the pod log is the run's log.
# Env: RGT_RUN_DIRS (run dirs, one per line: an Indexed Job's cells in index order, or one),
# RGT_COMMAND_<i> (the i-th command; one run: _0), JOB_COMPLETION_INDEX (Indexed Jobs),
# RGT_WORKDIR (may be empty). Secrets arrive as variables the Job takes from the run's Secret.
set -u
i=${JOB_COMPLETION_INDEX:-0}
d=$(printf '%s\n' "$RGT_RUN_DIRS" | sed -n "$((i + 1))p")
var=RGT_COMMAND_$i
cmd=${!var:-}
[ -n "$cmd" ] || { echo "rgt: no command for index $i"; exit 96; }
if [ -n "$d" ]; then mkdir -p -- "$d" && rm -f -- "$d/exit_code" "$d/ended_at"; fi
[ -n "${RGT_WORKDIR:-}" ] && { cd -- "$RGT_WORKDIR" || exit 97; }
echo "# rgt: run $(basename -- "${d:-run}") started on $(hostname) at $(date -u +%FT%TZ)"
# TERM (a deletion, a preemption) reaches the command's group; this shell records the end.
trap 'kill -TERM -- "-$c" 2>/dev/null' TERM
set -m
bash -c "$cmd" &
c=$!
set +m
while kill -0 "$c" 2>/dev/null; do wait "$c"; done
wait "$c"
code=$?
if [ -n "$d" ]; then
  printf '%s\n' "$code" > "$d/exit_code.tmp" && mv -f -- "$d/exit_code.tmp" "$d/exit_code"
  date +%s > "$d/ended_at.tmp" && mv -f -- "$d/ended_at.tmp" "$d/ended_at"
fi
echo "# rgt: command exited $code"
exit "$code"
