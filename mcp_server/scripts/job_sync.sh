#!/usr/bin/env bash
# Library: verified copies from scratch to the durable root (prepended to the wrapper and to
# job_aggregate.sh). A file reaches its final name only after the copy matched the source in
# size and sha256 (copy to a .rgt-tmp sibling, compare, rename).

# rgt_sha256 FILE: the file's sha256 in hex, from openssl, python3 or sha256sum (the first the
# box has: coreutils' sha256sum is often several times slower); nothing when none is there or
# the file cannot be read. Reads stdin, so no file name ever reaches a tool's output.
rgt_sha256() {
  local h
  if command -v openssl >/dev/null 2>&1; then h=$(openssl dgst -sha256 -r < "$1" 2>/dev/null)
  elif command -v python3 >/dev/null 2>&1; then
    h=$(python3 -c 'import hashlib, sys
h = hashlib.sha256()
for b in iter(lambda: sys.stdin.buffer.read(1 << 20), b""): h.update(b)
print(h.hexdigest())' < "$1" 2>/dev/null)
  elif command -v sha256sum >/dev/null 2>&1; then h=$(sha256sum < "$1" 2>/dev/null)
  fi
  h=${h%% *}
  case $h in *[!0-9a-f]*|'') return 1;; esac
  [ ${#h} -eq 64 ] && printf '%s\n' "$h"
}

# rgt_copy_verified SRC DST: copy SRC to DST through a temporary sibling, then rename once size
# and sha256 match. Sets rgt_sha and rgt_bytes; on failure returns 1 with the reason in rgt_why.
rgt_copy_verified() {
  local src=$1 dst=$2 dir tmp err ss ds sh dh
  case $dst in */*) dir=${dst%/*};; *) dir=.;; esac
  [ -d "$dir" ] || err=$(mkdir -p -- "$dir" 2>&1) || { rgt_why="cannot create $dir: ${err##*: }"; return 1; }
  tmp="$dir/.rgt-tmp.$$.${dst##*/}"
  err=$(cp -- "$src" "$tmp" 2>&1) || { rm -f -- "$tmp"; rgt_why="copy failed: ${err##*: }"; return 1; }
  ss=$(stat -L -c %s -- "$src" 2>/dev/null) ds=$(stat -c %s -- "$tmp" 2>/dev/null)
  if [ -z "$ss" ] || [ "$ss" != "$ds" ]; then
    rm -f -- "$tmp"; rgt_why="size differs after the copy: source ${ss:-?} bytes, copy ${ds:-?} bytes"; return 1; fi
  sh=$(rgt_sha256 "$src") dh=$(rgt_sha256 "$tmp")
  if [ -z "$sh" ]; then rm -f -- "$tmp"; rgt_why="no sha256 tool on the box (sha256sum, openssl or python3)"; return 1; fi
  if [ "$sh" != "$dh" ]; then rm -f -- "$tmp"; rgt_why="sha256 differs after the copy: source $sh, copy ${dh:-unreadable}"; return 1; fi
  err=$(mv -f -- "$tmp" "$dst" 2>&1) || { rm -f -- "$tmp"; rgt_why="rename into place failed: ${err##*: }"; return 1; }
  rgt_sha=$sh rgt_bytes=$ss
}

# rgt_expand PATH: a box path with a leading ~/ made absolute.
rgt_expand() { case $1 in \~) printf '%s\n' "$HOME";; \~/*) printf '%s\n' "$HOME/${1#??}";; *) printf '%s\n' "$1";; esac; }

# rgt_join WORD...: the words joined by "; ".
rgt_join() { local out="" w; for w in "$@"; do out+="${out:+; }$w"; done; printf '%s\n' "$out"; }

# rgt_sync_record DIR STATUS TEXT: the run's sync result, one line in DIR/sync_status (tmp + rename).
rgt_sync_record() {
  printf '%s %s\n' "$2" "$(printf '%s' "$3" | tr '\t\r\n' '   ')" > "$1/sync_status.tmp" \
    && mv -f -- "$1/sync_status.tmp" "$1/sync_status"
}

# rgt_sync DIR: copy what DIR/sync_spec names (line 1 the source root, line 2 the destination,
# then one glob per line, relative to the source root) and record the outcome. Every matched
# regular file (or link to one) is copied, except the durable root's own results/ and .rgt/
# (a source root that holds them must not copy earlier results again); a glob matching no
# file is a failure. Run it in a subshell: it changes directory and shell options.
rgt_sync() {
  local d=$1 root dest here results p f n IFS= total=0 bytes=0
  local -a list=() failures=()
  local -A seen=()
  { read -r root; read -r dest; } < "$d/sync_spec"
  root=$(rgt_expand "$root") dest=$(rgt_expand "$dest") results=${dest%/*}
  cd -- "$root" 2>/dev/null || { rgt_sync_record "$d" failed "the source root $root does not exist"; return 1; }
  here=$(pwd -P)
  shopt -s globstar nullglob dotglob
  while read -r p; do
    [ -n "$p" ] || continue
    n=0
    for f in $p; do
      [ -f "$f" ] || continue
      f=${f#./}
      case "$here/$f" in "$results"/*|"${results%/results}/.rgt"/*) continue;; esac
      n=$((n + 1))
      [ -n "${seen[$f]:-}" ] || { seen[$f]=1; list+=("$f"); }
    done
    [ "$n" -gt 0 ] || failures+=("glob '$p' matched no file under $root")
  done < <(tail -n +3 "$d/sync_spec")
  : > "$d/sync_files"
  for f in ${list[@]+"${list[@]}"}; do
    if rgt_copy_verified "$root/$f" "$dest/$f"; then
      total=$((total + 1)) bytes=$((bytes + rgt_bytes))
      printf '%s\t%s\t%s\n' "$rgt_sha" "$rgt_bytes" "$f" >> "$d/sync_files"
    else failures+=("$f: $rgt_why"); fi
  done
  if [ ${#failures[@]} -gt 0 ]; then
    rgt_sync_record "$d" failed "${#failures[@]} problem(s) copying to $dest: $(rgt_join "${failures[@]:0:5}")"
    return 1; fi
  rgt_sync_record "$d" ok "$total file(s), $bytes bytes copied to $dest, each verified by size and sha256"
}
