#!/bin/sh
# Launch round trip 1, read-only but for creating .rgt/: paths, disk, tools, git state, and the
# run last launched under the name. Needs job_state.sh.
# $1 durable root  $2 workdir  $3 run name ("" for none)
root=$1 wd=$2 name=$3
mkdir -p "$root/.rgt/runs" "$root/.rgt/names" "$root/.rgt/locks" || exit 3
base=$(cd "$root/.rgt" && pwd -P)
printf 'durable=%s\n' "$(cd "$root" && pwd -P)"
printf 'base=%s\nuser=%s\nhostname=%s\nuname=%s\n' "$base" "$(id -un)" "$(hostname)" "$(uname -srm)"
printf 'bytes=%s\n' "$(df -P -k -- "$root" | tail -n 1)"
printf 'inodes=%s\n' "$(df -P -i -- "$root" | tail -n 1)"
printf 'tmux=%s\nsetsid=%s\nsbatch=%s\n' "$(command -v tmux)" "$(command -v setsid)" "$(command -v sbatch)"
if [ -d "$wd" ]; then printf 'workdir=%s\n' "$(cd -- "$wd" && pwd -P)"
  # A push_code snapshot: its provenance (commit, branch, dirty) is the run's.
  if [ -f "$wd/.rgt/manifest.sha" ] && [ -f "$wd/.rgt/provenance.json" ]; then
    printf 'snapshot=%s\n' "$(basename -- "$(cd -- "$wd" && pwd -P)")"
    printf 'snapshot_provenance=%s\n' "$(head -c 20000 "$wd/.rgt/provenance.json" | base64 | tr -d '\n')"
  fi
  if command -v git >/dev/null 2>&1 && git -C "$wd" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    printf 'git_commit=%s\n' "$(git -C "$wd" rev-parse HEAD 2>/dev/null)"
    printf 'git_dirty=%s\n' "$(git -C "$wd" status --porcelain --untracked-files=no 2>/dev/null | head -c 1 | wc -c)"
  fi
fi
command -v nvidia-smi >/dev/null 2>&1 && printf 'gpus=%s\n' "$(nvidia-smi -L 2>/dev/null | head -n 16 | cut -c1-60 | tr '\n' ';')"
if [ -n "$name" ] && [ -f "$base/names/$name" ]; then rid=$(cat "$base/names/$name")
  printf 'existing=%s\n' "$rid"
  printf 'existing_state=%s\n' "$(rgt_state "$base/runs/$rid" | tr '\t' '|')"
fi
exit 0
