#!/bin/sh
# Is a path, once every symlink in it is resolved, inside a folder? Used before writing where a
# caller named a folder relative to another (reconcile's render_dir under the evidence folder).
# Prints "inside <resolved path>" or "outside <resolved path>".
# $1 the folder  $2 the path (need not exist yet)
top=$(realpath -m -- "$1") || exit 1
p=$(realpath -m -- "$2") || exit 1
case $p in "$top"|"$top"/*) echo "inside $p";; *) echo "outside $p";; esac
