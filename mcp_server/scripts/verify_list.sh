#!/bin/sh
# verify_artifacts, listing: facts about the result root, then every file and symlink under it.
# $1 the result root  $2 the most entries to print  $3... the roots it must be under (none: any)
[ -d "$1" ] || { echo RGT-NOROOT; exit 0; }
cd "$1" || exit 1
max=$2
shift 2
# Prints under=<n>: the first of them (1-based) that holds the root.
if [ "$#" -gt 0 ]; then
  here=$(pwd -P) ok="" n=0
  for r in "$@"; do
    n=$((n + 1))
    a=$(cd -- "$r" 2>/dev/null && pwd -P) || continue
    case "$here/" in "$a"/*) [ -n "$ok" ] || ok=$n;; esac
  done
  [ -n "$ok" ] || { printf 'RGT-OUTSIDE %s\n' "$here"; exit 0; }
  printf 'under=%s\n' "$ok"
fi
printf 'abs=%s\nnproc=%s\nnow=%s\n' "$(pwd -P)" "$(nproc 2>/dev/null || echo 1)" "$(date +%s.%N)"
printf 'python=%s\nopenssl=%s\nsha256sum=%s\n' "$(command -v python3)" "$(command -v openssl)" "$(command -v sha256sum)"
echo RGT-LIST
# Five NUL-terminated fields per entry (type, size, mtime, path, link target): no name can hold a
# NUL, so a TAB or newline in a name cannot shift a field.
find . -mindepth 1 \( -type f -o -type l \) -printf '%y\0%s\0%T@\0%P\0%l\0' 2>/dev/null |
  head -z -n "$((max * 5))"
