#!/bin/sh
# shellcheck disable=SC2153  # REAL and GIT_*: set by job_launch_lib.sh's functions
# Launch round trip 1, read-only but for creating .rgt/: paths, disk, tools, git state, and the
# run last launched under the name. Needs job_state.sh and job_launch_lib.sh. A later launch in the
# same place skips this round trip: its start checks and fills in what can change (launch_facts.py).
# $1 durable root  $2 workdir  $3 run name ("" for none)
root=$1 wd=$2 name=$3
mkdir -p "$root/.rgt/runs" "$root/.rgt/names" "$root/.rgt/locks" || exit 3
rgt_real "$root/.rgt"; base=$REAL
rgt_real "$root"; printf 'durable=%s\n' "$REAL"
host=; { read -r host < /proc/sys/kernel/hostname; } 2>/dev/null || host=$(hostname)
printf 'base=%s\nuser=%s\nhostname=%s\nuname=%s\n' "$base" "${USER:-$(id -un)}" "$host" "$(uname -srm)"
rgt_disk "$root"
for t in tmux setsid sbatch; do printf '%s=' "$t"; command -v "$t" || echo; done
if [ -d "$wd" ]; then rgt_real "$wd"; real=$REAL; printf 'workdir=%s\n' "$real"
  # A push_code snapshot: its provenance (commit, branch, dirty) is the run's.
  if [ -f "$wd/.rgt/manifest.sha" ] && [ -f "$wd/.rgt/provenance.json" ]; then
    printf 'snapshot=%s\n' "${real##*/}"
    printf 'snapshot_provenance=%s\n' "$(head -c 20000 "$wd/.rgt/provenance.json" | base64 | tr -d '\n')"
  fi
  rgt_git "$real"
  if [ -n "$GIT_COMMIT" ]; then printf 'git_commit=%s\ngit_dirty=%s\n' "$GIT_COMMIT" "$GIT_DIRTY"; fi
fi
command -v nvidia-smi >/dev/null 2>&1 && printf 'gpus=%s\n' "$(nvidia-smi -L 2>/dev/null | head -n 16 | cut -c1-60 | tr '\n' ';')"
if [ -n "$name" ] && [ -f "$base/names/$name" ]; then read -r rid < "$base/names/$name"
  printf 'existing=%s\n' "$rid"
  printf 'existing_state=%s\n' "$(rgt_state "$base/runs/$rid" | tr '\t' '|')"
fi
exit 0
