#!/bin/sh
# A21, one step on one box: is a directory one filesystem across the boxes of a job?
# $1 check | write | read | remove  $2 directory  $3 marker file name  $4 (write, read) the marker's
# content  $5... rgt_check's words (path_policy.sh runs ahead of this): the directory (read) and the
# marker (check and write: write intent, read: read, remove: delete) go through the path policy
# first, and a refusal is printed instead of acting.
# check: print "ok" (nothing written); write: create the marker (never overwriting) and print its
# device; read: print "seen" when the marker holds the content, else "absent" or "different";
# remove: delete it.
mode=$1 dir=$2 name=$3 content=${4:-}
shift 4
f="$dir/$name"
case "$mode" in check|write) intent='write';; read) intent='read';; *) intent='delete';; esac
# The directory itself (read: it may be a root) and the marker in it, each through the policy.
{ rgt_check read "$dir" "$@" && rgt_check "$intent" "$f" "$@"; } || { printf '%s\n' "$RGT_REFUSAL"; exit 0; }
case "$mode" in
  check) echo ok;;
  write) [ -d "$dir" ] || { echo "nodir"; exit 0; }
         ( set -C; printf '%s\n' "$content" > "$f" ) 2>/dev/null || { echo "unwritable"; exit 0; }
         printf 'written %s\n' "$(stat -f -c %T -- "$dir" 2>/dev/null)";;
  read) if [ ! -e "$f" ]; then echo absent; elif [ "$(cat -- "$f" 2>/dev/null)" = "$content" ]; then echo seen
        else echo different; fi;;
  remove) rm -f -- "$f";;
esac
