#!/bin/sh
# Launch round trip 1, read-only but for creating .rgt/: paths, disk, tools, git state, and the
# run last launched under the name. Needs job_state.sh. Paths are resolved with the shell's own
# `cd -P` and tools found with `command -v`: a launch forks as few processes as it can.
# $1 durable root  $2 workdir  $3 run name ("" for none)
root=$1 wd=$2 name=$3
mkdir -p "$root/.rgt/runs" "$root/.rgt/names" "$root/.rgt/locks" || exit 3
home=$PWD
# rgt_real PATH: REAL becomes the physical absolute path of a directory ("" when it is none),
# relative paths taken from the login dir, which stays the working directory.
rgt_real() { REAL=; cd -P -- "$1" 2>/dev/null && REAL=$PWD; cd -P -- "$home" || exit 3; }
rgt_real "$root/.rgt"; base=$REAL
rgt_real "$root"; printf 'durable=%s\n' "$REAL"
host=; { read -r host < /proc/sys/kernel/hostname; } 2>/dev/null || host=$(hostname)
printf 'base=%s\nuser=%s\nhostname=%s\nuname=%s\n' "$base" "${USER:-$(id -un)}" "$host" "$(uname -srm)"
# Free bytes and inodes in df's columns (a name, total, used, free): one statfs, df where stat
# has no -f.
if fs=$(stat -f -c '%S %b %a %f %c %d' -- "$root" 2>/dev/null); then
  # shellcheck disable=SC2086  # six numbers, split on purpose
  set -- $fs
  printf 'bytes=statfs %s %s %s\n' $(($2 * $1 / 1024)) $((($2 - $4) * $1 / 1024)) $(($3 * $1 / 1024))
  printf 'inodes=statfs %s %s %s\n' "$5" $(($5 - $6)) "$6"
else
  printf 'bytes=%s\n' "$(df -P -k -- "$root" | tail -n 1)"
  printf 'inodes=%s\n' "$(df -P -i -- "$root" | tail -n 1)"
fi
for t in tmux setsid sbatch; do printf '%s=' "$t"; command -v "$t" || echo; done
if [ -d "$wd" ]; then rgt_real "$wd"; real=$REAL; printf 'workdir=%s\n' "$real"
  # A push_code snapshot: its provenance (commit, branch, dirty) is the run's.
  if [ -f "$wd/.rgt/manifest.sha" ] && [ -f "$wd/.rgt/provenance.json" ]; then
    printf 'snapshot=%s\n' "${real##*/}"
    printf 'snapshot_provenance=%s\n' "$(head -c 20000 "$wd/.rgt/provenance.json" | base64 | tr -d '\n')"
  fi
  if top=$(git -C "$real" rev-parse --is-inside-work-tree HEAD 2>/dev/null); then
    printf 'git_commit=%s\n' "${top#*
}"
    changed=$(git -C "$real" status --porcelain --untracked-files=no 2>/dev/null)
    if [ -n "$changed" ]; then echo git_dirty=1; else echo git_dirty=0; fi
  fi
fi
command -v nvidia-smi >/dev/null 2>&1 && printf 'gpus=%s\n' "$(nvidia-smi -L 2>/dev/null | head -n 16 | cut -c1-60 | tr '\n' ';')"
if [ -n "$name" ] && [ -f "$base/names/$name" ]; then read -r rid < "$base/names/$name"
  printf 'existing=%s\n' "$rid"
  printf 'existing_state=%s\n' "$(rgt_state "$base/runs/$rid" | tr '\t' '|')"
fi
exit 0
