#!/usr/bin/env bash
# The box's clock (`now=`) and one `gpu=` line per GPU for the idle-meter warning.
# $1 the nvidia-smi --query-gpu fields
printf 'now=%(%s)T\n' -1
# No `exit`: list_runs runs the run scan after it in the same shell (one round trip, no subshell).
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu="$1" --format=csv,noheader,nounits 2>/dev/null | sed 's/^/gpu=/'
fi
