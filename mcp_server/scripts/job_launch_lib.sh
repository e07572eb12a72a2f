#!/bin/sh
# shellcheck disable=SC2034  # REAL, GIT_*, AVAIL_KIB, INODES, IFREE: results its users read
# Library: what a launch reads of the box, shared by its facts (job_launch_facts.sh) and its start
# (job_launch_start.sh), each with the shell's own builtins where it can: a launch forks as few
# processes as it can.

# The login dir: relative paths are taken from it, and it stays the working directory.
_rgt_home=$PWD

# rgt_real PATH: REAL becomes the physical absolute path of a directory ("" when it is none).
rgt_real() { REAL=; cd -P -- "$1" 2>/dev/null && REAL=$PWD; cd -P -- "$_rgt_home" || exit 3; }

# rgt_git DIR: GIT_COMMIT and GIT_DIRTY (1 or 0) of the git work tree DIR is in; both "" outside
# one (or in a repository without a commit).
rgt_git() { GIT_COMMIT='' GIT_DIRTY=''
  rgt_in_git "$1" || return 0
  if _rgt_top=$(git -C "$1" rev-parse --is-inside-work-tree HEAD 2>/dev/null); then
    GIT_COMMIT=${_rgt_top#*
}
    _rgt_changed=$(git -C "$1" status --porcelain --untracked-files=no 2>/dev/null)
    if [ -n "$_rgt_changed" ]; then GIT_DIRTY=1; else GIT_DIRTY=0; fi
  fi; }

# rgt_in_git DIR: whether DIR or a parent holds a .git (or GIT_DIR is set): git is not started
# for a directory no repository can own.
rgt_in_git() { [ -n "${GIT_DIR:-}" ] && return 0; _rgt_d=$1
  while :; do [ -e "$_rgt_d/.git" ] && return 0
    case $_rgt_d in /|'') return 1;; */*) _rgt_d=${_rgt_d%/*}; _rgt_d=${_rgt_d:-/};; *) return 1;; esac; done; }

# rgt_disk DIR: `bytes=` and `inodes=` lines for DIR's filesystem in df's columns (a name, total,
# used, free; KiB for bytes): one statfs, df where stat has no -f. Sets AVAIL_KIB, INODES, IFREE.
rgt_disk() {
  if _rgt_fs=$(stat -f -c '%S %b %a %f %c %d' -- "$1" 2>/dev/null); then
    # shellcheck disable=SC2086  # six numbers, split on purpose
    set -- $_rgt_fs
    AVAIL_KIB=$(($3 * $1 / 1024)) INODES=$5 IFREE=$6
    printf 'bytes=statfs %s %s %s\n' $(($2 * $1 / 1024)) $((($2 - $4) * $1 / 1024)) "$AVAIL_KIB"
    printf 'inodes=statfs %s %s %s\n' "$5" $(($5 - $6)) "$6"
  else
    _rgt_b=$(df -P -k -- "$1" | tail -n 1) _rgt_i=$(df -P -i -- "$1" | tail -n 1)
    printf 'bytes=%s\ninodes=%s\n' "$_rgt_b" "$_rgt_i"
    # shellcheck disable=SC2086  # df's columns, split on purpose
    set -- $_rgt_b; AVAIL_KIB=${4:-}
    # shellcheck disable=SC2086
    set -- $_rgt_i; INODES=${2:-} IFREE=${4:-}
  fi; }

# rgt_code_links CODE WORK: makes WORK, a new directory with a symlink to each of CODE's top-level
# entries (but CODE's own .rgt/), so a command started in WORK reads the code (`python train.py`,
# an import of a sibling, data/...) while whatever it creates lands in WORK. A top-level folder
# holding only placeholders (.gitkeep, .keep, .gitignore) is made a real, empty folder instead:
# it is where such a project writes its outputs.
rgt_code_links() {
  mkdir -- "$2" || return 1
  for _rgt_e in "$1"/* "$1"/.[!.]* "$1"/..?*; do
    [ -e "$_rgt_e" ] || [ -L "$_rgt_e" ] || continue
    _rgt_n=${_rgt_e##*/}
    [ "$_rgt_n" = .rgt ] && continue
    if [ -d "$_rgt_e" ] && [ ! -L "$_rgt_e" ] && rgt_placeholders_only "$_rgt_e"; then mkdir -- "$2/$_rgt_n" || return 1
    else ln -s -- "$_rgt_e" "$2/$_rgt_n" || return 1; fi
  done; }

# rgt_placeholders_only DIR: whether DIR holds nothing but placeholder files.
rgt_placeholders_only() {
  for _rgt_f in "$1"/* "$1"/.[!.]* "$1"/..?*; do
    [ -e "$_rgt_f" ] || [ -L "$_rgt_f" ] || continue
    case ${_rgt_f##*/} in .gitkeep|.keep|.gitignore) ;; *) return 1;; esac
  done; }
