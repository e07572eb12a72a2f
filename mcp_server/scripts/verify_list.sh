#!/bin/sh
# verify_artifacts, listing: facts about the result root, then every file and symlink under it.
# $1 the result root  $2 the most entries to print
[ -d "$1" ] || { echo RGT-NOROOT; exit 0; }
cd "$1" || exit 1
printf 'abs=%s\nnproc=%s\nnow=%s\n' "$(pwd -P)" "$(nproc 2>/dev/null || echo 1)" "$(date +%s.%N)"
printf 'python=%s\nopenssl=%s\nsha256sum=%s\n' "$(command -v python3)" "$(command -v openssl)" "$(command -v sha256sum)"
echo RGT-LIST
find . -mindepth 1 \( -type f -o -type l \) -printf '%y\t%s\t%T@\t%P\t%l\0' 2>/dev/null | head -z -n "$2"
