#!/bin/bash
# fetch_data's job on the box (run detached by the run machinery, so tail_logs / wait_for_run /
# cancel_run apply): download one URL into DEST resumably (curl -C -, else wget -c), retrying with
# backoff only what can succeed later (a timeout, a dropped connection, HTTP 408/425/429/5xx),
# check its sha256 when one is given, then move it into place and write the completion marker that
# makes a second fetch a no-op. The URL is taken literally (no [1-3] or {a,b} globbing) and only
# over http(s), redirects included. Where it writes is checked again here by the path policy (the
# box may have changed since the call checked it). Needs path_policy.sh.
# Progress lines: "rgt-fetch: <bytes> of <total>"; the last line names the last error.
# A token, when the call named one, is in $RGT_FETCH_TOKEN_VAR's variable, never in argv.
# $1 url  $2 dest file  $3 sha256 ("" for none)  $4 attempts  $5 expected bytes ("" unknown)
# $6 the source's fingerprint (a hash of the URL: a presigned URL is a credential), for the marker
# $7... rgt_confine's roots and control trees
set -u
url=$1 want=$3 attempts=$4 total=${5:-} source=${6:-}
roots=("${@:7}")
confined() {  # confined PATH: the path the policy allows, or exit 77 naming the refusal
  local c; c=$(rgt_confine write "$1" "${roots[@]}")
  case $c in /*) printf '%s' "$c";; *) echo "rgt-fetch: refused: the path policy says $c for $2; nothing was written" >&2
    return 1;; esac
}
dest=$(confined "$2" dest) || exit 77
marker=$(dirname -- "$dest")/.rgt-fetch/$(basename -- "$dest").done
part=$(confined "$dest.part" "dest's .part file") && confined "$marker" "the completion marker" >/dev/null &&
  confined "$marker.tmp" "the completion marker" >/dev/null || exit 77
mkdir -p -- "$(dirname -- "$dest")" "$(dirname -- "$marker")" || exit 3
err=$(mktemp) || exit 3
auth=()
if [ -n "${RGT_FETCH_TOKEN_VAR:-}" ] && [ -n "${!RGT_FETCH_TOKEN_VAR:-}" ]; then
  # The header goes through a file curl reads (-H @file), so the token is never in argv.
  hdr=$(mktemp) && chmod 600 "$hdr" && printf 'Authorization: Bearer %s\n' "${!RGT_FETCH_TOKEN_VAR}" > "$hdr"
  auth=(-H "@$hdr")
fi
trap 'rm -f -- "$err" ${hdr:+"$hdr"}' EXIT
report() { while :; do sleep 10; printf 'rgt-fetch: %s of %s bytes\n' "$(stat -c %s -- "$part" 2>/dev/null || echo 0)" \
  "${total:-?}"; done; }
# One attempt: sets code (0 or the tool's exit), http (the last HTTP status, "" when none) and why.
attempt() {
  if command -v curl >/dev/null 2>&1; then
    http=$(curl -fsSL --globoff --proto =https,http --proto-redir =https,http --max-redirs 10 --connect-timeout 30 \
      --speed-time 60 --speed-limit 1024 -C - "${auth[@]}" -w '%{http_code}' -o "$part" -- "$url" 2>"$err")
    code=$?
  else
    wget -q -S -c -T 60 -O "$part" -- "$url" 2>"$err"
    code=$?
    http=$(sed -n 's/^ *HTTP\/[0-9.]* \([0-9][0-9][0-9]\).*/\1/p' "$err" | tail -n 1)
    case $code in 4) code=56;; 8) code=22;; esac  # as curl numbers them: network failure, HTTP error
  fi
  grep -v '^ ' "$err" >&2
  why=$(grep -v '^ ' "$err" | tail -n 1)
  case $code in 22) why="HTTP ${http:-error}";; 0) ;; *) why=${why:-exit $code};; esac
}
# Worth another try: a timeout, a connection refused, reset or cut short, a server that cannot
# resume (the file starts again), HTTP 408/425/429/5xx. Never a 4xx, a refused protocol or redirect.
retryable() {
  case $code in
    7|16|18|28|33|35|52|55|56|92) return 0;;
    22) case $http in 408|425|429|5??) return 0;; esac;;
  esac
  return 1
}
report & reporter=$!
n=0 delay=2 code=1 http='' why=''
while [ "$n" -lt "$attempts" ]; do
  n=$((n + 1))
  attempt
  [ "$code" = 0 ] && break
  if ! retryable; then
    kill "$reporter" 2>/dev/null
    echo "rgt-fetch: failed on attempt $n: $why (exit $code; retrying cannot help)"
    exit "$code"
  fi
  # 33: curl cannot resume (the server ignores ranges): start the file again.
  [ "$code" = 33 ] && rm -f -- "$part"
  [ "$n" -lt "$attempts" ] || break
  printf 'rgt-fetch: attempt %s of %s failed (%s, exit %s, %s bytes so far); retrying in %ss\n' "$n" "$attempts" \
    "$why" "$code" "$(stat -c %s -- "$part" 2>/dev/null || echo 0)" "$delay"
  sleep "$delay"
  delay=$((delay * 2 > 60 ? 60 : delay * 2))
done
kill "$reporter" 2>/dev/null
if [ "$code" != 0 ]; then echo "rgt-fetch: gave up after $attempts attempts; last error: $why (exit $code)"; exit "$code"; fi
got=$(sha256sum -- "$part" | cut -d' ' -f1)
if [ -n "$want" ] && [ "$got" != "$want" ]; then
  echo "rgt-fetch: sha256 mismatch: got $got, expected $want; the partial file is removed"
  rm -f -- "$part"
  exit 65
fi
mv -f -- "$part" "$dest" || exit 3
printf '%s  %s\nsource %s\n' "$got" "$(basename -- "$dest")" "$source" > "$marker.tmp" &&
  mv -f -- "$marker.tmp" "$marker"
echo "rgt-fetch: done $(stat -c %s -- "$dest") bytes sha256 $got"
