#!/bin/sh
# inspect_run: sample one live run on its box, once a second for $2 seconds, in one round trip:
# the run's processes (its wrapper and every descendant: CPU ticks, RSS, count), its cgroup's
# memory use and limit, free bytes and inodes where it writes, free bytes on the durable root (the
# run dir's filesystem), its log's size, and every GPU's utilisation, memory-controller activity,
# VRAM and power when nvidia-smi is present.
# $1 run dir  $2 seconds  $3 directory whose filesystem the run writes to (run.json's output root:
# the path policy, path_policy.sh ahead of this script, decides whether it is sampled; a refused
# one is replaced by the run dir and reported as root_refused=<the refusal>)  $4... rgt_check's words
# Prints facts (key=value) first, then one line per sample:
#   s=<epoch s> ticks=<cpu ticks> rss_pages=<n> procs=<n> boxbusy=<ticks> boxall=<ticks>
#   cg=<cgroup bytes or -> avail=<KiB> iavail=<n> dfree=<KiB> log=<bytes>, and per GPU: g=<epoch s>,<index>,<util %>,<mem util %>,<used MiB>,<total MiB>,<W>
d=$1 window=$2 root=$3
shift 3
pid=$(cat "$d/pid" 2>/dev/null)
if [ -z "$pid" ] || [ -f "$d/exit_code" ] || [ ! -d "/proc/$pid" ]; then echo "live=0"; exit 0; fi
echo "live=1"
if rgt_check read "$root" "$@"; then root=$RGT_REAL; else printf 'root_refused=%s\n' "$RGT_REFUSAL"; root=$d; fi
cg=$(sed -n 's/^0:://p' "/proc/$pid/cgroup" 2>/dev/null | head -n 1)
cgdir=/sys/fs/cgroup$cg
[ -f "$cgdir/memory.current" ] || cgdir=/sys/fs/cgroup
printf 'tck=%s\nncpu=%s\n' "$(getconf CLK_TCK)" "$(nproc 2>/dev/null || echo 1)"
printf 'mem_max=%s\n' "$(cat "$cgdir/memory.max" 2>/dev/null || echo -)"
printf 'cpu_max=%s\n' "$(cat "$cgdir/cpu.max" 2>/dev/null || echo -)"
printf 'mem_total_kb=%s\n' "$(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo)"
printf 'page_kb=%s\n' "$(($(getconf PAGESIZE) / 1024))"
# One mount for both (the usual case): its fill is reported once. The mount point, not the device
# column, decides: every overlay mount names its device "overlay".
printf 'samefs=%s\n' "$(df -P -- "$d" "$root" 2>/dev/null | awk 'NR > 1 { dev[NR] = $6 } END { print (dev[2] == dev[3]) ? 1 : 0 }')"
smi=""; command -v nvidia-smi >/dev/null 2>&1 && smi=1
i=0
while [ "$i" -lt "$window" ]; do
  now=$(date +%s.%N)
  tree=$(ps -eo pid=,ppid= | awk -v root="$pid" '{ parent[$1] = $2 } END {
    keep[root] = 1; changed = 1
    while (changed) { changed = 0; for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; changed = 1 } }
    for (p in keep) print p }')
  # shellcheck disable=SC2086  # $tree: pids, one per line
  sums=$(for p in $tree; do cat "/proc/$p/stat" "/proc/$p/statm" 2>/dev/null; done | awk '
    /\) / { sub(/^.*\) /, ""); split($0, f, " "); ticks += f[12] + f[13]; n++; next }
    NF >= 2 { rss += $2 }
    END { printf "ticks=%d rss_pages=%d procs=%d", ticks, rss, n }')
  box=$(awk '$1 == "cpu" { printf "boxbusy=%d boxall=%d", $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat)
  printf 's=%s %s %s cg=%s avail=%s iavail=%s dfree=%s log=%s\n' "$now" "$sums" "$box" \
    "$(cat "$cgdir/memory.current" 2>/dev/null || echo -)" \
    "$(df -P -k -- "$root" 2>/dev/null | awk 'NR == 2 { print $4 }')" \
    "$(df -P -i -- "$root" 2>/dev/null | awk 'NR == 2 { print $4 }')" \
    "$(df -P -k -- "$d" 2>/dev/null | awk 'NR == 2 { print $4 }')" \
    "$(stat -c %s "$d/log" 2>/dev/null || echo 0)"
  if [ -n "$smi" ]; then
    timeout 5 nvidia-smi --query-gpu=index,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw \
      --format=csv,noheader,nounits 2>/dev/null | sed "s/^/g=$now,/"
  fi
  i=$((i + 1))
  [ "$i" -lt "$window" ] && sleep 1
done
exit 0
