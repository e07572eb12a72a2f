#!/bin/sh
# Print a run's run.json ($1), at most 1 MiB of it. Exit 3: the file does not exist.
[ -f "$1" ] || exit 3
head -c 1048576 -- "$1"
