#!/bin/bash
# fetch_data's job on the box (run detached by the run machinery, so tail_logs / wait_for_run /
# cancel_run apply): download one URL into DEST resumably (curl -C -, else wget -c) in a bounded
# retry loop with backoff, check its sha256 when one is given, then move it into place and write
# the completion marker that makes a second fetch a no-op. Progress lines: "rgt-fetch: <bytes> of
# <total>". A token, when the call named one, is in $RGT_FETCH_TOKEN_VAR's variable, never in argv.
# $1 url  $2 dest file  $3 sha256 ("" for none)  $4 attempts  $5 expected bytes ("" unknown)
# $6 the source's fingerprint (a hash of the URL: a presigned URL is a credential), for the marker
set -u
url=$1 dest=$2 want=$3 attempts=$4 total=${5:-} source=${6:-}
part=$dest.part marker=$(dirname -- "$dest")/.rgt-fetch/$(basename -- "$dest").done
mkdir -p -- "$(dirname -- "$dest")" "$(dirname -- "$marker")" || exit 3
auth=()
if [ -n "${RGT_FETCH_TOKEN_VAR:-}" ] && [ -n "${!RGT_FETCH_TOKEN_VAR:-}" ]; then
  # The header goes through a file curl reads (-H @file), so the token is never in argv.
  hdr=$(mktemp) && chmod 600 "$hdr" && printf 'Authorization: Bearer %s\n' "${!RGT_FETCH_TOKEN_VAR}" > "$hdr"
  trap 'rm -f -- "$hdr"' EXIT
  auth=(-H "@$hdr")
fi
report() { while :; do sleep 10; printf 'rgt-fetch: %s of %s bytes\n' "$(stat -c %s -- "$part" 2>/dev/null || echo 0)" \
  "${total:-?}"; done; }
report & reporter=$!
n=0 delay=2 code=1
while [ "$n" -lt "$attempts" ]; do
  n=$((n + 1))
  if command -v curl >/dev/null 2>&1; then
    curl -fsSL --connect-timeout 30 --speed-time 60 --speed-limit 1024 -C - "${auth[@]}" -o "$part" -- "$url"
    code=$?
  else
    wget -q -c -T 60 -O "$part" -- "$url"
    code=$?
  fi
  [ "$code" = 0 ] && break
  # 33: curl cannot resume (the server ignores ranges): start the file again.
  [ "$code" = 33 ] && rm -f -- "$part"
  printf 'rgt-fetch: attempt %s of %s failed (exit %s, %s bytes so far); retrying in %ss\n' "$n" "$attempts" "$code" \
    "$(stat -c %s -- "$part" 2>/dev/null || echo 0)" "$delay"
  sleep "$delay"
  delay=$((delay * 2 > 60 ? 60 : delay * 2))
done
kill "$reporter" 2>/dev/null
if [ "$code" != 0 ]; then echo "rgt-fetch: gave up after $attempts attempts (last exit $code)"; exit "$code"; fi
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
