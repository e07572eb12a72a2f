#!/bin/sh
# prune_code, confirmed: delete the planned snapshots of one project. Each goes through the path
# policy first (path_policy.sh, ahead of this script: a delete, under the durable root's code/
# tree, never through a symlink), so a snapshot the box replaced by a link to elsewhere is refused,
# never followed. The index entry goes first (so no later push counts on the snapshot's files),
# then the files, made writable to delete.
# $1 the project's code dir  $2 the snapshot ids, space-separated (16 hex digits each, checked by
# the server)  $3... rgt_check's words (the code tree as the root, the control trees)
set -u
dir=$1 ids=$2
shift 2
# shellcheck disable=SC2086  # $ids: hex ids, split on spaces
for id in $ids; do
  [ -d "$dir/$id" ] || { printf 'gone %s\n' "$id"; continue; }
  if ! rgt_check delete "$dir/.meta/$id.sha" "$@"; then printf 'refused %s %s\n' "$id" "$RGT_REFUSAL"; continue; fi
  meta=$RGT_REAL
  if ! rgt_check delete "$dir/$id" "$@"; then printf 'refused %s %s\n' "$id" "$RGT_REFUSAL"; continue; fi
  rm -f -- "$meta"
  chmod -R u+w -- "$RGT_REAL" && rm -rf -- "${RGT_REAL:?}" && printf 'pruned %s\n' "$id"
done
