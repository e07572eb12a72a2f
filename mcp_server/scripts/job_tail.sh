#!/usr/bin/env bash
# tail_logs in one round trip: the run's state (with the facts a lost run needs) and run.json,
# then a byte window of the log and, for the failure signatures, its last bytes. Seeks; never
# reads the whole log. Needs job_state.sh.
# $1 log file  $2 run dir ("" for a bare log path)  $3 start offset ("": the last $4 bytes)
# $4 window bytes  $5 nonce for the section markers  $6 signature tail bytes
# $7 margin: bytes of context sent before and after the window, so a secret straddling its edge is
# masked too   $8... the roots a log may be read under (the durable and scratch roots, the
# inventory's log_roots)
f=$1 run=$2 offset=$3 mb=$4 nonce=$5 sig_tail=$6 margin=$7
shift 7
if [ -n "$run" ]; then
  [ -d "$run" ] || { echo RGT-NORUN; exit 0; }
  st=$(rgt_state "$run"); printf 'state=%s\n' "$(printf %s "$st" | tr '\t' '|')"
  case "$st" in gone*) rgt_lost_facts "$run";; esac
  printf 'runjson=%s\n' "$(head -c 65536 "$run/run.json" 2>/dev/null | base64 | tr -d '\n')"
fi
# Confinement: the log is read by its resolved path, which must lie under one of the roots and
# match no credential pattern (a symlink cannot point the read at ~/.ssh or /etc/shadow).
real=$(readlink -f -- "$f" 2>/dev/null) || real=
if [ -z "$real" ] || [ ! -e "$real" ]; then echo RGT-NOLOG; exit 0; fi
case $real in
  */.ssh/*|*/.gnupg/*|*/.aws/*|*/.azure/*|*/.kube/*|*/.config/gcloud/*|*/.docker/config.json|*/.netrc|\
  */.git-credentials|*/.pgpass|*.pem|*.key|*/id_rsa*|*/id_dsa*|*/id_ecdsa*|*/id_ed25519*|/etc/shadow*|\
  /etc/gshadow*|/etc/sudoers*|/proc/*|/sys/*|/dev/*)
    printf 'RGT-DENIED %s\n' "$real"; exit 0;;
esac
inside='' n=0
for r in "$@"; do
  n=$((n + 1))
  rr=$(readlink -f -- "$r" 2>/dev/null) || continue
  case $real in "$rr"/*) [ -n "$inside" ] || inside=$n;; esac
done
[ -n "$inside" ] || { printf 'RGT-OUTSIDE %s\n' "$real"; exit 0; }
printf 'under=%s\n' "$inside"  # which of the roots (1-based) holds the log
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
printf '@@W%s\n' "$nonce"; [ "$len" -gt 0 ] && rd "$start" "$len"
end=$((start + len)); al=$(( size - end < margin ? size - end : margin )); bl=$(( start < margin ? start : margin ))
printf '@@A%s\n' "$nonce"; [ "$al" -gt 0 ] && rd "$end" "$al"
printf '@@B%s\n' "$nonce"; [ "$bl" -gt 0 ] && rd $((start - bl)) "$bl"
printf '@@T%s\n' "$nonce"
ts=$(( size > sig_tail ? size - sig_tail : 0 ))
if [ $((start + len)) -lt "$size" ] || [ "$ts" -lt "$start" ]; then rd "$ts" $((size - ts)); fi
printf '@@E%s\n' "$nonce"
