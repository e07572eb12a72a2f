#!/bin/sh
# prune_code, confirmed: delete the planned snapshots of one project. The index entry goes first
# (so no later push counts on the snapshot's files), then the files, made writable to delete.
# $1 the project's code dir  $2... snapshot ids (16 hex digits each, checked by the server)
set -u
dir=$1
shift
for id in "$@"; do
  [ -d "$dir/$id" ] || { printf 'gone %s\n' "$id"; continue; }
  rm -f -- "$dir/.meta/$id.sha"
  chmod -R u+w -- "$dir/$id" && rm -rf -- "${dir:?}/$id" && printf 'pruned %s\n' "$id"
done
