#!/usr/bin/env bash
# tail_logs in one round trip: the run's state (with the facts a lost run needs) and run.json,
# then a byte window of the log and, for the failure signatures, its last bytes. Seeks; never
# reads the whole log. Needs job_state.sh and path_policy.sh.
# $1 log file  $2 run dir ("" for a bare log path)  $3 start offset ("": the last $4 bytes)
# $4 window bytes  $5 nonce for the section markers  $6 signature tail bytes
# $7 margin: bytes of context sent before and after the window, so a secret straddling its edge is
# masked too   $8... rgt_check's words: the roots a log may be read under (the durable and scratch
# roots, the inventory's log_roots), then the control trees (none for a run's own log)
f=$1 run=$2 offset=$3 mb=$4 nonce=$5 sig_tail=$6 margin=$7
shift 7
if [ -n "$run" ]; then
  [ -d "$run" ] || { echo RGT-NORUN; exit 0; }
  st=$(rgt_state "$run"); printf 'state=%s\n' "$(printf %s "$st" | tr '\t' '|')"
  case "$st" in gone*) rgt_lost_facts "$run";; esac
  printf 'runjson=%s\n' "$(head -c 65536 "$run/run.json" 2>/dev/null | base64 | tr -d '\n')"
  # what an on-box patrol watching this run last wrote (nothing when none watches it)
  [ -f "$run/patrol.json" ] && printf 'patrol=%s\n' "$(head -c 65536 "$run/patrol.json" | base64 | tr -d '\n')"
fi
# The path policy (path_policy.sh, ahead of this script): the log is read by its resolved path,
# which must lie under one of the roots, off the deny list and, for a bare path, outside the
# server's own folders (a symlink cannot point the read at ~/.ssh, /etc/shadow or box.env).
if ! rgt_check read "$f" "$@"; then printf '%s\n' "$RGT_REFUSAL"; exit 0; fi
real=$RGT_REAL
[ -f "$real" ] || { echo RGT-NOLOG; exit 0; }
printf 'under=%s\n' "$RGT_UNDER"  # which of the roots (1-based) holds the log
f=$real
sm=$(stat -L -c '%s %Y' -- "$f" 2>/dev/null) || { echo RGT-NOLOG; exit 0; }
size=${sm% *}
printf 'size=%s\nmtime=%s\nnow=%(%s)T\n' "$size" "${sm#* }" -1
if [ -n "$offset" ]; then start=$offset; else start=$(( size > mb ? size - mb : 0 )); fi
if [ "$start" -gt "$size" ]; then echo reset=1; start=0; fi
len=$(( size - start < mb ? size - start : mb ))
printf 'start=%s\nlen=%s\n' "$start" "$len"
rd() { dd if="$f" bs=65536 iflag=skip_bytes,count_bytes skip="$1" count="$2" status=none 2>/dev/null \
  || tail -c +$(($1 + 1)) -- "$f" | head -c "$2"; }
# The window with its context on both sides, in one read: before ($bl bytes), window, after ($al).
end=$((start + len)); al=$(( size - end < margin ? size - end : margin )); bl=$(( start < margin ? start : margin ))
printf 'before=%s\nafter=%s\n' "$bl" "$al"
printf '@@R%s\n' "$nonce"; [ $((bl + len + al)) -gt 0 ] && rd $((start - bl)) $((bl + len + al))
printf '@@T%s\n' "$nonce"
ts=$(( size > sig_tail ? size - sig_tail : 0 ))
if [ $((start + len)) -lt "$size" ] || [ "$ts" -lt "$start" ]; then rd "$ts" $((size - ts)); fi
printf '@@E%s\n' "$nonce"
