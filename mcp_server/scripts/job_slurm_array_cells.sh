#!/bin/sh
# The run dirs of a Slurm sweep (one per line, from its chunk files), for cancel_run on its id.
# $1 the sweep's dir. Nothing printed when it has none.
cat -- "$1"/chunk-* 2>/dev/null
exit 0
