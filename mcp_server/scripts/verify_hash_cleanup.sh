#!/bin/sh
# verify_artifacts, acceptance: remove a finished hashing job's directory (nothing else).
# $1 the job directory (<root>/.rgt-hash-<id>)
case $1 in
  */.rgt-hash-*) rm -rf -- "$1" ;;
  *) echo "not a hashing job directory: $1" >&2; exit 2 ;;
esac
