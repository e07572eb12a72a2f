#!/bin/bash
# fetch_data's job on the box for a Hugging Face model or dataset: `hf download` (or the older
# huggingface-cli) into DEST, which resumes what an earlier attempt left, in a bounded retry loop
# with backoff. HF_ENDPOINT (a mirror) and HF_HOME come from the box env file that prepare_box
# writes; the token, when the call named one, reaches hf as HF_TOKEN from the environment, never argv.
# $1 repo id  $2 repo type (model|dataset)  $3 revision ("" for the default)  $4 dest dir  $5 attempts
# $6 the source's fingerprint, kept in the completion marker
set -u
repo=$1 kind=$2 rev=$3 dest=$4 attempts=$5 source=$6
if [ -n "${RGT_FETCH_TOKEN_VAR:-}" ] && [ -n "${!RGT_FETCH_TOKEN_VAR:-}" ]; then export HF_TOKEN="${!RGT_FETCH_TOKEN_VAR}"; fi
marker=$(dirname -- "$dest")/.rgt-fetch/$(basename -- "$dest").done
mkdir -p -- "$dest" "$(dirname -- "$marker")" || exit 3
if command -v hf >/dev/null 2>&1; then cli=(hf download); else cli=(huggingface-cli download); fi
args=("$repo" --repo-type "$kind" --local-dir "$dest")
[ -n "$rev" ] && args+=(--revision "$rev")
echo "rgt-fetch: ${cli[*]} $repo ($kind) from ${HF_ENDPOINT:-https://huggingface.co}"
n=0 delay=5 code=1
while [ "$n" -lt "$attempts" ]; do
  n=$((n + 1))
  "${cli[@]}" "${args[@]}"
  code=$?
  [ "$code" = 0 ] && break
  printf 'rgt-fetch: attempt %s of %s failed (exit %s, %s so far); retrying in %ss\n' "$n" "$attempts" "$code" \
    "$(du -sh -- "$dest" 2>/dev/null | cut -f1)" "$delay"
  sleep "$delay"
  delay=$((delay * 2 > 120 ? 120 : delay * 2))
done
if [ "$code" != 0 ]; then echo "rgt-fetch: gave up after $attempts attempts (last exit $code)"; exit "$code"; fi
printf 'hf  %s\nsource %s\n' "$(basename -- "$dest")" "$source" > "$marker.tmp" && mv -f -- "$marker.tmp" "$marker"
echo "rgt-fetch: done $(du -sb -- "$dest" | cut -f1) bytes in $dest"
