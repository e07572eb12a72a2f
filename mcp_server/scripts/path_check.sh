#!/bin/sh
# The path policy for a list of paths a caller named (a probe's input file, EVIDENCE.json, the
# documents, the rendered files' folder): one line per path, in order, the path as this box
# resolves it or the policy's refusal (see path_policy.sh, which runs ahead of this).
# $1 intent (read, write, delete, send)  $2... rgt_check's words (roots, control trees)
# stdin: the paths, one per line (absolute, or ~/... for this user's home)
intent=$1
shift
while IFS= read -r p; do
  case $p in \~) p=$HOME;; \~/*) p=$HOME/${p#\~/};; esac
  rgt_confine "$intent" "$p" "$@"
done
exit 0
