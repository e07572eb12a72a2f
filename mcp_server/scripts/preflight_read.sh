#!/usr/bin/env bash
# preflight's report in one round trip: the drill run's state, then its record (drill.json) and
# each attempt's stdout and stderr as sections, the first $2 bytes of each. Needs job_state.sh.
# $1 run dir  $2 bytes per file  $3 nonce for the section markers
run=$1 mb=$2 nonce=$3
[ -d "$run" ] || { echo RGT-NORUN; exit 0; }
st=$(rgt_state "$run"); printf 'state=%s\n' "$(printf %s "$st" | tr '\t' '|')"
if grep -q '/[.]rgt/preflight/drill-' "$run/cmd.sh" 2>/dev/null; then echo drill=1; fi
if [ -f "$run/log" ]; then printf '@@F%s log %s\n' "$nonce" "$(stat -c %s -- "$run/log")"; tail -c 4096 -- "$run/log"; printf '\n'; fi
[ -d "$run/preflight" ] || { printf '@@E%s\n' "$nonce"; exit 0; }
for f in drill.json a1.out a1.err a2.out a2.err a3.out a3.err a4.out a4.err; do
  p="$run/preflight/$f"
  if [ ! -f "$p" ] || [ -L "$p" ]; then continue; fi
  printf '@@F%s %s %s\n' "$nonce" "$f" "$(stat -c %s -- "$p" 2>/dev/null)"
  head -c "$mb" -- "$p"
  printf '\n'
done
printf '@@E%s\n' "$nonce"
