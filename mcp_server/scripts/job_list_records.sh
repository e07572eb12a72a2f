#!/bin/sh
# The run.json of each run id given, in one awk process: `<run id><TAB><run.json on one line>`
# (JSON keeps no raw newline inside a string, so joining its lines changes no value); at most
# 64 KiB of each; a run without run.json prints nothing. $1 runs dir, then the run ids.
runs=$1
shift
LC_ALL=C; export LC_ALL
cd -- "$runs" 2>/dev/null || exit 0
awk 'BEGIN {
  for (i = 1; i < ARGC; i++) {
    path = ARGV[i] "/run.json"; json = ""; n = 0
    while ((getline l < path) > 0 && n < 65536) { json = json " " l; n += length(l) }
    close(path)
    if (n > 0) printf "%s\t%s\n", ARGV[i], json
  }
}' "$@"
