#!/bin/sh
# list_runs in one pass, whatever the number of runs: one `find` for every run file's size and
# mtime, one `ps` for the process table, and one awk that reads the small files itself (no
# process per run). Prints, per run dir holding a run.json (queue runners excluded):
#   R<TAB>run id<TAB>backend<TAB>started_at<TAB>name<TAB>state line
# and, after it, for a run an on-box patrol watches: P<TAB>run id<TAB>escalations<TAB>its last line
# where backend, started_at and name come from run.json ("" when absent; started_at falls back
# to run.json's mtime) and the state line is exactly what job_state.sh's rgt_state prints.
# $1 runs dir
runs=$1
LC_ALL=C; export LC_ALL
[ -d "$runs" ] || exit 0
cd -- "$runs" || exit 1
boot=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)
find . -mindepth 2 -maxdepth 2 -type f -printf '%h\t%f\t%s\t%T@\n' 2>/dev/null | awk -F '\t' -v boot="$boot" '
function first(path,   l) { l = ""; if ((getline l < path) <= 0) l = ""; close(path); return l }
function alive(dir, pid, script) {
  if (pid == "" || !(pid in pstat) || pstat[pid] ~ /^Z/) return 0
  if (first(dir "/boot_id") != boot) return 0
  return index(pargs[pid], "/" dir "/" script) > 0
}
function field(json, re,   s) {
  if (!match(json, "(^|[^\\\\])\"" re)) return ""
  s = substr(json, RSTART, RLENGTH); sub(/^[^"]*"[a-z_]*": */, "", s); gsub(/"/, "", s); return s
}
function syncstate(d,   s) {
  if (!((d, "sync_status") in has)) return "failed no sync_status was recorded although sync_to_durable was asked"
  s = substr(first(d "/sync_status"), 1, 2000); gsub(/[\t\r]/, " ", s)
  return s == "" ? "failed sync_status is empty" : s
}
function held(d,   s) {
  if (!((d, "held") in has)) return ""
  s = substr(first(d "/held"), 1, 500); gsub(/[\t\r]/, " ", s); return "\theld " s
}
function orphans(d, pid) {
  if (!(d in seed) || first(d "/boot_id") != boot) return ""
  return (pid != "" && (pid in grp)) ? grp[pid] : seed[d]
}
function state(d,   lsz, lmt, pid, ec, ea, line, q, o) {
  lsz = ((d, "log") in has) ? size[d, "log"] : "-"; lmt = ((d, "log") in has) ? mt[d, "log"] : "-"
  pid = ((d, "pid") in has) ? first(d "/pid") : ""
  if ((d, "cancelled") in has && !alive(d, pid, "wrapper.sh") && orphans(d, pid) == "") {
    ec = ((d, "exit_code") in has) ? first(d "/exit_code") : "-"
    return "cancelled\t" ec "\t" mt[d, "cancelled"] "\t" lsz "\t" lmt
  }
  if ((d, "exit_code") in has) {
    ec = first(d "/exit_code"); ea = ((d, "ended_at") in has) ? first(d "/ended_at") : "-"
    line = "exited\t" ec "\t" ea "\t" lsz "\t" lmt
    return (ec == "0" && (d, "sync_spec") in has) ? line "\t" syncstate(d) : line
  }
  if (alive(d, pid, "wrapper.sh")) return "alive\t" pid "\t-\t" lsz "\t" lmt
  if (pid == "" && (d, "queued") in has) {
    q = first(d "/queued")
    if (q != "" && alive(q, first(q "/pid"), "queue.sh")) return "queued\t" q "\t-\t" lsz "\t" lmt held(d)
  }
  o = orphans(d, pid)
  if (o != "") return "orphaned\t" (pid == "" ? "-" : pid) "\t-\t" lsz "\t" lmt "\t" o
  return "gone\t" (pid == "" ? "-" : pid) "\t-\t" lsz "\t" lmt
}
function record(d,   path, l, json, n) {
  path = d "/run.json"; json = ""; n = 0
  while ((getline l < path) > 0 && n < 65536) { json = json " " l; n += length(l) }
  close(path); return json
}
BEGIN {
  cmd = "ps -ww -eo pid=,pgid=,stat=,args= 2>/dev/null"
  while ((cmd | getline l) > 0) {
    split(l, f, " "); pstat[f[1]] = f[3]; pargs[f[1]] = a = substr(l, index(l, " " f[3]) + length(f[3]) + 1)
    if (f[3] ~ /^Z/) continue
    c = f[4]; sub(/.*\//, "", c); sep = (f[2] in grp) ? ", " : ""; grp[f[2]] = grp[f[2]] sep f[1] " " c
    # The shell sourcing cmd.sh names it in its arguments: that run still has a live command.
    if (match(a, /\/[^\/ ]+\/cmd\.sh/)) {
      r = substr(a, RSTART + 1, RLENGTH - 8); sep = (r in seed) ? ", " : ""; seed[r] = seed[r] sep f[1] " " c
    }
  }
  close(cmd)
}
{ d = substr($1, 3); dirs[d] = 1; has[d, $2] = 1; size[d, $2] = $3; mt[d, $2] = int($4) }
END {
  for (d in dirs) {
    if (d ~ /^queue-/ || !((d, "run.json") in has)) continue
    json = record(d); started = field(json, "started_at\": *[0-9.eE+-]+")
    printf "R\t%s\t%s\t%s\t%s\t%s\n", d, field(json, "backend\": *\"[A-Za-z0-9_-]*\""), \
      (started == "" ? mt[d, "run.json"] : started), field(json, "name\": *\"[A-Za-z0-9._-]*\""), state(d)
    # the one-line state of an on-box patrol: escalations so far, its last status line
    if ((d, "patrol_state") in has) { p = substr(first(d "/patrol_state"), 1, 600); printf "P\t%s\t%s\n", d, p }
  }
}'
