#!/bin/sh
# Stop one run through its engine. Needs job_state.sh and an engine library (rgt_cancel).
# $1 run dir  $2 the engine's name for the job  $3 signal to send first ("": none)
# $4 grace after each signal, in tenths of a second. Exit 3: there is no such run dir.
[ -d "$1" ] || exit 3
rgt_cancel "$1" "$2" "$3" "$4"
