#!/bin/sh
# The state of each run dir given as an argument: one rgt_state line each, in order.
# Needs job_state.sh.
for run in "$@"; do rgt_state "$run"; done
