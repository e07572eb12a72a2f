#!/bin/sh
# Stop one run through its engine. Needs job_state.sh and an engine library (rgt_cancel).
# $1 run dir  $2 the engine's name for the job. Exit 3: there is no such run dir.
[ -d "$1" ] || exit 3
rgt_cancel "$1" "$2"
