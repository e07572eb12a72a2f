#!/bin/bash
# fetch_data's job on the box for a Hugging Face model or dataset: `hf download` (or the older
# huggingface-cli) into DEST, which resumes what an earlier attempt left, retried with backoff
# unless the Hub's answer cannot change (no such repo, revision or file, no access, a bad
# argument). Where it writes is checked again here by the path policy. HF_ENDPOINT (a mirror) and
# HF_HOME come from the box env file that prepare_box writes; the token, when the call named one,
# reaches hf as HF_TOKEN from the environment, never argv. Needs path_policy.sh.
# $1 repo id  $2 repo type (model|dataset)  $3 revision ("" for the default)  $4 dest dir  $5 attempts
# $6 the source's fingerprint, kept in the completion marker  $7... rgt_confine's roots and control trees
set -u
repo=$1 kind=$2 rev=$3 attempts=$5 source=$6
roots=("${@:7}")
if [ -n "${RGT_FETCH_TOKEN_VAR:-}" ] && [ -n "${!RGT_FETCH_TOKEN_VAR:-}" ]; then export HF_TOKEN="${!RGT_FETCH_TOKEN_VAR}"; fi
confined() {  # confined PATH WHAT: the path the policy allows, or exit 77 naming the refusal
  local c; c=$(rgt_confine write "$1" "${roots[@]}")
  case $c in /*) printf '%s' "$c";; *) echo "rgt-fetch: refused: the path policy says $c for $2; nothing was written" >&2
    return 1;; esac
}
dest=$(confined "$4" dest) || exit 77
marker=$(dirname -- "$dest")/.rgt-fetch/$(basename -- "$dest").done
confined "$marker" "the completion marker" >/dev/null && confined "$marker.tmp" "the completion marker" >/dev/null ||
  exit 77
mkdir -p -- "$dest" "$(dirname -- "$marker")" || exit 3
out=$(mktemp) || exit 3
trap 'rm -f -- "$out"' EXIT
if command -v hf >/dev/null 2>&1; then cli=(hf download); else cli=(huggingface-cli download); fi
args=("$repo" --repo-type "$kind" --local-dir "$dest")
[ -n "$rev" ] && args+=(--revision "$rev")
echo "rgt-fetch: ${cli[*]} $repo ($kind) from ${HF_ENDPOINT:-https://huggingface.co}"
final='RepositoryNotFound|RevisionNotFound|GatedRepo|EntryNotFound|(401|403|404) Client Error|usage:|error: argument'
n=0 delay=5 code=1
while [ "$n" -lt "$attempts" ]; do
  n=$((n + 1))
  "${cli[@]}" "${args[@]}" 2>&1 | tee "$out"
  code=${PIPESTATUS[0]}
  [ "$code" = 0 ] && break
  why=$(grep -E -o "$final" "$out" | tail -n 1)
  if [ -n "$why" ]; then
    echo "rgt-fetch: failed on attempt $n: $why (exit $code; retrying cannot help)"
    exit "$code"
  fi
  [ "$n" -lt "$attempts" ] || break
  printf 'rgt-fetch: attempt %s of %s failed (exit %s, %s so far); retrying in %ss\n' "$n" "$attempts" "$code" \
    "$(du -sh -- "$dest" 2>/dev/null | cut -f1)" "$delay"
  sleep "$delay"
  delay=$((delay * 2 > 120 ? 120 : delay * 2))
done
if [ "$code" != 0 ]; then
  echo "rgt-fetch: gave up after $attempts attempts; last error: $(grep -v '^ *$' "$out" | tail -n 1 | cut -c1-300) (exit $code)"
  exit "$code"
fi
printf 'hf  %s\nsource %s\n' "$(basename -- "$dest")" "$source" > "$marker.tmp" && mv -f -- "$marker.tmp" "$marker"
echo "rgt-fetch: done $(du -sb -- "$dest" | cut -f1) bytes in $dest"
