#!/bin/sh
# verify_artifacts, listing: the path policy on the result root first (nothing under a root it
# refuses is ever listed, hashed or sent), facts about the root, then every file and symlink
# under it, the server's own control trees inside it left out. Needs path_policy.sh.
# $1 the result root  $2 the most entries to print  $3... rgt_check's words (roots, control trees)
root=$1 max=$2
shift 2
rgt_check send "$root" "$@" || { printf '%s\n' "$RGT_REFUSAL"; exit 0; }
[ -d "$RGT_REAL" ] || { echo RGT-NOROOT; exit 0; }
cd -- "$RGT_REAL" || exit 1
here=$(pwd -P)
# Swapped for a symlink between the check and the cd: refused like any root it leads elsewhere.
[ "$here" = "$RGT_REAL" ] || { echo 'RGT-DENIED unresolvable'; exit 0; }
printf 'under=%s\n' "$RGT_UNDER"  # which of the roots (1-based) holds the root
printf 'abs=%s\nnproc=%s\nnow=%s\n' "$here" "$(nproc 2>/dev/null || echo 1)" "$(date +%s.%N)"
printf 'python=%s\nopenssl=%s\nsha256sum=%s\n' "$(command -v python3)" "$(command -v openssl)" "$(command -v sha256sum)"
# The control trees (and the state folder) that lie inside the root: never listed.
prunes=$(for w in "$@"; do
  case $w in
    '!/'*|'%/'*) t=$(rgt_resolve "${w#?}") || continue
                 case $t in "$here"/*) printf 'path %s\n' "${t#"$here"/}";; esac;;
    '!'*) printf 'name %s\n' "${w#!}";;
  esac
done)
set -- -false
while IFS=' ' read -r kind arg; do
  case $kind in name) set -- "$@" -o -name "$arg";; path) set -- "$@" -o -path "./$arg";; esac
done <<EOF2
$prunes
EOF2
echo RGT-LIST
[ "$max" -gt 0 ] || exit 0
# Five NUL-terminated fields per entry (type, size, mtime, path, link target): no name can hold a
# NUL, so a TAB or newline in a name cannot shift a field.
find . -mindepth 1 \( "$@" \) -prune -o \( -type f -o -type l \) -printf '%y\0%s\0%T@\0%P\0%l\0' 2>/dev/null |
  head -z -n "$((max * 5))"
