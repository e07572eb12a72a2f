#!/bin/sh
# Record that a run is being cancelled: its run dir's `cancelled` file (who, when, why as JSON),
# written atomically (tmp + rename) before the engine stops the run, so a reader never sees the
# run's end without the reason. $1 run dir  $2 the file's content. Exit 3: no such run dir.
[ -d "$1" ] || exit 3
printf '%s\n' "$2" > "$1/cancelled.tmp" && mv -f -- "$1/cancelled.tmp" "$1/cancelled"
