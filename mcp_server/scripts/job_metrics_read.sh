#!/usr/bin/env bash
# plot_run in one round trip: a run's state, then the tail of its log and of any metrics file
# (metrics.jsonl, metrics.csv, progress.csv) in the run dir or its working directory, each as a
# section. Reads at most $2 bytes of each file, from its end. Needs job_state.sh.
# TensorBoard event files (when $4 > 0) come base64-encoded, their first $4 bytes each, at most 4.
# $1 run dir  $2 bytes per file  $3 nonce for the section markers  $4 bytes per event file (0: none)
run=$1 mb=$2 nonce=$3 tb=${4:-0}
[ -d "$run" ] || { echo RGT-NORUN; exit 0; }
st=$(rgt_state "$run"); printf 'state=%s\n' "$(printf %s "$st" | tr '\t' '|')"
wd=$(head -c 4096 "$run/workdir" 2>/dev/null)
section() {
  [ -f "$2" ] || return 0
  printf '@@F%s %s %s\n' "$nonce" "$1" "$(stat -L -c %s -- "$2" 2>/dev/null)"
  tail -c "$mb" -- "$2"
  printf '\n'
}
section log "$run/log"
for f in metrics.jsonl metrics.csv progress.csv; do
  section "$f" "$run/$f"
  [ -n "$wd" ] && [ "$wd" != "$run" ] && section "workdir/$f" "$wd/$f"
done
if [ "$tb" -gt 0 ]; then
  find "$run" ${wd:+"$wd"} -maxdepth 3 -type f -name 'events.out.tfevents.*' 2>/dev/null | sort -u | head -n 4 |
  while IFS= read -r f; do
    printf '@@F%s tfevents:%s %s\n' "$nonce" "${f#"$wd"/}" "$(stat -L -c %s -- "$f" 2>/dev/null)"
    head -c "$tb" -- "$f" | base64 -w0
    printf '\n'
  done
fi
printf '@@E%s\n' "$nonce"
